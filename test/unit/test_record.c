/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of plugin/records/record.c: kubelet record codec, strict decoding, merge rules. */
#include "engine_testing.h"
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define H_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define H_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define H_C "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define REF "sha256:1111111111111111111111111111111111111111111111111111111111111111"

/* A kubelet-written record in the kubelet's exact (compact, ordered) form. */
#define FULL_RECORD(api)                                                                          \
    "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"" api "\","                                 \
    "\"lastUpdatedTime\":\"2025-03-04T05:06:07Z\",\"imageRef\":\"" REF "\","                      \
    "\"credentialMapping\":{"                                                                     \
    "\"docker.io/library/nginx\":{\"nodePodsAccessible\":true},"                                  \
    "\"registry.example.com/team-a/app\":{\"kubernetesSecrets\":["                                \
    "{\"uid\":\"uid-a\",\"namespace\":\"team-a\",\"name\":\"regcred\",\"credentialHash\":\"" H_A \
    "\"},"                                                                                        \
    "{\"uid\":\"uid-b\",\"namespace\":\"team-b\",\"name\":\"regcred\",\"credentialHash\":\"\"}]," \
    "\"kubernetesServiceAccounts\":[{\"uid\":\"uid-sa\",\"namespace\":\"team-a\",\"name\":"       \
    "\"builder\"}]}}}"

static pg_record *parse_ok(const char *text)
{
    pg_record *rec = NULL;
    pg_error err = {0};
    int rc = pg_record_parse(text, strlen(text), &rec, &err);
    ck_assert_msg(rc == PG_OK, "parse failed: %s", err.message);
    return rec;
}

static void parse_bad(const char *text, const char *expect_in_message)
{
    pg_record *rec = (pg_record *)1;
    pg_error err = {0};
    int rc = pg_record_parse(text, strlen(text), &rec, &err);
    ck_assert_msg(rc == PG_ERR_CORRUPT, "expected corrupt (%d) for %s, got %d: %s", PG_ERR_CORRUPT,
                  text, rc, err.message);
    ck_assert_ptr_null(rec);
    ck_assert_int_eq(err.code, PG_ERR_CORRUPT);
    if (expect_in_message)
        ck_assert_msg(strstr(err.message, expect_in_message) != NULL, "message \"%s\" lacks \"%s\"",
                      err.message, expect_in_message);
}

START_TEST(round_trip_v1alpha1)
{
    const char *text = FULL_RECORD(PG_API_V1ALPHA1);
    pg_record *rec = parse_ok(text);
    ck_assert_str_eq(pg_record_api_version(rec), PG_API_V1ALPHA1);
    ck_assert_str_eq(pg_record_image_ref(rec), REF);
    ck_assert_int_eq(pg_record_last_updated(rec), 1741064767);
    ck_assert_ptr_null(pg_record_dir(rec));
    char *out = pg_record_to_json(rec, NULL);
    ck_assert_str_eq(out, text);
    free(out);
    pg_record_free(rec);
}
END_TEST

START_TEST(round_trip_v1beta1)
{
    const char *text = FULL_RECORD(PG_API_V1BETA1);
    pg_record *rec = parse_ok(text);
    ck_assert_str_eq(pg_record_api_version(rec), PG_API_V1BETA1);
    char *out = pg_record_to_json(rec, NULL);
    ck_assert_str_eq(out, text);
    free(out);
    /* Re-serialised under the other version, only apiVersion changes. */
    char *alpha = NULL;
    ck_assert_int_eq(pg_record_serialize(rec, PG_API_V1ALPHA1, &alpha, NULL), PG_OK);
    ck_assert_str_eq(alpha, FULL_RECORD(PG_API_V1ALPHA1));
    free(alpha);
    pg_record_free(rec);
}
END_TEST

START_TEST(decoded_content)
{
    pg_record *rec = parse_ok(FULL_RECORD(PG_API_V1ALPHA1));
    ck_assert_uint_eq(rec->n_maps, 2);
    const pg_rec_mapping *m = pg_record_find(rec, "registry.example.com/team-a/app");
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(m->n_secrets, 2);
    ck_assert_str_eq(m->secrets[0].namespace_, "team-a");
    ck_assert_str_eq(m->secrets[0].credential_hash, H_A);
    ck_assert_str_eq(m->secrets[1].credential_hash, "");
    ck_assert_uint_eq(m->n_sas, 1);
    ck_assert_str_eq(m->sas[0].name, "builder");
    ck_assert(!m->node_pods_accessible);
    m = pg_record_find(rec, "docker.io/library/nginx");
    ck_assert_ptr_nonnull(m);
    ck_assert(m->node_pods_accessible);
    ck_assert_ptr_null(pg_record_find(rec, "docker.io/library/redis"));
    pg_record_free(rec);
}
END_TEST

START_TEST(minimal_record_and_mapping_order)
{
    /* No credentialMapping (omitempty); mappings arrive unsorted and are sorted. */
    pg_record *rec = parse_ok("{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"" PG_API_V1ALPHA1
                              "\",\"lastUpdatedTime\":\"2025-01-01T00:00:00.5+01:00\","
                              "\"imageRef\":\"x\"}");
    ck_assert_uint_eq(rec->n_maps, 0);
    ck_assert_int_eq(pg_record_last_updated(rec), 1735686000);
    pg_record_free(rec);
    rec = parse_ok("{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"" PG_API_V1ALPHA1
                   "\",\"lastUpdatedTime\":\"2025-01-01T00:00:00Z\",\"imageRef\":\"x\","
                   "\"credentialMapping\":{\"z/b\":{},\"a/c\":{\"nodePodsAccessible\":false}}}");
    ck_assert_str_eq(rec->maps[0].image_name, "a/c");
    ck_assert_str_eq(rec->maps[1].image_name, "z/b");
    char *out = pg_record_to_json(rec, NULL);
    ck_assert_str_eq(out, "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"" PG_API_V1ALPHA1
                          "\",\"lastUpdatedTime\":\"2025-01-01T00:00:00Z\",\"imageRef\":\"x\","
                          "\"credentialMapping\":{\"a/c\":{},\"z/b\":{}}}");
    free(out);
    pg_record_free(rec);
}
END_TEST

#define HEAD "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"" PG_API_V1ALPHA1 "\","
#define TIME "\"lastUpdatedTime\":\"2025-01-01T00:00:00Z\","
#define HEAD_REF HEAD TIME "\"imageRef\":\"x\","
#define MAP(body) HEAD_REF "\"credentialMapping\":{\"a/b\":" body "}}"
#define SECRET(fields) MAP("{\"kubernetesSecrets\":[" fields "]}")
#define SA(fields) MAP("{\"kubernetesServiceAccounts\":[" fields "]}")

START_TEST(rejects_bad_json)
{
    const char *full = FULL_RECORD(PG_API_V1ALPHA1);
    /* Every proper prefix of a valid record is invalid. */
    for (size_t n = 0; n < strlen(full); n++) {
        pg_record *rec = (pg_record *)1;
        pg_error err = {0};
        ck_assert_int_eq(pg_record_parse(full, n, &rec, &err), PG_ERR_CORRUPT);
        ck_assert_ptr_null(rec);
    }
    parse_bad("", "invalid JSON");
    parse_bad("[]", "not a JSON object");
    parse_bad("null", NULL);
    parse_bad(HEAD_REF "\"credentialMapping\":{}} {}", "invalid JSON");
    parse_bad("{\"kind\":\"ImagePulledRecord\\u0000\"}", NULL);
}
END_TEST

START_TEST(rejects_duplicate_keys)
{
    parse_bad(HEAD TIME "\"imageRef\":\"x\",\"imageRef\":\"y\"}", "invalid JSON");
    parse_bad(HEAD_REF "\"credentialMapping\":{\"a/b\":{},\"a/b\":{}}}", "invalid JSON");
    parse_bad(MAP("{\"nodePodsAccessible\":true,\"nodePodsAccessible\":true}"), NULL);
    parse_bad(SECRET("{\"uid\":\"u\",\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"s\","
                     "\"credentialHash\":\"\"}"),
              NULL);
}
END_TEST

START_TEST(rejects_unknown_fields)
{
    parse_bad(HEAD_REF "\"extra\":1}", "unknown field \"extra\"");
    parse_bad(HEAD_REF "\"ImageRef\":\"x\"}", "unknown field"); /* case-sensitive, like the kubelet */
    parse_bad(MAP("{\"kubernetesSecretCoordinates\":[]}"), "unknown field");
    parse_bad(SECRET("{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"s\",\"credentialHash\":\"\","
                     "\"password\":\"p\"}"),
              "unknown field \"password\"");
    parse_bad(SA("{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"s\",\"token\":\"t\"}"),
              "unknown field \"token\"");
}
END_TEST

START_TEST(rejects_wrong_types)
{
    parse_bad("{\"kind\":1,\"apiVersion\":\"" PG_API_V1ALPHA1 "\"}", "not a string");
    parse_bad(HEAD TIME "\"imageRef\":7}", "\"imageRef\" is not a string");
    parse_bad(HEAD TIME "\"imageRef\":null}", "not a string");
    parse_bad(HEAD "\"lastUpdatedTime\":0,\"imageRef\":\"x\"}", "not a string");
    parse_bad(HEAD_REF "\"credentialMapping\":[]}", "not an object");
    parse_bad(HEAD_REF "\"credentialMapping\":null}", "not an object");
    parse_bad(MAP("[]"), "not a JSON object");
    parse_bad(MAP("{\"kubernetesSecrets\":{}}"), "not an array");
    parse_bad(MAP("{\"kubernetesServiceAccounts\":\"x\"}"), "not an array");
    parse_bad(MAP("{\"nodePodsAccessible\":\"true\"}"), "not a boolean");
    parse_bad(MAP("{\"nodePodsAccessible\":1}"), "not a boolean");
    parse_bad(SECRET("\"regcred\""), "not a JSON object");
    parse_bad(SECRET("{\"uid\":1,\"namespace\":\"n\",\"name\":\"s\",\"credentialHash\":\"\"}"),
              "\"uid\" is not a string");
    parse_bad(SA("{\"uid\":\"u\",\"namespace\":[],\"name\":\"s\"}"), "not a string");
}
END_TEST

START_TEST(rejects_missing_and_bad_values)
{
    parse_bad("{\"apiVersion\":\"" PG_API_V1ALPHA1 "\"}", "\"kind\" is missing");
    parse_bad("{\"kind\":\"ImagePullIntent\",\"apiVersion\":\"" PG_API_V1ALPHA1 "\"}",
              "expected \"ImagePulledRecord\"");
    parse_bad("{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"kubelet.config.k8s.io/v1\"}",
              "unsupported apiVersion");
    parse_bad(HEAD TIME "\"credentialMapping\":{}}", "\"imageRef\" is missing");
    parse_bad(HEAD TIME "\"imageRef\":\"\"}", "empty imageRef");
    parse_bad(HEAD "\"imageRef\":\"x\"}", "\"lastUpdatedTime\" is missing");
    parse_bad(HEAD "\"lastUpdatedTime\":\"yesterday\",\"imageRef\":\"x\"}", "RFC 3339");
    parse_bad(HEAD_REF "\"credentialMapping\":{\"\":{}}}", "empty image name");
    parse_bad(SECRET("{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"s\"}"),
              "\"credentialHash\" is missing");
    parse_bad(SA("{\"uid\":\"u\",\"name\":\"s\"}"), "\"namespace\" is missing");
    /* credentialHash: empty or 64 lowercase hex. */
    parse_bad(SECRET("{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"s\",\"credentialHash\":\"abc\"}"),
              "64 lowercase hex");
    parse_bad(SECRET("{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"s\",\"credentialHash\":\"" H_A
                     "a\"}"),
              "64 lowercase hex");
    parse_bad(SECRET("{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"s\",\"credentialHash\":"
                     "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}"),
              "64 lowercase hex");
    parse_bad(SECRET("{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"s\",\"credentialHash\":"
                     "\"gggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggg\"}"),
              "64 lowercase hex");
    pg_record *rec = parse_ok(SECRET("{\"uid\":\"u\",\"namespace\":\"n\",\"name\":\"s\","
                                     "\"credentialHash\":\"" H_C "\"}"));
    pg_record_free(rec);
}
END_TEST

START_TEST(intent_codec)
{
    char *image = NULL;
    pg_error err = {0};
    char *text = NULL;
    ck_assert_int_eq(pg_intent_serialize("nginx:1.25", NULL, &text, &err), PG_OK);
    ck_assert_str_eq(text, "{\"kind\":\"ImagePullIntent\",\"apiVersion\":\"" PG_API_V1ALPHA1
                           "\",\"image\":\"nginx:1.25\"}");
    ck_assert_int_eq(pg_intent_parse(text, strlen(text), &image, &err), PG_OK);
    ck_assert_str_eq(image, "nginx:1.25");
    free(image);
    free(text);
    ck_assert_int_eq(pg_intent_serialize("nginx", PG_API_V1BETA1, &text, &err), PG_OK);
    ck_assert_int_eq(pg_intent_parse(text, strlen(text), &image, &err), PG_OK);
    free(image);
    free(text);
    ck_assert_int_eq(pg_intent_serialize("nginx", "v2", &text, &err), PG_ERR_INVALID);
    ck_assert_ptr_null(text);
    ck_assert_int_eq(err.code, PG_ERR_INVALID);
    /* Without an error to fill, the code still says why. */
    ck_assert_int_eq(pg_intent_serialize("nginx", "v2", &text, NULL), PG_ERR_INVALID);
    ck_assert_int_eq(pg_intent_parse("{", 1, &image, NULL), PG_ERR_CORRUPT);
    pg_record *rec = NULL;
    ck_assert_int_eq(pg_record_parse("[1]", 3, &rec, NULL), PG_ERR_CORRUPT);
    ck_assert_ptr_null(rec);

    static const char *const bad[] = {
        "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"" PG_API_V1ALPHA1 "\",\"image\":\"x\"}",
        "{\"kind\":\"ImagePullIntent\",\"apiVersion\":\"v1\",\"image\":\"x\"}",
        "{\"kind\":\"ImagePullIntent\",\"apiVersion\":\"" PG_API_V1ALPHA1 "\"}",
        "{\"kind\":\"ImagePullIntent\",\"apiVersion\":\"" PG_API_V1ALPHA1 "\",\"image\":\"\"}",
        "{\"kind\":\"ImagePullIntent\",\"apiVersion\":\"" PG_API_V1ALPHA1 "\",\"image\":3}",
        "{\"kind\":\"ImagePullIntent\",\"apiVersion\":\"" PG_API_V1ALPHA1
        "\",\"image\":\"x\",\"x\":1}",
        "{\"kind\":\"ImagePullIntent\",\"apiVersion\":\"" PG_API_V1ALPHA1
        "\",\"image\":\"x\",\"image\":\"y\"}",
        "{\"kind\":\"ImagePullIntent\"",
        "[]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        image = (char *)1;
        ck_assert_msg(pg_intent_parse(bad[i], strlen(bad[i]), &image, &err) == PG_ERR_CORRUPT,
                      "accepted %s", bad[i]);
        ck_assert_ptr_null(image);
    }
}
END_TEST

/* ------------------------------------------------------------ merging */

static pg_pull_credentials secrets_creds(const pg_secret *s, size_t n)
{
    return (pg_pull_credentials){.secrets = s, .n_secrets = n};
}

static char *json_of(const pg_record *rec)
{
    char *text = NULL;
    ck_assert_int_eq(pg_record_serialize(rec, NULL, &text, NULL), PG_OK);
    ck_assert_ptr_nonnull(text);
    return text;
}

/* --------------------------------------------------- keys as the pod wrote them */

static void expect_key_name(const char *key, const char *want)
{
    char *name = (char *)1;
    ck_assert_int_eq(pg_record_key_name(key, &name), PG_OK);
    if (!want)
        ck_assert_msg(name == NULL, "key %s: got %s, want itself", key, name);
    else
        ck_assert_msg(name && strcmp(name, want) == 0, "key %s: got %s, want %s", key,
                      name ? name : "(itself)", want);
    free(name);
}

START_TEST(key_names)
{
    /* The kubelet keys by the image as written, tag and digest removed. */
    expect_key_name("nginx", "docker.io/library/nginx");
    expect_key_name("library/nginx", "docker.io/library/nginx");
    expect_key_name("docker.io/nginx", "docker.io/library/nginx");
    expect_key_name("index.docker.io/library/nginx", "docker.io/library/nginx");
    expect_key_name("index.docker.io/secretorg/myimage", "docker.io/secretorg/myimage");
    expect_key_name("secretorg/myimage", "docker.io/secretorg/myimage");
    expect_key_name("testing", "docker.io/library/testing");
    /* Already normalised, or no plain image name: compared as written. */
    expect_key_name("docker.io/library/nginx", NULL);
    expect_key_name("docker.io/secretorg/myimage", NULL);
    expect_key_name("registry.example.com/team-a/app", NULL);
    expect_key_name("localhost/app", NULL);
    expect_key_name("localhost:5000/app", NULL);
    expect_key_name("nginx:1.25", NULL);
    expect_key_name("nginx@sha256:" H_A, NULL);
    expect_key_name("Nginx", NULL);
    expect_key_name("test-image1", "docker.io/library/test-image1");
}
END_TEST

#define SECRET_OF(ns, uid, hash)                                                                   \
    "{\"uid\":\"" uid "\",\"namespace\":\"" ns                                                     \
    "\",\"name\":\"regcred\",\"credentialHash\":\"" hash "\"}"

START_TEST(find_by_image_across_spellings)
{
    const char *text =
        "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"" PG_API_V1ALPHA1 "\","
        "\"lastUpdatedTime\":\"2025-01-01T00:00:00Z\",\"imageRef\":\"" REF "\","
        "\"credentialMapping\":{"
        "\"Weird\":{\"kubernetesSecrets\":[" SECRET_OF(
            "w", "u5",
            H_A) "]},"
                 "\"docker.io/library/nginx\":{\"kubernetesSecrets\":[" SECRET_OF(
                     "b", "u2",
                     H_B) "]},"
                          "\"index.docker.io/library/redis\":{\"nodePodsAccessible\":true},"
                          "\"nginx\":{\"kubernetesSecrets\":[" SECRET_OF(
                              "a", "u1",
                              H_A) "],"
                                   "\"kubernetesServiceAccounts\":[{\"uid\":\"s\",\"namespace\":"
                                   "\"a\",\"name\":\"sa\"}]},"
                                   "\"registry.example.com/x:tag\":{\"nodePodsAccessible\":true},"
                                   "\"secretorg/myimage\":{\"kubernetesSecrets\":[" SECRET_OF(
                                       "c", "u3", H_C) "]}}}";
    pg_record *rec = parse_ok(text);
    ck_assert_uint_eq(rec->n_maps, 6);
    /* nginx and docker.io/library/nginx are one image: the union of both keys. */
    const pg_rec_mapping *m = pg_record_find(rec, "docker.io/library/nginx");
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(m->n_secrets, 2);
    ck_assert_uint_eq(m->n_sas, 1);
    ck_assert(!m->node_pods_accessible);
    ck_assert_ptr_eq(pg_record_find(rec, "nginx"), m); /* a key as written finds its image */
    m = pg_record_find(rec, "docker.io/secretorg/myimage");
    ck_assert_msg(m && m->n_secrets == 1 && strcmp(m->secrets[0].uid, "u3") == 0, "secretorg");
    m = pg_record_find(rec, "docker.io/library/redis");
    ck_assert(m && m->node_pods_accessible);
    ck_assert_ptr_nonnull(pg_record_find(rec, "Weird")); /* not an image name: as written */
    ck_assert_ptr_null(pg_record_find(rec, "registry.example.com/x"));
    ck_assert_ptr_null(pg_record_find(rec, "docker.io/library/other"));
    /* The keys stay as the kubelet wrote them. */
    char *out = pg_record_to_json(rec, NULL);
    ck_assert_str_eq(out, text);
    free(out);
    pg_record_free(rec);
}
END_TEST

START_TEST(merge_pull_folds_spellings_of_its_image)
{
    pg_record *rec = parse_ok(
        "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"" PG_API_V1ALPHA1 "\","
        "\"lastUpdatedTime\":\"2025-01-01T00:00:00Z\",\"imageRef\":\"" REF "\","
        "\"credentialMapping\":{"
        "\"docker.io/secretorg/myimage\":{\"kubernetesSecrets\":[" SECRET_OF(
            "a", "u1", H_B) "]},"
                            "\"index.docker.io/secretorg/myimage\":{\"kubernetesServiceAccounts\":"
                            "[{\"uid\":\"s\",\"namespace\":\"a\",\"name\":\"sa\"}]},"
                            "\"nginx\":{\"nodePodsAccessible\":true},"
                            "\"secretorg/myimage\":{\"kubernetesSecrets\":[" SECRET_OF(
                                "a", "u1", H_A) "," SECRET_OF("b", "u2", H_A) "]}}}");
    pg_secret s[] = {{"c", "regcred", "u3", H_C}};
    pg_pull_credentials c = secrets_creds(s, 1);
    ck_assert_int_eq(pg_record_merge_pull(rec, "docker.io/secretorg/myimage", &c, NULL, NULL, NULL), PG_OK);
    char *text = json_of(rec);
    /* One key for the image; the normalised key's hash of a:u1 kept; nginx untouched. */
    ck_assert_str_eq(
        text, "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"" PG_API_V1ALPHA1 "\","
              "\"lastUpdatedTime\":\"2025-01-01T00:00:00Z\",\"imageRef\":\"" REF "\","
              "\"credentialMapping\":{\"docker.io/secretorg/"
              "myimage\":{\"kubernetesSecrets\":[" SECRET_OF("a", "u1", H_B) "," SECRET_OF(
                  "b", "u2",
                  H_A) "," SECRET_OF("c", "u3",
                                     H_C) "],\"kubernetesServiceAccounts\":"
                                          "[{\"uid\":\"s\",\"namespace\":\"a\",\"name\":\"sa\"}]},"
                                          "\"nginx\":{\"nodePodsAccessible\":true}}}");
    free(text);
    /* A spelling that was node-accessible makes the image so. */
    ck_assert_int_eq(pg_record_merge_pull(rec, "docker.io/library/nginx", &c, NULL, NULL, NULL), PG_OK);
    ck_assert_uint_eq(rec->n_maps, 2);
    const pg_rec_mapping *m = pg_record_find(rec, "docker.io/library/nginx");
    ck_assert(m && m->node_pods_accessible && !m->n_secrets);
    ck_assert_str_eq(rec->maps[0].image_name, "docker.io/library/nginx");
    ck_assert_ptr_null(rec->by_name); /* every key is its own name now */
    pg_record_free(rec);
}
END_TEST

START_TEST(merge_pull_without_credentials_maps_the_name)
{
    pg_record *rec = pg_record_new(REF, NULL);
    rec->last_updated = 0;
    ck_assert_int_eq(pg_record_merge_pull(rec, "docker.io/library/app", NULL, NULL, NULL, NULL), PG_OK);
    pg_pull_credentials none = {0};
    ck_assert_int_eq(pg_record_merge_pull(rec, "docker.io/library/app", &none, NULL, NULL, NULL), PG_OK);
    char *text = json_of(rec);
    ck_assert_str_eq(text, "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"" PG_API_V1ALPHA1
                           "\",\"lastUpdatedTime\":\"1970-01-01T00:00:00Z\",\"imageRef\":\"" REF
                           "\",\"credentialMapping\":{\"docker.io/library/app\":{}}}");
    free(text);
    /* The kubelet's own merge still records nothing for nothing. */
    ck_assert_int_eq(pg_record_merge(rec, "docker.io/library/other", &none, NULL), PG_OK);
    ck_assert_ptr_null(pg_record_find(rec, "docker.io/library/other"));
    pg_record_free(rec);
}
END_TEST

START_TEST(merge_secrets_sorted_newest_hash_wins)
{
    pg_record *rec = pg_record_new(REF, NULL);
    rec->last_updated = 0;
    pg_secret first[] = {{"team-b", "regcred", "u2", H_A},
                         {"team-a", "zeta", "u1", H_A},
                         {"team-a", "alpha", "u3", NULL}};
    pg_pull_credentials c = secrets_creds(first, 3);
    ck_assert_int_eq(pg_record_merge(rec, "r/app", &c, NULL), PG_OK);
    pg_secret rotated[] = {{"team-b", "regcred", "u2", H_B}, {"team-a", "alpha", "u0", H_C}};
    c = secrets_creds(rotated, 2);
    ck_assert_int_eq(pg_record_merge(rec, "r/app", &c, NULL), PG_OK);
    char *text = json_of(rec);
    ck_assert_str_eq(
        text, "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"" PG_API_V1ALPHA1
              "\",\"lastUpdatedTime\":\"1970-01-01T00:00:00Z\",\"imageRef\":\"" REF
              "\",\"credentialMapping\":{\"r/app\":{\"kubernetesSecrets\":["
              "{\"uid\":\"u0\",\"namespace\":\"team-a\",\"name\":\"alpha\",\"credentialHash\":\"" H_C
              "\"},"
              "{\"uid\":\"u3\",\"namespace\":\"team-a\",\"name\":\"alpha\",\"credentialHash\":\"\"},"
              "{\"uid\":\"u1\",\"namespace\":\"team-a\",\"name\":\"zeta\",\"credentialHash\":\"" H_A
              "\"},"
              "{\"uid\":\"u2\",\"namespace\":\"team-b\",\"name\":\"regcred\",\"credentialHash\":"
              "\"" H_B "\"}]}}}");
    free(text);
    pg_record_free(rec);
}
END_TEST

START_TEST(merge_node_accessible_clears_and_sticks)
{
    pg_record *rec = pg_record_new(REF, NULL);
    pg_secret s[] = {{"ns", "a", "u", H_A}};
    pg_service_account sa[] = {{"ns", "builder", "u"}};
    pg_pull_credentials c = {.secrets = s, .n_secrets = 1, .service_accounts = sa,
                             .n_service_accounts = 1};
    ck_assert_int_eq(pg_record_merge(rec, "r/app", &c, NULL), PG_OK);
    const pg_rec_mapping *m = pg_record_find(rec, "r/app");
    ck_assert_uint_eq(m->n_secrets, 1);
    ck_assert_uint_eq(m->n_sas, 1);
    pg_pull_credentials npa = {.node_pods_accessible = 1};
    ck_assert_int_eq(pg_record_merge(rec, "r/app", &npa, NULL), PG_OK);
    m = pg_record_find(rec, "r/app");
    ck_assert(m->node_pods_accessible);
    ck_assert_uint_eq(m->n_secrets, 0);
    ck_assert_uint_eq(m->n_sas, 0);
    /* Later secret pulls leave an accessible mapping accessible (kubelet behaviour). */
    ck_assert_int_eq(pg_record_merge(rec, "r/app", &c, NULL), PG_OK);
    m = pg_record_find(rec, "r/app");
    ck_assert(m->node_pods_accessible);
    ck_assert_uint_eq(m->n_secrets, 0);
    /* nodePodsAccessible together with secrets on a new mapping: lists dropped. */
    c.node_pods_accessible = 1;
    ck_assert_int_eq(pg_record_merge(rec, "r/other", &c, NULL), PG_OK);
    m = pg_record_find(rec, "r/other");
    ck_assert(m->node_pods_accessible);
    ck_assert_uint_eq(m->n_secrets, 0);
    char *text = json_of(rec);
    ck_assert_ptr_nonnull(strstr(text, "\"credentialMapping\":{\"r/app\":{\"nodePodsAccessible\":"
                                       "true},\"r/other\":{\"nodePodsAccessible\":true}}"));
    free(text);
    pg_record_free(rec);
}
END_TEST

START_TEST(merge_service_accounts_as_set)
{
    pg_record *rec = pg_record_new(REF, NULL);
    pg_service_account sa[] = {{"ns", "b", "u2"}, {"ns", "a", "u1"}, {"ns", "b", "u2"}};
    pg_pull_credentials c = {.service_accounts = sa, .n_service_accounts = 3};
    ck_assert_int_eq(pg_record_merge(rec, "r/app", &c, NULL), PG_OK);
    ck_assert_int_eq(pg_record_merge(rec, "r/app", &c, NULL), PG_OK);
    const pg_rec_mapping *m = pg_record_find(rec, "r/app");
    ck_assert_uint_eq(m->n_sas, 2);
    ck_assert_str_eq(m->sas[0].name, "a");
    ck_assert_str_eq(m->sas[1].name, "b");
    char *text = json_of(rec);
    ck_assert_ptr_nonnull(strstr(text, "{\"r/app\":{\"kubernetesServiceAccounts\":[{\"uid\":\"u1\","
                                       "\"namespace\":\"ns\",\"name\":\"a\"},{\"uid\":\"u2\","
                                       "\"namespace\":\"ns\",\"name\":\"b\"}]}}"));
    free(text);
    pg_record_free(rec);
}
END_TEST

START_TEST(merge_mappings_sorted_and_empty_creds)
{
    pg_record *rec = pg_record_new(REF, NULL);
    pg_pull_credentials npa = {.node_pods_accessible = 1};
    const char *names[] = {"m/x", "a/x", "z/x", "c/x"};
    for (size_t i = 0; i < 4; i++)
        ck_assert_int_eq(pg_record_merge(rec, names[i], &npa, NULL), PG_OK);
    ck_assert_uint_eq(rec->n_maps, 4);
    for (size_t i = 1; i < rec->n_maps; i++)
        ck_assert_int_lt(strcmp(rec->maps[i - 1].image_name, rec->maps[i].image_name), 0);
    pg_pull_credentials none = {0};
    ck_assert_int_eq(pg_record_merge(rec, "q/x", &none, NULL), PG_OK);
    ck_assert_int_eq(pg_record_merge(rec, "q/x", NULL, NULL), PG_OK);
    ck_assert_ptr_null(pg_record_find(rec, "q/x")); /* nothing to record: no mapping */
    pg_record_free(rec);
}
END_TEST

START_TEST(merge_normalises_unsorted_input)
{
    pg_record *rec = parse_ok(SECRET(
        "{\"uid\":\"u\",\"namespace\":\"z\",\"name\":\"s\",\"credentialHash\":\"\"},"
        "{\"uid\":\"u\",\"namespace\":\"a\",\"name\":\"s\",\"credentialHash\":\"\"},"
        "{\"uid\":\"u\",\"namespace\":\"z\",\"name\":\"s\",\"credentialHash\":\"\"}"));
    pg_secret s[] = {{"m", "s", "u", H_A}};
    pg_pull_credentials c = secrets_creds(s, 1);
    ck_assert_int_eq(pg_record_merge(rec, "a/b", &c, NULL), PG_OK);
    const pg_rec_mapping *m = pg_record_find(rec, "a/b");
    ck_assert_uint_eq(m->n_secrets, 3);
    ck_assert_str_eq(m->secrets[0].namespace_, "a");
    ck_assert_str_eq(m->secrets[1].namespace_, "m");
    ck_assert_str_eq(m->secrets[2].namespace_, "z");
    pg_record_free(rec);
}
END_TEST

START_TEST(merge_rejects_bad_input)
{
    pg_record *rec = pg_record_new(REF, NULL);
    pg_error err = {0};
    pg_secret bad_hash[] = {{"ns", "a", "u", "ABC"}};
    pg_pull_credentials c = secrets_creds(bad_hash, 1);
    ck_assert_int_eq(pg_record_merge(rec, "r/app", &c, &err), PG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "credentialHash"));
    pg_secret no_ns[] = {{NULL, "a", "u", H_A}};
    c = secrets_creds(no_ns, 1);
    ck_assert_int_eq(pg_record_merge(rec, "r/app", &c, &err), PG_ERR_INVALID);
    pg_service_account no_name[] = {{"ns", "", "u"}};
    c = (pg_pull_credentials){.service_accounts = no_name, .n_service_accounts = 1};
    ck_assert_int_eq(pg_record_merge(rec, "r/app", &c, &err), PG_ERR_INVALID);
    ck_assert_int_eq(pg_record_merge(rec, "", &c, &err), PG_ERR_INVALID);
    ck_assert_uint_eq(rec->n_maps, 0);
    /* Invalid UTF-8 is refused at serialisation, not silently rewritten. */
    pg_secret bad_utf8[] = {{"ns", "\xff", "u", H_A}};
    c = secrets_creds(bad_utf8, 1);
    ck_assert_int_eq(pg_record_merge(rec, "r/app", &c, &err), PG_OK);
    char *text = (char *)"unchanged";
    ck_assert_int_eq(pg_record_serialize(rec, NULL, &text, &err), PG_ERR_INVALID);
    ck_assert_ptr_null(text);
    ck_assert_int_eq(err.code, PG_ERR_INVALID);
    ck_assert_int_eq(pg_record_serialize(rec, NULL, &text, NULL), PG_ERR_INVALID);
    pg_record_free(rec);
    ck_assert_ptr_null(pg_record_new("", &err));
}
END_TEST

static Suite *record_suite(void)
{
    Suite *s = suite_create("record");
    TCase *codec = tcase_create("codec");
    tcase_add_test(codec, round_trip_v1alpha1);
    tcase_add_test(codec, round_trip_v1beta1);
    tcase_add_test(codec, decoded_content);
    tcase_add_test(codec, minimal_record_and_mapping_order);
    tcase_add_test(codec, intent_codec);
    suite_add_tcase(s, codec);
    TCase *strict = tcase_create("strict");
    tcase_add_test(strict, rejects_bad_json);
    tcase_add_test(strict, rejects_duplicate_keys);
    tcase_add_test(strict, rejects_unknown_fields);
    tcase_add_test(strict, rejects_wrong_types);
    tcase_add_test(strict, rejects_missing_and_bad_values);
    suite_add_tcase(s, strict);
    TCase *merge = tcase_create("merge");
    tcase_add_test(merge, merge_secrets_sorted_newest_hash_wins);
    tcase_add_test(merge, merge_node_accessible_clears_and_sticks);
    tcase_add_test(merge, merge_service_accounts_as_set);
    tcase_add_test(merge, merge_mappings_sorted_and_empty_creds);
    tcase_add_test(merge, merge_normalises_unsorted_input);
    tcase_add_test(merge, merge_rejects_bad_input);
    tcase_add_test(merge, merge_pull_folds_spellings_of_its_image);
    tcase_add_test(merge, merge_pull_without_credentials_maps_the_name);
    suite_add_tcase(s, merge);
    TCase *names = tcase_create("names");
    tcase_add_test(names, key_names);
    tcase_add_test(names, find_by_image_across_spellings);
    suite_add_tcase(s, names);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(record_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
