/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-cri's PullImage reading and the kubelet's credential semantics
 * (cri/README.md). Requests are built with protobuf-c from the CRI subset;
 * expected hashes come from test/data/credential-hash-vectors.json, never
 * from the code under test.
 */
#include "attribution.h"
#include "pull.h"
#include "cri_testing.h"
#include "verify_memory.h"

#include "annotation_build.h"
#include "annotation_seal.h"

#include "cri_subset.pb-c.h"

#include <check.h>
#include <grpc/status.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    const char *uid;        /* the pod's UID; NULL: "pod-uid-1" */
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
        md.uid = bin(s->uid ? s->uid : "pod-uid-1");
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

/* Decodes spec and resolves its credentials with attribution a (NULL: none); both must succeed. */
static void resolve_with(const req_spec *s, const cri_attribution *a, cri_pull_request *req,
                         cri_pull_creds *creds)
{
    size_t len;
    uint8_t *buf = pack_request(s, &len);
    pg_error err = {0};
    const char *why = NULL;
    ck_assert_msg(cri_pull_request_decode(buf, len, KEY, req, &why) == CRI_DECODED, "%s", why);
    free(buf);
    ck_assert_msg(cri_pull_credentials(req, a, creds, &err) == PG_OK, "%s", err.message);
}

static void resolve(const req_spec *s, cri_pull_request *req, cri_pull_creds *creds)
{
    resolve_with(s, NULL, req, creds);
}

/* The decode result of spec (the request is cleared again). */
static cri_decode_result decode_only(const req_spec *s)
{
    size_t len;
    uint8_t *buf = pack_request(s, &len);
    cri_pull_request req;
    const char *why = NULL;
    cri_decode_result r = cri_pull_request_decode(buf, len, KEY, &req, &why);
    if (r == CRI_DECODED)
        cri_pull_request_clear(&req);
    else
        ck_assert_ptr_nonnull(why);
    free(buf);
    return r;
}

/* The auth hash A of user/pass (the kubelet hash without the email). */
static void auth_hash_of(const char *user, const char *pass, char out[PG_HASH_HEX_LEN + 1])
{
    ck_assert_int_eq(pg_credential_hash(user, pass, "", out, NULL), PG_OK);
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

/* An unkeyed (v1) annotation: one secret with H = hash and, when auth is not
 * NULL, its auth hash A (present only when it differs: the entry has an email). */
static char *annotation_v1(const char *ns, const char *hash, const char *auth, bool with_sa)
{
    char *a = malloc(1024);
    char auth_member[128] = "";
    ck_assert_ptr_nonnull(a);
    if (auth)
        snprintf(auth_member, sizeof auth_member, ",\"authHash\":\"%s\"", auth);
    snprintf(a, 1024,
             "{\"" IMAGE_NAME "\":{\"kubernetesSecrets\":[{\"namespace\":\"%s\",\"name\":"
             "\"regcred\",\"uid\":\"uid-1\",\"credentialHash\":\"%s\"%s}]%s}}",
             ns, hash, auth_member,
             with_sa ? ",\"kubernetesServiceAccounts\":[{\"namespace\":\"team-a\",\"name\":"
                       "\"default\",\"uid\":\"sa-uid\"}]"
                     : "");
    return a;
}

static char *annotation_with(const char *ns, const char *hash, bool with_sa)
{
    return annotation_v1(ns, hash, NULL, with_sa);
}

/* The placeholder under ns and, when the pull names its pod (a namespace and a UID), the
 * binding of that pod (docs/interfaces.md §10). */
static void assert_unverified(const cri_pull_creds *c, const char *ns, const char *hash)
{
    bool pod_known = strcmp(ns, PG_UNKNOWN_NAMESPACE) != 0;
    ck_assert_int_eq(c->source, CRI_CREDS_UNVERIFIED);
    ck_assert_int_eq(c->creds.node_pods_accessible, 0);
    ck_assert_uint_eq(c->creds.n_secrets, pod_known ? 2 : 1);
    ck_assert_str_eq(c->creds.secrets[0].namespace_, ns);
    ck_assert_str_eq(c->creds.secrets[0].uid, "");
    ck_assert_str_eq(c->creds.secrets[0].credential_hash, hash);
    char name[128];
    snprintf(name, sizeof name, "%s%s", PG_UNVERIFIED_NAME_PREFIX, hash);
    ck_assert_str_eq(c->creds.secrets[0].name, name);
    if (!pod_known)
        return;
    const pg_secret *b = &c->creds.secrets[1];
    ck_assert_str_eq(b->namespace_, ns);
    ck_assert_str_eq(b->name, PG_POD_BINDING_PREFIX "pod-uid-1");
    ck_assert_str_eq(b->uid, "");
    ck_assert_str_eq(b->credential_hash, "");
    ck_assert_ptr_nonnull(strstr(c->detail, "bound to pod pod-uid-1"));
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
        if (!vectors[i].username[0] && !vectors[i].password[0])
            continue; /* empty credentials are refused (below) */
        req_spec s = {.username = vectors[i].username, .password = vectors[i].password};
        if (!vectors[i].username[0])
            continue; /* a password without a username: see unusable_credentials_are_refused */
        cri_pull_request req;
        cri_pull_creds c;
        resolve(&s, &req, &c);
        ck_assert(req.has_auth);
        ck_assert_msg(strcmp(req.auth_hash, vectors[i].hash) == 0, "vector %s: %s != %s",
                      vectors[i].name, req.auth_hash, vectors[i].hash);
        cri_pull_creds_clear(&c);
        cri_pull_request_clear(&req);
    }
}
END_TEST

START_TEST(auth_field_base64_padded_and_raw)
{
    load_vectors();
    for (size_t i = 0; i < n_vectors; i++) {
        if (strchr(vectors[i].username, ':') ||
            (!vectors[i].username[0] && !vectors[i].password[0]))
            continue; /* "user:pass" splits at the first colon; empty is refused */
        char joined[520];
        snprintf(joined, sizeof joined, "%s:%s", vectors[i].username, vectors[i].password);
        for (int padded = 0; padded < 2; padded++) {
            char *b64 = base64(joined, padded);
            req_spec s = {.auth = b64};
            cri_pull_request req;
            cri_pull_creds c;
            resolve(&s, &req, &c);
            ck_assert_msg(strcmp(req.auth_hash, vectors[i].hash) == 0, "vector %s",
                          vectors[i].name);
            cri_pull_creds_clear(&c);
            cri_pull_request_clear(&req);
            free(b64);
        }
    }
}
END_TEST

/* Credentials that cannot be hashed or attributed are refused: never a hash of
 * empty credentials, never recorded under a guess. */
START_TEST(unusable_credentials_are_refused)
{
    char *long_pass = malloc(CRI_MAX_CREDENTIAL_BYTES + 2);
    memset(long_pass, 'p', CRI_MAX_CREDENTIAL_BYTES + 1);
    long_pass[CRI_MAX_CREDENTIAL_BYTES + 1] = '\0';
    char *colon_only = base64(":", true);
    char *nul_inside = malloc(16);
    ck_assert_int_eq(
        EVP_EncodeBlock((unsigned char *)nul_inside, (const unsigned char *)"a:b\0c", 5), 8);
    const req_spec cases[] = {
        {.username = "alice", .password = long_pass},
        {.auth = "!!not base64!!"},
        {.auth = "YWxpY2U"},  /* "alice": no colon */
        {.auth = colon_only}, /* ":" -> empty credentials */
        {.auth = nul_inside}, /* "a:b\0c" */
        {.username = "alice", .password = "x", .auth = "YWxpY2U6eA=="}, /* ambiguous */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(decode_only(&cases[i]) == CRI_CREDS_UNUSABLE, "case %zu", i);
    free(long_pass);
    free(colon_only);
    free(nul_inside);

    /* NUL in a username or password; identity and registry tokens. */
    Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
    Runtime__V1__AuthConfig auth = RUNTIME__V1__AUTH_CONFIG__INIT;
    Runtime__V1__PullImageRequest r = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
    static const uint8_t nul_pass[] = {'s', 0, 'x'};
    spec.image = bin(IMAGE);
    r.image = &spec;
    r.auth = &auth;
    uint8_t buf[256];
    cri_pull_request req;
    auth.username = bin("alice");
    auth.password.data = (uint8_t *)nul_pass;
    auth.password.len = sizeof nul_pass;
    size_t len = runtime__v1__pull_image_request__pack(&r, buf);
    ck_assert_int_eq(cri_pull_request_decode(buf, len, KEY, &req, NULL), CRI_CREDS_UNUSABLE);
    auth.username = bin(NULL);
    auth.password = bin(NULL);
    auth.identity_token = bin("token");
    len = runtime__v1__pull_image_request__pack(&r, buf);
    ck_assert_int_eq(cri_pull_request_decode(buf, len, KEY, &req, NULL), CRI_CREDS_UNUSABLE);
    auth.identity_token = bin(NULL);
    auth.registry_token = bin("token");
    len = runtime__v1__pull_image_request__pack(&r, buf);
    ck_assert_int_eq(cri_pull_request_decode(buf, len, KEY, &req, NULL), CRI_CREDS_UNUSABLE);
    /* A bare server address is no credential at all. */
    auth.registry_token = bin(NULL);
    auth.server_address = bin("registry.example.com");
    len = runtime__v1__pull_image_request__pack(&r, buf);
    ck_assert_int_eq(cri_pull_request_decode(buf, len, KEY, &req, NULL), CRI_DECODED);
    ck_assert(!req.has_auth);
    cri_pull_request_clear(&req);
}
END_TEST

START_TEST(auth_hash_in_annotation_names_the_secret)
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

/* The CRI carries no email: the secret is found by A and recorded with its H. */
START_TEST(secret_with_email_is_found_by_its_auth_hash)
{
    load_vectors();
    json_error_t je;
    json_t *root = json_load_file(PG_CRI_TESTDATA "/credential-hash-vectors.json", 0, &je);
    ck_assert_ptr_nonnull(root);
    size_t i;
    json_t *vec;
    const char *user = NULL, *pass = NULL, *h = NULL;
    json_array_foreach(root, i, vec)
    {
        const char *email = json_string_value(json_object_get(vec, "email"));
        if (email && *email && !user) {
            user = json_string_value(json_object_get(vec, "username"));
            pass = json_string_value(json_object_get(vec, "password"));
            h = json_string_value(json_object_get(vec, "credentialHash"));
        }
    }
    ck_assert_ptr_nonnull(user);
    char auth[PG_HASH_HEX_LEN + 1];
    auth_hash_of(user, pass, auth);
    ck_assert_str_ne(auth, h);
    char *a = annotation_v1("team-a", h, auth, false);
    req_spec s = {
        .username = user, .password = pass, .sandbox = true, .ns = "team-a", .annotation = a};
    cri_pull_request req;
    cri_pull_creds c;
    resolve(&s, &req, &c);
    ck_assert_int_eq(c.source, CRI_CREDS_POD_SECRET);
    ck_assert_uint_eq(c.creds.n_secrets, 1);
    ck_assert_str_eq(c.creds.secrets[0].name, "regcred");
    ck_assert_str_eq(c.creds.secrets[0].credential_hash, h); /* the kubelet's, with the email */
    cri_pull_creds_clear(&c);
    cri_pull_request_clear(&req);
    free(a);
    json_decref(root);
}
END_TEST

/* Credentials the pod's entry does not list are bound to its namespace: never node-wide. */
START_TEST(unlisted_credentials_are_namespace_bound)
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
    assert_unverified(&c, "team-a", v->hash);
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
    assert_unverified(&c, PG_UNKNOWN_NAMESPACE, v->hash);
    cri_pull_creds_clear(&c);
    cri_pull_request_clear(&req);
}
END_TEST

/* A pull that cannot name its pod (no UID, or one that cannot be a UID) binds no pod. */
START_TEST(no_pod_binding_without_a_pod_uid)
{
    const vector *v = plain_vector();
    const char *uids[] = {"", "pod/uid", "pod:uid", "a b"};
    for (size_t i = 0; i < sizeof uids / sizeof uids[0]; i++) {
        req_spec s = {.username = v->username,
                      .password = v->password,
                      .sandbox = true,
                      .ns = "team-a",
                      .uid = uids[i]};
        cri_pull_request req;
        cri_pull_creds c;
        resolve(&s, &req, &c);
        ck_assert_int_eq(c.source, CRI_CREDS_UNVERIFIED);
        ck_assert_uint_eq(c.creds.n_secrets, 1);
        ck_assert_ptr_nonnull(strstr(c.creds.secrets[0].name, PG_UNVERIFIED_NAME_PREFIX));
        cri_pull_creds_clear(&c);
        cri_pull_request_clear(&req);
    }
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
    cri_attribution at = {.mac_required = true};
    cri_pull_request req;
    cri_pull_creds c;
    resolve_with(&s, &at, &req, &c);
    assert_unverified(&c, "team-a", v->hash);
    cri_pull_creds_clear(&c);
    cri_pull_request_clear(&req);
    free(a);
}
END_TEST

/* A keyed (v2) annotation as the webhook writes it: sealed H and A, entry MAC. */
static char *sealed_annotation(const pg_mac_key *key, const char *ns, const char *h,
                               const char *a_hash)
{
    pg_error err = {0};
    pg_annotation *an = pg_annotation_new(ns, &err);
    ck_assert_ptr_nonnull(an);
    ck_assert_int_eq(pg_annotation_add_image(an, IMAGE, NULL, &err), PG_OK);
    ck_assert_int_eq(
        pg_annotation_add_secret_hashes(an, IMAGE, ns, "regcred", "uid-1", h, a_hash, &err), PG_OK);
    ck_assert_msg(pg_annotation_sign(an, key, &err) == PG_OK, "%s", err.message);
    char *text = pg_annotation_dump(an, &err);
    ck_assert_ptr_nonnull(text);
    pg_annotation_free(an);
    return text;
}

START_TEST(sealed_annotation_opens_only_with_the_key_and_namespace)
{
    const vector *v = plain_vector();
    static const char key_bytes[] = "0123456789abcdef0123456789abcdef-node-key";
    static const char other_bytes[] = "another-node-key-0123456789abcdef0123456789";
    pg_mac_key *key = NULL, *other = NULL;
    ck_assert_int_eq(pg_mac_key_from_bytes(key_bytes, sizeof key_bytes - 1, &key, NULL), PG_OK);
    ck_assert_int_eq(pg_mac_key_from_bytes(other_bytes, sizeof other_bytes - 1, &other, NULL),
                     PG_OK);
    char *team_a = sealed_annotation(key, "team-a", v->hash, v->hash);
    ck_assert_ptr_null(strstr(team_a, v->hash)); /* nothing guessable in clear */
    struct {
        const char *pod_ns;
        const pg_mac_key *node_key;
        cri_cred_source want;
    } cases[] = {
        {"team-a", key, CRI_CREDS_POD_SECRET},
        {"team-b", key, CRI_CREDS_UNVERIFIED},   /* copied into team-b */
        {"team-a", other, CRI_CREDS_UNVERIFIED}, /* a node with another key */
        {"team-a", NULL, CRI_CREDS_UNVERIFIED},  /* a node with no key */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        req_spec s = {.username = v->username,
                      .password = v->password,
                      .sandbox = true,
                      .ns = cases[i].pod_ns,
                      .annotation = team_a};
        cri_attribution at = {.mac_key = cases[i].node_key,
                              .mac_required = cases[i].node_key != NULL};
        cri_pull_request req;
        cri_pull_creds c;
        resolve_with(&s, &at, &req, &c);
        ck_assert_msg(c.source == cases[i].want, "case %zu: %s (%s)", i,
                      cri_cred_source_name(c.source), c.detail);
        if (cases[i].want == CRI_CREDS_UNVERIFIED)
            assert_unverified(&c, cases[i].pod_ns, v->hash);
        cri_pull_creds_clear(&c);
        cri_pull_request_clear(&req);
    }
    free(team_a);
    pg_mac_key_free(key);
    pg_mac_key_free(other);
}
END_TEST

/* A file of the node's own docker config, written with mode. */
static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(chmod(path, mode), 0);
}

START_TEST(node_docker_config_credentials_are_node_wide)
{
    const vector *v = plain_vector();
    char dir[] = "/tmp/pg-cri-node.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char good[128], unsafe[128], link[128], missing[128];
    snprintf(good, sizeof good, "%s/config.json", dir);
    snprintf(unsafe, sizeof unsafe, "%s/writable.json", dir);
    snprintf(link, sizeof link, "%s/link.json", dir);
    snprintf(missing, sizeof missing, "%s/missing.json", dir);
    char doc[1200];
    snprintf(doc, sizeof doc,
             "{\"auths\":{\"registry.example.com\":{\"username\":\"%s\",\"password\":\"%s\"}}}",
             v->username, v->password);
    write_file(good, doc, 0600);
    /* Other credentials in files the node must not trust. */
    write_file(unsafe,
               "{\"auths\":{\"registry.example.com\":{\"username\":\"eve\",\"password\":\"x\"}}}",
               0666);
    ck_assert_int_eq(symlink(unsafe, link), 0);
    const char *paths[] = {good, unsafe, link, missing, NULL};
    pg_error err = {0};
    cri_node_creds *nc = cri_node_creds_new(paths, &err);
    ck_assert_ptr_nonnull(nc);
    ck_assert_int_eq(cri_node_creds_refresh(nc, NULL, &err), PG_OK);
    cri_attribution at = {.node = nc};
    char *a = annotation_with("team-a", OTHER_HASH, false);
    struct {
        const char *user, *pass, *image;
        cri_cred_source want;
    } cases[] = {
        {v->username, v->password, IMAGE, CRI_CREDS_NODE},
        {"eve", "x", IMAGE, CRI_CREDS_UNVERIFIED}, /* only in an unsafe file */
        {v->username, v->password, "other.example.com/team-a/app:1.0", CRI_CREDS_UNVERIFIED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        req_spec s = {.image = cases[i].image,
                      .username = cases[i].user,
                      .password = cases[i].pass,
                      .sandbox = true,
                      .ns = "team-a",
                      .annotation = a};
        cri_pull_request req;
        cri_pull_creds c;
        resolve_with(&s, &at, &req, &c);
        ck_assert_msg(c.source == cases[i].want, "case %zu: %s (%s)", i,
                      cri_cred_source_name(c.source), c.detail);
        ck_assert_int_eq(c.creds.node_pods_accessible, cases[i].want == CRI_CREDS_NODE);
        cri_pull_creds_clear(&c);
        cri_pull_request_clear(&req);
    }
    /* The file changes: the next refresh reads it again. */
    write_file(good, "{\"auths\":{}}", 0600);
    ck_assert_int_eq(cri_node_creds_refresh(nc, NULL, &err), PG_OK);
    bool holds = true;
    char auth[PG_HASH_HEX_LEN + 1];
    auth_hash_of(v->username, v->password, auth);
    ck_assert_int_eq(cri_node_creds_holds(nc, IMAGE, auth, &holds, &err), PG_OK);
    ck_assert(!holds);
    cri_node_creds_free(nc);
    free(a);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Whether the node's files, read from dir/name, hold user:pass for IMAGE. */
static bool node_file_holds(const char *dir, const char *name, const char *doc, const char *user,
                            const char *pass)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_file(path, doc, 0600);
    const char *paths[] = {path, NULL};
    pg_error err = {0};
    cri_node_creds *nc = cri_node_creds_new(paths, &err);
    ck_assert_ptr_nonnull(nc);
    ck_assert_int_eq(cri_node_creds_refresh(nc, NULL, &err), PG_OK);
    char auth[PG_HASH_HEX_LEN + 1];
    auth_hash_of(user, pass, auth);
    bool holds = false;
    ck_assert_int_eq(cri_node_creds_holds(nc, IMAGE, auth, &holds, &err), PG_OK);
    cri_node_creds_free(nc);
    ck_assert_int_eq(unlink(path), 0);
    return holds;
}

/*
 * The kubelet picks a node file's form by its name (pkg/credentialprovider/config.go):
 * config.json is read for its "auths" only, .dockercfg as the bare map. Credentials the
 * kubelet would never use are not node credentials, whatever the content looks like.
 */
START_TEST(node_credential_files_are_read_as_the_kubelet_reads_them)
{
    const vector *v = plain_vector();
    char dir[] = "/tmp/pg-cri-node-form.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char bare[1200], auths[1300];
    snprintf(bare, sizeof bare,
             "{\"registry.example.com\":{\"username\":\"%s\",\"password\":\"%s\"}}", v->username,
             v->password);
    snprintf(auths, sizeof auths, "{\"auths\":%s}", bare);
    const char *u = v->username, *p = v->password;
    ck_assert_msg(!node_file_holds(dir, "config.json", bare, u, p), "bare map in config.json");
    ck_assert_msg(node_file_holds(dir, ".dockercfg", bare, u, p), "bare map in .dockercfg");
    ck_assert_msg(node_file_holds(dir, "config.json", auths, u, p), "auths in config.json");
    ck_assert_msg(!node_file_holds(dir, ".dockercfg", auths, u, p), "auths in .dockercfg");
    /* Another name (the kubelet reads none): read as config.json, never as a bare map. */
    ck_assert_msg(!node_file_holds(dir, "node.json", bare, u, p), "bare map in node.json");
    ck_assert_msg(node_file_holds(dir, "node.json", auths, u, p), "auths in node.json");
    ck_assert_msg(!node_file_holds(dir, "x.dockercfg", bare, u, p), "bare map in x.dockercfg");
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

START_TEST(hostile_requests_are_refused)
{
    static const uint8_t garbage[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f};
    cri_pull_request req;
    ck_assert_int_eq(cri_pull_request_decode(garbage, sizeof garbage, KEY, &req, NULL),
                     CRI_NOT_A_PULL);
    /* Encodings a Go decoder takes and protobuf-c does not: refused, never forwarded.
     * The image field's tag (1, length-delimited: 0x0a) as a non-minimal varint of six
     * bytes (Go reads tags of up to ten; protobuf-c of up to five). */
    static const uint8_t long_tag[] = {0x8a, 0x80, 0x80, 0x80, 0x80, 0x00,
                                       0x05, 0x0a, 0x03, 'a',  'p',  'p'};
    ck_assert_int_eq(cri_pull_request_decode(long_tag, sizeof long_tag, KEY, &req, NULL),
                     CRI_NOT_A_PULL);
    /* A group (field 15, wire types 3 and 4) after a valid image. */
    static const uint8_t group[] = {0x0a, 0x05, 0x0a, 0x03, 'a', 'p', 'p', 0x7b, 0x7c};
    ck_assert_int_eq(cri_pull_request_decode(group, sizeof group, KEY, &req, NULL), CRI_NOT_A_PULL);
    /* Without the group the same bytes are a pull of "app". */
    ck_assert_int_eq(cri_pull_request_decode(group, sizeof group - 2, KEY, &req, NULL),
                     CRI_DECODED);
    ck_assert_str_eq(req.image, "app");
    cri_pull_request_clear(&req);
    /* An image with a NUL would be recorded under a different (truncated) name. */
    Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
    Runtime__V1__PullImageRequest r = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
    static const uint8_t nul_image[] = {'b', 'u', 's', 'y', 0, 'x'};
    spec.image.data = (uint8_t *)nul_image;
    spec.image.len = sizeof nul_image;
    r.image = &spec;
    uint8_t buf[64];
    size_t len = runtime__v1__pull_image_request__pack(&r, buf);
    ck_assert_int_eq(cri_pull_request_decode(buf, len, KEY, &req, NULL), CRI_NOT_A_PULL);
    /* No image at all. */
    r.image = NULL;
    len = runtime__v1__pull_image_request__pack(&r, buf);
    ck_assert_int_eq(cri_pull_request_decode(buf, len, KEY, &req, NULL), CRI_NOT_A_PULL);
}
END_TEST

START_TEST(methods_as_grpc_go_routes_them)
{
    struct {
        const char *path;
        cri_method_kind kind;
        const char *status;
    } cases[] = {
        {"/runtime.v1.ImageService/PullImage", CRI_METHOD_PULL_IMAGE,
         "/runtime.v1.ImageService/ImageStatus"},
        {"runtime.v1.ImageService/PullImage", CRI_METHOD_PULL_IMAGE,
         "/runtime.v1.ImageService/ImageStatus"},
        {"/runtime.v1alpha2.ImageService/PullImage", CRI_METHOD_PULL_IMAGE,
         "/runtime.v1alpha2.ImageService/ImageStatus"},
        {"runtime.v1alpha2.ImageService/PullImage", CRI_METHOD_PULL_IMAGE,
         "/runtime.v1alpha2.ImageService/ImageStatus"},
        /* Services grpc-go does not serve under these spellings: forwarded, the runtime
         * answers UNIMPLEMENTED. */
        {"//runtime.v1.ImageService/PullImage", CRI_METHOD_OTHER, NULL},
        {"/x/runtime.v1.ImageService/PullImage", CRI_METHOD_OTHER, NULL},
        {"/runtime.v1.ImageService/PullImage/", CRI_METHOD_OTHER, NULL},
        {"/runtime.v1.ImageService/PullImages", CRI_METHOD_OTHER, NULL},
        /* Verification pulls: ImageStatus (intercepted only with criVerifyPulls). */
        {"/runtime.v1.ImageService/ImageStatus", CRI_METHOD_IMAGE_STATUS,
         "/runtime.v1.ImageService/ImageStatus"},
        {"runtime.v1alpha2.ImageService/ImageStatus", CRI_METHOD_IMAGE_STATUS,
         "/runtime.v1alpha2.ImageService/ImageStatus"},
        {"/runtime.v1.ImageService/ImageStatuses", CRI_METHOD_OTHER, NULL},
        {"/runtime.v1.RuntimeService/ImageStatus", CRI_METHOD_OTHER, NULL},
        {"/runtime.v1.RuntimeService/PullImage", CRI_METHOD_OTHER, NULL},
        {"PullImage", CRI_METHOD_OTHER, NULL},
        {"", CRI_METHOD_OTHER, NULL},
        /* The CRI's unary methods, relayed as unary calls; streams and unknown methods not. */
        {"/runtime.v1.RuntimeService/ListContainers", CRI_METHOD_UNARY, NULL},
        {"runtime.v1alpha2.RuntimeService/Version", CRI_METHOD_UNARY, NULL},
        {"/runtime.v1.RuntimeService/UpdatePodSandboxResources", CRI_METHOD_UNARY, NULL},
        {"/runtime.v1.ImageService/ListImages", CRI_METHOD_UNARY, NULL},
        {"/runtime.v1alpha2.ImageService/ImageFsInfo", CRI_METHOD_UNARY, NULL},
        {"/runtime.v1.RuntimeService/GetContainerEvents", CRI_METHOD_OTHER, NULL},
        {"/runtime.v1.RuntimeService/NoSuchMethod", CRI_METHOD_OTHER, NULL},
        {"/runtime.v1.RuntimeService/ListContainer", CRI_METHOD_OTHER, NULL},
        {"/runtime.v1.ImageService/ListContainers", CRI_METHOD_OTHER, NULL},
        {"/runtime.v1.RuntimeService/ListImages", CRI_METHOD_OTHER, NULL},
        {"/runtime.v2.RuntimeService/Version", CRI_METHOD_OTHER, NULL},
        {"//runtime.v1.RuntimeService/Version", CRI_METHOD_OTHER, NULL},
        {"/test.Echo/Unary", CRI_METHOD_OTHER, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cri_method m = cri_method_parse(cases[i].path, strlen(cases[i].path));
        ck_assert_msg(m.kind == cases[i].kind, "%s", cases[i].path);
        if (cases[i].status)
            ck_assert_str_eq(m.image_status, cases[i].status);
    }
    static const char with_nul[] = "/runtime.v1.ImageService/PullImage\0x";
    ck_assert_int_eq(cri_method_parse(with_nul, sizeof with_nul - 1).kind, CRI_METHOD_OTHER);
}
END_TEST

/* The admission rule over every combination: forwarded only when decoded, with a
 * slot and a durable intent; every other combination waits or is refused. */
START_TEST(admission_forwards_only_decoded_slotted_durable)
{
    const cri_decode_result decodes[] = {CRI_DECODED, CRI_NOT_A_PULL, CRI_CREDS_UNUSABLE,
                                         CRI_EXTRA_MESSAGE, CRI_DECODE_NO_RESOURCE};
    const cri_slot_state slots[] = {CRI_SLOT_NONE, CRI_SLOT_WAITING, CRI_SLOT_HELD};
    const cri_record_outcome intents[] = {CRI_RECORD_NOT_SUBMITTED, CRI_RECORD_WAITING,
                                          CRI_RECORD_DURABLE,       CRI_RECORD_FAILED,
                                          CRI_RECORD_PENDING,       CRI_RECORD_NOT_QUEUED};
    size_t forwards = 0;
    for (size_t d = 0; d < 5; d++)
        for (size_t s = 0; s < 3; s++)
            for (size_t i = 0; i < 6; i++) {
                cri_admission a = cri_pull_admit(decodes[d], slots[s], intents[i]);
                bool should = decodes[d] == CRI_DECODED && slots[s] == CRI_SLOT_HELD &&
                              intents[i] == CRI_RECORD_DURABLE;
                ck_assert_msg((a.step == CRI_STEP_FORWARD) == should, "d%zu s%zu i%zu", d, s, i);
                forwards += a.step == CRI_STEP_FORWARD;
                if (a.step == CRI_STEP_REFUSE) {
                    ck_assert_ptr_nonnull(a.message);
                    ck_assert(strncmp(a.message, "pullgate: ", 10) == 0);
                    ck_assert(a.code == GRPC_STATUS_INVALID_ARGUMENT ||
                              a.code == GRPC_STATUS_RESOURCE_EXHAUSTED ||
                              a.code == GRPC_STATUS_UNAVAILABLE);
                }
                if (decodes[d] == CRI_NOT_A_PULL || decodes[d] == CRI_CREDS_UNUSABLE ||
                    decodes[d] == CRI_EXTRA_MESSAGE)
                    ck_assert_int_eq(a.code, GRPC_STATUS_INVALID_ARGUMENT);
                if (decodes[d] == CRI_DECODED && slots[s] == CRI_SLOT_HELD) {
                    if (intents[i] == CRI_RECORD_PENDING || intents[i] == CRI_RECORD_FAILED)
                        ck_assert_int_eq(a.code, GRPC_STATUS_UNAVAILABLE);
                    if (intents[i] == CRI_RECORD_NOT_QUEUED)
                        ck_assert_int_eq(a.code, GRPC_STATUS_RESOURCE_EXHAUSTED);
                    if (intents[i] == CRI_RECORD_NOT_SUBMITTED)
                        ck_assert_int_eq(a.step, CRI_STEP_RECORD_INTENT);
                }
                if (decodes[d] == CRI_DECODED && slots[s] == CRI_SLOT_NONE)
                    ck_assert_int_eq(a.code, GRPC_STATUS_RESOURCE_EXHAUSTED);
            }
    ck_assert_uint_eq(forwards, 1);
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
    ck_assert_int_eq(cri_pull_request_decode(buf, len, KEY, &req, NULL), CRI_DECODED);
    ck_assert_int_eq(cri_pull_credentials(&req, NULL, &c, NULL), PG_OK);
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
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(entry, "kubernetesSecrets"), i, item)
    { /* the keyed form: hashes sealed for the item */
        char sealed[PG_SEALED_LEN + 1];
        const char *h = json_string_value(json_object_get(item, "credentialHash"));
        ck_assert_int_eq(pg_seal_hashes(key, json_string_value(json_object_get(item, "namespace")),
                                        json_string_value(json_object_get(item, "name")),
                                        json_string_value(json_object_get(item, "uid")), h, h,
                                        sealed, NULL),
                         PG_OK);
        json_object_set_new(item, PG_SEALED_FIELD, json_string(sealed));
        json_object_del(item, "credentialHash");
    }
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
        cri_attribution at = {.mac_key = key, .mac_required = true};
        ck_assert_int_eq(cri_pull_request_decode(buf, len, KEY, &req, NULL), CRI_DECODED);
        ck_assert_int_eq(cri_pull_credentials(&req, &at, &c, NULL), PG_OK);
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

START_TEST(list_images_and_image_presence)
{
    const char *id = "sha256:4a35f7a3c6ef3e8a1b0cd71fa1d5ef7fa3f5d2c4a1b2c3d4e5f60718293a4b5c";
    Runtime__V1__Image img = RUNTIME__V1__IMAGE__INIT;
    ProtobufCBinaryData tags[1] = {bin("registry.example.com/team-a/app:1.0")};
    img.id = bin(id);
    img.repo_tags = tags;
    img.n_repo_tags = 1;
    Runtime__V1__Image *imgs[1] = {&img};
    Runtime__V1__ListImagesResponse lr = RUNTIME__V1__LIST_IMAGES_RESPONSE__INIT;
    lr.images = imgs;
    lr.n_images = 1;
    uint8_t buf[512];
    size_t len = runtime__v1__list_images_response__pack(&lr, buf);
    pg_strv refs = {0};
    size_t n_images = 9;
    ck_assert_int_eq(cri_list_images_refs(buf, len, &refs, &n_images, NULL), PG_OK);
    ck_assert_uint_eq(n_images, 1);
    ck_assert_uint_eq(refs.n, 3); /* both spellings of the ID, and the tag */
    ck_assert_str_eq(refs.v[0], id);
    ck_assert_str_eq(refs.v[1], id + 7);
    ck_assert_str_eq(refs.v[2], "registry.example.com/team-a/app:1.0");
    /* An empty answer is an empty list, not an error. */
    ck_assert_int_eq(cri_list_images_refs(buf, 0, &refs, &n_images, NULL), PG_OK);
    ck_assert_uint_eq(n_images, 0);
    pg_strv_clear(&refs);
    static const uint8_t junk[] = {0x0a, 0xff};
    ck_assert_int_eq(cri_list_images_refs(junk, sizeof junk, &refs, &n_images, NULL),
                     PG_ERR_INVALID);
    pg_strv_clear(&refs);

    Runtime__V1__Container ctr = RUNTIME__V1__CONTAINER__INIT;
    ctr.image_ref = bin(id);
    Runtime__V1__Container *ctrs[1] = {&ctr};
    Runtime__V1__ListContainersResponse cr = RUNTIME__V1__LIST_CONTAINERS_RESPONSE__INIT;
    cr.containers = ctrs;
    cr.n_containers = 1;
    len = runtime__v1__list_containers_response__pack(&cr, buf);
    ck_assert_int_eq(cri_list_containers_refs(buf, len, &refs, NULL), PG_OK);
    ck_assert_uint_eq(refs.n, 2);
    pg_strv_clear(&refs);

    Runtime__V1__ImageStatusResponse sr = RUNTIME__V1__IMAGE_STATUS_RESPONSE__INIT;
    len = runtime__v1__image_status_response__pack(&sr, buf);
    ck_assert_int_eq(cri_image_status_present(buf, len), 0);
    sr.image = &img;
    len = runtime__v1__image_status_response__pack(&sr, buf);
    ck_assert_int_eq(cri_image_status_present(buf, len), 1);
    ck_assert_int_eq(cri_image_status_present(junk, sizeof junk), -1);
}
END_TEST

/* An ImageStatusRequest with n annotations key[i]=value[i]. */
static uint8_t *pack_status(const char *image, const char *const *keys, const char *const *values,
                            size_t n, size_t *len)
{
    Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
    Runtime__V1__ImageStatusRequest r = RUNTIME__V1__IMAGE_STATUS_REQUEST__INIT;
    Runtime__V1__StringMapEntry *e = calloc(n ? n : 1, sizeof *e);
    Runtime__V1__StringMapEntry **ep = calloc(n ? n : 1, sizeof *ep);
    for (size_t i = 0; i < n; i++) {
        runtime__v1__string_map_entry__init(&e[i]);
        e[i].key = bin(keys[i]);
        e[i].value = bin(values[i]);
        ep[i] = &e[i];
    }
    if (image)
        spec.image = bin(image);
    spec.annotations = ep;
    spec.n_annotations = n;
    r.image = &spec;
    *len = runtime__v1__image_status_request__get_packed_size(&r);
    uint8_t *buf = malloc(*len ? *len : 1);
    runtime__v1__image_status_request__pack(&r, buf);
    free(e);
    free(ep);
    return buf;
}

START_TEST(image_status_request_pod_annotations)
{
    cri_status_request r;
    pg_error err = {0};
    size_t len;
    /* crictl, the image GC, the proxy's own follow-ups: no pod annotations. */
    uint8_t *buf = pack_status(IMAGE, NULL, NULL, 0, &len);
    ck_assert_int_eq(cri_status_request_decode(buf, len, KEY, &r, &err), PG_OK);
    ck_assert_str_eq(r.image, IMAGE);
    ck_assert(!r.has_pod_annotations);
    ck_assert_ptr_null(r.annotation);
    cri_status_request_clear(&r);
    free(buf);
    /* Some other annotation only: still not the kubelet's. */
    const char *k1[] = {"example.com/x"}, *v1[] = {"y"};
    buf = pack_status(IMAGE, k1, v1, 1, &len);
    ck_assert_int_eq(cri_status_request_decode(buf, len, KEY, &r, &err), PG_OK);
    ck_assert(!r.has_pod_annotations);
    cri_status_request_clear(&r);
    free(buf);
    /* The kubelet's own annotations; the credentials annotation, last entry wins. */
    const char *k2[] = {"kubernetes.io/config.source", "kubernetes.io/config.seen", KEY, KEY};
    const char *v2[] = {"api", "2026-11-25T09:00:00.1Z", "{broken", "{}"};
    buf = pack_status(IMAGE, k2, v2, 4, &len);
    ck_assert_int_eq(cri_status_request_decode(buf, len, KEY, &r, &err), PG_OK);
    ck_assert(r.has_pod_annotations);
    ck_assert_str_eq(r.annotation, "{}");
    ck_assert_uint_eq(r.annotation_len, 2);
    ck_assert_str_eq(r.config_seen, "2026-11-25T09:00:00.1Z");
    cri_status_request_clear(&r);
    free(buf);
    /* The credentials annotation alone counts; an empty value is present. */
    const char *k3[] = {KEY}, *v3[] = {""};
    buf = pack_status(IMAGE, k3, v3, 1, &len);
    ck_assert_int_eq(cri_status_request_decode(buf, len, KEY, &r, &err), PG_OK);
    ck_assert(r.has_pod_annotations);
    ck_assert_str_eq(r.annotation, "");
    cri_status_request_clear(&r);
    free(buf);
}
END_TEST

START_TEST(image_status_request_hostile)
{
    cri_status_request r;
    pg_error err = {0};
    size_t len;
    /* No image, garbage, a NUL in the annotation, too many annotations. */
    uint8_t *buf = pack_status(NULL, NULL, NULL, 0, &len);
    ck_assert_int_eq(cri_status_request_decode(buf, len, KEY, &r, &err), PG_ERR_INVALID);
    ck_assert_ptr_null(r.image);
    free(buf);
    static const uint8_t garbage[] = {0x0a, 0xff, 0xff, 0xff};
    ck_assert_int_eq(cri_status_request_decode(garbage, sizeof garbage, KEY, &r, &err),
                     PG_ERR_INVALID);
    static const uint8_t nul_value[] = {0x0a, 0x0f, 0x0a, 0x01, 'x',  0x12, 0x0a, 0x0a, 0x01,
                                        'k',  0x12, 0x05, '{',  '\0', '}',  ' ',  ' '};
    ck_assert_int_ne(cri_status_request_decode(nul_value, sizeof nul_value, "k", &r, &err), PG_OK);
    ck_assert_ptr_null(r.image);
    size_t n = CRI_MAX_STATUS_ANNOTATIONS + 1;
    const char **keys = calloc(n, sizeof *keys), **values = calloc(n, sizeof *values);
    for (size_t i = 0; i < n; i++)
        keys[i] = values[i] = "a";
    buf = pack_status(IMAGE, keys, values, n, &len);
    ck_assert_int_eq(cri_status_request_decode(buf, len, KEY, &r, &err), PG_ERR_LIMIT);
    free(buf);
    buf = pack_status(IMAGE, keys, values, n - 1, &len);
    ck_assert_int_eq(cri_status_request_decode(buf, len, KEY, &r, &err), PG_OK);
    cri_status_request_clear(&r);
    free(buf);
    free(keys);
    free(values);
}
END_TEST

START_TEST(verify_key_separates_fields)
{
    uint8_t a[32], b[32], c[32], d[32];
    cri_verify_key("img", "ab", 2, "c", a);
    cri_verify_key("img", "a", 1, "bc", b);
    cri_verify_key("img", "ab", 2, "c", c);
    cri_verify_key("img", "ab", 2, NULL, d);
    ck_assert(memcmp(a, b, 32) != 0);
    ck_assert(memcmp(a, c, 32) == 0);
    ck_assert(memcmp(a, d, 32) != 0);
}
END_TEST

START_TEST(verify_memory_bounds_the_loop)
{
    pg_error err = {0};
    cri_verify_memory *m = cri_verify_memory_new(2, 1000, &err);
    uint8_t k1[32] = {1}, k2[32] = {2}, k3[32] = {3};
    /* Asked, not pulled: asked again (a refused pull is retried, the registry decides). */
    ck_assert(cri_verify_memory_ask(m, k1, 0));
    ck_assert(cri_verify_memory_ask(m, k1, 10));
    /* Pulled: the next curable answer is the truth, until the TTL runs out. */
    ck_assert(cri_verify_memory_pulled(m, k1, 20));
    ck_assert(!cri_verify_memory_ask(m, k1, 30));
    ck_assert(!cri_verify_memory_ask(m, k1, 1020));
    ck_assert(cri_verify_memory_ask(m, k1, 1021));
    /* A pull nobody was asked for is not remembered. */
    ck_assert(!cri_verify_memory_pulled(m, k2, 1030));
    ck_assert_uint_eq(cri_verify_memory_size(m), 1);
    /* Full: the oldest entry makes room. */
    ck_assert(cri_verify_memory_ask(m, k2, 1040));
    ck_assert(cri_verify_memory_ask(m, k3, 1050));
    ck_assert_uint_eq(cri_verify_memory_size(m), 2);
    ck_assert(!cri_verify_memory_pulled(m, k1, 1060));
    ck_assert(cri_verify_memory_pulled(m, k3, 1060));
    /* A clock that went back: the entry is not trusted. */
    ck_assert(cri_verify_memory_ask(m, k3, 0));
    cri_verify_memory_free(m);
    ck_assert_ptr_null(cri_verify_memory_new(0, 1000, &err));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cri_pull");
    TCase *tc = tcase_create("credentials");
    tcase_add_test(tc, no_auth_is_node_accessible);
    tcase_add_test(tc, username_password_hash_matches_vectors);
    tcase_add_test(tc, auth_field_base64_padded_and_raw);
    tcase_add_test(tc, unusable_credentials_are_refused);
    tcase_add_test(tc, auth_hash_in_annotation_names_the_secret);
    tcase_add_test(tc, secret_with_email_is_found_by_its_auth_hash);
    tcase_add_test(tc, unlisted_credentials_are_namespace_bound);
    tcase_add_test(tc, sealed_annotation_opens_only_with_the_key_and_namespace);
    tcase_add_test(tc, node_docker_config_credentials_are_node_wide);
    tcase_add_test(tc, node_credential_files_are_read_as_the_kubelet_reads_them);
    tcase_add_test(tc, methods_as_grpc_go_routes_them);
    tcase_add_test(tc, admission_forwards_only_decoded_slotted_durable);
    tcase_add_test(tc, list_images_and_image_presence);
    tcase_add_test(tc, cannot_tell_is_pod_namespace_hash_only);
    tcase_add_test(tc, no_sandbox_is_unknown_namespace_hash_only);
    tcase_add_test(tc, no_pod_binding_without_a_pod_uid);
    tcase_add_test(tc, hmac_required_without_key_is_unverified);
    tcase_add_test(tc, hmac_signed_entry_verifies_only_for_its_namespace);
    tcase_add_test(tc, hostile_requests_are_refused);
    tcase_add_test(tc, last_annotation_entry_wins);
    tcase_add_test(tc, pull_response_and_image_status);
    tcase_add_test(tc, image_status_request_pod_annotations);
    tcase_add_test(tc, image_status_request_hostile);
    tcase_add_test(tc, verify_key_separates_fields);
    tcase_add_test(tc, verify_memory_bounds_the_loop);
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
