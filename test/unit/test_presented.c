/* SPDX-License-Identifier: Apache-2.0 */
/* The credentials annotation: strict parsing, key normalisation, namespace filtering. */
#include "annotation_mac.h" /* pg_presented_parse_keyed */
#include "engine_testing.h"
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define HASH_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

size_t pg_presented_ignored(const pg_presented *p, const char *image_name);

static pg_presented *parse_ok(const char *json, const char *ns)
{
    pg_presented *p = NULL;
    pg_error err = {0};
    ck_assert_msg(pg_presented_parse_keyed(json, strlen(json), ns, NULL, &p, &err) == PG_OK,
                  "%s: %s", json, err.message);
    ck_assert_ptr_nonnull(p);
    return p;
}

static void parse_bad(const char *json, const char *needle)
{
    pg_presented *p = (pg_presented *)1;
    pg_error err = {0};
    int rc = pg_presented_parse_keyed(json, strlen(json), "team-a", NULL, &p, &err);
    ck_assert_msg(rc != PG_OK, "accepted: %s", json);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(err.message, needle), "%s: \"%s\" lacks \"%s\"", json, err.message,
                  needle);
}

START_TEST(secrets_and_service_accounts)
{
    pg_presented *p = parse_ok(
        "{\"registry.example.com/team-a/app\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\","
        "\"name\":\"regcred\",\"uid\":\"u1\",\"credentialHash\":\"" HASH_A "\"}],"
        "\"kubernetesServiceAccounts\":[{\"namespace\":\"team-a\",\"name\":\"builder\","
        "\"uid\":\"u2\"}]}}",
        "team-a");
    const pg_pod_cred *s;
    const pg_pod_cred *sa;
    ck_assert_uint_eq(pg_presented_secrets(p, "registry.example.com/team-a/app", &s), 1);
    ck_assert_str_eq(s[0].namespace_, "team-a");
    ck_assert_str_eq(s[0].name, "regcred");
    ck_assert_str_eq(s[0].uid, "u1");
    ck_assert_str_eq(s[0].credential_hash, HASH_A);
    ck_assert_uint_eq(pg_presented_sas(p, "registry.example.com/team-a/app", &sa), 1);
    ck_assert_str_eq(sa[0].name, "builder");
    ck_assert_uint_eq(pg_presented_secrets(p, "registry.example.com/team-a/other", &s), 0);
    ck_assert_uint_eq(pg_presented_sas(NULL, "x", &sa), 0);
    pg_presented_free(p);
    pg_presented_free(NULL);
}
END_TEST

START_TEST(other_namespaces_dropped)
{
    pg_presented *p = parse_ok(
        "{\"r.io/app\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"x\","
        "\"uid\":\"1\",\"credentialHash\":\"" HASH_A "\"},{\"namespace\":\"team-b\",\"name\":\"y\","
        "\"uid\":\"2\"}],\"kubernetesServiceAccounts\":[{\"namespace\":\"team-a\",\"name\":\"s\","
        "\"uid\":\"3\"}]}}",
        "team-b");
    const pg_pod_cred *s;
    const pg_pod_cred *sa;
    ck_assert_uint_eq(pg_presented_secrets(p, "r.io/app", &s), 1);
    ck_assert_str_eq(s[0].name, "y");
    ck_assert_str_eq(s[0].credential_hash, "");
    ck_assert_uint_eq(pg_presented_sas(p, "r.io/app", &sa), 0);
    ck_assert_uint_eq(pg_presented_ignored(p, "r.io/app"), 2);
    pg_presented_free(p);

    /* No namespace: nothing is the pod's own. */
    p = parse_ok("{\"r.io/app\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"x\","
                 "\"uid\":\"1\"}]}}",
                 NULL);
    ck_assert_uint_eq(pg_presented_secrets(p, "r.io/app", &s), 0);
    pg_presented_free(p);
}
END_TEST

START_TEST(keys_normalised_and_folded)
{
    pg_presented *p = parse_ok(
        "{\"nginx\":{\"kubernetesSecrets\":[{\"namespace\":\"ns\",\"name\":\"a\",\"uid\":\"1\"}]},"
        "\"docker.io/library/nginx\":{\"kubernetesSecrets\":[{\"namespace\":\"ns\",\"name\":\"b\","
        "\"uid\":\"2\"}]},\"index.docker.io/library/nginx\":{},"
        "\"zz.io/z\":{\"kubernetesServiceAccounts\":[]}}",
        "ns");
    const pg_pod_cred *s;
    ck_assert_uint_eq(pg_presented_secrets(p, "docker.io/library/nginx", &s), 2);
    ck_assert_uint_eq(pg_presented_secrets(p, "nginx", &s), 0); /* lookups use normalised names */
    ck_assert_uint_eq(pg_presented_secrets(p, "zz.io/z", &s), 0);
    pg_presented_free(p);
    p = parse_ok("{}", "ns");
    ck_assert_uint_eq(pg_presented_secrets(p, "docker.io/library/nginx", &s), 0);
    pg_presented_free(p);
}
END_TEST

START_TEST(hostile_and_malformed)
{
    parse_bad("", "invalid JSON");
    parse_bad("null", "invalid JSON");
    parse_bad("[]", "expected a JSON object");
    parse_bad("{\"a.io/x\":{},\"a.io/x\":{}}", "duplicate");
    parse_bad("{\"a.io/x\":[]}", "expected an object");
    parse_bad("{\"a.io/x\":{\"nodePodsAccessible\":true}}", "unknown field");
    parse_bad("{\"a.io/x\":{\"kubernetesSecrets\":{}}}", "must be an array");
    parse_bad("{\"a.io/x\":{\"kubernetesSecrets\":[1]}}", "expected an object");
    parse_bad("{\"a.io/x\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"n\"}]}}",
              "missing field \"uid\"");
    parse_bad("{\"a.io/x\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"n\","
              "\"uid\":1}]}}",
              "must be a string");
    parse_bad("{\"a.io/x\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"\","
              "\"uid\":\"u\"}]}}",
              "is empty");
    parse_bad("{\"a.io/x\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"n\","
              "\"uid\":\"u\",\"credentialHash\":\"ABC\"}]}}",
              "64 lowercase hex");
    parse_bad("{\"a.io/x\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"n\","
              "\"uid\":\"u\",\"extra\":1}]}}",
              "unknown field \"extra\"");
    parse_bad("{\"a.io/x\":{\"kubernetesServiceAccounts\":[{\"namespace\":\"team-a\","
              "\"name\":\"n\",\"uid\":\"u\",\"credentialHash\":\"" HASH_A "\"}]}}",
              "unknown field");
    parse_bad("{\"a.io/x\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"n\","
              "\"uid\":\"u\\u0000x\"}]}}",
              "invalid JSON");
    parse_bad("{\"a.io/x:1.0\":{}}", "without tag or digest");
    parse_bad("{\"NOT AN IMAGE\":{}}", "not an image name");
    /* Other-namespace entries are still validated: a malformed one is an error. */
    parse_bad("{\"a.io/x\":{\"kubernetesSecrets\":[{\"namespace\":\"team-z\",\"name\":5,"
              "\"uid\":\"u\"}]}}",
              "must be a string");
}
END_TEST

START_TEST(deep_nesting_and_size_limits)
{
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 1);
    ck_assert_ptr_nonnull(deep);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = '\0';
    parse_bad(deep, "invalid JSON");
    free(deep);

    size_t n = PG_MAX_ANNOTATION_BYTES + 1;
    char *big = malloc(n + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, ' ', n);
    big[0] = '{';
    big[n - 1] = '}';
    big[n] = '\0';
    parse_bad(big, "larger than the limit");
    free(big);
}
END_TEST

START_TEST(many_keys_fold_fast)
{
    /* ~20k keys, half duplicates after normalisation: must stay near-linear. */
    size_t keys = 10000, cap = keys * 80 + 16, off = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    off += (size_t)snprintf(buf + off, cap - off, "{");
    for (size_t i = 0; i < keys; i++)
        off += (size_t)snprintf(buf + off, cap - off,
                                "%s\"img%zu\":{},\"docker.io/library/img%zu\":{}", i ? "," : "", i,
                                i);
    off += (size_t)snprintf(buf + off, cap - off, "}");
    pg_presented *p = parse_ok(buf, "ns");
    const pg_pod_cred *s;
    ck_assert_uint_eq(pg_presented_secrets(p, "docker.io/library/img9999", &s), 0);
    pg_presented_free(p);
    free(buf);
}
END_TEST

/* pullgate-cri's candidate namespace for an ImageStatus (no pod metadata there). */
static void assert_namespace(const char *json, int want_rc, const char *want_ns)
{
    char *ns = (char *)"unset";
    pg_error err = {0};
    int rc = pg_presented_namespace(json, strlen(json), &ns, &err);
    ck_assert_msg(rc == want_rc, "%s: rc %d (%s)", json, rc, err.message);
    if (want_ns)
        ck_assert_msg(ns && strcmp(ns, want_ns) == 0, "%s: namespace %s", json, ns ? ns : "NULL");
    else
        ck_assert_msg(ns == NULL, "%s: namespace %s", json, ns);
    free(ns);
}

START_TEST(candidate_namespace)
{
    assert_namespace("{}", PG_OK, NULL);
    assert_namespace("{\"nginx\":{}}", PG_OK, NULL);
    assert_namespace("{\"nginx\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"r\","
                     "\"uid\":\"u\"}],\"kubernetesServiceAccounts\":[{\"namespace\":\"team-a\"}]},"
                     "\"app\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\"}]}}",
                     PG_OK, "team-a");
    /* Two namespaces: no producer writes that; no candidate. */
    assert_namespace("{\"nginx\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\"}]},"
                     "\"app\":{\"kubernetesServiceAccounts\":[{\"namespace\":\"team-b\"}]}}",
                     PG_ERR_INVALID, NULL);
    assert_namespace("[]", PG_ERR_INVALID, NULL);
    assert_namespace("{\"nginx\":[]}", PG_ERR_INVALID, NULL);
    assert_namespace("{\"nginx\":{\"kubernetesSecrets\":{}}}", PG_ERR_INVALID, NULL);
    assert_namespace("{\"nginx\":{\"kubernetesSecrets\":[1]}}", PG_ERR_INVALID, NULL);
    assert_namespace("{\"nginx\":{\"kubernetesSecrets\":[{\"namespace\":7}]}}", PG_ERR_INVALID,
                     NULL);
    assert_namespace("{\"nginx\":{\"kubernetesSecrets\":[{\"namespace\":\"\"}]}}", PG_ERR_INVALID,
                     NULL);
    assert_namespace("{\"nginx\":{\"kubernetesSecrets\":[{\"namespace\":\"a\\u0000b\"}]}}",
                     PG_ERR_INVALID, NULL);
    assert_namespace("{\"nginx\":", PG_ERR_INVALID, NULL);
    size_t big = PG_MAX_ANNOTATION_BYTES + 16;
    char *buf = malloc(big + 1);
    memset(buf, ' ', big);
    buf[0] = '{';
    buf[big - 1] = '}';
    buf[big] = '\0';
    char *ns = NULL;
    pg_error err = {0};
    ck_assert_int_eq(pg_presented_namespace(buf, big, &ns, &err), PG_ERR_LIMIT);
    ck_assert_ptr_null(ns);
    free(buf);
}
END_TEST

static Suite *presented_suite(void)
{
    Suite *s = suite_create("presented");
    TCase *tc = tcase_create("presented");
    tcase_add_test(tc, secrets_and_service_accounts);
    tcase_add_test(tc, other_namespaces_dropped);
    tcase_add_test(tc, keys_normalised_and_folded);
    tcase_add_test(tc, hostile_and_malformed);
    tcase_add_test(tc, deep_nesting_and_size_limits);
    tcase_add_test(tc, many_keys_fold_fast);
    tcase_add_test(tc, candidate_namespace);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(presented_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
