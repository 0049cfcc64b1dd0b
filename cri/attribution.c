/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The attribution of a pull's credentials (attribution.h; cri/README.md "Which
 * credentials a pull records"): what a pull is recorded with, from its decoded
 * request, the pod's annotation and the node's own credentials.
 */
#include "attribution.h"

#include "cleanup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- credentials */

const char *cri_cred_source_name(cri_cred_source s)
{
    switch (s) {
    case CRI_CREDS_NONE: return "none";
    case CRI_CREDS_NODE: return "node";
    case CRI_CREDS_POD_SECRET: return "secret";
    case CRI_CREDS_UNVERIFIED: return "unverified";
    case CRI_CREDS_RUNTIME_NAMESPACE: return "runtime-namespace";
    }
    return "unknown";
}

static void secret_free(const pg_secret *s)
{
    free((char *)s->namespace_);
    free((char *)s->name);
    free((char *)s->uid);
    free((char *)s->credential_hash);
}

void cri_pull_creds_clear(cri_pull_creds *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->creds.n_secrets; i++)
        secret_free(&c->secrets[i]);
    free(c->secrets);
    free((char *)c->namespace_marker.namespace_);
    memset(c, 0, sizeof *c);
}

static int add_secret(cri_pull_creds *c, const char *ns, const char *name, const char *uid,
                      const char *hash, pg_error *err)
{
    pg_secret *nv = realloc(c->secrets, (c->creds.n_secrets + 1) * sizeof *nv);
    if (!nv)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    c->secrets = nv;
    c->creds.secrets = nv;
    pg_secret s = {pg_strdup(ns), pg_strdup(name), pg_strdup(uid), pg_strdup(hash)};
    if (!s.namespace_ || !s.name || !s.uid || !s.credential_hash) {
        secret_free(&s);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    nv[c->creds.n_secrets++] = s;
    return PG_OK;
}

/*
 * The pod that pulled may run it (docs/interfaces.md §10): its binding
 * {namespace, PG_POD_BINDING_PREFIX + its UID, "", ""}, which only a container
 * whose runtime-set pod identity is that namespace and UID matches. Only for a
 * pull that names its pod (sandbox_config with a namespace and a UID).
 */
static int bind_pod(const cri_pull_request *r, cri_pull_creds *c, pg_error *err)
{
    if (!r->has_sandbox || !r->pod_namespace || !pg_pod_uid_valid(r->pod_uid))
        return PG_OK;
    char name[sizeof PG_POD_BINDING_PREFIX + PG_POD_UID_MAX];
    snprintf(name, sizeof name, "%s%s", PG_POD_BINDING_PREFIX, r->pod_uid);
    size_t len = strlen(c->detail);
    snprintf(c->detail + len, sizeof c->detail - len, "; bound to pod %.40s", r->pod_uid);
    return add_secret(c, r->pod_namespace, name, "", "", err);
}

/* The namespace-bound placeholder for credentials no secret of the pod names, and the pod's binding. */
static int unverified(const cri_pull_request *r, const char *why, cri_pull_creds *c, pg_error *err)
{
    char name[sizeof PG_UNVERIFIED_NAME_PREFIX + PG_HASH_HEX_LEN];
    snprintf(name, sizeof name, "%s%s", PG_UNVERIFIED_NAME_PREFIX, r->auth_hash);
    c->source = CRI_CREDS_UNVERIFIED;
    snprintf(c->detail, sizeof c->detail, "%s", why);
    int rc = add_secret(c, r->pod_namespace ? r->pod_namespace : PG_UNKNOWN_NAMESPACE, name, "",
                        r->auth_hash, err);
    return rc == PG_OK ? bind_pod(r, c, err) : rc;
}

static int node_accessible(cri_cred_source source, const char *why, cri_pull_creds *c)
{
    c->source = source;
    c->creds.node_pods_accessible = 1;
    snprintf(c->detail, sizeof c->detail, "%s", why);
    return PG_OK;
}

/* Every secret the pod presents for the image whose auth hash is the pull's. */
static int from_annotation(const cri_pull_request *r, const pg_presented *p, const char *image_name,
                           cri_pull_creds *c, pg_error *err)
{
    const pg_pod_cred *secrets;
    size_t n_secrets = pg_presented_secrets(p, image_name, &secrets);
    for (size_t i = 0; i < n_secrets; i++) {
        const pg_pod_cred *s = &secrets[i];
        if (!s->auth_hash || !pg_is_hex64(s->auth_hash) || !pg_is_hex64(s->credential_hash) ||
            strcmp(s->auth_hash, r->auth_hash) != 0)
            continue;
        int rc = add_secret(c, s->namespace_, s->name, s->uid, s->credential_hash, err);
        if (rc != PG_OK)
            return rc;
        c->source = CRI_CREDS_POD_SECRET;
        snprintf(c->detail, sizeof c->detail, "secret %.100s/%.100s", s->namespace_, s->name);
    }
    if (c->source == CRI_CREDS_POD_SECRET)
        return PG_OK;
    if (pg_presented_rejected(p, image_name))
        return unverified(r, "the annotation entry for the image does not verify", c, err);
    if (pg_presented_unopened(p, image_name))
        return unverified(r, "the annotation entry is sealed and this node has no key", c, err);
    if (n_secrets == 0 && pg_presented_ignored(p, image_name))
        return unverified(r, "the annotation entry names other namespaces", c, err);
    if (n_secrets == 0)
        return unverified(r, "no annotation entry for the image in the pod's namespace", c, err);
    return unverified(r, "credentials not among the pod's secrets for the image", c, err);
}

static int from_pod(const cri_pull_request *r, const cri_attribution *a, cri_pull_creds *c,
                    pg_error *err)
{
    if (!r->has_sandbox)
        return unverified(r, "no sandbox_config", c, err);
    if (!r->pod_namespace)
        return unverified(r, "no pod namespace", c, err);
    if (!r->annotation)
        return unverified(r, "no credentials annotation", c, err);
    if (a->mac_required && !a->mac_key)
        return unverified(r, "hmacKeyFile set but the key is unavailable", c, err);
    pg_error why = {0};
    pg_autofree char *image_name = pg_image_name(r->image, &why);
    if (!image_name)
        return why.code == PG_ERR_NOMEM ? pg_fail(err, PG_ERR_NOMEM, "out of memory")
                                        : unverified(r, "the image is not a reference", c, err);
    pg_presented *p = NULL;
    if (pg_presented_parse_keyed(r->annotation, r->annotation_len, r->pod_namespace, a->mac_key, &p,
                                 &why) != PG_OK)
        return why.code == PG_ERR_NOMEM ? pg_fail(err, PG_ERR_NOMEM, "out of memory")
                                        : unverified(r, "malformed credentials annotation", c, err);
    int rc = from_annotation(r, p, image_name, c, err);
    pg_presented_free(p);
    return rc;
}

/*
 * No credentials in the request, but the runtime may have pulled with the namespace's own
 * (CRI-O's namespaced auth): not node-wide. Recorded as the namespace marker, a service account
 * {namespace: the pod's, name: PG_NAMESPACE_MARKER_NAME, uid: ""} that every pod of that
 * namespace matches with its own service account (docs/interfaces.md §5, §10).
 */
static int runtime_namespace(const cri_pull_request *r, const cri_attribution *a, cri_pull_creds *c,
                             pg_error *err)
{
    pg_service_account *m = &c->namespace_marker;
    if (!(m->namespace_ = pg_strdup(r->pod_namespace)))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    m->name = PG_NAMESPACE_MARKER_NAME;
    m->uid = "";
    c->creds.service_accounts = m;
    c->creds.n_service_accounts = 1;
    c->source = CRI_CREDS_RUNTIME_NAMESPACE;
    snprintf(c->detail, sizeof c->detail, "no credentials, %s",
             a->runtime_auth_why ? a->runtime_auth_why : "the runtime may hold the namespace's");
    return PG_OK;
}

static int resolve_creds(const cri_pull_request *r, const cri_attribution *a, cri_pull_creds *c,
                         pg_error *err)
{
    /* CRI-O consults its namespaced auth only for a pull naming a namespace. */
    if (!r->has_auth && a->runtime_namespace_auth && r->pod_namespace)
        return runtime_namespace(r, a, c, err);
    if (!r->has_auth)
        return node_accessible(CRI_CREDS_NONE, "no credentials", c);
    if (!pg_is_hex64(r->auth_hash) || strcmp(r->auth_hash, PG_EMPTY_CREDENTIAL_HASH) == 0)
        return pg_fail(err, PG_ERR_INTERNAL, "cri_pull_credentials: unusable credentials");
    bool node = false;
    int rc = cri_node_creds_holds(a->node, r->image, r->auth_hash, &node, err);
    if (rc != PG_OK)
        return rc;
    if (node)
        return node_accessible(CRI_CREDS_NODE, "the node's own docker config holds them", c);
    return from_pod(r, a, c, err);
}

int cri_pull_credentials(const cri_pull_request *r, const cri_attribution *a, cri_pull_creds *out,
                         pg_error *err)
{
    memset(out, 0, sizeof *out);
    static const cri_attribution none = {.mac_key = NULL};
    if (!r || !r->image)
        return pg_fail(err, PG_ERR_INTERNAL, "cri_pull_credentials: no request");
    int rc = resolve_creds(r, a ? a : &none, out, err);
    if (rc != PG_OK)
        cri_pull_creds_clear(out);
    return rc;
}
