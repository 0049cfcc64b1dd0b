/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The credentials a pod presents (docs/interfaces.md §4): the annotation
 *   {"<image name>":{"kubernetesSecrets":[{namespace,name,uid, credentialHash[,authHash]
 *                                          | sealedHashes}],
 *                    "kubernetesServiceAccounts":[{namespace,name,uid}], "hmac"?}}
 * parsed strictly (the value is attacker-reachable: anyone who can create a
 * pod can try to set it), keys normalised like record mapping keys, and every
 * credential outside the pod's namespace dropped: a pod can only use secrets
 * and service accounts of its own namespace. One form per key state: with a key
 * every entry is signed and its hashes sealed (annotation_seal.h), opened here after
 * the entry's "hmac" verified; without one the hashes are clear and "hmac" is
 * ignored. Every consumer sees the same {credential_hash, auth_hash} either way.
 */
#include "annotation_mac.h"
#include "annotation_seal.h"
#include "cleanup.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct pres_entry {
    char *image_name; /* normalised: "docker.io/library/nginx" */
    pg_pod_cred *secrets;
    size_t n_secrets;
    pg_pod_cred *sas; /* service accounts (credential_hash NULL) */
    size_t n_sas;
    char **sealed;    /* per secret: its sealedHashes text until opened, else NULL */
    size_t n_ignored; /* credentials dropped for naming another namespace */
    size_t n_rejected; /* entries dropped because their "hmac" did not verify */
    size_t n_unopened; /* sealed entries dropped: this node has no key to open them */
} pres_entry;

struct pg_presented {
    pres_entry *entries; /* sorted by image_name, names unique */
    size_t n;
};

/* ------------------------------------------------------------------ freeing */

static void free_sealed(pres_entry *e)
{
    for (size_t i = 0; e->sealed && i < e->n_secrets; i++)
        free(e->sealed[i]);
    free(e->sealed);
    e->sealed = NULL;
}

/* Forgets an entry's credentials (its name stays, for the folding and the reason text). */
static void drop_credentials(pres_entry *e)
{
    free_sealed(e);
    pg_pod_creds_free(&e->secrets, &e->n_secrets);
    pg_pod_creds_free(&e->sas, &e->n_sas);
}

static void free_entry(pres_entry *e)
{
    drop_credentials(e);
    free(e->image_name);
}

void pg_presented_free(pg_presented *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        free_entry(&p->entries[i]);
    free(p->entries);
    free(p);
}

/* ------------------------------------------------------------------ fields */

/* A required non-empty string field without embedded NUL; *out borrowed. */
static int get_string(const json_t *obj, const char *field, const char *what, bool required,
                      const char **out, pg_error *err)
{
    const json_t *v = json_object_get(obj, field);
    *out = NULL;
    if (!v && !required)
        return PG_OK;
    if (!v)
        return pg_fail(err, PG_ERR_INVALID, "%s: missing field \"%s\"", what, field);
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
        return pg_fail(err, PG_ERR_INVALID, "%s: field \"%s\" must be a string", what, field);
    if (required && json_string_length(v) == 0)
        return pg_fail(err, PG_ERR_INVALID, "%s: field \"%s\" is empty", what, field);
    *out = json_string_value(v);
    return PG_OK;
}


typedef struct coords {
    const char *namespace_, *name, *uid;
    const char *hash;   /* clear credentialHash ("" or 64 hex), NULL when absent */
    const char *auth;   /* clear authHash (64 hex), NULL when absent */
    const char *sealed; /* sealedHashes (keyed form), NULL when absent */
} coords;

static int check_hex64(const char *v, const char *field, const char *what, pg_error *err)
{
    if (v && *v && !pg_is_hex64(v))
        return pg_fail(err, PG_ERR_INVALID, "%s: %s is not 64 lowercase hex digits", what, field);
    return PG_OK;
}

/* The hash fields of a secret item: clear (unkeyed form) or sealed (keyed), never both. */
static int parse_hashes(const json_t *obj, const char *what, coords *c, pg_error *err)
{
    int rc = get_string(obj, "credentialHash", what, false, &c->hash, err);
    if (rc == PG_OK)
        rc = get_string(obj, "authHash", what, false, &c->auth, err);
    if (rc == PG_OK)
        rc = get_string(obj, PG_SEALED_FIELD, what, false, &c->sealed, err);
    if (rc == PG_OK)
        rc = check_hex64(c->hash, "credentialHash", what, err);
    if (rc == PG_OK)
        rc = check_hex64(c->auth, "authHash", what, err);
    if (rc != PG_OK)
        return rc;
    if (c->auth && (!*c->auth || !c->hash || !*c->hash))
        return pg_fail(err, PG_ERR_INVALID, "%s: authHash needs a credentialHash", what);
    if (c->sealed && (c->hash || c->auth))
        return pg_fail(err, PG_ERR_INVALID, "%s: sealedHashes with a clear hash", what);
    if (c->sealed && !pg_sealed_text_valid(c->sealed))
        return pg_fail(err, PG_ERR_INVALID, "%s: sealedHashes is not %d base64url characters",
                       what, PG_SEALED_LEN);
    return PG_OK;
}

static int parse_coords(const json_t *obj, const char *what, bool secret, coords *c,
                        pg_error *err)
{
    static const char *const secret_keys[] = {"namespace", "name", "uid", "credentialHash",
                                              "authHash", PG_SEALED_FIELD, NULL};
    static const char *const sa_keys[] = {"namespace", "name", "uid", NULL};
    *c = (coords){0};
    if (!json_is_object(obj))
        return pg_fail(err, PG_ERR_INVALID, "%s: expected an object", what);
    int rc = pg_json_only_keys(obj, secret ? secret_keys : sa_keys, what, err);
    if (rc == PG_OK)
        rc = get_string(obj, "namespace", what, true, &c->namespace_, err);
    if (rc == PG_OK)
        rc = get_string(obj, "name", what, true, &c->name, err);
    if (rc == PG_OK)
        rc = get_string(obj, "uid", what, true, &c->uid, err);
    if (rc == PG_OK && secret)
        rc = parse_hashes(obj, what, c, err);
    return rc;
}

/* ------------------------------------------------------------ credentials */

/* A hash that proves something: the empty-credential hash is kept as "" (none). */
static char *proving_copy(const char *h)
{
    return pg_strdup(h && strcmp(h, PG_EMPTY_CREDENTIAL_HASH) != 0 ? h : "");
}

/* Appends a copy of c to v[0..*n); a secret gets "" for a missing hash, and its
 * auth hash defaults to its credentialHash (a clear entry without an email). */
static int add_cred(pg_pod_cred **v, size_t *n, const coords *c, bool secret, pg_error *err)
{
    pg_pod_cred *nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    *v = nv;
    pg_pod_cred cred = {pg_strdup(c->namespace_), pg_strdup(c->name), pg_strdup(c->uid),
                        secret ? proving_copy(c->hash) : NULL,
                        secret ? proving_copy(c->auth ? c->auth : c->hash) : NULL};
    if (!cred.namespace_ || !cred.name || !cred.uid ||
        (secret && (!cred.credential_hash || !cred.auth_hash))) {
        pg_pod_cred_clear(&cred);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    nv[(*n)++] = cred;
    return PG_OK;
}

/* A secret with its sealed text kept beside it until the entry's MAC is checked. */
static int add_secret(pres_entry *e, const coords *c, pg_error *err)
{
    char **ns = realloc(e->sealed, (e->n_secrets + 1) * sizeof *ns);
    if (!ns)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    e->sealed = ns;
    ns[e->n_secrets] = NULL;
    if (c->sealed && !(ns[e->n_secrets] = pg_strdup(c->sealed)))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    int rc = add_cred(&e->secrets, &e->n_secrets, c, true, err);
    if (rc != PG_OK) {
        free(ns[e->n_secrets]);
        ns[e->n_secrets] = NULL;
    }
    return rc;
}

/* Parses one credential list; every item is validated, even those later dropped. */
static int parse_list(const json_t *arr, const char *field, const char *image,
                      const char *pod_namespace, pres_entry *e, pg_error *err)
{
    bool secrets = strcmp(field, "kubernetesSecrets") == 0;
    if (!arr)
        return PG_OK;
    if (!json_is_array(arr))
        return pg_fail(err, PG_ERR_INVALID, "annotation: \"%.256s\": %s must be an array", image,
                       field);
    size_t i;
    json_t *item;
    json_array_foreach(arr, i, item)
    {
        char what[384];
        snprintf(what, sizeof what, "annotation: \"%.256s\": %s[%zu]", image, field, i);
        coords c;
        int rc = parse_coords(item, what, secrets, &c, err);
        if (rc != PG_OK)
            return rc;
        if (strcmp(c.namespace_, pod_namespace) != 0) {
            e->n_ignored++;
            continue;
        }
        rc = secrets ? add_secret(e, &c, err) : add_cred(&e->sas, &e->n_sas, &c, false, err);
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}

/* The key must be an image name (tag and digest removed), normalised like record keys. */
static int normalise_key(const char *key, char **name_out, pg_error *err)
{
    pg_error why = {0};
    pg_autoref pg_ref *ref = pg_ref_parse(key, &why);
    if (!ref)
        return pg_fail(err, PG_ERR_INVALID, "annotation: key \"%.256s\" is not an image name: %s",
                       key, why.message);
    if (pg_ref_tag(ref) || pg_ref_digest(ref))
        return pg_fail(err, PG_ERR_INVALID,
                       "annotation: key \"%.256s\" must be an image name without tag or digest",
                       key);
    if (!(*name_out = pg_strdup(pg_ref_name(ref))))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    return PG_OK;
}

/*
 * With an HMAC key (config hmacKeyFile) an entry counts only if its "hmac"
 * verifies for the pod's namespace (docs/annotation-hmac.md): a copy replayed
 * into another namespace then presents nothing. An entry holding a clear hash never
 * verifies: the keyed form seals every hash. Verified per entry, before
 * entries with equal normalised names are folded together.
 */
static int check_mac(const json_t *val, const char *pod_namespace, const pg_mac_key **keyp,
                     pres_entry *e, pg_error *err)
{
    const pg_mac_key *key = *keyp;
    if (!key)
        return PG_OK;
    pg_error why = {0};
    int rc = pg_annotation_mac_verify_entry(key, pod_namespace, e->image_name, val, &why);
    /* The key retired by the last rotation (annotation-hmac.md, "Rotation"): an entry the
     * webhook signed before it still verifies, and its seals open with the same key. */
    const pg_mac_key *previous = pg_mac_key_previous(key);
    if (rc == PG_ERR_UNSAFE && previous) {
        pg_error why_previous = {0};
        if (pg_annotation_mac_verify_entry(previous, pod_namespace, e->image_name, val,
                                           &why_previous) == PG_OK) {
            rc = PG_OK;
            *keyp = previous;
        }
    }
    if (rc == PG_ERR_UNSAFE) {
        drop_credentials(e);
        e->n_rejected++;
        return PG_OK;
    }
    return rc == PG_OK ? PG_OK : pg_fail(err, rc, "annotation: %s", why.message);
}

/*
 * An entry's sealed hashes, opened once its MAC verified. Without a key
 * nothing can be opened: the entry presents nothing (n_unopened). A value that
 * does not open rejects the whole entry, as a bad MAC does.
 */
static int open_sealed(const pg_mac_key *key, pres_entry *e, pg_error *err)
{
    bool any = false;
    for (size_t i = 0; i < e->n_secrets; i++)
        any = any || e->sealed[i];
    if (!any)
        return PG_OK;
    if (!key) {
        drop_credentials(e);
        e->n_unopened++;
        return PG_OK;
    }
    for (size_t i = 0; i < e->n_secrets; i++) {
        pg_pod_cred *c = &e->secrets[i];
        char hash[PG_HASH_HEX_LEN + 1], auth[PG_HASH_HEX_LEN + 1];
        pg_error why = {0};
        if (!e->sealed[i])
            continue;
        int rc = pg_unseal_hashes(key, c->namespace_, c->name, c->uid, e->sealed[i], hash, auth,
                                  &why);
        if (rc == PG_ERR_UNSAFE) {
            drop_credentials(e);
            e->n_rejected++;
            return PG_OK;
        }
        if (rc != PG_OK)
            return pg_fail(err, rc, "annotation: %s", why.message);
        free(c->credential_hash);
        free(c->auth_hash);
        c->credential_hash = proving_copy(hash);
        c->auth_hash = proving_copy(auth);
        if (!c->credential_hash || !c->auth_hash)
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    free_sealed(e);
    return PG_OK;
}

/* An entry holds clear hashes (unkeyed form) or sealed ones (keyed), never both. */
static int check_one_version(const json_t *val, const char *what, pg_error *err)
{
    if (pg_annotation_entry_version(val) != 2)
        return PG_OK;
    size_t i;
    const json_t *item;
    json_array_foreach(json_object_get(val, "kubernetesSecrets"), i, item)
    {
        if (json_object_get(item, "credentialHash"))
            return pg_fail(err, PG_ERR_INVALID, "%s: mixes sealed and clear credential hashes",
                           what);
    }
    return PG_OK;
}

static int parse_entry(const char *key, const json_t *val, const char *pod_namespace,
                       const pg_mac_key *mac_key, pres_entry *e, pg_error *err)
{
    static const char *const allowed[] = {"kubernetesSecrets", "kubernetesServiceAccounts",
                                          PG_MAC_FIELD, NULL};
    char what[320];
    snprintf(what, sizeof what, "annotation: \"%.256s\"", key);
    if (!json_is_object(val))
        return pg_fail(err, PG_ERR_INVALID, "%s: expected an object", what);
    int rc = pg_json_only_keys(val, allowed, what, err);
    if (rc == PG_OK)
        rc = normalise_key(key, &e->image_name, err);
    if (rc == PG_OK)
        rc = parse_list(json_object_get(val, "kubernetesSecrets"), "kubernetesSecrets", key,
                        pod_namespace, e, err);
    if (rc == PG_OK)
        rc = parse_list(json_object_get(val, "kubernetesServiceAccounts"),
                        "kubernetesServiceAccounts", key, pod_namespace, e, err);
    const char *mac;
    if (rc == PG_OK) /* optional; its value is judged only when a key is configured */
        rc = get_string(val, PG_MAC_FIELD, what, false, &mac, err);
    if (rc == PG_OK)
        rc = check_one_version(val, what, err);
    if (rc == PG_OK)
        rc = check_mac(val, pod_namespace, &mac_key, e, err);
    if (rc == PG_OK)
        rc = open_sealed(mac_key, e, err);
    free_sealed(e); /* opened, dropped or failed: the texts are no longer needed */
    return rc;
}

/* ------------------------------------------------------------ entry table */

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const pres_entry *)a)->image_name, ((const pres_entry *)b)->image_name);
}

/* Moves the credentials (*src)[0..*n_src) to the end of *dst (the strings change owner). */
static int move_creds(pg_pod_cred **dst, size_t *n_dst, pg_pod_cred **src, size_t *n_src, pg_error *err)
{
    if (*n_src) {
        pg_pod_cred *nv = realloc(*dst, (*n_dst + *n_src) * sizeof *nv);
        if (!nv)
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
        memcpy(nv + *n_dst, *src, *n_src * sizeof *nv);
        *dst = nv;
        *n_dst += *n_src;
    }
    free(*src);
    *src = NULL;
    *n_src = 0;
    return PG_OK;
}

/* Moves from's credentials into into (from keeps only its name afterwards). */
static int merge_entry(pres_entry *into, pres_entry *from, pg_error *err)
{
    int rc = move_creds(&into->secrets, &into->n_secrets, &from->secrets, &from->n_secrets, err);
    if (rc == PG_OK)
        rc = move_creds(&into->sas, &into->n_sas, &from->sas, &from->n_sas, err);
    if (rc != PG_OK)
        return rc;
    into->n_ignored += from->n_ignored;
    into->n_rejected += from->n_rejected;
    into->n_unopened += from->n_unopened;
    return PG_OK;
}

/* "nginx" and "docker.io/library/nginx" are one image: sort, then fold equal names. */
static int sort_and_fold(pg_presented *p, pg_error *err)
{
    if (p->n == 0)
        return PG_OK;
    qsort(p->entries, p->n, sizeof *p->entries, cmp_entry);
    size_t out = 0;
    for (size_t i = 1; i < p->n; i++) {
        pres_entry *e = &p->entries[i];
        if (strcmp(p->entries[out].image_name, e->image_name) == 0) {
            int rc = merge_entry(&p->entries[out], e, err);
            if (rc != PG_OK)
                return rc; /* every entry is still owned by p and freed with it */
            free_entry(e);
        } else if (++out == i) {
            continue;
        } else {
            p->entries[out] = *e;
        }
        memset(e, 0, sizeof *e); /* freed or moved: leave nothing to free twice */
    }
    p->n = out + 1;
    return PG_OK;
}

static int parse_root(const json_t *root, const char *pod_namespace, const pg_mac_key *mac_key,
                      pg_presented *p, pg_error *err)
{
    if (!json_is_object(root))
        return pg_fail(err, PG_ERR_INVALID, "annotation: expected a JSON object");
    size_t count = json_object_size(root);
    if (count && !(p->entries = calloc(count, sizeof *p->entries)))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)root, key, val)
    {
        /* Count first so a failing entry is still freed with p. */
        pres_entry *e = &p->entries[p->n++];
        int rc = parse_entry(key, val, pod_namespace, mac_key, e, err);
        if (rc != PG_OK)
            return rc;
    }
    return sort_and_fold(p, err);
}

int pg_presented_parse_keyed(const char *json, size_t len, const char *pod_namespace,
                             const pg_mac_key *mac_key, pg_presented **out, pg_error *err)
{
    *out = NULL;
    if (!json)
        return pg_fail(err, PG_ERR_INVALID, "annotation: missing");
    if (len > PG_MAX_ANNOTATION_BYTES)
        return pg_fail(err, PG_ERR_LIMIT, "annotation: %zu bytes, larger than the limit of %u",
                       len, PG_MAX_ANNOTATION_BYTES);
    pg_autojson json_t *root = pg_json_parse(json, len, "annotation", err);
    if (!root)
        return PG_ERR_INVALID;
    pg_presented *p = calloc(1, sizeof *p);
    if (!p)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    /* No namespace: nothing can be in "the pod's namespace"; every entry is dropped. */
    int rc = parse_root(root, pod_namespace ? pod_namespace : "", mac_key, p, err);
    if (rc == PG_OK)
        *out = p;
    else
        pg_presented_free(p);
    return rc;
}

/* ------------------------------------------------------------------ lookup */

static const pres_entry *find_entry(const pg_presented *p, const char *image_name)
{
    if (!p || !image_name || p->n == 0)
        return NULL;
    pres_entry key = {.image_name = (char *)image_name};
    return bsearch(&key, p->entries, p->n, sizeof *p->entries, cmp_entry);
}

size_t pg_presented_secrets(const pg_presented *p, const char *image_name,
                            const pg_pod_cred **out)
{
    const pres_entry *e = find_entry(p, image_name);
    *out = e ? e->secrets : NULL;
    return e ? e->n_secrets : 0;
}

size_t pg_presented_sas(const pg_presented *p, const char *image_name, const pg_pod_cred **out)
{
    const pres_entry *e = find_entry(p, image_name);
    *out = e ? e->sas : NULL;
    return e ? e->n_sas : 0;
}

size_t pg_presented_ignored(const pg_presented *p, const char *image_name)
{
    const pres_entry *e = find_entry(p, image_name);
    return e ? e->n_ignored : 0;
}

size_t pg_presented_rejected(const pg_presented *p, const char *image_name)
{
    const pres_entry *e = find_entry(p, image_name);
    return e ? e->n_rejected : 0;
}

size_t pg_presented_unopened(const pg_presented *p, const char *image_name)
{
    const pres_entry *e = find_entry(p, image_name);
    return e ? e->n_unopened : 0;
}

/* ------------------------------------------------------------ namespace */

/* Notes the namespace of every item of one list in *ns (borrowed from the JSON). */
static int list_namespaces(const json_t *arr, const char **ns, pg_error *err)
{
    if (!arr)
        return PG_OK;
    if (!json_is_array(arr))
        return pg_fail(err, PG_ERR_INVALID, "annotation: a credential list is not an array");
    size_t i;
    const json_t *item;
    json_array_foreach(arr, i, item)
    {
        const char *v = NULL;
        int rc = json_is_object(item)
                     ? get_string(item, "namespace", "annotation item", true, &v, err)
                     : pg_fail(err, PG_ERR_INVALID, "annotation item: expected an object");
        if (rc != PG_OK)
            return rc;
        if (*ns && strcmp(*ns, v) != 0)
            return pg_fail(err, PG_ERR_INVALID, "annotation: items name more than one namespace");
        *ns = v;
    }
    return PG_OK;
}

int pg_presented_namespace(const char *json, size_t len, char **ns, pg_error *err)
{
    *ns = NULL;
    if (!json)
        return pg_fail(err, PG_ERR_INVALID, "annotation: missing");
    if (len > PG_MAX_ANNOTATION_BYTES)
        return pg_fail(err, PG_ERR_LIMIT, "annotation: %zu bytes, larger than the limit of %u", len,
                       PG_MAX_ANNOTATION_BYTES);
    pg_autojson json_t *root = pg_json_parse(json, len, "annotation", err);
    if (!root)
        return PG_ERR_INVALID;
    if (!json_is_object(root))
        return pg_fail(err, PG_ERR_INVALID, "annotation: expected a JSON object");
    const char *found = NULL; /* borrowed from root */
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (!json_is_object(val))
            return pg_fail(err, PG_ERR_INVALID, "annotation: an entry is not an object");
        int rc = list_namespaces(json_object_get(val, "kubernetesSecrets"), &found, err);
        if (rc == PG_OK)
            rc = list_namespaces(json_object_get(val, "kubernetesServiceAccounts"), &found, err);
        if (rc != PG_OK)
            return rc;
    }
    if (found && !(*ns = pg_strdup(found)))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    return PG_OK;
}
