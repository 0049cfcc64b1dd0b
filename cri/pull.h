/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What pullgate-cri reads from the CRI messages it understands (PullImage,
 * ImageStatus) and the kubelet's credential semantics for recording a pull
 * (cri/README.md "Which credentials a pull records"). Pure functions over
 * bytes: no network, no store, so they can be unit tested and fuzzed.
 */
#ifndef PULLGATE_CRI_PULL_H
#define PULLGATE_CRI_PULL_H

#include "annotation_mac.h"
#include "internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds on what one request may carry (the message itself is bounded by gRPC). */
#define CRI_MAX_CREDENTIAL_BYTES (64u << 10) /* username, password, auth each */
#define CRI_MAX_FIELD_BYTES 1024u            /* pod namespace, name, uid */
#define CRI_MAX_ALIASES 256u                 /* identities indexed per pulled image */

/*
 * Secret coordinates used when the proxy cannot tell which of the pod's
 * secrets the credentials belong to. The store needs a non-empty name and
 * merges secrets by (namespace, name, uid), so the name carries the hash:
 * two unverified pulls with different credentials stay two entries. ':' is
 * not allowed in Kubernetes object names, so no real secret is ever named
 * like this, and the empty uid never equals a presented secret's uid: only
 * a pod presenting the same credentialHash matches the entry.
 */
#define CRI_UNVERIFIED_NAME_PREFIX "pullgate:unverified-"
#define CRI_UNKNOWN_NAMESPACE "pullgate:unknown-namespace"

/* A decoded PullImageRequest: owned copies, credentials already hashed and wiped. */
typedef struct cri_pull_request {
    char *image;         /* image.image; never NULL after a successful decode */
    bool has_sandbox;    /* sandbox_config present */
    char *pod_namespace; /* sandbox_config.metadata.namespace, NULL when absent/empty */
    char *pod_name;
    char *pod_uid;
    char *annotation; /* the credentials annotation's value, NULL when absent */
    size_t annotation_len;
    bool has_auth;    /* any AuthConfig field non-empty */
    bool auth_usable; /* the hash below is the kubelet's hash of these credentials */
    char credential_hash[PG_HASH_HEX_LEN + 1];
    const char *auth_problem; /* why auth_usable is false (static text), or NULL */
} cri_pull_request;

/*
 * Decodes a PullImageRequest (runtime.v1 or v1alpha2 bytes) and computes the
 * kubelet credential hash of its auth: username/password, or when both are
 * empty the base64 "auth" field as "user:pass". Passwords never leave this
 * function: every copy is wiped with OPENSSL_cleanse. annotation_key is the
 * config's credentialsAnnotation. PG_ERR_INVALID when the bytes are not a
 * PullImageRequest with an image; *out is then empty.
 */
int cri_pull_request_decode(const uint8_t *buf, size_t len, const char *annotation_key,
                            cri_pull_request *out, pg_error *err);
void cri_pull_request_clear(cri_pull_request *r);

/* Why a pull is recorded with the credentials it is (for logs; never secret). */
typedef enum cri_cred_source {
    CRI_CREDS_NONE = 0,   /* no auth: nodePodsAccessible */
    CRI_CREDS_POD_SECRET, /* found in the pod's annotation by hash */
    CRI_CREDS_NODE_WIDE,  /* the pod's valid entry does not list them: nodePodsAccessible */
    CRI_CREDS_UNVERIFIED  /* cannot tell: hash only, under the pod's namespace */
} cri_cred_source;

/* The credentials to record for one pull; owns every string it points to. */
typedef struct cri_pull_creds {
    pg_pull_credentials creds; /* view for pg_store_record_pulled */
    pg_secret *secrets;        /* creds.secrets; strings below are owned */
    cri_cred_source source;
    char detail[256]; /* e.g. "no annotation", "secret team-a/regcred" */
} cri_pull_creds;

/*
 * The kubelet's recording semantics for r (cri/README.md): no auth ->
 * nodePodsAccessible; a hash that one or more of the pod's own secrets for the
 * pulled image carry in its credentials annotation (HMAC-verified when mac_key
 * is non-NULL) -> those secrets; a valid entry for the image that does not
 * list the hash -> node-wide credentials -> nodePodsAccessible; anything it
 * cannot tell -> the hash under the pod's namespace (never node-accessible).
 * mac_required (config hmacKeyFile set): without mac_key nothing verifies.
 * Fails only for PG_ERR_NOMEM / PG_ERR_INTERNAL.
 */
int cri_pull_credentials(const cri_pull_request *r, const pg_mac_key *mac_key, bool mac_required,
                         cri_pull_creds *out, pg_error *err);
void cri_pull_creds_clear(cri_pull_creds *c);
const char *cri_cred_source_name(cri_cred_source s);

/* PullImageResponse.image_ref; caller frees. PG_ERR_INVALID when missing/bad. */
int cri_pull_response_decode(const uint8_t *buf, size_t len, char **image_ref, pg_error *err);

/* An ImageStatusRequest for image (verbose false), packed; caller frees *buf. */
int cri_image_status_request_encode(const char *image, uint8_t **buf, size_t *len, pg_error *err);

/*
 * Every identity an ImageStatusResponse reports (image.id, repo_tags,
 * repo_digests) that is a well-formed image ID or reference, plus `also`
 * (the image string as pulled; may be NULL), de-duplicated, at most
 * CRI_MAX_ALIASES. *aliases is NULL-terminated, free with pg_strv_free.
 * PG_ERR_NOT_FOUND when the response names no image (runtime forgot it).
 */
int cri_image_status_aliases(const uint8_t *buf, size_t len, const char *also, char ***aliases,
                             pg_error *err);

/* 1 when s is "sha256:<64 hex>" or 64 hex, or parses as an image reference. */
int cri_is_image_identity(const char *s);

#endif
