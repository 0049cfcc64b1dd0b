/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which credentials a pull is recorded with (cri/README.md "Which credentials a
 * pull records", docs/interfaces.md §10): the kubelet's credential semantics over
 * a decoded request. Pure: no network, no store.
 */
#ifndef PULLGATE_CRI_ATTRIBUTION_H
#define PULLGATE_CRI_ATTRIBUTION_H

#include "annotation_mac.h"
#include "nodecreds.h"
#include "pull.h"

#include <stdbool.h>

/* Why a pull is recorded with the credentials it is (for logs; never secret). */
typedef enum cri_cred_source {
    CRI_CREDS_NONE = 0,         /* no credentials: nodePodsAccessible */
    CRI_CREDS_NODE,             /* the node's own docker config holds them: nodePodsAccessible */
    CRI_CREDS_POD_SECRET,       /* a secret of the pod's annotation, found by its auth hash */
    CRI_CREDS_UNVERIFIED,       /* anything else: the placeholder under the pod's namespace */
    CRI_CREDS_RUNTIME_NAMESPACE /* none, but the runtime may hold the namespace's (CRI-O):
                                   the namespace marker, every pod of that namespace */
} cri_cred_source;

/* The credentials to record for one pull; owns every string it points to. */
typedef struct cri_pull_creds {
    pg_pull_credentials creds; /* view for pg_store_record_pulled */
    pg_secret *secrets;        /* creds.secrets; strings below are owned */
    pg_service_account namespace_marker; /* creds.service_accounts when the source is
                                            CRI_CREDS_RUNTIME_NAMESPACE; namespace_ owned */
    cri_cred_source source;
    char detail[256]; /* e.g. "no annotation", "secret team-a/regcred" */
} cri_pull_creds;

/* What the attribution may consult besides the request. */
typedef struct cri_attribution {
    const pg_mac_key *mac_key;  /* NULL when annotations are not keyed */
    bool mac_required;          /* hmacKeyFile set (then a NULL key opens nothing) */
    const cri_node_creds *node; /* the node's own docker config; NULL: none */
    /* The runtime may pull with credentials of its own for the pod's namespace when the
     * request carries none (CRI-O's namespaced auth, common/crio_auth.h); why says how that was
     * decided. */
    bool runtime_namespace_auth;
    const char *runtime_auth_why;
} cri_attribution;

/*
 * The attribution rule (docs/interfaces.md §10) for a decoded request:
 *  - no credentials -> nodePodsAccessible;
 *  - credentials whose auth hash A an entry of the node's own docker config
 *    files has for the image -> nodePodsAccessible;
 *  - every secret of the pod's namespace that the pod's credentials
 *    annotation presents for the pulled image with auth hash A -> that secret
 *    {namespace, name, uid, credentialHash: its kubelet hash H};
 *  - anything else (no annotation, no entry, an entry that does not verify,
 *    unlisted credentials: a secret added after admission, a credential
 *    provider) -> the placeholder {pod's namespace (or
 *    PG_UNKNOWN_NAMESPACE), PG_UNVERIFIED_NAME_PREFIX + A, "", A}, which
 *    matches only a secret presented with auth hash A in that namespace.
 * Never node-accessible by inference. Fails only for PG_ERR_NOMEM /
 * PG_ERR_INTERNAL.
 */
int cri_pull_credentials(const cri_pull_request *r, const cri_attribution *a, cri_pull_creds *out,
                         pg_error *err);
void cri_pull_creds_clear(cri_pull_creds *c);
const char *cri_cred_source_name(cri_cred_source s);

#endif
