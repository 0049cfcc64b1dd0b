/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PullImage / ImageStatus decoding with protobuf-c, and the kubelet's
 * credential semantics for a recorded pull. Every input here comes from the
 * CRI socket and is treated as hostile: lengths are bounded, embedded NULs are
 * refused, nothing is trusted to be UTF-8, and passwords are wiped.
 */
#include "pull.h"

#include "cri_subset.pb-c.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ helpers */

/* A copy of a bytes field as a C string; NULL for an empty field. */
static int dup_field(const ProtobufCBinaryData *f, size_t max, const char *what, char **out,
                     pg_error *err)
{
    *out = NULL;
    if (f->len == 0)
        return PG_OK;
    if (f->len > max)
        return pg_fail(err, PG_ERR_LIMIT, "%s: %zu bytes, larger than the limit of %zu", what,
                       f->len, max);
    if (memchr(f->data, '\0', f->len))
        return pg_fail(err, PG_ERR_INVALID, "%s: contains a NUL byte", what);
    char *s = malloc(f->len + 1);
    if (!s)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    memcpy(s, f->data, f->len);
    s[f->len] = '\0';
    *out = s;
    return PG_OK;
}

static void free_secret_copy(char *s)
{
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

static void wipe_field(ProtobufCBinaryData *f)
{
    if (f->data && f->len)
        OPENSSL_cleanse(f->data, f->len);
}

static bool is_b64_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

/*
 * Decodes base64 "user:pass" as the kubelet reads a docker config "auth":
 * padded text in the standard alphabet, unpadded text as raw (padding added
 * here). *user and *pass are owned, wiped by the caller. Static reason on error.
 */
static const char *decode_auth(const ProtobufCBinaryData *auth, char **user, char **pass)
{
    *user = *pass = NULL;
    size_t len = auth->len, pad = 0;
    const unsigned char *in = auth->data;
    while (pad < 2 && len > pad && in[len - 1 - pad] == '=')
        pad++;
    for (size_t i = 0; i < len - pad; i++)
        if (!is_b64_char(in[i]))
            return "auth field is not base64";
    if ((pad && len % 4) || (len - pad) % 4 == 1)
        return "auth field is not base64";
    size_t data_len = len - pad, padded = (data_len + 3) / 4 * 4;
    unsigned char *text = malloc(padded + 1), *plain = malloc(padded / 4 * 3 + 1);
    const char *why = (!text || !plain) ? "out of memory" : NULL;
    if (!why) {
        memcpy(text, in, data_len);
        memset(text + data_len, '=', padded - data_len);
        int n = EVP_DecodeBlock(plain, text, (int)padded);
        size_t trailing = padded - data_len; /* each '=' decoded as one zero byte */
        if (n < 0 || (size_t)n < trailing)
            why = "auth field is not base64";
        else {
            size_t plain_len = (size_t)n - trailing;
            plain[plain_len] = '\0';
            char *colon = memchr(plain, ':', plain_len);
            if (memchr(plain, '\0', plain_len) || !colon)
                why = "auth field is not \"user:pass\"";
            else {
                *colon = '\0';
                *user = pg_strdup((char *)plain);
                *pass = pg_strdup(colon + 1);
                if (!*user || !*pass)
                    why = "out of memory";
            }
        }
    }
    if (text) {
        OPENSSL_cleanse(text, padded);
        free(text);
    }
    if (plain) {
        OPENSSL_cleanse(plain, padded / 4 * 3 + 1);
        free(plain);
    }
    return why;
}

/* ------------------------------------------------------ PullImageRequest */

static bool any_credential(const Runtime__V1__AuthConfig *a)
{
    /* server_address alone names a registry, it is no credential. */
    return a && (a->username.len || a->password.len || a->auth.len || a->identity_token.len ||
                 a->registry_token.len);
}

/* The kubelet's hash of the credentials the runtime will use. */
static int hash_auth(const Runtime__V1__AuthConfig *a, cri_pull_request *out, pg_error *err)
{
    char *user = NULL, *pass = NULL;
    int rc = PG_OK;
    if (a->username.len > CRI_MAX_CREDENTIAL_BYTES || a->password.len > CRI_MAX_CREDENTIAL_BYTES ||
        a->auth.len > CRI_MAX_CREDENTIAL_BYTES) {
        out->auth_problem = "credentials larger than the limit";
        return PG_OK;
    }
    if (a->username.len == 0 && a->password.len == 0 && a->auth.len) {
        out->auth_problem = decode_auth(&a->auth, &user, &pass);
    } else {
        pg_error e = {0};
        if (dup_field(&a->username, CRI_MAX_CREDENTIAL_BYTES, "username", &user, &e) != PG_OK ||
            dup_field(&a->password, CRI_MAX_CREDENTIAL_BYTES, "password", &pass, &e) != PG_OK)
            out->auth_problem =
                e.code == PG_ERR_NOMEM ? "out of memory" : "username or password contains NUL";
    }
    if (!out->auth_problem) {
        pg_error e = {0};
        if (pg_credential_hash(user, pass, "", out->credential_hash, &e) == PG_OK)
            out->auth_usable = true;
        else
            rc = pg_fail(err, e.code, "credential hash: %s", e.message);
    }
    free_secret_copy(user);
    free_secret_copy(pass);
    return rc;
}

static int read_sandbox(const Runtime__V1__PodSandboxConfig *sc, const char *annotation_key,
                        cri_pull_request *out, pg_error *err)
{
    out->has_sandbox = true;
    int rc = PG_OK;
    if (sc->metadata) {
        rc = dup_field(&sc->metadata->namespace_, CRI_MAX_FIELD_BYTES, "pod namespace",
                       &out->pod_namespace, err);
        if (rc == PG_OK)
            rc = dup_field(&sc->metadata->name, CRI_MAX_FIELD_BYTES, "pod name", &out->pod_name,
                           err);
        if (rc == PG_OK)
            rc = dup_field(&sc->metadata->uid, CRI_MAX_FIELD_BYTES, "pod uid", &out->pod_uid, err);
    }
    size_t key_len = strlen(annotation_key);
    /* A map on the wire: the last entry of a key wins, as in every protobuf decoder. */
    const Runtime__V1__StringMapEntry *found = NULL;
    for (size_t i = 0; rc == PG_OK && i < sc->n_annotations; i++) {
        const Runtime__V1__StringMapEntry *e = sc->annotations[i];
        if (e->key.len == key_len && memcmp(e->key.data, annotation_key, key_len) == 0)
            found = e;
    }
    if (rc == PG_OK && found) {
        rc = dup_field(&found->value, PG_MAX_ANNOTATION_BYTES, "credentials annotation",
                       &out->annotation, err);
        /* An empty value is present but malformed: keep it distinguishable from absent. */
        if (rc == PG_OK && !out->annotation && !(out->annotation = pg_strdup("")))
            rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
        out->annotation_len = out->annotation ? strlen(out->annotation) : 0;
    }
    return rc;
}

static int read_request(Runtime__V1__PullImageRequest *req, const char *annotation_key,
                        cri_pull_request *out, pg_error *err)
{
    if (!req->image || req->image->image.len == 0)
        return pg_fail(err, PG_ERR_INVALID, "PullImageRequest: no image");
    int rc = dup_field(&req->image->image, PG_MAX_IMAGE_LEN, "image", &out->image, err);
    if (rc == PG_OK && req->sandbox_config)
        rc = read_sandbox(req->sandbox_config, annotation_key, out, err);
    if (rc == PG_OK && any_credential(req->auth)) {
        out->has_auth = true;
        rc = hash_auth(req->auth, out, err);
    }
    return rc;
}

int cri_pull_request_decode(const uint8_t *buf, size_t len, const char *annotation_key,
                            cri_pull_request *out, pg_error *err)
{
    memset(out, 0, sizeof *out);
    if (!annotation_key)
        return pg_fail(err, PG_ERR_INVALID, "no annotation key");
    Runtime__V1__PullImageRequest *req = runtime__v1__pull_image_request__unpack(NULL, len, buf);
    if (!req)
        return pg_fail(err, PG_ERR_INVALID, "not a PullImageRequest (%zu bytes)", len);
    int rc = read_request(req, annotation_key, out, err);
    if (req->auth) {
        wipe_field(&req->auth->username);
        wipe_field(&req->auth->password);
        wipe_field(&req->auth->auth);
        wipe_field(&req->auth->identity_token);
        wipe_field(&req->auth->registry_token);
    }
    runtime__v1__pull_image_request__free_unpacked(req, NULL);
    if (rc != PG_OK)
        cri_pull_request_clear(out);
    return rc;
}

void cri_pull_request_clear(cri_pull_request *r)
{
    if (!r)
        return;
    free(r->image);
    free(r->pod_namespace);
    free(r->pod_name);
    free(r->pod_uid);
    free(r->annotation);
    OPENSSL_cleanse(r->credential_hash, sizeof r->credential_hash);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------- credentials */

const char *cri_cred_source_name(cri_cred_source s)
{
    switch (s) {
    case CRI_CREDS_NONE: return "none";
    case CRI_CREDS_POD_SECRET: return "secret";
    case CRI_CREDS_NODE_WIDE: return "node-wide";
    case CRI_CREDS_UNVERIFIED: return "unverified";
    }
    return "unknown";
}

void cri_pull_creds_clear(cri_pull_creds *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->creds.n_secrets; i++) {
        free((char *)c->secrets[i].namespace_);
        free((char *)c->secrets[i].name);
        free((char *)c->secrets[i].uid);
        free((char *)c->secrets[i].credential_hash);
    }
    free(c->secrets);
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
        free((char *)s.namespace_);
        free((char *)s.name);
        free((char *)s.uid);
        free((char *)s.credential_hash);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    nv[c->creds.n_secrets++] = s;
    return PG_OK;
}

static int unverified(const cri_pull_request *r, const char *why, cri_pull_creds *c, pg_error *err)
{
    char name[sizeof CRI_UNVERIFIED_NAME_PREFIX + PG_HASH_HEX_LEN];
    snprintf(name, sizeof name, "%s%s", CRI_UNVERIFIED_NAME_PREFIX, r->credential_hash);
    c->source = CRI_CREDS_UNVERIFIED;
    snprintf(c->detail, sizeof c->detail, "%s", why);
    return add_secret(c, r->pod_namespace ? r->pod_namespace : CRI_UNKNOWN_NAMESPACE, name, "",
                      r->credential_hash, err);
}

/* Looks the hash up in the pod's annotation entry for the pulled image. */
static int from_annotation(const cri_pull_request *r, const pg_presented *p, const char *image_name,
                           cri_pull_creds *c, pg_error *err)
{
    const pg_pod_cred *secrets;
    const pg_pod_cred *sas;
    size_t n_secrets = pg_presented_secrets(p, image_name, &secrets);
    size_t n_sas = pg_presented_sas(p, image_name, &sas);
    if (pg_presented_rejected(p, image_name))
        return unverified(r, "annotation entry for the image does not verify (hmac)", c, err);
    for (size_t i = 0; i < n_secrets; i++) {
        if (strcmp(secrets[i].credential_hash, r->credential_hash) != 0)
            continue;
        int rc = add_secret(c, secrets[i].namespace_, secrets[i].name, secrets[i].uid,
                            r->credential_hash, err);
        if (rc != PG_OK)
            return rc;
        c->source = CRI_CREDS_POD_SECRET;
        snprintf(c->detail, sizeof c->detail, "secret %.100s/%.100s", secrets[i].namespace_,
                 secrets[i].name);
    }
    if (c->source == CRI_CREDS_POD_SECRET)
        return PG_OK;
    if (n_secrets + n_sas == 0)
        return unverified(r, "no annotation entry for the image in the pod's namespace", c, err);
    if (pg_presented_ignored(p, image_name))
        return unverified(r, "annotation entry for the image names other namespaces", c, err);
    /* The pod's valid entry lists its credentials and these are not among them:
     * they came from the node (config.json, a credential provider). */
    c->source = CRI_CREDS_NODE_WIDE;
    c->creds.node_pods_accessible = 1;
    snprintf(c->detail, sizeof c->detail, "credentials not among the pod's secrets");
    return PG_OK;
}

static int resolve_creds(const cri_pull_request *r, const pg_mac_key *mac_key, bool mac_required,
                         cri_pull_creds *c, pg_error *err)
{
    if (!r->has_auth) {
        c->source = CRI_CREDS_NONE;
        c->creds.node_pods_accessible = 1;
        snprintf(c->detail, sizeof c->detail, "no credentials");
        return PG_OK;
    }
    if (!r->auth_usable) {
        /* Still a hash: of empty credentials, which no producer lists for a secret. */
        cri_pull_request tmp = *r;
        int rc = pg_credential_hash("", "", "", tmp.credential_hash, err);
        if (rc != PG_OK)
            return rc;
        return unverified(&tmp, r->auth_problem ? r->auth_problem : "unusable auth", c, err);
    }
    if (!r->has_sandbox)
        return unverified(r, "no sandbox_config", c, err);
    if (!r->pod_namespace)
        return unverified(r, "no pod namespace", c, err);
    if (!r->annotation)
        return unverified(r, "no credentials annotation", c, err);
    if (mac_required && !mac_key)
        return unverified(r, "hmacKeyFile set but the key is unavailable", c, err);
    pg_error why = {0};
    char *image_name = pg_image_name(r->image, &why);
    if (!image_name)
        return why.code == PG_ERR_NOMEM ? pg_fail(err, PG_ERR_NOMEM, "out of memory")
                                        : unverified(r, "image is not a reference", c, err);
    pg_presented *p = NULL;
    int rc;
    if (pg_presented_parse_keyed(r->annotation, r->annotation_len, r->pod_namespace, mac_key, &p,
                                 &why) != PG_OK)
        rc = why.code == PG_ERR_NOMEM ? pg_fail(err, PG_ERR_NOMEM, "out of memory")
                                      : unverified(r, "malformed credentials annotation", c, err);
    else
        rc = from_annotation(r, p, image_name, c, err);
    pg_presented_free(p);
    free(image_name);
    return rc;
}

int cri_pull_credentials(const cri_pull_request *r, const pg_mac_key *mac_key, bool mac_required,
                         cri_pull_creds *out, pg_error *err)
{
    memset(out, 0, sizeof *out);
    if (!r || !r->image)
        return pg_fail(err, PG_ERR_INTERNAL, "cri_pull_credentials: no request");
    int rc = resolve_creds(r, mac_key, mac_required, out, err);
    if (rc != PG_OK)
        cri_pull_creds_clear(out);
    return rc;
}

/* --------------------------------------------------------- responses */

int cri_pull_response_decode(const uint8_t *buf, size_t len, char **image_ref, pg_error *err)
{
    *image_ref = NULL;
    Runtime__V1__PullImageResponse *resp = runtime__v1__pull_image_response__unpack(NULL, len, buf);
    if (!resp)
        return pg_fail(err, PG_ERR_INVALID, "not a PullImageResponse (%zu bytes)", len);
    int rc = dup_field(&resp->image_ref, PG_MAX_IMAGE_LEN, "image_ref", image_ref, err);
    if (rc == PG_OK && !*image_ref)
        rc = pg_fail(err, PG_ERR_INVALID, "PullImageResponse: empty image_ref");
    runtime__v1__pull_image_response__free_unpacked(resp, NULL);
    return rc;
}

int cri_image_status_request_encode(const char *image, uint8_t **buf, size_t *len, pg_error *err)
{
    Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
    Runtime__V1__ImageStatusRequest req = RUNTIME__V1__IMAGE_STATUS_REQUEST__INIT;
    spec.image.data = (uint8_t *)image;
    spec.image.len = strlen(image);
    req.image = &spec;
    *len = runtime__v1__image_status_request__get_packed_size(&req);
    if (!(*buf = malloc(*len ? *len : 1)))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    runtime__v1__image_status_request__pack(&req, *buf);
    return PG_OK;
}


int cri_is_image_identity(const char *s)
{
    if (!s || !*s || strlen(s) > PG_MAX_IMAGE_LEN)
        return 0;
    if (strncmp(s, "sha256:", 7) == 0)
        return pg_is_hex64(s + 7);
    if (pg_is_hex64(s))
        return 1;
    pg_ref *ref = pg_ref_parse(s, NULL);
    pg_ref_free(ref);
    return ref != NULL;
}

/* Appends a copy of s when it is an identity not yet listed; quietly skips others. */
static int strv_add_identity(pg_strv *l, const char *s, pg_error *err)
{
    if (!cri_is_image_identity(s) || l->n >= CRI_MAX_ALIASES)
        return PG_OK;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0)
            return PG_OK;
    return pg_strv_push(l, s, err);
}

static int strv_add_field(pg_strv *l, const ProtobufCBinaryData *f, pg_error *err)
{
    pg_error why = {0};
    char *s = NULL;
    if (dup_field(f, PG_MAX_IMAGE_LEN, "identity", &s, &why) != PG_OK)
        return why.code == PG_ERR_NOMEM ? pg_fail(err, PG_ERR_NOMEM, "out of memory") : PG_OK;
    int rc = s ? strv_add_identity(l, s, err) : PG_OK;
    free(s);
    return rc;
}

static int collect_aliases(const Runtime__V1__Image *img, const char *also, pg_strv *l,
                           pg_error *err)
{
    int rc = strv_add_field(l, &img->id, err);
    for (size_t i = 0; rc == PG_OK && i < img->n_repo_tags; i++)
        rc = strv_add_field(l, &img->repo_tags[i], err);
    for (size_t i = 0; rc == PG_OK && i < img->n_repo_digests; i++)
        rc = strv_add_field(l, &img->repo_digests[i], err);
    if (rc == PG_OK && also)
        rc = strv_add_identity(l, also, err);
    return rc;
}

int cri_image_status_aliases(const uint8_t *buf, size_t len, const char *also, char ***aliases,
                             pg_error *err)
{
    *aliases = NULL;
    Runtime__V1__ImageStatusResponse *resp =
        runtime__v1__image_status_response__unpack(NULL, len, buf);
    if (!resp)
        return pg_fail(err, PG_ERR_INVALID, "not an ImageStatusResponse (%zu bytes)", len);
    pg_strv l = {0};
    int rc = pg_strv_ensure(&l, err);
    if (rc == PG_OK && !resp->image)
        rc = pg_fail(err, PG_ERR_NOT_FOUND, "ImageStatus: the runtime reports no such image");
    if (rc == PG_OK)
        rc = collect_aliases(resp->image, also, &l, err);
    runtime__v1__image_status_response__free_unpacked(resp, NULL);
    if (rc != PG_OK) {
        pg_strv_clear(&l);
        return rc;
    }
    *aliases = l.v; /* the caller frees it with pg_strv_free */
    return PG_OK;
}
