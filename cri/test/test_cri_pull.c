/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-cri's PullImage reading and the kubelet's credential semantics
 * (cri/README.md). Requests are built with protobuf-c from the CRI subset;
 * expected hashes come from test/data/credential-hash-vectors.json, never
 * from the code under test.
 */
#include "pull.h"

#include "cri_subset.pb-c.h"

#include <check.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IMAGE "registry.example.com/team-a/app:1.0"
#define IMAGE_NAME "registry.example.com/team-a/app"
#define KEY "pullgate.dev/credentials"
#define OTHER_HASH "0000000000000000000000000000000000000000000000000000000000000000"

/* ------------------------------------------------------------ vectors */

typedef struct vector {
    char name[64], username[256], password[256], hash[PG_HASH_HEX_LEN + 1];
} vector;

static vector vectors[64];
static size_t n_vectors;

/* Vectors without an email: CRI's AuthConfig carries none. */
static void load_vectors(void)
{
    if (n_vectors)
        return;
    json_error_t je;
    json_t *root = json_load_file(PG_CRI_TESTDATA "/credential-hash-vectors.json", 0, &je);
    ck_assert_msg(root != NULL, "vectors: %s", je.text);
    size_t i;
    json_t *v;
    json_array_foreach(root, i, v)
    {
        const char *email = json_string_value(json_object_get(v, "email"));
        const char *u = json_string_value(json_object_get(v, "username"));
        const char *p = json_string_value(json_object_get(v, "password"));
        const char *h = json_string_value(json_object_get(v, "credentialHash"));
        if ((email && *email) || !u || !p || !h || strlen(u) >= 256 || strlen(p) >= 256 ||
            n_vectors == 64)
            continue;
        /* Vectors whose strings hold a NUL cannot travel as C strings here. */
        if (strlen(u) != json_string_length(json_object_get(v, "username")) ||
            strlen(p) != json_string_length(json_object_get(v, "password")))
            continue;
        vector *out = &vectors[n_vectors++];
        snprintf(out->name, sizeof out->name, "%s", json_string_value(json_object_get(v, "name")));
        snprintf(out->username, sizeof out->username, "%s", u);
        snprintf(out->password, sizeof out->password, "%s", p);
        snprintf(out->hash, sizeof out->hash, "%s", h);
    }
    json_decref(root);
    ck_assert_uint_ge(n_vectors, 3);
}

static const vector *plain_vector(void)
{
    load_vectors();
    for (size_t i = 0; i < n_vectors; i++)
        if (strcmp(vectors[i].name, "plain") == 0)
            return &vectors[i];
    ck_abort_msg("no \"plain\" vector");
    return NULL;
}

/* ------------------------------------------------------------ requests */

typedef struct req_spec {
    const char *image;
    const char *username, *password, *auth;
    bool sandbox;
    const char *ns;
    const char *annotation; /* value of KEY, or NULL */
} req_spec;

static ProtobufCBinaryData bin(const char *s)
{
    ProtobufCBinaryData b = {s ? strlen(s) : 0, (uint8_t *)s};
    return b;
}

static uint8_t *pack_request(const req_spec *s, size_t *len)
{
    Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
    Runtime__V1__AuthConfig auth = RUNTIME__V1__AUTH_CONFIG__INIT;
    Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
    Runtime__V1__PodSandboxConfig sc = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
    Runtime__V1__StringMapEntry other = RUNTIME__V1__STRING_MAP_ENTRY__INIT;
    Runtime__V1__StringMapEntry cred = RUNTIME__V1__STRING_MAP_ENTRY__INIT;
    Runtime__V1__StringMapEntry *entries[2] = {&other, &cred};
    Runtime__V1__PullImageRequest req = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
    spec.image = bin(s->image ? s->image : IMAGE);
    req.image = &spec;
    if (s->username || s->password || s->auth) {
        auth.username = bin(s->username);
        auth.password = bin(s->password);
        auth.auth = bin(s->auth);
        req.auth = &auth;
    }
    if (s->sandbox) {
        md.name = bin("pod-1");
        md.uid = bin("pod-uid-1");
        md.namespace_ = bin(s->ns);
        sc.metadata = &md;
        other.key = bin("unrelated.example/key");
        other.value = bin("x");
        cred.key = bin(KEY);
        cred.value = bin(s->annotation);
        sc.annotations = entries;
        sc.n_annotations = s->annotation ? 2 : 1;
        req.sandbox_config = &sc;
    }
    *len = runtime__v1__pull_image_request__get_packed_size(&req);
    uint8_t *buf = malloc(*len + 1);
    ck_assert_ptr_nonnull(buf);
    runtime__v1__pull_image_request__pack(&req, buf);
    return buf;
}

/* Decodes spec and resolves its credentials; both must succeed. */
static void resolve(const req_spec *s, cri_pull_request *req, cri_pull_creds *creds)
{
    size_t len;
    uint8_t *buf = pack_request(s, &len);
    pg_error err = {0};
    ck_assert_msg(cri_pull_request_decode(buf, len, KEY, req, &err) == PG_OK, "%s", err.message);
    free(buf);
    ck_assert_msg(cri_pull_credentials(req, NULL, false, creds, &err) == PG_OK, "%s", err.message);
}

static char *base64(const char *text, bool padded)
{
    size_t n = strlen(text);
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    ck_assert_ptr_nonnull(out);
    int len = EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)text, (int)n);
    while (!padded && len > 0 && out[len - 1] == '=')
        out[--len] = '\0';
    return out;
}

static char *annotation_with(const char *ns, const char *hash, bool with_sa)
{
    char *a = malloc(1024);
    ck_assert_ptr_nonnull(a);
    snprintf(a, 1024,
             "{\"" IMAGE_NAME "\":{\"kubernetesSecrets\":[{\"namespace\":\"%s\",\"name\":"
             "\"regcred\",\"uid\":\"uid-1\",\"credentialHash\":\"%s\"}]%s}}",
             ns, hash,
             with_sa ? ",\"kubernetesServiceAccounts\":[{\"namespace\":\"team-a\",\"name\":"
                       "\"default\",\"uid\":\"sa-uid\"}]"
                     : "");
    return a;
}

static void assert_unverified(const cri_pull_creds *c, const char *ns, const char *hash)
{
    ck_assert_int_eq(c->source, CRI_CREDS_UNVERIFIED);
    ck_assert_int_eq(c->creds.node_pods_accessible, 0);
    ck_assert_uint_eq(c->creds.n_secrets, 1);
    ck_assert_str_eq(c->creds.secrets[0].namespace_, ns);
    ck_assert_str_eq(c->creds.secrets[0].uid, "");
    ck_assert_str_eq(c->creds.secrets[0].credential_hash, hash);
    char name[128];
    snprintf(name, sizeof name, "%s%s", CRI_UNVERIFIED_NAME_PREFIX, hash);
    ck_assert_str_eq(c->creds.secrets[0].name, name);
}

/* ------------------------------------------------------------ tests */

START_TEST(no_auth_is_node_accessible)
{
    req_spec s = {.sandbox = true, .ns = "team-a"};
    cri_pull_request req;
    cri_pull_creds c;
    resolve(&s, &req, &c);
    ck_assert_str_eq(req.image, IMAGE);
    ck_assert(!req.has_auth);
    ck_assert_int_eq(c.source, CRI_CREDS_NONE);
    ck_assert_int_eq(c.creds.node_pods_accessible, 1);
    ck_assert_uint_eq(c.creds.n_secrets, 0);
    cri_pull_creds_clear(&c);
    cri_pull_request_clear(&req);
}
END_TEST

START_TEST(username_password_hash_matches_vectors)
{
    load_vectors();
    for (size_t i = 0; i < n_vectors; i++) {
        req_spec s = {.username = vectors[i].username, .password = vectors[i].password};
        cri_pull_request req;
        cri_pull_creds c;
        resolve(&s, &req, &c);
        ck_assert_msg(req.auth_usable, "vector %s", vectors[i].name);
        ck_assert_msg(strcmp(req.credential_hash, vectors[i].hash) == 0, "vector %s: %s != %s",
                      vectors[i].name, req.credential_hash, vectors[i].hash);
        cri_pull_creds_clear(&c);
        cri_pull_request_clear(&req);
    }
}
END_TEST

START_TEST(auth_field_base64_padded_and_raw)
{
    load_vectors();
    for (size_t i = 0; i < n_vectors; i++) {
        if (strchr(vectors[i].username, ':'))
            continue; /* "user:pass" splits at the first colon */
        char joined[520];
        snprintf(joined, sizeof joined, "%s:%s", vectors[i].username, vectors[i].password);
        for (int padded = 0; padded < 2; padded++) {
            char *b64 = base64(joined, padded);
            req_spec s = {.auth = b64};
            cri_pull_request req;
            cri_pull_creds c;
            resolve(&s, &req, &c);
            ck_assert_msg(req.auth_usable, "vector %s (%s)", vectors[i].name, b64);
            ck_assert_msg(strcmp(req.credential_hash, vectors[i].hash) == 0, "vector %s",
                          vectors[i].name);
            cri_pull_creds_clear(&c);
            cri_pull_request_clear(&req);
            free(b64);
        }
    }
}
END_TEST

START_TEST(bad_auth_field_is_unverified_never_node)
{
    req_spec s = {.auth = "!!not base64!!", .sandbox = true, .ns = "team-a"};
    cri_pull_request req;
    cri_pull_creds c;
    resolve(&s, &req, &c);
    ck_assert(req.has_auth);
    ck_assert(!req.auth_usable);
    ck_assert_int_eq(c.source, CRI_CREDS_UNVERIFIED);
    ck_assert_int_eq(c.creds.node_pods_accessible, 0);
    cri_pull_creds_clear(&c);
    cri_pull_request_clear(&req);
}
END_TEST

START_TEST(hash_in_annotation_names_the_secret)
{
    const vector *v = plain_vector();
    char *a = annotation_with("team-a", v->hash, true);
    req_spec s = {.username = v->username,
                  .password = v->password,
                  .sandbox = true,
                  .ns = "team-a",
                  .annotation = a};
    cri_pull_request req;
    cri_pull_creds c;
    resolve(&s, &req, &c);
    ck_assert_int_eq(c.source, CRI_CREDS_POD_SECRET);
    ck_assert_int_eq(c.creds.node_pods_accessible, 0);
    ck_assert_uint_eq(c.creds.n_secrets, 1);
    ck_assert_str_eq(c.creds.secrets[0].namespace_, "team-a");
    ck_assert_str_eq(c.creds.secrets[0].name, "regcred");
    ck_assert_str_eq(c.creds.secrets[0].uid, "uid-1");
    ck_assert_str_eq(c.creds.secrets[0].credential_hash, v->hash);
    ck_assert_ptr_eq(c.creds.secrets, c.secrets);
    cri_pull_creds_clear(&c);
    cri_pull_request_clear(&req);
    free(a);
}
END_TEST

START_TEST(valid_entry_without_the_hash_is_node_wide)
{
    const vector *v = plain_vector();
    char *a = annotation_with("team-a", OTHER_HASH, true);
    req_spec s = {.username = v->username,
                  .password = v->password,
                  .sandbox = true,
                  .ns = "team-a",
                  .annotation = a};
    cri_pull_request req;
    cri_pull_creds c;
    resolve(&s, &req, &c);
    ck_assert_int_eq(c.source, CRI_CREDS_NODE_WIDE);
    ck_assert_int_eq(c.creds.node_pods_accessible, 1);
    ck_assert_uint_eq(c.creds.n_secrets, 0);
    cri_pull_creds_clear(&c);
    cri_pull_request_clear(&req);
    free(a);
}
END_TEST

START_TEST(cannot_tell_is_pod_namespace_hash_only)
{
    const vector *v = plain_vector();
    char *other_ns = annotation_with("team-b", v->hash, false);
    char *other_image = malloc(512);
    snprintf(other_image, 512,
             "{\"registry.example.com/team-a/other\":{\"kubernetesSecrets\":[{\"namespace\":"
             "\"team-a\",\"name\":\"regcred\",\"uid\":\"uid-1\",\"credentialHash\":\"%s\"}]}}",
             v->hash);
    const char *cases[] = {NULL,
                           "",
                           "{not json",
                           "[]",
                           other_ns,
                           other_image,
                           "{\"" IMAGE_NAME "\":{\"unknownKey\":[]}}"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        req_spec s = {.username = v->username,
                      .password = v->password,
                      .sandbox = true,
                      .ns = "team-a",
                      .annotation = cases[i]};
        cri_pull_request req;
        cri_pull_creds c;
        resolve(&s, &req, &c);
        assert_unverified(&c, "team-a", v->hash);
        cri_pull_creds_clear(&c);
        cri_pull_request_clear(&req);
    }
    free(other_ns);
    free(other_image);
}
END_TEST

START_TEST(no_sandbox_is_unknown_namespace_hash_only)
{
    const vector *v = plain_vector();
    req_spec s = {.username = v->username, .password = v->password};
    cri_pull_request req;
    cri_pull_creds c;
    resolve(&s, &req, &c);
    assert_unverified(&c, CRI_UNKNOWN_NAMESPACE, v->hash);
    cri_pull_creds_clear(&c);
    cri_pull_request_clear(&req);
}
END_TEST

START_TEST(hmac_required_without_key_is_unverified)
{
    const vector *v = plain_vector();
    char *a = annotation_with("team-a", v->hash, true);
    req_spec s = {.username = v->username,
                  .password = v->password,
                  .sandbox = true,
                  .ns = "team-a",
                  .annotation = a};
    size_t len;
    uint8_t *buf = pack_request(&s, &len);
    cri_pull_request req;
    cri_pull_creds c;
    ck_assert_int_eq(cri_pull_request_decode(buf, len, KEY, &req, NULL), PG_OK);
    ck_assert_int_eq(cri_pull_credentials(&req, NULL, true, &c, NULL), PG_OK);
    assert_unverified(&c, "team-a", v->hash);
    cri_pull_creds_clear(&c);
    cri_pull_request_clear(&req);
    free(buf);
    free(a);
}
END_TEST

START_TEST(hostile_requests_are_refused)
{
    static const uint8_t garbage[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f};
    cri_pull_request req;
    pg_error err = {0};
    ck_assert_int_ne(cri_pull_request_decode(garbage, sizeof garbage, KEY, &req, &err), PG_OK);
    /* An image with a NUL would be recorded under a different (truncated) name. */
    Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
    Runtime__V1__PullImageRequest r = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
    static const uint8_t nul_image[] = {'b', 'u', 's', 'y', 0, 'x'};
    spec.image.data = (uint8_t *)nul_image;
    spec.image.len = sizeof nul_image;
    r.image = &spec;
    uint8_t buf[64];
    size_t len = runtime__v1__pull_image_request__pack(&r, buf);
    ck_assert_int_eq(cri_pull_request_decode(buf, len, KEY, &req, &err), PG_ERR_INVALID);
    /* No image at all. */
    r.image = NULL;
    len = runtime__v1__pull_image_request__pack(&r, buf);
    ck_assert_int_eq(cri_pull_request_decode(buf, len, KEY, &req, &err), PG_ERR_INVALID);
}
END_TEST

START_TEST(last_annotation_entry_wins)
{
    /* Two entries of one map key: protobuf's rule is "last wins"; the proxy agrees. */
    const vector *v = plain_vector();
    char *good = annotation_with("team-a", v->hash, true);
    Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
    Runtime__V1__AuthConfig auth = RUNTIME__V1__AUTH_CONFIG__INIT;
    Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
    Runtime__V1__PodSandboxConfig sc = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
    Runtime__V1__StringMapEntry first = RUNTIME__V1__STRING_MAP_ENTRY__INIT;
    Runtime__V1__StringMapEntry last = RUNTIME__V1__STRING_MAP_ENTRY__INIT;
    Runtime__V1__StringMapEntry *entries[2] = {&first, &last};
    Runtime__V1__PullImageRequest r = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
    spec.image = bin(IMAGE);
    auth.username = bin(v->username);
    auth.password = bin(v->password);
    md.namespace_ = bin("team-a");
    first.key = last.key = bin(KEY);
    first.value = bin("{broken");
    last.value = bin(good);
    sc.metadata = &md;
    sc.annotations = entries;
    sc.n_annotations = 2;
    r.image = &spec;
    r.auth = &auth;
    r.sandbox_config = &sc;
    size_t len = runtime__v1__pull_image_request__get_packed_size(&r);
    uint8_t *buf = malloc(len);
    runtime__v1__pull_image_request__pack(&r, buf);
    cri_pull_request req;
    cri_pull_creds c;
    ck_assert_int_eq(cri_pull_request_decode(buf, len, KEY, &req, NULL), PG_OK);
    ck_assert_int_eq(cri_pull_credentials(&req, NULL, false, &c, NULL), PG_OK);
    ck_assert_int_eq(c.source, CRI_CREDS_POD_SECRET);
    cri_pull_creds_clear(&c);
    cri_pull_request_clear(&req);
    free(buf);
    free(good);
}
END_TEST

START_TEST(pull_response_and_image_status)
{
    Runtime__V1__PullImageResponse pr = RUNTIME__V1__PULL_IMAGE_RESPONSE__INIT;
    const char *id = "sha256:4a35f7a3c6ef3e8a1b0cd71fa1d5ef7fa3f5d2c4a1b2c3d4e5f60718293a4b5c";
    pr.image_ref = bin(id);
    uint8_t buf[512];
    size_t len = runtime__v1__pull_image_response__pack(&pr, buf);
    char *ref = NULL;
    ck_assert_int_eq(cri_pull_response_decode(buf, len, &ref, NULL), PG_OK);
    ck_assert_str_eq(ref, id);
    free(ref);
    pr.image_ref = bin(NULL);
    len = runtime__v1__pull_image_response__pack(&pr, buf);
    ck_assert_int_eq(cri_pull_response_decode(buf, len, &ref, NULL), PG_ERR_INVALID);

    Runtime__V1__Image img = RUNTIME__V1__IMAGE__INIT;
    ProtobufCBinaryData tags[3] = {bin("registry.example.com/team-a/app:1.0"),
                                   bin("not a reference!"),
                                   bin("registry.example.com/team-a/app:1.0")};
    ProtobufCBinaryData digests[1] = {
        bin("registry.example.com/team-a/app@sha256:"
            "1111111111111111111111111111111111111111111111111111111111111111")};
    img.id = bin(id);
    img.repo_tags = tags;
    img.n_repo_tags = 3;
    img.repo_digests = digests;
    img.n_repo_digests = 1;
    Runtime__V1__ImageStatusResponse sr = RUNTIME__V1__IMAGE_STATUS_RESPONSE__INIT;
    sr.image = &img;
    len = runtime__v1__image_status_response__pack(&sr, buf);
    char **aliases = NULL;
    ck_assert_int_eq(
        cri_image_status_aliases(buf, len, "registry.example.com/team-a/app:1.0", &aliases, NULL),
        PG_OK);
    size_t n = 0;
    while (aliases[n])
        n++;
    ck_assert_uint_eq(n, 3); /* id, the tag once, the digest; the junk tag is dropped */
    ck_assert_str_eq(aliases[0], id);
    ck_assert_str_eq(aliases[1], "registry.example.com/team-a/app:1.0");
    pg_strv_free(aliases);
    /* The runtime reports no image. */
    sr.image = NULL;
    len = runtime__v1__image_status_response__pack(&sr, buf);
    ck_assert_int_eq(cri_image_status_aliases(buf, len, NULL, &aliases, NULL), PG_ERR_NOT_FOUND);
    /* And the request it sends is an ImageStatusRequest for the ref. */
    uint8_t *req;
    ck_assert_int_eq(cri_image_status_request_encode(id, &req, &len, NULL), PG_OK);
    Runtime__V1__ImageStatusRequest *back =
        runtime__v1__image_status_request__unpack(NULL, len, req);
    ck_assert_ptr_nonnull(back);
    ck_assert_uint_eq(back->image->image.len, strlen(id));
    ck_assert(memcmp(back->image->image.data, id, strlen(id)) == 0);
    runtime__v1__image_status_request__free_unpacked(back, NULL);
    free(req);
}
END_TEST

/* An annotation whose entry for IMAGE_NAME is signed for sign_ns under key. */
static char *signed_annotation(const pg_mac_key *key, const char *sign_ns, const char *hash)
{
    char *plain = annotation_with("team-a", hash, true);
    json_t *root = json_loads(plain, 0, NULL);
    free(plain);
    ck_assert_ptr_nonnull(root);
    json_t *entry = json_object_get(root, IMAGE_NAME);
    char mac[PG_MAC_HEX_LEN + 1];
    pg_error err = {0};
    ck_assert_msg(pg_annotation_mac_of_entry(key, sign_ns, IMAGE_NAME, entry, mac, &err) == PG_OK,
                  "%s", err.message);
    json_object_set_new(entry, PG_MAC_FIELD, json_string(mac));
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

START_TEST(hmac_signed_entry_verifies_only_for_its_namespace)
{
    const vector *v = plain_vector();
    static const char key_bytes[] = "0123456789abcdef0123456789abcdef-node-key";
    pg_mac_key *key = NULL;
    ck_assert_int_eq(pg_mac_key_from_bytes(key_bytes, sizeof key_bytes - 1, &key, NULL), PG_OK);
    const char *signed_for[] = {"team-a", "team-b"};
    cri_cred_source expected[] = {CRI_CREDS_POD_SECRET, CRI_CREDS_UNVERIFIED};
    for (int i = 0; i < 2; i++) {
        /* The pod is in team-a; the second annotation was signed for team-b (a replay). */
        char *a = signed_annotation(key, signed_for[i], v->hash);
        req_spec s = {.username = v->username,
                      .password = v->password,
                      .sandbox = true,
                      .ns = "team-a",
                      .annotation = a};
        size_t len;
        uint8_t *buf = pack_request(&s, &len);
        cri_pull_request req;
        cri_pull_creds c;
        ck_assert_int_eq(cri_pull_request_decode(buf, len, KEY, &req, NULL), PG_OK);
        ck_assert_int_eq(cri_pull_credentials(&req, key, true, &c, NULL), PG_OK);
        ck_assert_msg(c.source == expected[i], "signed for %s: %s (%s)", signed_for[i],
                      cri_cred_source_name(c.source), c.detail);
        if (expected[i] == CRI_CREDS_UNVERIFIED)
            assert_unverified(&c, "team-a", v->hash);
        cri_pull_creds_clear(&c);
        cri_pull_request_clear(&req);
        free(buf);
        free(a);
    }
    pg_mac_key_free(key);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cri_pull");
    TCase *tc = tcase_create("credentials");
    tcase_add_test(tc, no_auth_is_node_accessible);
    tcase_add_test(tc, username_password_hash_matches_vectors);
    tcase_add_test(tc, auth_field_base64_padded_and_raw);
    tcase_add_test(tc, bad_auth_field_is_unverified_never_node);
    tcase_add_test(tc, hash_in_annotation_names_the_secret);
    tcase_add_test(tc, valid_entry_without_the_hash_is_node_wide);
    tcase_add_test(tc, cannot_tell_is_pod_namespace_hash_only);
    tcase_add_test(tc, no_sandbox_is_unknown_namespace_hash_only);
    tcase_add_test(tc, hmac_required_without_key_is_unverified);
    tcase_add_test(tc, hmac_signed_entry_verifies_only_for_its_namespace);
    tcase_add_test(tc, hostile_requests_are_refused);
    tcase_add_test(tc, last_annotation_entry_wins);
    tcase_add_test(tc, pull_response_and_image_status);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
