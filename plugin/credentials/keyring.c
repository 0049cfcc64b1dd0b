/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kubelet's dockerconfigjson keyring (BasicDockerKeyring,
 * pkg/credentialprovider/keyring.go): which entries of a pull secret apply to
 * an image, and their credential hashes. Keys are URL-parsed, indexed, sorted
 * in reverse byte order, and matched by host labels (filepath.Match per
 * label), equal ports and a path prefix; the "index.docker.io" key is a
 * fallback for Docker Hub images when nothing else matched.
 */
#include "cleanup.h"
#include "credhash.h"
#include "gocompat.h"
#include "keyring.h"

#include <openssl/crypto.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ===================================================== dockerconfig entries */

typedef struct entry {
    char *key; /* keyring index key, NULL when the location does not parse */
    pg_cred_hashes hashes;
    size_t order; /* position in the document: ties keep document order */
} entry;

typedef struct entries {
    entry *v;
    size_t n, cap;
} entries;

/* A parsed document: its entries sorted in the keyring's lookup order. */
struct pg_dockerconfig {
    entries e;
};

/* v (n of *cap elements used) with room for one more; a grown copy wipes the old block,
 * which holds hashes. NULL (v unchanged) when out of memory. */
static void *room_for_one(void *v, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return v;
    size_t grown = *cap ? *cap * 2 : 8;
    void *nv = calloc(grown, size);
    if (!nv)
        return NULL;
    if (n)
        memcpy(nv, v, n * size);
    if (v)
        OPENSSL_cleanse(v, *cap * size);
    free(v);
    *cap = grown;
    return nv;
}

static void entries_free(entries *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].key);
    if (e->v) /* the hashes identify credentials: leave none in freed memory */
        OPENSSL_cleanse(e->v, e->cap * sizeof *e->v);
    free(e->v);
}

/* A string field: null leaves it unchanged (Go); any other type is an error. */
static int string_field(json_t *v, const char *field, const char **s, size_t *n, pg_error *err)
{
    if (json_is_null(v))
        return PG_OK;
    if (!json_is_string(v))
        return pg_fail(err, PG_ERR_INVALID, "dockerconfig: \"%s\" is not a string", field);
    *s = json_string_value(v);
    *n = json_string_length(v);
    return PG_OK;
}

/* Reads username/password/email/auth of one entry (last case variant wins, as in Go). */
static int read_entry_fields(json_t *obj, pg_cred *c, const char **auth, size_t *auth_len,
                             pg_error *err)
{
    const char *key;
    json_t *v;
    int rc = PG_OK;
    json_object_foreach(obj, key, v)
    {
        if (pg_go_json_key_matches(key, "username"))
            rc = string_field(v, "username", &c->user, &c->user_len, err);
        else if (pg_go_json_key_matches(key, "password"))
            rc = string_field(v, "password", &c->pass, &c->pass_len, err);
        else if (pg_go_json_key_matches(key, "email"))
            rc = string_field(v, "email", &c->email, &c->email_len, err);
        else if (pg_go_json_key_matches(key, "auth"))
            rc = string_field(v, "auth", auth, auth_len, err);
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}

/* H (the kubelet's hash, with the email) and A (the same without it). */
static int hash_pair(const pg_cred *c, pg_cred_hashes *out, pg_error *err)
{
    pg_cred no_email = *c;
    no_email.email = "";
    no_email.email_len = 0;
    out->usable = c->user_len > 0 || c->pass_len > 0;
    int rc = pg_cred_hash(c, out->hash, err);
    return rc == PG_OK ? pg_cred_hash(&no_email, out->auth_hash, err) : rc;
}

/* decodeDockerConfigFieldAuth: base64 "user:pass" replaces username/password. */
static int hash_with_auth(pg_cred *c, const char *auth, size_t auth_len, pg_cred_hashes *out,
                          pg_error *err)
{
    unsigned char *dec = malloc(auth_len + 1);
    if (!dec)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    size_t dec_len = 0;
    int rc = PG_OK;
    if (!pg_go_base64_decode(auth, auth_len, pg_go_base64_is_padded(auth, auth_len), dec,
                             &dec_len)) {
        rc = pg_fail(err, PG_ERR_INVALID, "dockerconfig: \"auth\" is not valid base64");
    } else {
        const unsigned char *colon = memchr(dec, ':', dec_len);
        if (!colon) {
            rc = pg_fail(err, PG_ERR_INVALID, "dockerconfig: \"auth\" is not username:password");
        } else {
            c->user = (const char *)dec;
            c->user_len = (size_t)(colon - dec);
            c->pass = (const char *)colon + 1;
            c->pass_len = dec_len - c->user_len - 1;
            rc = hash_pair(c, out, err);
        }
    }
    OPENSSL_cleanse(dec, auth_len + 1); /* the decoded password */
    free(dec);
    return rc;
}

static int entry_hash(json_t *obj, pg_cred_hashes *out, pg_error *err)
{
    pg_cred c = {"", "", "", 0, 0, 0};
    const char *auth = "";
    size_t auth_len = 0;
    if (json_is_null(obj))
        return hash_pair(&c, out, err); /* Go decodes null into a zero entry */
    if (!json_is_object(obj))
        return pg_fail(err, PG_ERR_INVALID, "dockerconfig: an entry is not an object");
    int rc = read_entry_fields(obj, &c, &auth, &auth_len, err);
    if (rc != PG_OK)
        return rc;
    if (auth_len)
        return hash_with_auth(&c, auth, auth_len, out, err);
    return hash_pair(&c, out, err);
}

/* ================================================================ keyring */

/*
 * BasicDockerKeyring.Add: the index key of a location. "https://" is added
 * when no http(s) scheme is given; a "/v1/" or "/v2/" path prefix counts as
 * the bare host. *key is NULL (and PG_OK returned) when url.Parse fails: the
 * kubelet ignores such entries.
 */
static int location_key(const char *loc, size_t len, char **key)
{
    *key = NULL;
    pg_autofree char *value = NULL;
    bool has_scheme = strncmp(loc, "https://", 8) == 0 || strncmp(loc, "http://", 7) == 0;
    if (asprintf(&value, "%s%.*s", has_scheme ? "" : "https://", (int)len, loc) < 0)
        return PG_ERR_NOMEM;
    pg_autogourl pg_go_url u = {0};
    int rc = pg_go_url_parse(value, strlen(value), &u);
    if (rc != PG_OK)
        return rc == PG_ERR_INVALID ? PG_OK : rc;
    const char *path = u.path;
    if (strncmp(path, "/v2/", 4) == 0 || strncmp(path, "/v1/", 4) == 0)
        path += 3;
    bool use_path = path[0] && strcmp(path, "/") != 0;
    if (asprintf(key, "%s%s", u.host, use_path ? path : "") >= 0)
        return PG_OK;
    *key = NULL;
    return PG_ERR_NOMEM;
}

/* ------------------------------------------------------- URLsMatch */

static size_t count_labels(const char *h, size_t n)
{
    size_t c = 1;
    for (size_t i = 0; i < n; i++)
        c += h[i] == '.';
    return c;
}

/* Next '.'-separated label of h as a new string; advances *pos. */
static char *next_label(const char *h, size_t n, size_t *pos)
{
    size_t start = *pos, i = start;
    while (i < n && h[i] != '.')
        i++;
    *pos = i + 1;
    return strndup(h + start, i - start);
}

static int labels_match(const char *gh, size_t gn, const char *th, size_t tn, bool *match)
{
    size_t gp = 0, tp = 0;
    size_t count = count_labels(gh, gn);
    *match = true;
    for (size_t k = 0; k < count && *match; k++) {
        pg_autofree char *g = next_label(gh, gn, &gp);
        pg_autofree char *t = next_label(th, tn, &tp);
        if (!g || !t)
            return PG_ERR_NOMEM;
        *match = pg_go_path_match(g, t);
    }
    return PG_OK;
}

static int urls_match(const pg_go_url *glob, const pg_go_url *target, bool *match)
{
    const char *gh, *th, *gport, *tport;
    size_t gn, tn;
    pg_go_split_host_port(glob->host, &gh, &gn, &gport);
    pg_go_split_host_port(target->host, &th, &tn, &tport);
    *match = false;
    if (strcmp(gport, tport) != 0 || count_labels(gh, gn) != count_labels(th, tn) ||
        strncmp(target->path, glob->path, strlen(glob->path)) != 0)
        return PG_OK;
    return labels_match(gh, gn, th, tn, match);
}

/* URLsMatchStr(key, image); a key that does not parse matches nothing. */
static int key_matches(const char *key, const pg_go_url *image, bool *match)
{
    pg_autogourl pg_go_url g = {0};
    *match = false;
    int rc = pg_go_url_parse_schemeless(key, &g);
    if (rc != PG_OK)
        return rc == PG_ERR_INVALID ? PG_OK : rc;
    return urls_match(&g, image, match);
}

/* isDefaultRegistryMatch on the normalised image name. */
static bool is_default_registry_match(const char *image)
{
    const char *slash = strchr(image, '/');
    if (image[0] == '\0' || image[0] == '/')
        return false;
    if (!slash)
        return true;
    size_t n = (size_t)(slash - image);
    if ((n == 9 && strncmp(image, "docker.io", 9) == 0) ||
        (n == 15 && strncmp(image, "index.docker.io", 15) == 0))
        return true;
    return !memchr(image, '.', n) && !memchr(image, ':', n);
}

/* ========================================================= lookup results */

/* Reverse byte order of keys (sort.Reverse(sort.StringSlice)), document order within a key. */
static int entry_cmp(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    int c = strcmp(y->key, x->key);
    if (c)
        return c;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The entries of one key group [i, end). */
static size_t group_end(const entries *e, size_t i)
{
    size_t j = i + 1;
    while (j < e->n && strcmp(e->v[j].key, e->v[i].key) == 0)
        j++;
    return j;
}

/* The lookup's result: a growing array of hash pairs. */
typedef struct found {
    pg_cred_hashes *v;
    size_t n, cap;
} found;

static int push(found *out, const pg_cred_hashes *h)
{
    pg_cred_hashes *v = room_for_one(out->v, out->n, &out->cap, sizeof *v);
    if (!v)
        return PG_ERR_NOMEM;
    out->v = v;
    out->v[out->n++] = *h;
    return PG_OK;
}

static int push_group(found *out, const entries *e, size_t i, size_t end)
{
    for (; i < end; i++)
        if (push(out, &e->v[i].hashes) != PG_OK)
            return PG_ERR_NOMEM;
    return PG_OK;
}

/* BasicDockerKeyring.Lookup over entries sorted by entry_cmp. */
static int keyring_lookup(const entries *e, const char *image_name, found *out)
{
    pg_autogourl pg_go_url target = {0};
    int rc = pg_go_url_parse_schemeless(image_name, &target);
    if (rc != PG_OK)
        return rc == PG_ERR_INVALID ? PG_OK : rc; /* cannot match anything */
    for (size_t i = 0; i < e->n && rc == PG_OK;) {
        size_t end = group_end(e, i);
        bool match = false;
        rc = key_matches(e->v[i].key, &target, &match);
        if (rc == PG_OK && match)
            rc = push_group(out, e, i, end);
        i = end;
    }
    if (rc != PG_OK || out->n > 0 || !is_default_registry_match(image_name))
        return rc;
    for (size_t i = 0; i < e->n; i++) /* Docker Hub fallback */
        if (strcmp(e->v[i].key, "index.docker.io") == 0 && push(out, &e->v[i].hashes) != PG_OK)
            return PG_ERR_NOMEM;
    return PG_OK;
}

/* ====================================================== document decoding */

static int add_entry(entries *e, const char *loc, json_t *val, pg_error *err)
{
    pg_cred_hashes hashes;
    int rc = entry_hash(val, &hashes, err); /* a bad entry fails the whole secret, as in Go */
    if (rc != PG_OK)
        return rc;
    char *key;
    if (location_key(loc, strlen(loc), &key) != PG_OK)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (!key)
        return PG_OK; /* the kubelet logs and ignores unparsable locations */
    entry *v = room_for_one(e->v, e->n, &e->cap, sizeof *v);
    if (!v) {
        free(key);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    e->v = v;
    e->v[e->n].key = key;
    e->v[e->n].hashes = hashes;
    e->v[e->n].order = e->n;
    e->n++;
    return PG_OK;
}

/* A DockerConfig map: location -> entry. null is an empty map. */
static int add_auth_map(entries *e, json_t *map, pg_error *err)
{
    if (json_is_null(map))
        return PG_OK;
    if (!json_is_object(map))
        return pg_fail(err, PG_ERR_INVALID, "dockerconfig: \"auths\" is not an object");
    const char *loc;
    json_t *val;
    json_object_foreach(map, loc, val)
    {
        int rc = add_entry(e, loc, val, err);
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}

/* DockerConfigJSON.HTTPHeaders is a map[string]string: check its type like Go. */
static int check_http_headers(json_t *h, pg_error *err)
{
    const char *k;
    json_t *v;
    if (json_is_null(h))
        return PG_OK;
    if (!json_is_object(h))
        return pg_fail(err, PG_ERR_INVALID, "dockerconfig: \"HttpHeaders\" is not an object");
    json_object_foreach(h, k, v)
    {
        if (!json_is_string(v) && !json_is_null(v))
            return pg_fail(err, PG_ERR_INVALID, "dockerconfig: a header value is not a string");
    }
    return PG_OK;
}

static bool has_auths_key(json_t *root)
{
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
    {
        if (pg_go_json_key_matches(k, "auths"))
            return true;
    }
    return false;
}

/*
 * {"auths":{...}} (kubernetes.io/dockerconfigjson, config.json) or a bare map
 * (.dockercfg), as form says; PG_DOCKERCONFIG_SNIFF picks by the content. In
 * the "auths" form every other member is ignored, as Go's Unmarshal into the
 * kubelet's DockerConfigJSON ignores it: a bare map read that way holds nothing.
 */
static int load_entries(json_t *root, pg_dockerconfig_form form, entries *e, pg_error *err)
{
    if (json_is_null(root))
        return PG_OK; /* Go unmarshals null into an empty config */
    if (!json_is_object(root))
        return pg_fail(err, PG_ERR_INVALID, "dockerconfig: not a JSON object");
    if (form == PG_DOCKERCONFIG_BARE || (form == PG_DOCKERCONFIG_SNIFF && !has_auths_key(root)))
        return add_auth_map(e, root, err);
    const char *k;
    json_t *v;
    json_t *auths = NULL;
    json_object_foreach(root, k, v)
    {
        int rc = PG_OK;
        if (pg_go_json_key_matches(k, "auths")) {
            /* Go would merge both maps into one; refuse the ambiguity instead. */
            if (auths)
                return pg_fail(err, PG_ERR_INVALID, "dockerconfig: \"auths\" given twice");
            auths = v;
        } else if (pg_go_json_key_matches(k, "httpheaders"))
            rc = check_http_headers(v, err);
        if (rc != PG_OK)
            return rc;
    }
    return auths ? add_auth_map(e, auths, err) : PG_OK; /* no "auths": Go's nil map, no entry */
}

/*
 * Every string of the parsed document wiped before it is freed: jansson keeps
 * its own copies of the passwords and "auth" values. (A process that wants
 * jansson's parse buffers wiped too sets a wiping allocator with
 * json_set_alloc_funcs; that is global state, the caller's to choose.)
 */
static void wipe_strings(json_t *v, int depth)
{
    if (depth > 64) /* dockerconfig documents are shallow; jansson bounds depth itself */
        return;
    if (json_is_string(v)) {
        OPENSSL_cleanse((char *)json_string_value(v), json_string_length(v));
    } else if (json_is_object(v)) {
        const char *k;
        json_t *m;
        json_object_foreach(v, k, m)
        {
            wipe_strings(m, depth + 1);
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *m;
        json_array_foreach(v, i, m)
        {
            wipe_strings(m, depth + 1);
        }
    }
}

/* Strict parse whose error names a position, never a byte of the (secret) text. */
static json_t *parse_secret_json(const char *json, size_t len, pg_error *err)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        pg_fail(err, PG_ERR_INVALID, "dockerconfig: invalid JSON at line %d column %d", je.line,
                je.column);
    OPENSSL_cleanse(&je, sizeof je); /* its text may quote the document */
    return root;
}

pg_dockerconfig_form pg_dockerconfig_form_of_file(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    const char *base = slash ? slash + 1 : path;
    return base && strcmp(base, ".dockercfg") == 0 ? PG_DOCKERCONFIG_BARE : PG_DOCKERCONFIG_AUTHS;
}

int pg_dockerconfig_parse_as(const char *json, size_t len, pg_dockerconfig_form form,
                             pg_dockerconfig **out, pg_error *err)
{
    *out = NULL;
    if (!json)
        return pg_fail(err, PG_ERR_INVALID, "no dockerconfig");
    if (len > PG_MAX_DOCKERCONFIG_BYTES)
        return pg_fail(err, PG_ERR_LIMIT, "dockerconfig larger than %u bytes",
                       PG_MAX_DOCKERCONFIG_BYTES);
    json_t *root = parse_secret_json(json, len, err);
    if (!root)
        return PG_ERR_INVALID;
    pg_autodockerconfig pg_dockerconfig *dc = calloc(1, sizeof *dc);
    int rc =
        dc ? load_entries(root, form, &dc->e, err) : pg_fail(err, PG_ERR_NOMEM, "out of memory");
    wipe_strings(root, 0);
    json_decref(root);
    if (rc != PG_OK)
        return rc;
    if (dc->e.n)
        qsort(dc->e.v, dc->e.n, sizeof *dc->e.v, entry_cmp);
    *out = pg_steal(&dc);
    return PG_OK;
}

void pg_dockerconfig_free(pg_dockerconfig *dc)
{
    if (!dc)
        return;
    entries_free(&dc->e);
    free(dc);
}

int pg_dockerconfig_lookup(const pg_dockerconfig *dc, const char *image, pg_cred_hashes **out,
                           size_t *n, pg_error *err)
{
    *out = NULL;
    *n = 0;
    if (!dc || !image)
        return pg_fail(err, PG_ERR_INVALID, "no dockerconfig or image");
    pg_error local = {0};
    pg_autofree char *name = pg_image_name(image, &local);
    if (!name) {
        if (err)
            *err = local;
        return local.code;
    }
    found f = {0};
    int rc = keyring_lookup(&dc->e, name, &f);
    if (rc != PG_OK) {
        pg_cred_hashes_free(f.v, f.cap);
        return pg_fail(err, rc, "out of memory");
    }
    *out = f.v;
    *n = f.n;
    return PG_OK;
}

void pg_cred_hashes_free(pg_cred_hashes *v, size_t n)
{
    if (v)
        OPENSSL_cleanse(v, n * sizeof *v);
    free(v);
}

PG_API int pg_dockerconfig_hashes(const char *json, size_t len, const char *image,
                                  char ***hashes_out, pg_error *err)
{
    if (!hashes_out)
        return pg_fail(err, PG_ERR_INVALID, "no output pointer");
    *hashes_out = NULL;
    if (!json || !image)
        return pg_fail(err, PG_ERR_INVALID, "no dockerconfig or image");
    pg_autodockerconfig pg_dockerconfig *dc = NULL;
    pg_cred_hashes *pairs = NULL;
    size_t n = 0;
    pg_strv out = {0};
    int rc = pg_dockerconfig_parse_as(json, len, PG_DOCKERCONFIG_SNIFF, &dc, err);
    if (rc == PG_OK)
        rc = pg_dockerconfig_lookup(dc, image, &pairs, &n, err);
    for (size_t i = 0; rc == PG_OK && i < n; i++)
        rc = pg_strv_push(&out, pairs[i].hash, err);
    if (rc == PG_OK)
        rc = pg_strv_ensure(&out, err); /* no match: an empty list, not NULL */
    pg_cred_hashes_free(pairs, n);
    if (rc != PG_OK) {
        pg_strv_clear(&out);
        return rc;
    }
    *hashes_out = out.v;
    return PG_OK;
}
