/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The keyed annotation (v2, docs/annotation-hmac.md "Sealed hashes"; docs/interfaces.md §4):
 *  - sealing against vectors made by an independent implementation (python3-cryptography,
 *    test/data/annotation-v2-vectors.json): the C code seals to the same bytes and opens them;
 *  - a sealed value opens only for its own item, under its own key, untampered;
 *  - the parser: v2 items open to {credentialHash, auth hash} after the entry MAC; without a
 *    key they present nothing; mixed or malformed items are refused; clear hashes (the
 *    unkeyed form) are rejected when a key is set, signed or not; the empty-credential hash
 *    is dropped;
 *  - matching: the empty-credential hash never matches; pullgate-cri's placeholder matches
 *    only a presented secret of its namespace by auth hash;
 *  - rotation: the key file's PATH.previous opens what it sealed, while it is there;
 *  - the builder: entries without username and password are not presented, an email entry
 *    carries its auth hash, signing seals every hash, and a malformed dockerconfig's error
 *    quotes none of its bytes.
 */
#include "annotation_build.h"
#include "annotation_seal.h"
#include "internal.h"
#include "keyring.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

#define A64 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define B64 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define IMAGE "registry.example.com/team-a/app"

static json_t *vectors(void)
{
    char *path = tu_testdata("annotation-v2-vectors.json");
    json_t *v = json_load_file(path, 0, NULL);
    free(path);
    ck_assert_ptr_nonnull(v);
    return v;
}

static pg_mac_key *vector_key(const json_t *v)
{
    const char *hex = json_string_value(json_object_get(v, "keyHex"));
    unsigned char bytes[64];
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++)
        bytes[i] = (unsigned char)(pg_hex_value((unsigned char)hex[2 * i]) << 4 |
                                   pg_hex_value((unsigned char)hex[2 * i + 1]));
    pg_mac_key *key = NULL;
    pg_error err = {0};
    ck_assert_int_eq(pg_mac_key_from_bytes(bytes, n, &key, &err), PG_OK);
    return key;
}

static pg_mac_key *other_key(void)
{
    unsigned char bytes[32];
    memset(bytes, 0x42, sizeof bytes);
    pg_mac_key *key = NULL;
    ck_assert_int_eq(pg_mac_key_from_bytes(bytes, sizeof bytes, &key, NULL), PG_OK);
    return key;
}

#define S(o, k) json_string_value(json_object_get((o), (k)))

START_TEST(seals_like_the_independent_implementation)
{
    json_t *v = vectors();
    pg_mac_key *key = vector_key(v);
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(v, "seal"), i, t)
    {
        char out[PG_SEALED_LEN + 1], h[PG_HASH_HEX_LEN + 1], a[PG_HASH_HEX_LEN + 1];
        pg_error err = {0};
        ck_assert_int_eq(pg_seal_hashes(key, S(t, "namespace"), S(t, "name"), S(t, "uid"),
                                        S(t, "hash"), S(t, "authHash"), out, &err),
                         PG_OK);
        ck_assert_str_eq(out, S(t, "sealedHashes"));
        ck_assert_int_eq(pg_unseal_hashes(key, S(t, "namespace"), S(t, "name"), S(t, "uid"),
                                          S(t, "sealedHashes"), h, a, &err),
                         PG_OK);
        ck_assert_str_eq(h, S(t, "hash"));
        ck_assert_str_eq(a, S(t, "authHash"));
    }
    pg_mac_key_free(key);
    json_decref(v);
}
END_TEST

/* Opening fails (PG_ERR_UNSAFE) and leaves the outputs untouched. */
static void assert_does_not_open(const pg_mac_key *key, const char *ns, const char *name,
                                 const char *uid, const char *sealed)
{
    char h[PG_HASH_HEX_LEN + 1] = "untouched", a[PG_HASH_HEX_LEN + 1] = "untouched";
    ck_assert_int_eq(pg_unseal_hashes(key, ns, name, uid, sealed, h, a, NULL), PG_ERR_UNSAFE);
    ck_assert_str_eq(h, "untouched");
    ck_assert_str_eq(a, "untouched");
}

START_TEST(opens_only_for_its_item_key_and_bytes)
{
    json_t *v = vectors();
    pg_mac_key *key = vector_key(v), *other = other_key();
    const json_t *t = json_array_get(json_object_get(v, "seal"), 0);
    const char *sealed = S(t, "sealedHashes");
    assert_does_not_open(other, "team-a", "regcred", "uid-a", sealed);
    assert_does_not_open(key, "team-b", "regcred", "uid-a", sealed);
    assert_does_not_open(key, "team-a", "regcred2", "uid-a", sealed);
    assert_does_not_open(key, "team-a", "regcred", "uid-b", sealed);
    assert_does_not_open(key, "team-a", "regcred\nx", "uid-a", sealed);
    char tampered[PG_SEALED_LEN + 1];
    for (size_t pos = 0; pos < PG_SEALED_LEN; pos += 13) {
        strcpy(tampered, sealed);
        tampered[pos] = tampered[pos] == 'A' ? 'B' : 'A';
        assert_does_not_open(key, "team-a", "regcred", "uid-a", tampered);
    }
    assert_does_not_open(key, "team-a", "regcred", "uid-a", "");
    assert_does_not_open(key, "team-a", "regcred", "uid-a", A64);
    strcpy(tampered, sealed);
    tampered[PG_SEALED_LEN - 1] = '_'; /* non-zero padding bits: a second spelling */
    ck_assert(!pg_sealed_text_valid(tampered));
    assert_does_not_open(key, "team-a", "regcred", "uid-a", tampered);
    pg_mac_key_free(other);
    pg_mac_key_free(key);
    json_decref(v);
}
END_TEST

static pg_presented *parse(const char *json, const char *ns, const pg_mac_key *key, int want)
{
    pg_presented *p = NULL;
    pg_error err = {0};
    int rc = pg_presented_parse_keyed(json, strlen(json), ns, key, &p, &err);
    ck_assert_msg(rc == want, "rc %d (%s), want %d", rc, err.message, want);
    return p;
}

START_TEST(v2_entry_opens_after_its_mac)
{
    json_t *v = vectors();
    pg_mac_key *key = vector_key(v), *other = other_key();
    const json_t *e = json_object_get(v, "entry");
    json_t *ann = json_pack("{s:O}", IMAGE, json_object_get(e, "value"));
    char *text = json_dumps(ann, JSON_COMPACT);
    const pg_pod_cred *s = NULL;

    pg_presented *p = parse(text, "team-a", key, PG_OK);
    ck_assert_uint_eq(pg_presented_secrets(p, IMAGE, &s), 1);
    ck_assert_str_eq(s[0].credential_hash, A64);
    ck_assert_str_eq(s[0].auth_hash, A64);
    ck_assert_uint_eq(pg_presented_rejected(p, IMAGE), 0);
    pg_presented_free(p);

    p = parse(text, "team-a", NULL, PG_OK); /* a node without the key opens nothing */
    ck_assert_uint_eq(pg_presented_secrets(p, IMAGE, &s), 0);
    ck_assert_uint_eq(pg_presented_unopened(p, IMAGE), 1);
    pg_presented_free(p);

    p = parse(text, "team-a", other, PG_OK); /* another cluster's key: the MAC fails */
    ck_assert_uint_eq(pg_presented_secrets(p, IMAGE, &s), 0);
    ck_assert_uint_eq(pg_presented_rejected(p, IMAGE), 1);
    pg_presented_free(p);

    p = parse(text, "team-b", key, PG_OK); /* replayed into team-b: the MAC fails */
    ck_assert_uint_eq(pg_presented_secrets(p, IMAGE, &s), 0);
    ck_assert_uint_eq(pg_presented_rejected(p, IMAGE), 1);
    pg_presented_free(p);

    free(text);
    json_decref(ann);
    pg_mac_key_free(other);
    pg_mac_key_free(key);
    json_decref(v);
}
END_TEST

/* Writes the vector's key to path (0600). */
static void write_vector_key(const json_t *v, const char *path, unsigned mode)
{
    const char *hex = json_string_value(json_object_get(v, "keyHex"));
    char bytes[64];
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++)
        bytes[i] = (char)(pg_hex_value((unsigned char)hex[2 * i]) << 4 |
                          pg_hex_value((unsigned char)hex[2 * i + 1]));
    tu_write_file(path, bytes, (long)n, mode);
}

/*
 * Rotation (docs/annotation-hmac.md): the key file holds the new key, PATH.previous the one
 * it replaced. An entry sealed before the rotation verifies and opens with the previous key
 * while that file is there, and with nothing once it is gone; a previous key that cannot be
 * trusted fails the load (fail closed).
 */
START_TEST(the_previous_key_opens_what_it_sealed)
{
    json_t *v = vectors();
    const json_t *e = json_object_get(v, "entry");
    json_t *ann = json_pack("{s:O}", IMAGE, json_object_get(e, "value"));
    char *text = json_dumps(ann, JSON_COMPACT);
    char *dir = tu_mkdtemp();
    char *path = tu_sprintf("%s/annotation.key", dir);
    char *previous = tu_sprintf("%s/annotation.key.previous", dir);
    char other[32];
    memset(other, 0x42, sizeof other);
    tu_write_file(path, other, sizeof other, 0600); /* the new key */
    const pg_pod_cred *s = NULL;
    pg_mac_key *key = NULL;
    pg_error err = {0};

    ck_assert_int_eq(pg_mac_key_load(path, &key, &err), PG_OK); /* no rotation in progress */
    ck_assert_ptr_null(pg_mac_key_previous(key));
    pg_presented *p = parse(text, "team-a", key, PG_OK);
    ck_assert_uint_eq(pg_presented_secrets(p, IMAGE, &s), 0);
    ck_assert_uint_eq(pg_presented_rejected(p, IMAGE), 1);
    pg_presented_free(p);
    pg_mac_key_free(key);

    write_vector_key(v, previous, 0600); /* the key the entry was sealed with */
    ck_assert_int_eq(pg_mac_key_load(path, &key, &err), PG_OK);
    ck_assert_ptr_nonnull(pg_mac_key_previous(key));
    p = parse(text, "team-a", key, PG_OK);
    ck_assert_uint_eq(pg_presented_secrets(p, IMAGE, &s), 1);
    ck_assert_str_eq(s[0].credential_hash, A64);
    ck_assert_uint_eq(pg_presented_rejected(p, IMAGE), 0);
    pg_presented_free(p);
    p = parse(text, "team-b", key, PG_OK); /* still bound to its namespace */
    ck_assert_uint_eq(pg_presented_secrets(p, IMAGE, &s), 0);
    pg_presented_free(p);
    pg_mac_key_free(key);

    ck_assert_int_eq(chmod(previous, 0644), 0); /* readable by others: not a key */
    ck_assert_int_eq(pg_mac_key_load(path, &key, &err), PG_ERR_UNSAFE);
    ck_assert_ptr_null(key);
    ck_assert_ptr_nonnull(strstr(err.message, "previous"));

    tu_rmrf(dir);
    free(previous);
    free(path);
    free(dir);
    free(text);
    json_decref(ann);
    json_decref(v);
}
END_TEST

START_TEST(malformed_items_are_refused)
{
    static const char *const bad[] = {
        /* sealed beside a clear hash */
        "{\"r.io/a\":{\"kubernetesSecrets\":[{\"namespace\":\"n\",\"name\":\"s\",\"uid\":\"u\","
        "\"credentialHash\":\"" A64 "\",\"sealedHashes\":\"x\"}]}}",
        /* a sealed value of the wrong form */
        "{\"r.io/a\":{\"kubernetesSecrets\":[{\"namespace\":\"n\",\"name\":\"s\",\"uid\":\"u\","
        "\"sealedHashes\":\"" A64 "\"}]}}",
        /* authHash without credentialHash */
        "{\"r.io/a\":{\"kubernetesSecrets\":[{\"namespace\":\"n\",\"name\":\"s\",\"uid\":\"u\","
        "\"authHash\":\"" A64 "\"}]}}",
        /* authHash not hex */
        "{\"r.io/a\":{\"kubernetesSecrets\":[{\"namespace\":\"n\",\"name\":\"s\",\"uid\":\"u\","
        "\"credentialHash\":\"" A64 "\",\"authHash\":\"xyz\"}]}}",
        NULL};
    for (size_t i = 0; bad[i]; i++)
        ck_assert_ptr_null(parse(bad[i], "n", NULL, PG_ERR_INVALID));
}
END_TEST

START_TEST(clear_items_and_the_empty_hash)
{
    const pg_pod_cred *s = NULL;
    /* Clear, with authHash (an email secret, unkeyed): both hashes kept. */
    pg_presented *p = parse("{\"r.io/a\":{\"kubernetesSecrets\":[{\"namespace\":\"n\",\"name\":"
                            "\"s\",\"uid\":\"u\",\"credentialHash\":\"" A64 "\",\"authHash\":\"" B64
                            "\"}]}}",
                            "n", NULL, PG_OK);
    ck_assert_uint_eq(pg_presented_secrets(p, "r.io/a", &s), 1);
    ck_assert_str_eq(s[0].credential_hash, A64);
    ck_assert_str_eq(s[0].auth_hash, B64);
    pg_presented_free(p);
    /* With a key, clear hashes are not the keyed form: no MAC covers them (test_annotation_mac
     * checks the MAC a pre-1.0.0 producer computed), the entry is rejected, with or without
     * authHash. */
    pg_mac_key *key = other_key();
    pg_annotation *a = pg_annotation_new("n", NULL);
    ck_assert_int_eq(pg_annotation_add_secret_hashes(a, "r.io/a", "n", "s", "u", A64, NULL, NULL),
                     PG_OK);
    char *clear = pg_annotation_dump(a, NULL);
    pg_annotation_free(a);
    json_t *j = json_loads(clear, 0, NULL);
    json_t *entry = json_object_get(j, "r.io/a");
    char mac[PG_MAC_HEX_LEN + 1];
    ck_assert_int_eq(pg_annotation_mac_of_entry(key, "n", "r.io/a", entry, mac, NULL),
                     PG_ERR_INVALID);
    json_object_set_new(entry, "hmac", json_string(A64));
    char *signed_v1 = json_dumps(j, JSON_COMPACT);
    p = parse(signed_v1, "n", key, PG_OK);
    ck_assert_uint_eq(pg_presented_secrets(p, "r.io/a", &s), 0);
    ck_assert_uint_eq(pg_presented_rejected(p, "r.io/a"), 1);
    pg_presented_free(p);
    json_object_set_new(json_array_get(json_object_get(entry, "kubernetesSecrets"), 0), "authHash",
                        json_string(B64));
    char *with_auth = json_dumps(j, JSON_COMPACT);
    p = parse(with_auth, "n", key, PG_OK);
    ck_assert_uint_eq(pg_presented_secrets(p, "r.io/a", &s), 0);
    ck_assert_uint_eq(pg_presented_rejected(p, "r.io/a"), 1);
    pg_presented_free(p);
    /* The empty-credential hash is presented as no hash at all. */
    p = parse("{\"r.io/a\":{\"kubernetesSecrets\":[{\"namespace\":\"n\",\"name\":\"s\",\"uid\":"
              "\"u\",\"credentialHash\":\"" PG_EMPTY_CREDENTIAL_HASH "\"}]}}",
              "n", NULL, PG_OK);
    ck_assert_uint_eq(pg_presented_secrets(p, "r.io/a", &s), 1);
    ck_assert_str_eq(s[0].credential_hash, "");
    pg_presented_free(p);
    free(clear);
    free(signed_v1);
    free(with_auth);
    json_decref(j);
    pg_mac_key_free(key);
}
END_TEST

START_TEST(matching_rules)
{
    pg_pod_cred presented = {"team-a", "regcred", "uid-a", A64, B64};
    pg_pod_cred by_hash = {"team-x", "other", "uid-x", A64, NULL};
    pg_pod_cred empty_p = {"team-a", "s", "u1", PG_EMPTY_CREDENTIAL_HASH, PG_EMPTY_CREDENTIAL_HASH};
    pg_pod_cred empty_r = {"team-b", "t", "u2", PG_EMPTY_CREDENTIAL_HASH, NULL};
    ck_assert(pg_pod_cred_matches(&presented, &by_hash)); /* the kubelet's rule */
    ck_assert(!pg_pod_cred_matches(&empty_p, &empty_r));  /* E0 proves nothing */
    char name[128];
    snprintf(name, sizeof name, "%s%s", PG_UNVERIFIED_NAME_PREFIX, B64);
    pg_pod_cred placeholder = {"team-a", name, "", B64, NULL};
    ck_assert(pg_pod_cred_is_placeholder(&placeholder));
    ck_assert(pg_pod_cred_matches(&presented, &placeholder)); /* same ns, auth hash */
    pg_pod_cred other_ns = {"team-b", "regcred", "uid-a", A64, B64};
    ck_assert(!pg_pod_cred_matches(&other_ns, &placeholder)); /* bound to its namespace */
    pg_pod_cred by_h_only = {"team-a", "regcred", "uid-a", B64, A64};
    ck_assert(!pg_pod_cred_matches(&by_h_only, &placeholder)); /* by A, never by H */
    pg_pod_cred sa = {"team-a", name, "", NULL, NULL};
    ck_assert(!pg_pod_cred_matches(&sa, &placeholder));
}
END_TEST

/* One registry, four entries of one secret: a password, an email one, a token-only one, {}. */
#define DC_ALL                                                                                  \
    "{\"auths\":{\"registry.example.com\":{\"username\":\"alice\",\"password\":\"s3cret\"},"   \
    "\"registry.example.com/team-a\":{\"username\":\"bob\",\"password\":\"pw\","               \
    "\"email\":\"b@example.com\"},"                                                             \
    "\"registry.example.com/team-a/app\":{\"identitytoken\":\"tok\"},"                         \
    "\"https://registry.example.com/team-a/app/x\":{}}}"

START_TEST(builder_presents_only_usable_entries)
{
    pg_dockerconfig *dc = NULL;
    pg_error err = {0};
    ck_assert_int_eq(
        pg_dockerconfig_parse_as(DC_ALL, strlen(DC_ALL), PG_DOCKERCONFIG_SNIFF, &dc, &err), PG_OK);
    pg_cred_hashes *pairs = NULL;
    size_t n = 0;
    ck_assert_int_eq(pg_dockerconfig_lookup(dc, IMAGE "/x:1", &pairs, &n, &err), PG_OK);
    ck_assert_uint_eq(n, 4); /* the keyring applies all four */
    size_t usable = 0;
    for (size_t i = 0; i < n; i++)
        usable += pairs[i].usable;
    ck_assert_uint_eq(usable, 2);
    pg_cred_hashes_free(pairs, n);
    pg_dockerconfig_free(dc);

    char h[PG_HASH_HEX_LEN + 1], a[PG_HASH_HEX_LEN + 1];
    ck_assert_int_eq(pg_credential_hash("bob", "pw", "b@example.com", h, NULL), PG_OK);
    ck_assert_int_eq(pg_credential_hash("bob", "pw", "", a, NULL), PG_OK);
    pg_annotation *ann = pg_annotation_new("team-a", &err);
    ck_assert_int_eq(pg_annotation_add_image(ann, IMAGE "/x:1", NULL, &err), PG_OK);
    ck_assert_int_eq(pg_annotation_add_dockerconfig(ann, "team-a", "regcred", "uid-a", DC_ALL,
                                                    strlen(DC_ALL), &err),
                     PG_OK);
    char *text = pg_annotation_dump(ann, &err);
    ck_assert_ptr_null(strstr(text, PG_EMPTY_CREDENTIAL_HASH));
    char *want = tu_sprintf("\"credentialHash\":\"%s\",\"authHash\":\"%s\"", h, a);
    ck_assert_ptr_nonnull(strstr(text, want));
    json_t *j = json_loads(text, 0, NULL);
    ck_assert_uint_eq(
        json_array_size(json_object_get(json_object_get(j, IMAGE "/x"), "kubernetesSecrets")), 2);
    json_decref(j);
    free(text);

    /* Signed: every hash sealed, and the verifier opens them to the same pair. */
    pg_mac_key *key = other_key();
    ck_assert_int_eq(pg_annotation_sign(ann, key, &err), PG_OK);
    text = pg_annotation_dump(ann, &err);
    ck_assert_ptr_null(strstr(text, h));
    ck_assert_ptr_null(strstr(text, a));
    ck_assert_ptr_null(strstr(text, "credentialHash"));
    pg_presented *p = parse(text, "team-a", key, PG_OK);
    const pg_pod_cred *s = NULL;
    ck_assert_uint_eq(pg_presented_secrets(p, IMAGE "/x", &s), 2);
    bool found = false;
    for (size_t i = 0; i < 2; i++)
        found = found || (strcmp(s[i].credential_hash, h) == 0 && strcmp(s[i].auth_hash, a) == 0);
    ck_assert(found);
    pg_presented_free(p);
    free(text);
    free(want);
    pg_mac_key_free(key);
    pg_annotation_free(ann);
}
END_TEST

START_TEST(dockerconfig_errors_quote_no_secret_bytes)
{
    static const char *const bad[] = {
        "{\"auths\":{\"r.io\":{\"password\":\"Sup3rS3cretPW\" \"x\"}}}",
        "{\"auths\":{\"r.io\":{\"password\":\"Sup3rS3cretPW\x01\"}}}",
        "{\"auths\":{\"r.io\":{\"auth\":\"Sup3rS3cretPW!!\"}}}",
        "{\"auths\":{\"r.io\":{\"password\":Sup3rS3cretPW}}}",
        NULL};
    for (size_t i = 0; bad[i]; i++) {
        pg_annotation *ann = pg_annotation_new("team-a", NULL);
        ck_assert_int_eq(pg_annotation_add_image(ann, "r.io/a", NULL, NULL), PG_OK);
        pg_error err = {0};
        ck_assert_int_ne(
            pg_annotation_add_dockerconfig(ann, "team-a", "s", "u", bad[i], strlen(bad[i]), &err),
            PG_OK);
        ck_assert_msg(!strstr(err.message, "Sup3r") && !strstr(err.message, "S3cret"),
                      "error quotes the secret: %s", err.message);
        pg_annotation_free(ann);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("annotation_v2");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, seals_like_the_independent_implementation);
    tcase_add_test(tc, opens_only_for_its_item_key_and_bytes);
    tcase_add_test(tc, v2_entry_opens_after_its_mac);
    tcase_add_test(tc, the_previous_key_opens_what_it_sealed);
    tcase_add_test(tc, malformed_items_are_refused);
    tcase_add_test(tc, clear_items_and_the_empty_hash);
    tcase_add_test(tc, matching_rules);
    tcase_add_test(tc, builder_presents_only_usable_entries);
    tcase_add_test(tc, dockerconfig_errors_quote_no_secret_bytes);
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
