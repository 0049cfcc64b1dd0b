/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CRI messages pullgate-cri reads and writes (pull.h), with protobuf-c:
 * PullImageRequest (its credentials hashed and wiped at once), ImageStatus,
 * PullImageResponse, ListImages and ListContainers. Every input here comes from
 * a CRI socket and is treated as hostile: lengths are bounded, embedded NULs are
 * refused, nothing is trusted to be UTF-8, and passwords are wiped.
 */
#include "pull.h"

#include "cleanup.h"
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

static bool key_is(const ProtobufCBinaryData *k, const char *text)
{
    size_t n = strlen(text);
    return k->len == n && memcmp(k->data, text, n) == 0;
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

/* ------------------------------------------------------ PullImageRequest */

static bool is_b64_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

/* Splits the decoded "user:pass" (plain_len bytes) into owned copies. */
static const char *split_user_pass(const unsigned char *plain, size_t plain_len, char **user,
                                   char **pass)
{
    const unsigned char *colon = memchr(plain, ':', plain_len);
    if (memchr(plain, '\0', plain_len))
        return "the auth field decodes to a NUL byte";
    if (!colon)
        return "the auth field is not base64 of \"user:pass\"";
    size_t ulen = (size_t)(colon - plain), plen = plain_len - ulen - 1;
    if (!(*user = malloc(ulen + 1)) || !(*pass = malloc(plen + 1)))
        return "out of memory";
    memcpy(*user, plain, ulen);
    (*user)[ulen] = '\0';
    memcpy(*pass, colon + 1, plen);
    (*pass)[plen] = '\0';
    return NULL;
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
            return "the auth field is not base64";
    if ((pad && len % 4) || (len - pad) % 4 == 1)
        return "the auth field is not base64";
    size_t data_len = len - pad, padded = (data_len + 3) / 4 * 4;
    unsigned char *text = malloc(padded + 1), *plain = malloc(padded / 4 * 3 + 1);
    const char *why = (!text || !plain) ? "out of memory" : NULL;
    if (!why) {
        memcpy(text, in, data_len);
        memset(text + data_len, '=', padded - data_len);
        int n = EVP_DecodeBlock(plain, text, (int)padded);
        size_t trailing = padded - data_len; /* each '=' decoded as one zero byte */
        if (n < 0 || (size_t)n < trailing)
            why = "the auth field is not base64";
        else
            why = split_user_pass(plain, (size_t)n - trailing, user, pass);
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

static bool any_credential(const Runtime__V1__AuthConfig *a)
{
    /* server_address alone names a registry, it is no credential. */
    return a && (a->username.len || a->password.len || a->auth.len || a->identity_token.len ||
                 a->registry_token.len);
}

/* user/pass as the runtime uses them, or a static reason why they cannot be attributed. */
static const char *read_credentials(const Runtime__V1__AuthConfig *a, char **user, char **pass)
{
    *user = *pass = NULL;
    if (a->username.len > CRI_MAX_CREDENTIAL_BYTES || a->password.len > CRI_MAX_CREDENTIAL_BYTES ||
        a->auth.len > CRI_MAX_CREDENTIAL_BYTES)
        return "credentials larger than the limit of 64 KiB";
    if (a->identity_token.len || a->registry_token.len)
        return "identity or registry tokens cannot be attributed to a pull secret";
    if (a->auth.len && (a->username.len || a->password.len))
        return "both the auth field and a username or password (runtimes differ on which counts)";
    if (a->auth.len)
        return decode_auth(&a->auth, user, pass);
    pg_error e = {0};
    if (dup_field(&a->username, CRI_MAX_CREDENTIAL_BYTES, "username", user, &e) != PG_OK ||
        dup_field(&a->password, CRI_MAX_CREDENTIAL_BYTES, "password", pass, &e) != PG_OK)
        return e.code == PG_ERR_NOMEM ? "out of memory" : "the username or password holds a NUL";
    return NULL;
}

/* The auth hash A of the credentials, or the reason they are unusable. */
static cri_decode_result hash_auth(const Runtime__V1__AuthConfig *a, cri_pull_request *out,
                                   const char **why)
{
    char *user = NULL, *pass = NULL;
    const char *problem = read_credentials(a, &user, &pass);
    cri_decode_result res = CRI_DECODED;
    if (!problem && !(user && *user) && !(pass && *pass))
        problem = "empty credentials (no username and no password)";
    if (!problem &&
        pg_credential_hash(user ? user : "", pass ? pass : "", "", out->auth_hash, NULL) != PG_OK)
        problem = "out of memory";
    if (problem) {
        res = strcmp(problem, "out of memory") == 0 ? CRI_DECODE_NO_RESOURCE : CRI_CREDS_UNUSABLE;
        *why = problem;
    }
    free_secret_copy(user);
    free_secret_copy(pass);
    return res;
}

/*
 * The credentials annotation ("" when present and empty: malformed, not absent) and the
 * kubelet's config.seen among a pod's annotations; *kubelet_keys is set when a
 * kubernetes.io/config.* key is there. A map on the wire: the last entry of a key wins, as in
 * every protobuf decoder.
 */
static int read_pod_annotations(Runtime__V1__StringMapEntry *const *entries, size_t n,
                                const char *annotation_key, char **annotation,
                                size_t *annotation_len, char **config_seen, bool *kubelet_keys,
                                pg_error *err)
{
    size_t prefix_len = strlen(CRI_KUBELET_ANNOTATION_PREFIX);
    const Runtime__V1__StringMapEntry *found = NULL, *seen = NULL;
    for (size_t i = 0; i < n; i++) {
        const Runtime__V1__StringMapEntry *e = entries[i];
        if (key_is(&e->key, annotation_key))
            found = e;
        else if (e->key.len > prefix_len &&
                 memcmp(e->key.data, CRI_KUBELET_ANNOTATION_PREFIX, prefix_len) == 0)
            *kubelet_keys = true;
        if (key_is(&e->key, CRI_CONFIG_SEEN_ANNOTATION))
            seen = e;
    }
    int rc = PG_OK;
    if (found) {
        rc = dup_field(&found->value, PG_MAX_ANNOTATION_BYTES, "credentials annotation",
                       annotation, err);
        if (rc == PG_OK && !*annotation && !(*annotation = pg_strdup("")))
            rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
        *annotation_len = *annotation ? strlen(*annotation) : 0;
    }
    if (rc == PG_OK && seen)
        rc = dup_field(&seen->value, CRI_MAX_FIELD_BYTES, "config.seen", config_seen, err);
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
    bool kubelet_keys = false;
    if (rc == PG_OK)
        rc = read_pod_annotations(sc->annotations, sc->n_annotations, annotation_key,
                                  &out->annotation, &out->annotation_len, &out->config_seen,
                                  &kubelet_keys, err);
    return rc;
}

static cri_decode_result read_request(Runtime__V1__PullImageRequest *req,
                                      const char *annotation_key, cri_pull_request *out,
                                      const char **why)
{
    if (!req->image || req->image->image.len == 0) {
        *why = "no image";
        return CRI_NOT_A_PULL;
    }
    pg_error e = {0};
    int rc = dup_field(&req->image->image, PG_MAX_IMAGE_LEN, "image", &out->image, &e);
    if (rc == PG_OK && req->sandbox_config)
        rc = read_sandbox(req->sandbox_config, annotation_key, out, &e);
    if (rc != PG_OK) {
        *why = rc == PG_ERR_NOMEM ? "out of memory"
                                  : "a field is too long or holds a NUL (image, pod, annotation)";
        return rc == PG_ERR_NOMEM ? CRI_DECODE_NO_RESOURCE : CRI_NOT_A_PULL;
    }
    if (!any_credential(req->auth))
        return CRI_DECODED;
    out->has_auth = true;
    return hash_auth(req->auth, out, why);
}

cri_decode_result cri_pull_request_decode(const uint8_t *buf, size_t len,
                                          const char *annotation_key, cri_pull_request *out,
                                          const char **why)
{
    const char *ignored;
    if (!why)
        why = &ignored;
    *why = NULL;
    memset(out, 0, sizeof *out);
    if (!annotation_key || !buf) {
        *why = "no request";
        return CRI_NOT_A_PULL;
    }
    if (len > CRI_MAX_PULL_REQUEST_BYTES) {
        *why = "larger than 1 MiB";
        return CRI_NOT_A_PULL;
    }
    Runtime__V1__PullImageRequest *req = runtime__v1__pull_image_request__unpack(NULL, len, buf);
    if (!req) {
        /* Not only garbage: encodings a Go runtime accepts and protobuf-c does not
         * (a non-minimal varint tag, a group). Undecodable here is never forwarded. */
        *why = "not a PullImageRequest protobuf-c can decode";
        return CRI_NOT_A_PULL;
    }
    cri_decode_result res = read_request(req, annotation_key, out, why);
    if (req->auth) {
        wipe_field(&req->auth->username);
        wipe_field(&req->auth->password);
        wipe_field(&req->auth->auth);
        wipe_field(&req->auth->identity_token);
        wipe_field(&req->auth->registry_token);
    }
    runtime__v1__pull_image_request__free_unpacked(req, NULL);
    if (res != CRI_DECODED)
        cri_pull_request_clear(out);
    return res;
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
    free(r->config_seen);
    OPENSSL_cleanse(r->auth_hash, sizeof r->auth_hash);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------ ImageStatus */

static int read_status_annotations(const Runtime__V1__ImageSpec *spec, const char *annotation_key,
                                   cri_status_request *out, pg_error *err)
{
    if (spec->n_annotations > CRI_MAX_STATUS_ANNOTATIONS)
        return pg_fail(err, PG_ERR_LIMIT, "more than %u pod annotations",
                       CRI_MAX_STATUS_ANNOTATIONS);
    int rc = read_pod_annotations(spec->annotations, spec->n_annotations, annotation_key,
                                  &out->annotation, &out->annotation_len, &out->config_seen,
                                  &out->has_pod_annotations, err);
    if (out->annotation) /* the credentials annotation is a pod annotation too */
        out->has_pod_annotations = true;
    return rc;
}

int cri_status_request_decode(const uint8_t *buf, size_t len, const char *annotation_key,
                              cri_status_request *out, pg_error *err)
{
    memset(out, 0, sizeof *out);
    if (!buf || !annotation_key)
        return pg_fail(err, PG_ERR_INVALID, "no request");
    if (len > CRI_MAX_PULL_REQUEST_BYTES)
        return pg_fail(err, PG_ERR_LIMIT, "ImageStatusRequest larger than 1 MiB");
    Runtime__V1__ImageStatusRequest *req =
        runtime__v1__image_status_request__unpack(NULL, len, buf);
    if (!req)
        return pg_fail(err, PG_ERR_INVALID, "not an ImageStatusRequest protobuf-c can decode");
    int rc = !req->image || req->image->image.len == 0
                 ? pg_fail(err, PG_ERR_INVALID, "no image")
                 : dup_field(&req->image->image, PG_MAX_IMAGE_LEN, "image", &out->image, err);
    if (rc == PG_OK)
        rc = read_status_annotations(req->image, annotation_key, out, err);
    runtime__v1__image_status_request__free_unpacked(req, NULL);
    if (rc != PG_OK)
        cri_status_request_clear(out);
    return rc;
}

void cri_status_request_clear(cri_status_request *r)
{
    if (!r)
        return;
    free(r->image);
    free(r->annotation);
    free(r->config_seen);
    memset(r, 0, sizeof *r);
}

static void hash_field(EVP_MD_CTX *md, const char *s, size_t len)
{
    uint8_t n[8];
    for (int i = 0; i < 8; i++)
        n[i] = (uint8_t)((uint64_t)len >> (8 * i));
    EVP_DigestUpdate(md, n, sizeof n);
    if (len)
        EVP_DigestUpdate(md, s, len);
}

void cri_verify_key(const char *image, const char *annotation, size_t annotation_len,
                    const char *config_seen, uint8_t key[32])
{
    unsigned int n = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    memset(key, 0, 32);
    if (!md)
        return; /* every key equal: the loop bound then only answers the truth sooner */
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    hash_field(md, image ? image : "", image ? strlen(image) : 0);
    hash_field(md, annotation ? annotation : "", annotation ? annotation_len : 0);
    hash_field(md, config_seen ? config_seen : "", config_seen ? strlen(config_seen) : 0);
    EVP_DigestFinal_ex(md, key, &n);
    EVP_MD_CTX_free(md);
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

/* 1 when s is "sha256:<64 hex>" or 64 hex, or parses as an image reference. */
static int is_image_identity(const char *s)
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
    if (!is_image_identity(s) || l->n >= CRI_MAX_ALIASES)
        return PG_OK;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0)
            return PG_OK;
    return pg_strv_push(l, s, err);
}

static int strv_add_field(pg_strv *l, const ProtobufCBinaryData *f, pg_error *err)
{
    pg_error why = {0};
    pg_autofree char *s = NULL;
    if (dup_field(f, PG_MAX_IMAGE_LEN, "identity", &s, &why) != PG_OK)
        return why.code == PG_ERR_NOMEM ? pg_fail(err, PG_ERR_NOMEM, "out of memory") : PG_OK;
    return s ? strv_add_identity(l, s, err) : PG_OK;
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

int cri_image_status_present(const uint8_t *buf, size_t len)
{
    Runtime__V1__ImageStatusResponse *resp =
        runtime__v1__image_status_response__unpack(NULL, len, buf);
    if (!resp)
        return -1;
    /* The CRI answers an absent image with no image (an empty message), not an error. */
    int present = resp->image && resp->image->id.len > 0;
    runtime__v1__image_status_response__free_unpacked(resp, NULL);
    return present;
}

/* Appends a listed identity as it is written (every string keeps a record: no
 * parsing decides what may be deleted), and the other spelling of an image ID. */
static int add_listed(pg_strv *refs, const ProtobufCBinaryData *f, pg_error *err)
{
    if (f->len == 0 || f->len > PG_MAX_IMAGE_LEN || memchr(f->data, '\0', f->len))
        return PG_OK;
    if (refs->n >= CRI_MAX_LISTED_REFS)
        return pg_fail(err, PG_ERR_LIMIT, "the runtime lists more than %u identities",
                       CRI_MAX_LISTED_REFS);
    char s[PG_MAX_IMAGE_LEN + 8];
    memcpy(s, f->data, f->len);
    s[f->len] = '\0';
    int rc = pg_strv_push(refs, s, err);
    if (rc == PG_OK && strncmp(s, "sha256:", 7) == 0 && pg_is_hex64(s + 7))
        rc = pg_strv_push(refs, s + 7, err);
    else if (rc == PG_OK && pg_is_hex64(s)) {
        char with[7 + PG_HASH_HEX_LEN + 1] = "sha256:";
        memcpy(with + 7, s, PG_HASH_HEX_LEN + 1);
        rc = pg_strv_push(refs, with, err);
    }
    return rc;
}

int cri_list_images_refs(const uint8_t *buf, size_t len, pg_strv *refs, size_t *n_images,
                         pg_error *err)
{
    *n_images = 0;
    Runtime__V1__ListImagesResponse *resp =
        runtime__v1__list_images_response__unpack(NULL, len, buf);
    if (!resp)
        return pg_fail(err, PG_ERR_INVALID, "not a ListImagesResponse (%zu bytes)", len);
    int rc = pg_strv_ensure(refs, err);
    for (size_t i = 0; rc == PG_OK && i < resp->n_images; i++) {
        const Runtime__V1__Image *img = resp->images[i];
        rc = add_listed(refs, &img->id, err);
        for (size_t k = 0; rc == PG_OK && k < img->n_repo_tags; k++)
            rc = add_listed(refs, &img->repo_tags[k], err);
        for (size_t k = 0; rc == PG_OK && k < img->n_repo_digests; k++)
            rc = add_listed(refs, &img->repo_digests[k], err);
    }
    *n_images = resp->n_images;
    runtime__v1__list_images_response__free_unpacked(resp, NULL);
    return rc;
}

int cri_list_containers_refs(const uint8_t *buf, size_t len, pg_strv *refs, pg_error *err)
{
    Runtime__V1__ListContainersResponse *resp =
        runtime__v1__list_containers_response__unpack(NULL, len, buf);
    if (!resp)
        return pg_fail(err, PG_ERR_INVALID, "not a ListContainersResponse (%zu bytes)", len);
    int rc = pg_strv_ensure(refs, err);
    for (size_t i = 0; rc == PG_OK && i < resp->n_containers; i++) {
        const Runtime__V1__Container *c = resp->containers[i];
        rc = add_listed(refs, &c->image_ref, err);
        if (rc == PG_OK && c->image)
            rc = add_listed(refs, &c->image->image, err);
    }
    runtime__v1__list_containers_response__free_unpacked(resp, NULL);
    return rc;
}
