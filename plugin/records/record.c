/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubelet pull records (ImagePulledRecord / ImagePullIntent): strict decoding,
 * serialisation in the kubelet's field order, and the kubelet's merge rules.
 *
 * Format facts (kubelet pkg/kubelet/images/pullmanager, k8s.io/kubelet/config/v1alpha1):
 *  - TypeMeta is inlined first: kind, apiVersion. Then lastUpdatedTime, imageRef,
 *    credentialMapping (omitempty). Go marshals map keys sorted bytewise.
 *  - ImagePullCredentials: kubernetesSecrets, kubernetesServiceAccounts,
 *    nodePodsAccessible, all omitempty.
 *  - ImagePullSecret: uid, namespace, name, credentialHash (never omitted).
 *  - ImagePullServiceAccount: uid, namespace, name.
 *  - The kubelet decodes strictly (unknown fields are errors).
 * We are stricter than Go where it costs kubelet-written files nothing: every
 * field the kubelet always writes is required, and null is never accepted.
 */
#include "cleanup.h"
#include "engine_testing.h" /* pg_intent_parse, pg_record_merge */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ freeing */

void pg_pod_cred_clear(pg_pod_cred *c)
{
    free(c->namespace_);
    free(c->name);
    free(c->uid);
    free(c->credential_hash);
    free(c->auth_hash);
}

void pg_pod_creds_free(pg_pod_cred **v, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        pg_pod_cred_clear(&(*v)[i]);
    free(*v);
    *v = NULL;
    *n = 0;
}

/* A hash that proves holding credentials: present, and not the hash of none. */
static bool proving_hash(const char *h)
{
    return h && *h && strcmp(h, PG_EMPTY_CREDENTIAL_HASH) != 0;
}

bool pg_pod_cred_same_hash(const pg_pod_cred *a, const pg_pod_cred *b)
{
    const char *x = a->credential_hash, *y = b->credential_hash;
    return proving_hash(x) && proving_hash(y) && strcmp(x, y) == 0;
}

bool pg_pod_cred_is_placeholder(const pg_pod_cred *recorded)
{
    return recorded->credential_hash &&
           strncmp(recorded->name, PG_UNVERIFIED_NAME_PREFIX,
                   sizeof PG_UNVERIFIED_NAME_PREFIX - 1) == 0;
}

bool pg_pod_uid_valid(const char *uid)
{
    size_t n = 0;
    for (; uid && uid[n]; n++) {
        unsigned char ch = (unsigned char)uid[n];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                  ch == '-' || ch == '.' || ch == '_';
        if (!ok || n >= PG_POD_UID_MAX)
            return false;
    }
    return n > 0;
}

bool pg_pod_cred_is_pod_binding(const pg_pod_cred *recorded)
{
    return recorded->credential_hash && !*recorded->credential_hash && !*recorded->uid &&
           strncmp(recorded->name, PG_POD_BINDING_PREFIX, sizeof PG_POD_BINDING_PREFIX - 1) == 0 &&
           pg_pod_uid_valid(recorded->name + sizeof PG_POD_BINDING_PREFIX - 1);
}

bool pg_pod_binding_matches(const char *pod_namespace, const char *pod_uid,
                            const pg_pod_cred *recorded)
{
    return pod_namespace && *pod_namespace && pg_pod_uid_valid(pod_uid) &&
           pg_pod_cred_is_pod_binding(recorded) &&
           strcmp(recorded->namespace_, pod_namespace) == 0 &&
           strcmp(recorded->name + sizeof PG_POD_BINDING_PREFIX - 1, pod_uid) == 0;
}

bool pg_pod_cred_is_namespace_marker(const pg_pod_cred *recorded)
{
    return !recorded->credential_hash && strcmp(recorded->name, PG_NAMESPACE_MARKER_NAME) == 0;
}

bool pg_pod_cred_matches(const pg_pod_cred *presented, const pg_pod_cred *recorded)
{
    /* A pod binding is the runtime's pod identity, never something a pod presents. */
    if (pg_pod_cred_is_pod_binding(recorded))
        return false;
    if (pg_pod_cred_is_namespace_marker(recorded))
        return !presented->credential_hash &&
               strcmp(presented->namespace_, recorded->namespace_) == 0;
    if (pg_pod_cred_is_placeholder(recorded))
        return presented->credential_hash && proving_hash(presented->auth_hash) &&
               strcmp(presented->namespace_, recorded->namespace_) == 0 &&
               strcmp(presented->auth_hash, recorded->credential_hash) == 0;
    return pg_pod_cred_same_hash(presented, recorded) ||
           (strcmp(presented->namespace_, recorded->namespace_) == 0 &&
            strcmp(presented->name, recorded->name) == 0 &&
            strcmp(presented->uid, recorded->uid) == 0);
}

static void mapping_clear_lists(pg_rec_mapping *m)
{
    pg_pod_creds_free(&m->secrets, &m->n_secrets);
    pg_pod_creds_free(&m->sas, &m->n_sas);
}

static void mapping_clear(pg_rec_mapping *m)
{
    mapping_clear_lists(m);
    free(m->image_name);
}

static void mappings_free(pg_rec_mapping *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        mapping_clear(&v[i]);
    free(v);
}

PG_API void pg_record_free(pg_record *rec)
{
    if (!rec)
        return;
    mappings_free(rec->maps, rec->n_maps);
    mappings_free(rec->by_name, rec->n_by_name);
    free(rec->api_version);
    free(rec->image_ref);
    free(rec->last_updated_text);
    free(rec->dir);
    free(rec);
}

/* ---------------------------------------------------------- accessors */

PG_API const char *pg_record_image_ref(const pg_record *rec) { return rec ? rec->image_ref : NULL; }
PG_API const char *pg_record_api_version(const pg_record *rec)
{
    return rec ? rec->api_version : NULL;
}
PG_API const char *pg_record_dir(const pg_record *rec) { return rec ? rec->dir : NULL; }
PG_API time_t pg_record_last_updated(const pg_record *rec) { return rec ? rec->last_updated : 0; }

pg_record *pg_record_new(const char *image_ref, pg_error *err)
{
    if (!image_ref || !*image_ref) {
        pg_fail(err, PG_ERR_INVALID, "empty imageRef");
        return NULL;
    }
    pg_record *rec = calloc(1, sizeof *rec);
    if (rec) {
        rec->image_ref = strdup(image_ref);
        rec->api_version = strdup(PG_API_V1ALPHA1);
    }
    if (!rec || !rec->image_ref || !rec->api_version) {
        pg_record_free(rec);
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return rec;
}

typedef int (*elem_cmp)(const void *, const void *);

/* Binary search of sorted base[0..n): the index of key, or where it belongs. */
static size_t sorted_position(const void *base, size_t n, size_t size, const void *key, elem_cmp cmp,
                              bool *found)
{
    const char *b = base;
    size_t lo = 0, hi = n;
    *found = false;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp(b + mid * size, key);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int cmp_mapping_to_name(const void *mapping, const void *image_name)
{
    return strcmp(((const pg_rec_mapping *)mapping)->image_name, image_name);
}

/* v[0..n) sorted by image_name: the index of image_name's mapping, or where it belongs. */
static size_t position_in(const pg_rec_mapping *v, size_t n, const char *image_name, bool *found)
{
    return sorted_position(v, n, sizeof *v, image_name, cmp_mapping_to_name, found);
}

static const pg_rec_mapping *find_in(const pg_rec_mapping *v, size_t n, const char *image_name)
{
    bool found = false;
    size_t at = position_in(v, n, image_name, &found);
    return found ? &v[at] : NULL;
}

int pg_record_key_name(const char *key, char **name_out)
{
    *name_out = NULL;
    /* The common case (pullgate's keys, fully written ones) costs a string scan. */
    if (!key || !pg_ref_needs_normalising(key))
        return PG_OK;
    pg_autoref pg_ref *ref = pg_ref_parse(key, NULL);
    /* Only a plain name names an image: the kubelet never writes a tag or
     * digest into a key, so such a key (or garbage) stands for itself. */
    if (ref && !pg_ref_tag(ref) && !pg_ref_digest(ref) && !(*name_out = strdup(pg_ref_name(ref))))
        return PG_ERR_NOMEM;
    return PG_OK;
}

const pg_rec_mapping *pg_record_find(const pg_record *rec, const char *image_name)
{
    if (!rec || !image_name)
        return NULL;
    if (!rec->by_name)
        return find_in(rec->maps, rec->n_maps, image_name);
    const pg_rec_mapping *m = find_in(rec->by_name, rec->n_by_name, image_name);
    if (m)
        return m;
    /* A key as written ("r/app"): the mapping of the image it names. */
    const pg_rec_mapping *raw = find_in(rec->maps, rec->n_maps, image_name);
    pg_autofree char *name = NULL;
    if (!raw || pg_record_key_name(raw->image_name, &name) != PG_OK || !name)
        return NULL;
    return find_in(rec->by_name, rec->n_by_name, name);
}

/* ------------------------------------------------------ mappings by image */

static int cred_copy(pg_pod_cred *dst, const pg_pod_cred *src)
{
    *dst = (pg_pod_cred){strdup(src->namespace_), strdup(src->name), strdup(src->uid),
                         src->credential_hash ? strdup(src->credential_hash) : NULL, NULL};
    if (dst->namespace_ && dst->name && dst->uid && (dst->credential_hash || !src->credential_hash))
        return PG_OK;
    pg_pod_cred_clear(dst);
    memset(dst, 0, sizeof *dst);
    return PG_ERR_NOMEM;
}

/* Appends copies of src[0..n) to *v (*n_v entries). */
static int creds_append(pg_pod_cred **v, size_t *n_v, const pg_pod_cred *src, size_t n)
{
    if (!n)
        return PG_OK;
    pg_pod_cred *grown = realloc(*v, (*n_v + n) * sizeof *grown);
    if (!grown)
        return PG_ERR_NOMEM;
    *v = grown;
    for (size_t i = 0; i < n; i++, (*n_v)++)
        if (cred_copy(&grown[*n_v], &src[i]) != PG_OK)
            return PG_ERR_NOMEM;
    return PG_OK;
}

/* One key of a record with the image it names (borrowed or owned). */
typedef struct named_key {
    const char *name;
    char *owned;
    size_t map;
} named_key;

static int cmp_named(const void *a, const void *b)
{
    const named_key *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->map > y->map) - (x->map < y->map);
}

/* The union mapping of keys[0..n) (one image) into *view. */
static int view_of(const pg_record *rec, const named_key *keys, size_t n, pg_rec_mapping *view)
{
    if (!(view->image_name = strdup(keys[0].name)))
        return PG_ERR_NOMEM;
    int rc = PG_OK;
    for (size_t k = 0; rc == PG_OK && k < n; k++) {
        const pg_rec_mapping *m = &rec->maps[keys[k].map];
        view->node_pods_accessible = view->node_pods_accessible || m->node_pods_accessible;
        rc = creds_append(&view->secrets, &view->n_secrets, m->secrets, m->n_secrets);
        if (rc == PG_OK)
            rc = creds_append(&view->sas, &view->n_sas, m->sas, m->n_sas);
    }
    return rc;
}

/*
 * Builds rec->by_name after rec->maps changed: one mapping per image, the
 * union of every key that names it. A record whose keys all are their own
 * names (pullgate's, or a kubelet's for fully written images) needs none.
 */
static int index_by_name(pg_record *rec)
{
    mappings_free(rec->by_name, rec->n_by_name);
    rec->by_name = NULL;
    rec->n_by_name = 0;
    bool spelled = false; /* some key spells its image otherwise (pg_record_key_name) */
    for (size_t i = 0; !spelled && i < rec->n_maps; i++)
        spelled = pg_ref_needs_normalising(rec->maps[i].image_name);
    if (!spelled)
        return PG_OK; /* the common case: no allocation */
    named_key *keys = calloc(rec->n_maps, sizeof *keys);
    if (!keys)
        return PG_ERR_NOMEM;
    int rc = PG_OK;
    bool aliased = false;
    for (size_t i = 0; rc == PG_OK && i < rec->n_maps; i++) {
        rc = pg_record_key_name(rec->maps[i].image_name, &keys[i].owned);
        keys[i].name = keys[i].owned ? keys[i].owned : rec->maps[i].image_name;
        keys[i].map = i;
        aliased = aliased || keys[i].owned;
    }
    size_t groups = 0;
    if (rc == PG_OK && aliased) {
        qsort(keys, rec->n_maps, sizeof *keys, cmp_named);
        for (size_t i = 0; i < rec->n_maps; i++)
            groups += i == 0 || strcmp(keys[i].name, keys[i - 1].name) != 0;
        if (!(rec->by_name = calloc(groups, sizeof *rec->by_name)))
            rc = PG_ERR_NOMEM;
    }
    for (size_t i = 0; rc == PG_OK && aliased && i < rec->n_maps;) {
        size_t j = i + 1;
        while (j < rec->n_maps && strcmp(keys[j].name, keys[i].name) == 0)
            j++;
        rc = view_of(rec, &keys[i], j - i, &rec->by_name[rec->n_by_name++]);
        i = j;
    }
    for (size_t i = 0; i < rec->n_maps; i++)
        free(keys[i].owned);
    free(keys);
    if (rc != PG_OK) {
        mappings_free(rec->by_name, rec->n_by_name);
        rec->by_name = NULL;
        rec->n_by_name = 0;
    }
    return rc;
}

/* ----------------------------------------------------------- checking */

/* "" or 64 lowercase hex digits, like the kubelet's SHA-256 hex. */
static bool valid_credential_hash(const char *s) { return !*s || pg_is_hex64(s); }

static bool known_api_version(const char *v)
{
    return strcmp(v, PG_API_V1ALPHA1) == 0 || strcmp(v, PG_API_V1BETA1) == 0;
}

/* ----------------------------------------------------------- decoding */

/* Decoding context: names the object being decoded in error messages. */
typedef struct decoder {
    pg_error *err;
    const char *what; /* "pulled record" / "pull intent" */
} decoder;

static int field_error(const decoder *d, const char *where, const char *key, const char *problem)
{
    return pg_fail(d->err, PG_ERR_CORRUPT, "%s: %s: field \"%s\" %s", d->what, where, key,
                   problem);
}

/* A required string member; *out borrowed from obj. */
static int get_string(const decoder *d, const json_t *obj, const char *key, const char *where,
                      const char **out)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL; /* defined on every path, so callers never read garbage */
    if (!v)
        return field_error(d, where, key, "is missing");
    if (!json_is_string(v))
        return field_error(d, where, key, "is not a string");
    *out = json_string_value(v);
    return PG_OK;
}

static int dup_string(const decoder *d, const json_t *obj, const char *key, const char *where,
                      char **out)
{
    const char *s;
    int rc = get_string(d, obj, key, where, &s);
    if (rc != PG_OK)
        return rc;
    if (!(*out = strdup(s)))
        return pg_fail(d->err, PG_ERR_NOMEM, "out of memory");
    return PG_OK;
}

static int check_keys(const decoder *d, const json_t *obj, const char *const *allowed,
                      const char *where)
{
    char what[96];
    snprintf(what, sizeof what, "%s: %s", d->what, where);
    if (!json_is_object(obj))
        return pg_fail(d->err, PG_ERR_CORRUPT, "%s is not a JSON object", what);
    int rc = pg_json_only_keys(obj, allowed, what, d->err);
    if (rc != PG_OK && d->err)
        d->err->code = PG_ERR_CORRUPT;
    return rc == PG_OK ? PG_OK : PG_ERR_CORRUPT;
}

/* kind and apiVersion, the inlined TypeMeta. *api_out borrowed. */
static int check_type_meta(const decoder *d, const json_t *root, const char *kind,
                           const char **api_out)
{
    const char *k, *api;
    int rc = get_string(d, root, "kind", "top level", &k);
    if (rc == PG_OK)
        rc = get_string(d, root, "apiVersion", "top level", &api);
    if (rc != PG_OK)
        return rc;
    if (strcmp(k, kind) != 0)
        return pg_fail(d->err, PG_ERR_CORRUPT, "%s: kind is \"%.64s\", expected \"%s\"", d->what,
                       k, kind);
    if (!known_api_version(api))
        return pg_fail(d->err, PG_ERR_CORRUPT, "%s: unsupported apiVersion \"%.80s\"", d->what,
                       api);
    *api_out = api;
    return PG_OK;
}

static int parse_root(const decoder *d, const char *buf, size_t len, json_t **root)
{
    *root = pg_json_parse(buf, len, d->what, d->err);
    if (!*root) { /* invalid JSON, pg_json_parse's only failure: in a record, corruption */
        if (d->err)
            d->err->code = PG_ERR_CORRUPT;
        return PG_ERR_CORRUPT;
    }
    if (!json_is_object(*root)) /* *root stays for the caller's pg_autojson to release */
        return pg_fail(d->err, PG_ERR_CORRUPT, "%s is not a JSON object", d->what);
    return PG_OK;
}

/* The two credential lists of a mapping: secrets carry a credentialHash, service accounts none. */
typedef struct cred_kind {
    const char *field; /* the mapping's member */
    const char *entry; /* "<field> entry", for errors */
    bool has_hash;
} cred_kind;

static const cred_kind SECRETS = {"kubernetesSecrets", "kubernetesSecrets entry", true};
static const cred_kind SERVICE_ACCOUNTS = {"kubernetesServiceAccounts",
                                           "kubernetesServiceAccounts entry", false};

static int decode_cred(const decoder *d, const json_t *obj, const cred_kind *k, pg_pod_cred *c)
{
    static const char *const secret_keys[] = {"uid", "namespace", "name", "credentialHash", NULL};
    static const char *const sa_keys[] = {"uid", "namespace", "name", NULL};
    int rc = check_keys(d, obj, k->has_hash ? secret_keys : sa_keys, k->entry);
    if (rc == PG_OK)
        rc = dup_string(d, obj, "uid", k->entry, &c->uid);
    if (rc == PG_OK)
        rc = dup_string(d, obj, "namespace", k->entry, &c->namespace_);
    if (rc == PG_OK)
        rc = dup_string(d, obj, "name", k->entry, &c->name);
    if (rc == PG_OK && k->has_hash)
        rc = dup_string(d, obj, "credentialHash", k->entry, &c->credential_hash);
    if (rc == PG_OK && k->has_hash && !valid_credential_hash(c->credential_hash))
        rc = pg_fail(d->err, PG_ERR_CORRUPT,
                     "%s: credentialHash \"%.80s\" is not 64 lowercase hex digits", d->what,
                     c->credential_hash);
    return rc;
}

/* An optional array member: NULL when absent. */
static int get_array(const decoder *d, const json_t *obj, const char *key, json_t **out)
{
    json_t *v = json_object_get(obj, key);
    if (v && !json_is_array(v))
        return pg_fail(d->err, PG_ERR_CORRUPT, "%s: \"%s\" is not an array", d->what, key);
    *out = v;
    return PG_OK;
}

static int decode_creds(const decoder *d, const json_t *arr, const cred_kind *k, pg_pod_cred **v,
                        size_t *n_out)
{
    size_t n = json_array_size(arr);
    if (!n)
        return PG_OK;
    if (!(*v = calloc(n, sizeof **v)))
        return pg_fail(d->err, PG_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        *n_out = i + 1; /* so that a failure frees the partial entry */
        int rc = decode_cred(d, json_array_get(arr, i), k, &(*v)[i]);
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}

static int decode_mapping(const decoder *d, const char *image_name, const json_t *obj,
                          pg_rec_mapping *m)
{
    static const char *const keys[] = {"kubernetesSecrets", "kubernetesServiceAccounts",
                                       "nodePodsAccessible", NULL};
    if (!*image_name)
        return pg_fail(d->err, PG_ERR_CORRUPT, "%s: empty image name in credentialMapping",
                       d->what);
    if (!(m->image_name = strdup(image_name)))
        return pg_fail(d->err, PG_ERR_NOMEM, "out of memory");
    int rc = check_keys(d, obj, keys, "credentialMapping entry");
    json_t *secrets = NULL, *sas = NULL;
    if (rc == PG_OK)
        rc = get_array(d, obj, SECRETS.field, &secrets);
    if (rc == PG_OK)
        rc = get_array(d, obj, SERVICE_ACCOUNTS.field, &sas);
    if (rc == PG_OK)
        rc = decode_creds(d, secrets, &SECRETS, &m->secrets, &m->n_secrets);
    if (rc == PG_OK)
        rc = decode_creds(d, sas, &SERVICE_ACCOUNTS, &m->sas, &m->n_sas);
    json_t *npa = json_object_get(obj, "nodePodsAccessible");
    if (rc == PG_OK && npa && !json_is_boolean(npa))
        rc = pg_fail(d->err, PG_ERR_CORRUPT, "%s: \"nodePodsAccessible\" is not a boolean",
                     d->what);
    m->node_pods_accessible = npa && json_is_true(npa);
    return rc;
}

static int compare_mapping(const void *a, const void *b)
{
    return strcmp(((const pg_rec_mapping *)a)->image_name, ((const pg_rec_mapping *)b)->image_name);
}

static int decode_mappings(const decoder *d, const json_t *root, pg_record *rec)
{
    json_t *cm = json_object_get(root, "credentialMapping");
    if (!cm)
        return PG_OK; /* omitempty */
    if (!json_is_object(cm))
        return pg_fail(d->err, PG_ERR_CORRUPT, "%s: \"credentialMapping\" is not an object",
                       d->what);
    size_t n = json_object_size(cm);
    if (!n)
        return PG_OK;
    if (!(rec->maps = calloc(n, sizeof *rec->maps)))
        return pg_fail(d->err, PG_ERR_NOMEM, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(cm, key, v)
    {
        int rc = decode_mapping(d, key, v, &rec->maps[rec->n_maps++]);
        if (rc != PG_OK)
            return rc;
    }
    /* Keys are unique (duplicates rejected by the parser); sort for lookup. */
    qsort(rec->maps, rec->n_maps, sizeof *rec->maps, compare_mapping);
    if (index_by_name(rec) != PG_OK)
        return pg_fail(d->err, PG_ERR_NOMEM, "out of memory");
    return PG_OK;
}

static int decode_record(const decoder *d, const json_t *root, pg_record *rec)
{
    static const char *const keys[] = {"kind", "apiVersion", "lastUpdatedTime", "imageRef",
                                       "credentialMapping", NULL};
    const char *api, *updated;
    int rc = check_keys(d, root, keys, "top level");
    if (rc == PG_OK)
        rc = check_type_meta(d, root, "ImagePulledRecord", &api);
    if (rc == PG_OK && !(rec->api_version = strdup(api)))
        rc = pg_fail(d->err, PG_ERR_NOMEM, "out of memory");
    if (rc == PG_OK)
        rc = dup_string(d, root, "imageRef", "top level", &rec->image_ref);
    if (rc == PG_OK && !*rec->image_ref)
        rc = pg_fail(d->err, PG_ERR_CORRUPT, "%s: empty imageRef", d->what);
    if (rc == PG_OK)
        rc = get_string(d, root, "lastUpdatedTime", "top level", &updated);
    if (rc == PG_OK && pg_parse_rfc3339(updated, &rec->last_updated, d->err) != PG_OK)
        rc = pg_fail(d->err, PG_ERR_CORRUPT, "%s: lastUpdatedTime \"%.64s\" is not RFC 3339",
                     d->what, updated);
    if (rc == PG_OK && !(rec->last_updated_text = strdup(updated)))
        rc = pg_fail(d->err, PG_ERR_NOMEM, "out of memory");
    if (rc == PG_OK)
        rc = decode_mappings(d, root, rec);
    return rc;
}

int pg_record_parse(const char *buf, size_t len, pg_record **out, pg_error *err)
{
    decoder d = {err, "pulled record"};
    *out = NULL;
    pg_autojson json_t *root = NULL;
    int rc = parse_root(&d, buf, len, &root);
    if (rc != PG_OK)
        return rc;
    pg_record *rec = calloc(1, sizeof *rec);
    rc = rec ? decode_record(&d, root, rec) : pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc == PG_OK)
        *out = rec;
    else
        pg_record_free(rec);
    return rc;
}

int pg_intent_parse(const char *buf, size_t len, char **image_out, pg_error *err)
{
    static const char *const keys[] = {"kind", "apiVersion", "image", NULL};
    decoder d = {err, "pull intent"};
    *image_out = NULL;
    pg_autojson json_t *root = NULL;
    int rc = parse_root(&d, buf, len, &root);
    if (rc != PG_OK)
        return rc;
    const char *api, *image = NULL;
    rc = check_keys(&d, root, keys, "top level");
    if (rc == PG_OK)
        rc = check_type_meta(&d, root, "ImagePullIntent", &api);
    if (rc == PG_OK)
        rc = get_string(&d, root, "image", "top level", &image);
    if (rc == PG_OK && !*image)
        rc = pg_fail(err, PG_ERR_CORRUPT, "pull intent: empty image");
    if (rc == PG_OK && !(*image_out = strdup(image)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    return rc;
}

/* ------------------------------------------------------- serialising */

/*
 * Objects are built member by member in the kubelet's field order; jansson
 * (>= 2.8) keeps insertion order. json_string() refuses invalid UTF-8, which
 * we report instead of silently writing what Go would have rewritten.
 */
static int set_string(json_t *obj, const char *key, const char *value)
{
    json_t *s = json_string(value ? value : "");
    return s ? json_object_set_new(obj, key, s) : -1;
}

static json_t *cred_to_json(const pg_pod_cred *c, const cred_kind *k)
{
    json_t *o = json_object();
    if (!o || set_string(o, "uid", c->uid) || set_string(o, "namespace", c->namespace_) ||
        set_string(o, "name", c->name) ||
        (k->has_hash && set_string(o, "credentialHash", c->credential_hash))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int append_creds(json_t *o, const cred_kind *k, const pg_pod_cred *v, size_t n)
{
    if (!n)
        return 0; /* omitempty */
    json_t *arr = json_array();
    if (!arr || json_object_set_new(o, k->field, arr))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(arr, cred_to_json(&v[i], k)))
            return -1;
    return 0;
}

static json_t *mapping_to_json(const pg_rec_mapping *m)
{
    json_t *o = json_object();
    if (!o || append_creds(o, &SECRETS, m->secrets, m->n_secrets) ||
        append_creds(o, &SERVICE_ACCOUNTS, m->sas, m->n_sas) ||
        (m->node_pods_accessible && json_object_set_new(o, "nodePodsAccessible", json_true()))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int append_mappings(json_t *root, const pg_record *rec)
{
    if (!rec->n_maps)
        return 0; /* omitempty */
    json_t *cm = json_object();
    if (!cm || json_object_set_new(root, "credentialMapping", cm))
        return -1;
    for (size_t i = 0; i < rec->n_maps; i++) /* sorted, like Go's map marshalling */
        if (json_object_set_new(cm, rec->maps[i].image_name, mapping_to_json(&rec->maps[i])))
            return -1;
    return 0;
}

/* *text = root as compact JSON (caller frees); root is released either way. */
static int dump_or_fail(json_t *root, int build_failed, const char *what, char **text,
                        pg_error *err)
{
    *text = build_failed ? NULL : json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!*text)
        return pg_fail(err, PG_ERR_INVALID,
                       "cannot serialise %s: out of memory or a string is not valid UTF-8", what);
    return PG_OK;
}

int pg_record_serialize(const pg_record *rec, const char *api_version, char **out,
                        pg_error *err)
{
    *out = NULL;
    if (!api_version)
        api_version = rec->api_version ? rec->api_version : PG_API_V1ALPHA1;
    if (!known_api_version(api_version))
        return pg_fail(err, PG_ERR_INVALID, "unsupported record apiVersion \"%.80s\"",
                       api_version);
    char when[32];
    const char *updated = rec->last_updated_text;
    if (!updated) {
        pg_format_rfc3339(rec->last_updated, when);
        updated = when;
    }
    json_t *root = json_object();
    int failed = !root || set_string(root, "kind", "ImagePulledRecord") ||
                 set_string(root, "apiVersion", api_version) ||
                 set_string(root, "lastUpdatedTime", updated) ||
                 set_string(root, "imageRef", rec->image_ref) || append_mappings(root, rec);
    return dump_or_fail(root, failed, "pulled record", out, err);
}

int pg_intent_serialize(const char *image, const char *api_version, char **out, pg_error *err)
{
    *out = NULL;
    if (!api_version)
        api_version = PG_API_V1ALPHA1;
    if (!known_api_version(api_version))
        return pg_fail(err, PG_ERR_INVALID, "unsupported record apiVersion \"%.80s\"",
                       api_version);
    json_t *root = json_object();
    int failed = !root || set_string(root, "kind", "ImagePullIntent") ||
                 set_string(root, "apiVersion", api_version) || set_string(root, "image", image);
    return dump_or_fail(root, failed, "pull intent", out, err);
}

PG_API char *pg_record_to_json(const pg_record *rec, pg_error *err)
{
    if (!rec) {
        pg_fail(err, PG_ERR_INVALID, "no record");
        return NULL;
    }
    char *text;
    pg_record_serialize(rec, rec->api_version, &text, err);
    return text;
}

/* ------------------------------------------------------------ merging */

static int cmp_coords(const char *ns_a, const char *name_a, const char *uid_a, const char *ns_b,
                      const char *name_b, const char *uid_b)
{
    int c = strcmp(ns_a, ns_b);
    if (!c)
        c = strcmp(name_a, name_b);
    if (!c)
        c = strcmp(uid_a, uid_b);
    return c;
}

/* Credentials are keyed by (namespace, name, uid); the hash is a value, not part of the key. */
static int cmp_cred(const void *a, const void *b)
{
    const pg_pod_cred *x = a, *y = b;
    return cmp_coords(x->namespace_, x->name, x->uid, y->namespace_, y->name, y->uid);
}

/*
 * Records written by someone else may hold unsorted or repeated entries.
 * Sorting is only needed then, so check first (the common case is O(n)).
 * Among repeated coordinates the kubelet keeps the last one read; qsort is
 * not stable, so for that rare case we keep an arbitrary one of them: all
 * name the same secret and the next pull of it rewrites the hash anyway.
 */
typedef void (*elem_clear)(void *);

/* Sorts base[0..*n) by cmp unless already strictly sorted, then drops repeats (clearing them). */
static void sort_unique(void *base, size_t *n, size_t size, elem_cmp cmp, elem_clear clear)
{
    char *b = base;
    size_t i;
    for (i = 1; i < *n && cmp(b + (i - 1) * size, b + i * size) < 0; i++)
        ;
    if (i >= *n)
        return;
    qsort(base, *n, size, cmp);
    size_t out = 0;
    for (i = 0; i < *n; i++) {
        if (out && cmp(b + (out - 1) * size, b + i * size) == 0) {
            clear(b + i * size);
            continue;
        }
        if (out != i)
            memcpy(b + out * size, b + i * size, size);
        out++;
    }
    *n = out;
}

static void clear_cred_elem(void *p) { pg_pod_cred_clear(p); }

static void normalise_creds(pg_pod_cred *v, size_t *n)
{
    sort_unique(v, n, sizeof *v, cmp_cred, clear_cred_elem);
}

static int check_coords(const char *kind, size_t i, const char *ns, const char *name,
                        const char *uid, pg_error *err)
{
    if (!ns || !*ns || !name || !*name || !uid)
        return pg_fail(err, PG_ERR_INVALID,
                       "%s %zu: namespace and name must be non-empty and uid present", kind, i);
    return PG_OK;
}

static int check_creds(const pg_pull_credentials *c, pg_error *err)
{
    for (size_t i = 0; i < c->n_secrets; i++) {
        const pg_secret *s = &c->secrets[i];
        int rc = check_coords("secret", i, s->namespace_, s->name, s->uid, err);
        if (rc != PG_OK)
            return rc;
        if (s->credential_hash && !valid_credential_hash(s->credential_hash))
            return pg_fail(err, PG_ERR_INVALID,
                           "secret %s/%s: credentialHash is not 64 lowercase hex digits",
                           s->namespace_, s->name);
    }
    for (size_t i = 0; i < c->n_service_accounts; i++) {
        const pg_service_account *sa = &c->service_accounts[i];
        int rc = check_coords("service account", i, sa->namespace_, sa->name, sa->uid, err);
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}

/*
 * Merges one credential (hash NULL for a service account) into the sorted
 * list v[0..*n): a secret already there gets the newest hash, a service
 * account already there is left alone (a set).
 */
static int merge_one_cred(pg_pod_cred **v, size_t *n, const pg_pod_cred *in, bool has_hash,
                          pg_error *err)
{
    bool found;
    size_t at = sorted_position(*v, *n, sizeof **v, in, cmp_cred, &found);
    if (found && !has_hash)
        return PG_OK;
    char *hash = has_hash ? strdup(in->credential_hash ? in->credential_hash : "") : NULL;
    if (has_hash && !hash)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (found) { /* same coordinates: the newest hash wins */
        free((*v)[at].credential_hash);
        (*v)[at].credential_hash = hash;
        return PG_OK;
    }
    pg_pod_cred c = {strdup(in->namespace_), strdup(in->name), strdup(in->uid), hash, NULL};
    pg_pod_cred *grown = realloc(*v, (*n + 1) * sizeof *grown);
    if (grown)
        *v = grown;
    if (!c.namespace_ || !c.name || !c.uid || !grown) {
        pg_pod_cred_clear(&c);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    memmove(&grown[at + 1], &grown[at], (*n - at) * sizeof *grown);
    grown[at] = c;
    (*n)++;
    return PG_OK;
}

/* A secret of a pod (not pullgate-cri's placeholder or pod binding) with a hash that proves something. */
static bool regular_secret(const pg_pod_cred *c)
{
    return proving_hash(c->credential_hash) && !pg_pod_cred_is_placeholder(c) &&
           !pg_pod_cred_is_pod_binding(c);
}

bool pg_pod_cred_same_credential(const pg_pod_cred *a, const pg_pod_cred *b)
{
    return regular_secret(a) && regular_secret(b) && strcmp(a->namespace_, b->namespace_) == 0 &&
           strcmp(a->credential_hash, b->credential_hash) == 0;
}

/* A regular secret of in's namespace holding in's hash under other coordinates, or NULL. */
static const pg_pod_cred *same_hash_elsewhere(const pg_rec_mapping *m, const pg_pod_cred *in)
{
    for (size_t i = 0; i < m->n_secrets; i++) {
        const pg_pod_cred *r = &m->secrets[i];
        if (pg_pod_cred_same_credential(r, in) && cmp_cred(r, in) != 0)
            return r;
    }
    return NULL;
}

static void remove_secret_at(pg_rec_mapping *m, size_t at)
{
    pg_pod_cred_clear(&m->secrets[at]);
    memmove(&m->secrets[at], &m->secrets[at + 1], (m->n_secrets - at - 1) * sizeof *m->secrets);
    m->n_secrets--;
}

/*
 * One secret of a pull into m (sorted): the kubelet's rule (by coordinates,
 * the newest hash wins), except that a namespace holds each credential once
 * per image. A regular secret whose namespace already holds its hash under
 * other coordinates adds nothing: the recorded one matches every pod
 * presenting that hash, so 64 secrets holding one credential cost one entry,
 * not 64 (docs/interfaces.md §2). An entry with in's coordinates then holds an
 * older hash of that secret, which the kubelet would overwrite: it goes.
 */
static int merge_secret(pg_rec_mapping *m, const pg_pod_cred *in, pg_error *err)
{
    bool found;
    size_t at = sorted_position(m->secrets, m->n_secrets, sizeof *m->secrets, in, cmp_cred, &found);
    bool unchanged = found && strcmp(m->secrets[at].credential_hash,
                                     in->credential_hash ? in->credential_hash : "") == 0;
    if (!unchanged && same_hash_elsewhere(m, in)) {
        if (found)
            remove_secret_at(m, at);
        return PG_OK;
    }
    return merge_one_cred(&m->secrets, &m->n_secrets, in, true, err);
}

/* The mapping for image_name, inserted (empty) at its sorted place if missing. */
static pg_rec_mapping *mapping_for(pg_record *rec, const char *image_name, pg_error *err)
{
    bool found;
    size_t lo = position_in(rec->maps, rec->n_maps, image_name, &found);
    if (found)
        return &rec->maps[lo];
    pg_autofree char *name = strdup(image_name);
    pg_rec_mapping *grown = realloc(rec->maps, (rec->n_maps + 1) * sizeof *grown);
    if (grown)
        rec->maps = grown;
    if (!name || !grown) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    memmove(&grown[lo + 1], &grown[lo], (rec->n_maps - lo) * sizeof *grown);
    grown[lo] = (pg_rec_mapping){.image_name = pg_steal(&name)};
    rec->n_maps++;
    return &grown[lo];
}

/*
 * Before merging into m: a mapping that is nodePodsAccessible stays so, and a
 * node-accessible merge makes it so and clears its lists (false: nothing more to
 * merge). Otherwise its lists are sorted and unique, ready for the merge (true).
 */
static bool lists_to_merge(pg_rec_mapping *m, bool node_accessible)
{
    if (m->node_pods_accessible)
        return false;
    if (node_accessible) {
        mapping_clear_lists(m);
        m->node_pods_accessible = true;
        return false;
    }
    normalise_creds(m->secrets, &m->n_secrets);
    normalise_creds(m->sas, &m->n_sas);
    return true;
}

static bool creds_empty(const pg_pull_credentials *c)
{
    return !c || (!c->node_pods_accessible && !c->n_secrets && !c->n_service_accounts);
}

/*
 * Kubelet rules (pullmanager.go pulledRecordMergeNewCreds):
 *  - no credentials to record: nothing changes (no empty mapping is added);
 *  - a mapping that is nodePodsAccessible stays so, whatever is merged later;
 *  - nodePodsAccessible clears the secret and service-account lists;
 *  - secrets are keyed by (namespace, name, uid), the newest hash wins, sorted;
 *  - service accounts are a set, sorted.
 * The kubelet merges either secrets or service accounts per pull (one
 * credential source per pull); we merge both when both are given.
 */
static int merge_creds(pg_record *rec, const char *image_name, const pg_pull_credentials *creds,
                       pg_error *err)
{
    if (creds_empty(creds))
        return PG_OK;
    int rc = check_creds(creds, err);
    if (rc != PG_OK)
        return rc;
    pg_rec_mapping *m = mapping_for(rec, image_name, err);
    if (!m)
        return PG_ERR_NOMEM;
    if (!lists_to_merge(m, creds->node_pods_accessible))
        return PG_OK;
    for (size_t i = 0; rc == PG_OK && i < creds->n_secrets; i++) {
        const pg_secret *in = &creds->secrets[i];
        pg_pod_cred c = {(char *)in->namespace_, (char *)in->name, (char *)in->uid,
                         (char *)in->credential_hash, NULL};
        rc = merge_secret(m, &c, err);
    }
    for (size_t i = 0; rc == PG_OK && i < creds->n_service_accounts; i++) {
        const pg_service_account *in = &creds->service_accounts[i];
        pg_pod_cred c = {(char *)in->namespace_, (char *)in->name, (char *)in->uid, NULL, NULL};
        rc = merge_one_cred(&m->sas, &m->n_sas, &c, false, err);
    }
    return rc;
}

/* The mappings changed: the view by image follows (pg_record_find). */
static int reindexed(pg_record *rec, int rc, pg_error *err)
{
    if (index_by_name(rec) != PG_OK && rc == PG_OK)
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    return rc;
}

int pg_record_merge(pg_record *rec, const char *image_name, const pg_pull_credentials *creds,
                    pg_error *err)
{
    if (!rec || !image_name || !*image_name)
        return pg_fail(err, PG_ERR_INVALID, "merge: no record or empty image name");
    return reindexed(rec, merge_creds(rec, image_name, creds, err), err);
}

/*
 * Folds mapping m (another key of the same image) into t. Which of two
 * recorded hashes of one secret is newer is unknown here: t's (the
 * normalised key, pullgate's own) is kept, the other coordinates are added.
 */
static int fold_into(pg_rec_mapping *t, const pg_rec_mapping *m, pg_error *err)
{
    if (!lists_to_merge(t, m->node_pods_accessible))
        return PG_OK;
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < m->n_secrets; i++) {
        bool found;
        sorted_position(t->secrets, t->n_secrets, sizeof *t->secrets, &m->secrets[i], cmp_cred,
                        &found);
        if (!found)
            rc = merge_one_cred(&t->secrets, &t->n_secrets, &m->secrets[i], true, err);
    }
    for (size_t i = 0; rc == PG_OK && i < m->n_sas; i++)
        rc = merge_one_cred(&t->sas, &t->n_sas, &m->sas[i], false, err);
    return rc;
}

/* Every key other than image_name that names the same image, folded into image_name's. */
static int fold_keys(pg_record *rec, const char *image_name, pg_error *err)
{
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < rec->n_maps;) {
        pg_autofree char *name = NULL;
        if (strcmp(rec->maps[i].image_name, image_name) == 0 ||
            (rc = pg_record_key_name(rec->maps[i].image_name, &name)) != PG_OK || !name ||
            strcmp(name, image_name) != 0) {
            if (rc == PG_ERR_NOMEM)
                rc = pg_fail(err, rc, "out of memory");
            i++;
            continue;
        }
        pg_rec_mapping moved = rec->maps[i];
        memmove(&rec->maps[i], &rec->maps[i + 1], (rec->n_maps - i - 1) * sizeof *rec->maps);
        rec->n_maps--;
        pg_rec_mapping *t = mapping_for(rec, image_name, err);
        rc = t ? fold_into(t, &moved, err) : PG_ERR_NOMEM;
        mapping_clear(&moved);
        i = 0; /* the target may have been inserted before i */
    }
    return rc;
}

/* ------------------------------------------------------ the fair share */

/* Bytes of s as a JSON string body (jansson's escaping): what it costs in the record. */
static size_t json_len(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
        n += *p == '"' || *p == '\\' || *p == '\b' || *p == '\f' || *p == '\n' || *p == '\r' ||
                     *p == '\t'
                 ? 2
             : *p < 0x20 ? 6
                         : 1;
    return n;
}

/* What one entry and one mapping key cost as serialised, syntax included (a
 * bound, checked against pg_record_serialize by the unit tests). */
#define SECRET_SYNTAX 56u /* {"uid":"","namespace":"","name":"","credentialHash":""}, */
#define SA_SYNTAX 36u     /* {"uid":"","namespace":"","name":""}, */
#define KEY_SYNTAX 88u    /* "":{"kubernetesSecrets":[],"kubernetesServiceAccounts":[],... */

static size_t entry_bytes(const pg_pod_cred *c, bool secret)
{
    return json_len(c->namespace_) + json_len(c->name) + json_len(c->uid) +
           (secret ? json_len(c->credential_hash) + SECRET_SYNTAX : SA_SYNTAX);
}

static size_t key_bytes(const char *key) { return json_len(key) + KEY_SYNTAX; }

/* ns's use of one mapping: entries and bytes (its key included when it holds one). */
static pg_share_use mapping_share(const pg_rec_mapping *m, const char *ns)
{
    pg_share_use u = {0, 0};
    for (size_t i = 0; i < m->n_secrets; i++)
        if (strcmp(m->secrets[i].namespace_, ns) == 0) {
            u.entries++;
            u.bytes += entry_bytes(&m->secrets[i], true);
        }
    for (size_t i = 0; i < m->n_sas; i++)
        if (strcmp(m->sas[i].namespace_, ns) == 0) {
            u.entries++;
            u.bytes += entry_bytes(&m->sas[i], false);
        }
    if (u.entries)
        u.bytes += key_bytes(m->image_name);
    return u;
}

pg_share_use pg_record_share(const pg_record *rec, const char *ns)
{
    pg_share_use u = {0, 0};
    for (size_t m = 0; rec && ns && m < rec->n_maps; m++) {
        pg_share_use one = mapping_share(&rec->maps[m], ns);
        u.entries += one.entries;
        u.bytes += one.bytes;
    }
    return u;
}

size_t pg_record_pool_bytes(const pg_record *rec)
{
    size_t n = 0;
    for (size_t m = 0; rec && m < rec->n_maps; m++)
        if (!rec->maps[m].n_secrets && !rec->maps[m].n_sas)
            n += key_bytes(rec->maps[m].image_name);
    return n;
}

static bool over_share(pg_share_use u)
{
    return u.entries > PG_SHARE_MAX_ENTRIES || u.bytes > PG_SHARE_MAX_BYTES;
}

/* Past a bound and larger than before the pull: an over-share record written
 * before the bounds (or by hand) keeps taking its namespace's re-pulls. */
static bool grew_past(pg_share_use now, pg_share_use before)
{
    return (now.entries > PG_SHARE_MAX_ENTRIES && now.entries > before.entries) ||
           (now.bytes > PG_SHARE_MAX_BYTES && now.bytes > before.bytes);
}

/* The namespaces one pull names, with their use before it. */
typedef struct share_check {
    const char **ns;
    pg_share_use *before;
    size_t n;
    bool pooled_before; /* the pulled name's key was in the pool already */
} share_check;

static void share_check_free(share_check *sc)
{
    free(sc->ns);
    free(sc->before);
}

static void share_note(share_check *sc, const pg_record *rec, const char *ns)
{
    if (!ns)
        return; /* check_creds refuses it */
    for (size_t i = 0; i < sc->n; i++)
        if (strcmp(sc->ns[i], ns) == 0)
            return;
    sc->ns[sc->n] = ns;
    sc->before[sc->n++] = pg_record_share(rec, ns);
}

static bool pooled(const pg_rec_mapping *m) { return m && !m->n_secrets && !m->n_sas; }

static int share_begin(share_check *sc, const pg_record *rec, const char *image_name,
                       const pg_pull_credentials *creds)
{
    size_t most = creds ? creds->n_secrets + creds->n_service_accounts : 0;
    *sc = (share_check){NULL, NULL, 0, pooled(find_in(rec->maps, rec->n_maps, image_name))};
    if (!most)
        return PG_OK;
    sc->ns = calloc(most, sizeof *sc->ns);
    sc->before = calloc(most, sizeof *sc->before);
    if (!sc->ns || !sc->before)
        return PG_ERR_NOMEM;
    for (size_t i = 0; i < creds->n_secrets; i++)
        share_note(sc, rec, creds->secrets[i].namespace_);
    for (size_t i = 0; i < creds->n_service_accounts; i++)
        share_note(sc, rec, creds->service_accounts[i].namespace_);
    return PG_OK;
}

/* One of ns's pod bindings that may make room, and when it was recorded. */
typedef struct evictable {
    size_t map, secret;
    time_t when;
} evictable;

static int cmp_evictable(const void *a, const void *b)
{
    const evictable *x = a, *y = b;
    if (x->when != y->when)
        return x->when < y->when ? -1 : 1;
    if (x->map != y->map)
        return x->map < y->map ? -1 : 1;
    return (x->secret > y->secret) - (x->secret < y->secret);
}

/* Whether recorded secret c of image_name's mapping is one this pull records. */
static bool recorded_now(const char *map_name, const char *image_name, const pg_pod_cred *c,
                         const pg_pull_credentials *creds)
{
    if (strcmp(map_name, image_name) != 0)
        return false;
    for (size_t i = 0; i < creds->n_secrets; i++) {
        const pg_secret *in = &creds->secrets[i];
        if (cmp_coords(in->namespace_, in->name, in->uid, c->namespace_, c->name, c->uid) == 0)
            return true;
    }
    return false;
}

/* ns's pod bindings other than this pull's, oldest first. */
static int evictables_of(const pg_record *rec, const char *ns, const char *image_name,
                         const pg_pull_credentials *creds, pg_recorded_at_fn recorded_at,
                         void *ud, evictable **out, size_t *n_out)
{
    size_t n = 0, cap = 0;
    pg_autofree evictable *v = NULL;
    for (size_t m = 0; m < rec->n_maps; m++) {
        const pg_rec_mapping *map = &rec->maps[m];
        for (size_t i = 0; i < map->n_secrets; i++) {
            const pg_pod_cred *c = &map->secrets[i];
            if (strcmp(c->namespace_, ns) != 0 || !pg_pod_cred_is_pod_binding(c) ||
                recorded_now(map->image_name, image_name, c, creds))
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                evictable *grown = realloc(v, cap * sizeof *grown);
                if (!grown)
                    return PG_ERR_NOMEM;
                v = grown;
            }
            v[n++] = (evictable){m, i, recorded_at ? recorded_at(map->image_name, c, ud) : 0};
        }
    }
    if (n)
        qsort(v, n, sizeof *v, cmp_evictable);
    *out = pg_steal(&v);
    *n_out = n;
    return PG_OK;
}

/* Removes the secrets marked in doomed (per mapping, per secret index). */
static void remove_doomed(pg_record *rec, bool **doomed)
{
    for (size_t m = 0; m < rec->n_maps; m++) {
        pg_rec_mapping *map = &rec->maps[m];
        size_t out = 0;
        for (size_t i = 0; doomed[m] && i < map->n_secrets; i++) {
            if (doomed[m][i]) {
                pg_pod_cred_clear(&map->secrets[i]);
                continue;
            }
            map->secrets[out++] = map->secrets[i];
        }
        if (doomed[m])
            map->n_secrets = out;
    }
}

/*
 * ns is over its share: its own oldest pod bindings (other pods' conveniences,
 * which a re-pull restores) make room until it fits again. *use follows.
 */
static int evict_bindings(pg_record *rec, const char *ns, const char *image_name,
                          const pg_pull_credentials *creds, pg_recorded_at_fn recorded_at,
                          void *ud, pg_share_use *use)
{
    pg_autofree evictable *v = NULL;
    size_t n = 0;
    int rc = evictables_of(rec, ns, image_name, creds, recorded_at, ud, &v, &n);
    if (rc != PG_OK || !n)
        return rc;
    bool **doomed = calloc(rec->n_maps, sizeof *doomed);
    pg_autofree size_t *left = calloc(rec->n_maps, sizeof *left); /* ns's entries per mapping */
    rc = doomed && left ? PG_OK : PG_ERR_NOMEM;
    for (size_t m = 0; rc == PG_OK && m < rec->n_maps; m++)
        left[m] = mapping_share(&rec->maps[m], ns).entries;
    for (size_t k = 0; rc == PG_OK && k < n && over_share(*use); k++) {
        const pg_rec_mapping *map = &rec->maps[v[k].map];
        if (!doomed[v[k].map] && !(doomed[v[k].map] = calloc(map->n_secrets, sizeof **doomed))) {
            rc = PG_ERR_NOMEM;
            break;
        }
        doomed[v[k].map][v[k].secret] = true;
        use->entries--;
        use->bytes -= entry_bytes(&map->secrets[v[k].secret], true);
        if (--left[v[k].map] == 0)
            use->bytes -= key_bytes(map->image_name);
    }
    if (rc == PG_OK)
        remove_doomed(rec, doomed);
    for (size_t m = 0; doomed && m < rec->n_maps; m++)
        free(doomed[m]);
    free(doomed);
    return rc;
}

static int share_exceeded(const pg_record *rec, const char *ns, pg_share_use use, pg_error *err)
{
    return pg_fail(err, PG_ERR_QUOTA,
                   "namespace %.64s has used up its share of the pull record of %.160s: %zu "
                   "entries and %zu bytes of names with this pull (at most %u and %u per "
                   "namespace and record); not recorded",
                   ns, rec->image_ref, use.entries, use.bytes, PG_SHARE_MAX_ENTRIES,
                   PG_SHARE_MAX_BYTES);
}

/* After the merge: every namespace the pull names within its share (or no larger), the pool too. */
static int share_end(const share_check *sc, pg_record *rec, const char *image_name,
                     const pg_pull_credentials *creds, pg_recorded_at_fn recorded_at, void *ud,
                     pg_error *err)
{
    for (size_t i = 0; i < sc->n; i++) {
        pg_share_use use = pg_record_share(rec, sc->ns[i]);
        if (!grew_past(use, sc->before[i]))
            continue;
        if (evict_bindings(rec, sc->ns[i], image_name, creds, recorded_at, ud, &use) != PG_OK)
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
        if (grew_past(use, sc->before[i]))
            return share_exceeded(rec, sc->ns[i], use, err);
    }
    /* The pool grows only by the pulled name: a new key without credentials, or one a
     * node-accessible pull cleared (a namespace's own bindings never empty a key: each
     * came with its placeholder). Measured only then: it reads every key. */
    if (sc->pooled_before || !pooled(find_in(rec->maps, rec->n_maps, image_name)))
        return PG_OK;
    size_t pool = pg_record_pool_bytes(rec);
    if (pool > PG_SHARE_POOL_BYTES)
        return pg_fail(err, PG_ERR_QUOTA,
                       "the pull record of %.160s holds %zu bytes of image names pulled without "
                       "namespace-bound credentials with this pull (at most %u); not recorded",
                       rec->image_ref, pool, PG_SHARE_POOL_BYTES);
    return PG_OK;
}

int pg_record_merge_pull(pg_record *rec, const char *image_name, const pg_pull_credentials *creds,
                         pg_recorded_at_fn recorded_at, void *ud, pg_error *err)
{
    if (!rec || !image_name || !*image_name)
        return pg_fail(err, PG_ERR_INVALID, "merge: no record or empty image name");
    share_check sc;
    int rc = share_begin(&sc, rec, image_name, creds) == PG_OK ? PG_OK
                                                   : pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc == PG_OK)
        rc = fold_keys(rec, image_name, err);
    if (rc == PG_OK)
        rc = merge_creds(rec, image_name, creds, err);
    /* Pulled under this name, even with nothing to record: the kubelet's own
     * form of "credentials unknown" ({}), which every pod must verify. */
    if (rc == PG_OK && !mapping_for(rec, image_name, err))
        rc = PG_ERR_NOMEM;
    if (rc == PG_OK)
        rc = share_end(&sc, rec, image_name, creds ? creds : &(pg_pull_credentials){0},
                       recorded_at, ud, err);
    share_check_free(&sc);
    return reindexed(rec, rc, err);
}
