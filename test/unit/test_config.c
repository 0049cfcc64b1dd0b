/* SPDX-License-Identifier: Apache-2.0 */
/* Configuration: defaults, every key valid and invalid, strict loading, file safety. */
#include "engine_testing.h"
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pg_config *new_config(void)
{
    pg_error err = {0};
    pg_config *cfg = pg_config_new(&err);
    ck_assert_msg(cfg != NULL, "%s", err.message);
    return cfg;
}

static size_t strv_len(const char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

/* Loads json; returns the code and leaves the message in *err. */
static int load(pg_config *cfg, const char *json, pg_error *err)
{
    pg_error_clear(err);
    return pg_config_load_json(cfg, json, strlen(json), err);
}

static void assert_config_error(const char *json, const char *needle)
{
    pg_config *cfg = new_config();
    pg_error err = {0};
    int rc = load(cfg, json, &err);
    ck_assert_msg(rc == PG_ERR_CONFIG, "%s: rc %d (%s)", json, rc, err.message);
    ck_assert_msg(strstr(err.message, needle), "%s: message \"%s\" lacks \"%s\"", json,
                  err.message, needle);
    pg_config_free(cfg);
}

static void assert_loads(const char *json)
{
    pg_config *cfg = new_config();
    pg_error err = {0};
    ck_assert_msg(load(cfg, json, &err) == PG_OK, "%s: %s", json, err.message);
    pg_config_free(cfg);
}

START_TEST(defaults_match_contract)
{
    pg_config *cfg = new_config();
    ck_assert_int_eq(pg_config_policy(cfg), PG_POLICY_NEVER_VERIFY_PRELOADED);
    ck_assert_int_eq(pg_config_mode(cfg), PG_MODE_ENFORCE);
    ck_assert_int_eq(pg_config_runtime(cfg), PG_RUNTIME_AUTO);
    ck_assert_str_eq(pg_config_state_dir(cfg), PG_DEFAULT_STATE_DIR);
    ck_assert_str_eq(pg_config_annotation(cfg), "pullgate.dev/credentials");
    ck_assert_str_eq(pg_config_dbus(cfg), "system");
    ck_assert_str_eq(pg_config_log_level(cfg), "info");
    ck_assert_str_eq(pg_config_record_api_version(cfg), "kubelet.config.k8s.io/v1alpha1");
    ck_assert_int_eq(pg_config_credential_ttl(cfg), 0);
    ck_assert_uint_eq(strv_len(pg_config_allowlist(cfg)), 0);
    ck_assert_ptr_nonnull(pg_config_allowlist(cfg));
    ck_assert_uint_eq(strv_len(pg_config_pinned_images(cfg)), 0);
    ck_assert_uint_eq(strv_len(pg_config_read_only_dirs(cfg)), 1);
    ck_assert_str_eq(pg_config_read_only_dirs(cfg)[0], "/var/lib/kubelet/image_manager");
    ck_assert(pg_config_cri_verify_pulls(cfg));
    pg_config_free(cfg);
    pg_config_free(NULL);
}
END_TEST

START_TEST(contract_example_loads_and_round_trips)
{
    const char *example =
        "{\"policy\":\"NeverVerifyPreloadedImages\", \"allowlist\":[], "
        "\"stateDir\":\"/var/lib/pullgate\", "
        "\"readOnlyRecordDirs\":[\"/var/lib/kubelet/image_manager\"], \"runtime\":\"auto\", "
        "\"mode\":\"enforce\", \"credentialsAnnotation\":\"pullgate.dev/credentials\", "
        "\"credentialTTL\":\"0s\", \"pinnedImages\":[], "
        "\"recordApiVersion\":\"kubelet.config.k8s.io/v1alpha1\", \"dbus\":\"system\", "
        "\"logLevel\":\"info\"}";
    pg_config *cfg = new_config();
    pg_error err = {0};
    ck_assert_msg(load(cfg, example, &err) == PG_OK, "%s", err.message);
    char *a = pg_config_to_json(cfg, &err);
    ck_assert_ptr_nonnull(a);
    ck_assert_msg(strstr(a, "\"hmacKeyFile\":\"\""), "%s", a);
    pg_config *again = new_config();
    ck_assert_msg(load(again, a, &err) == PG_OK, "%s", err.message);
    char *b = pg_config_to_json(again, &err);
    ck_assert_str_eq(a, b);
    pg_free(a);
    pg_free(b);
    pg_config_free(cfg);
    pg_config_free(again);
}
END_TEST

START_TEST(every_key_accepts_valid_values)
{
    pg_config *cfg = new_config();
    pg_error err = {0};
    const char *json =
        "{\"policy\":\"AlwaysVerify\",\"allowlist\":[\"registry.example.com/infra/*\","
        "\"docker.io/library/nginx\"],\"stateDir\":\"/srv/pg\",\"readOnlyRecordDirs\":[],"
        "\"runtime\":\"containerd\",\"mode\":\"audit\",\"credentialsAnnotation\":\"creds\","
        "\"credentialTTL\":\"1h30m\",\"pinnedImages\":[\"registry.k8s.io/pause*\",\"*etcd*\","
        "\"quay.io/x/y:1\"],\"recordApiVersion\":\"kubelet.config.k8s.io/v1beta1\","
        "\"dbus\":\"unix:path=/run/dbus/system_bus_socket\",\"logLevel\":\"debug\","
        "\"hmacKeyFile\":\"/etc/pullgate/hmac.key\"}";
    ck_assert_msg(load(cfg, json, &err) == PG_OK, "%s", err.message);
    ck_assert_int_eq(pg_config_policy(cfg), PG_POLICY_ALWAYS_VERIFY);
    ck_assert_int_eq(pg_config_mode(cfg), PG_MODE_AUDIT);
    ck_assert_int_eq(pg_config_runtime(cfg), PG_RUNTIME_CONTAINERD);
    ck_assert_str_eq(pg_config_state_dir(cfg), "/srv/pg");
    ck_assert_str_eq(pg_config_annotation(cfg), "creds");
    ck_assert_int_eq(pg_config_credential_ttl(cfg), 5400);
    ck_assert_str_eq(pg_config_record_api_version(cfg), PG_API_V1BETA1);
    ck_assert_str_eq(pg_config_dbus(cfg), "unix:path=/run/dbus/system_bus_socket");
    ck_assert_str_eq(pg_config_log_level(cfg), "debug");
    ck_assert_uint_eq(strv_len(pg_config_allowlist(cfg)), 2);
    ck_assert_uint_eq(strv_len(pg_config_read_only_dirs(cfg)), 0);
    ck_assert_uint_eq(strv_len(pg_config_pinned_images(cfg)), 3);
    char *text = pg_config_to_json(cfg, &err);
    ck_assert_msg(strstr(text, "\"credentialTTL\":\"1h30m0s\""), "%s", text);
    ck_assert_msg(strstr(text, "\"hmacKeyFile\":\"/etc/pullgate/hmac.key\""), "%s", text);
    pg_free(text);
    pg_config_free(cfg);

    const char *more[] = {
        "{\"policy\":\"NeverVerify\"}",
        "{\"policy\":\"NeverVerifyAllowlistedImages\"}",
        "{\"runtime\":\"cri-o\"}",
        "{\"dbus\":\"session\"}",
        "{\"dbus\":\"none\"}",
        "{\"logLevel\":\"error\"}",
        "{\"logLevel\":\"warning\"}",
        "{\"credentialTTL\":\"0\"}",
        "{\"credentialTTL\":\"90s\"}",
        "{\"credentialTTL\":\"1.5s\"}",
        "{\"credentialsAnnotation\":\"a.b-c.example/My_Key.1\"}",
        "{\"hmacKeyFile\":\"\"}",
        "{\"allowlist\":[\"registry.example.com:5000/team/*\",\"docker.io/*\"]}",
        "{}",
        "{\"criMetricsListen\":\"none\"}",
        "{\"criMetricsListen\":\"\"}",
        "{\"criMetricsListen\":\"0.0.0.0:9469\"}",
        "{\"criMetricsListen\":\"[::1]:1\"}",
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        assert_loads(more[i]);
}
END_TEST

START_TEST(every_key_rejects_invalid_values)
{
    static const struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"policy\":\"Foo\"}", "config: key \"policy\": invalid value \"Foo\" (expected one of"},
        {"{\"policy\":\"neververify\"}", "key \"policy\""},
        {"{\"mode\":\"Enforce\"}", "key \"mode\""},
        {"{\"runtime\":\"docker\"}", "key \"runtime\""},
        {"{\"stateDir\":\"relative/dir\"}", "key \"stateDir\""},
        {"{\"stateDir\":\"\"}", "key \"stateDir\""},
        {"{\"stateDir\":\"/a\\nb\"}", "key \"stateDir\""},
        {"{\"readOnlyRecordDirs\":[\"/ok\",\"rel\"]}", "key \"readOnlyRecordDirs\""},
        {"{\"credentialsAnnotation\":\"\"}", "key \"credentialsAnnotation\""},
        {"{\"credentialsAnnotation\":\"UPPER.example/x\"}", "key \"credentialsAnnotation\""},
        {"{\"credentialsAnnotation\":\"pullgate.dev/\"}", "key \"credentialsAnnotation\""},
        {"{\"credentialsAnnotation\":\"a/b/c\"}", "key \"credentialsAnnotation\""},
        {"{\"credentialsAnnotation\":\"-x\"}", "key \"credentialsAnnotation\""},
        {"{\"credentialsAnnotation\":"
         "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
         "key \"credentialsAnnotation\""},
        {"{\"credentialTTL\":\"10\"}", "key \"credentialTTL\""},
        {"{\"credentialTTL\":\"-1s\"}", "key \"credentialTTL\""},
        {"{\"credentialTTL\":\"1d\"}", "key \"credentialTTL\""},
        {"{\"credentialTTL\":\"500ms\"}", "at least 1s"},
        {"{\"allowlist\":[\"registry.example.com/*/app\"]}", "key \"allowlist\""},
        {"{\"allowlist\":[\"docker.io/library/nginx:1.25\"]}", "key \"allowlist\""},
        {"{\"allowlist\":[\"library/*\"]}", "key \"allowlist\""},
        {"{\"allowlist\":[\" docker.io/library/nginx\"]}", "key \"allowlist\""},
        {"{\"allowlist\":[\"/*\"]}", "key \"allowlist\""},
        {"{\"pinnedImages\":[\"*\"]}", "key \"pinnedImages\""},
        {"{\"pinnedImages\":[\"a*b\"]}", "key \"pinnedImages\""},
        {"{\"pinnedImages\":[\"\"]}", "key \"pinnedImages\""},
        {"{\"recordApiVersion\":\"v1alpha1\"}", "key \"recordApiVersion\""},
        {"{\"dbus\":\"systemd\"}", "key \"dbus\""},
        {"{\"logLevel\":\"trace\"}", "key \"logLevel\""},
        {"{\"hmacKeyFile\":\"key\"}", "key \"hmacKeyFile\""},
        {"{\"criMetricsListen\":\"localhost:9469\"}", "key \"criMetricsListen\""},
        {"{\"criMetricsListen\":\"127.0.0.1\"}", "key \"criMetricsListen\""},
        {"{\"criMetricsListen\":\"127.0.0.1:0\"}", "key \"criMetricsListen\""},
        {"{\"criMetricsListen\":\"127.0.0.1:65536\"}", "key \"criMetricsListen\""},
        {"{\"criMetricsListen\":\"127.0.0.1:+80\"}", "key \"criMetricsListen\""},
        {"{\"criMetricsListen\":\"::1:9469\"}", "key \"criMetricsListen\""},
        {"{\"criMetricsListen\":\"[::1]:\"}", "key \"criMetricsListen\""},
        {"{\"criMetricsListen\":\":9469\"}", "key \"criMetricsListen\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_config_error(bad[i].json, bad[i].needle);
}
END_TEST

START_TEST(cri_verify_pulls_is_a_boolean)
{
    pg_config *cfg = new_config();
    pg_error err = {0};
    ck_assert_msg(load(cfg, "{\"criVerifyPulls\":false}", &err) == PG_OK, "%s", err.message);
    ck_assert(!pg_config_cri_verify_pulls(cfg));
    char *text = pg_config_to_json(cfg, &err);
    ck_assert_msg(strstr(text, "\"criVerifyPulls\":false"), "%s", text);
    pg_free(text);
    ck_assert_int_eq(pg_config_set(cfg, "criVerifyPulls", "true", &err), PG_OK);
    ck_assert(pg_config_cri_verify_pulls(cfg));
    ck_assert_int_eq(pg_config_set(cfg, "criVerifyPulls", "yes", &err), PG_ERR_CONFIG);
    ck_assert(pg_config_cri_verify_pulls(cfg));
    pg_config_free(cfg);
    assert_config_error("{\"criVerifyPulls\":\"false\"}",
                        "key \"criVerifyPulls\": expected a boolean, got a string");
    assert_config_error("{\"criVerifyPulls\":0}", "key \"criVerifyPulls\": expected a boolean");
    assert_config_error("{\"criVerifyPulls\":null}", "key \"criVerifyPulls\"");
}
END_TEST

/* pullgate-cri's memory bounds: whole numbers, defaults that keep the built-in bounds. */
START_TEST(cri_cache_bounds_are_whole_numbers)
{
    pg_config *cfg = new_config();
    pg_error err = {0};
    ck_assert_uint_eq(pg_config_cri_record_cache_entries(cfg), 4096);
    ck_assert_uint_eq(pg_config_cri_record_cache_bytes(cfg), (size_t)64 << 20);
    ck_assert_uint_eq(pg_config_cri_absence_cache_entries(cfg), 131072);
    ck_assert_msg(load(cfg,
                       "{\"criRecordCacheEntries\":1000,\"criRecordCacheMiB\":16,"
                       "\"criAbsenceCacheEntries\":1024}",
                       &err) == PG_OK,
                  "%s", err.message);
    ck_assert_uint_eq(pg_config_cri_record_cache_entries(cfg), 1000);
    ck_assert_uint_eq(pg_config_cri_record_cache_bytes(cfg), (size_t)16 << 20);
    ck_assert_uint_eq(pg_config_cri_absence_cache_entries(cfg), 1024);
    char *text = pg_config_to_json(cfg, &err);
    ck_assert_msg(strstr(text, "\"criRecordCacheEntries\":1000,\"criRecordCacheMiB\":16,"
                               "\"criAbsenceCacheEntries\":1024"),
                  "%s", text);
    pg_config *again = new_config();
    ck_assert_msg(load(again, text, &err) == PG_OK, "%s", err.message);
    ck_assert_uint_eq(pg_config_cri_record_cache_entries(again), 1000);
    pg_free(text);
    pg_config_free(again);
    ck_assert_int_eq(pg_config_set(cfg, "criRecordCacheEntries", "16777216", &err), PG_OK);
    ck_assert_uint_eq(pg_config_cri_record_cache_entries(cfg), 16777216);
    static const char *const refused[] = {
        "0", "16777217", "-1", "+5", " 5", "5 ", "5x", "", "99999999999999999999"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        ck_assert_msg(pg_config_set(cfg, "criRecordCacheEntries", refused[i], &err) ==
                          PG_ERR_CONFIG,
                      "\"%s\" accepted", refused[i]);
        ck_assert_msg(strstr(err.message, "expected a whole number from 1 to 16777216"), "%s",
                      err.message);
    }
    ck_assert_uint_eq(pg_config_cri_record_cache_entries(cfg), 16777216);
    pg_config_free(cfg);
    assert_config_error("{\"criRecordCacheEntries\":\"4096\"}",
                        "key \"criRecordCacheEntries\": expected a whole number, got a string");
    assert_config_error("{\"criRecordCacheEntries\":4096.0}",
                        "key \"criRecordCacheEntries\": expected a whole number, got a number");
    assert_config_error("{\"criRecordCacheMiB\":0}", "key \"criRecordCacheMiB\"");
    assert_config_error("{\"criRecordCacheMiB\":65537}", "key \"criRecordCacheMiB\"");
    assert_config_error("{\"criAbsenceCacheEntries\":1023}", "key \"criAbsenceCacheEntries\"");
    assert_config_error("{\"criAbsenceCacheEntries\":true}", "key \"criAbsenceCacheEntries\"");
}
END_TEST

START_TEST(unknown_duplicate_and_mistyped_keys)
{
    assert_config_error("{\"polcy\":\"AlwaysVerify\"}", "unknown key \"polcy\"");
    assert_config_error("{\"policy\":\"AlwaysVerify\",\"policy\":\"NeverVerify\"}", "duplicate");
    assert_config_error("{\"policy\":1}", "key \"policy\": expected a string, got a number");
    assert_config_error("{\"policy\":null}", "key \"policy\"");
    assert_config_error("{\"credentialTTL\":60}", "key \"credentialTTL\"");
    assert_config_error("{\"allowlist\":\"docker.io/*\"}", "key \"allowlist\": expected an array");
    assert_config_error("{\"pinnedImages\":[1]}", "key \"pinnedImages\": item 0");
    assert_config_error("{\"stateDir\":\"/a\\u0000b\"}", "not allowed");
    assert_config_error("[]", "expected a JSON object");
    assert_config_error("{\"policy\":\"AlwaysVerify\"} {}", "config");
    assert_config_error("", "config");
}
END_TEST

START_TEST(failed_load_leaves_config_unchanged)
{
    pg_config *cfg = new_config();
    pg_error err = {0};
    ck_assert_int_eq(load(cfg, "{\"policy\":\"AlwaysVerify\",\"pinnedImages\":[\"a*\"],"
                               "\"mode\":\"bogus\"}", &err), PG_ERR_CONFIG);
    ck_assert_int_eq(pg_config_policy(cfg), PG_POLICY_NEVER_VERIFY_PRELOADED);
    ck_assert_uint_eq(strv_len(pg_config_pinned_images(cfg)), 0);
    /* A list in a file replaces the list. */
    ck_assert_int_eq(load(cfg, "{\"readOnlyRecordDirs\":[\"/a\",\"/b\"]}", &err), PG_OK);
    ck_assert_int_eq(load(cfg, "{\"readOnlyRecordDirs\":[\"/c\"]}", &err), PG_OK);
    ck_assert_uint_eq(strv_len(pg_config_read_only_dirs(cfg)), 1);
    ck_assert_str_eq(pg_config_read_only_dirs(cfg)[0], "/c");
    pg_config_free(cfg);
}
END_TEST

START_TEST(set_and_clear_list)
{
    pg_config *cfg = new_config();
    pg_error err = {0};
    ck_assert_int_eq(pg_config_set(cfg, "policy", "AlwaysVerify", &err), PG_OK);
    ck_assert_int_eq(pg_config_policy(cfg), PG_POLICY_ALWAYS_VERIFY);
    ck_assert_int_eq(pg_config_set(cfg, "credentialTTL", "2m", &err), PG_OK);
    ck_assert_int_eq(pg_config_credential_ttl(cfg), 120);
    ck_assert_int_eq(pg_config_set(cfg, "stateDir", "/tmp/x", &err), PG_OK);
    ck_assert_str_eq(pg_config_state_dir(cfg), "/tmp/x");
    ck_assert_int_eq(pg_config_set(cfg, "readOnlyRecordDirs", "/extra", &err), PG_OK);
    ck_assert_uint_eq(strv_len(pg_config_read_only_dirs(cfg)), 2);
    ck_assert_int_eq(pg_config_clear_list(cfg, "readOnlyRecordDirs", &err), PG_OK);
    ck_assert_uint_eq(strv_len(pg_config_read_only_dirs(cfg)), 0);
    ck_assert_int_eq(pg_config_set(cfg, "allowlist", "registry.example.com/*", &err), PG_OK);
    ck_assert_int_eq(pg_config_set(cfg, "allowlist", "nginx:latest", &err), PG_ERR_CONFIG);
    ck_assert_uint_eq(strv_len(pg_config_allowlist(cfg)), 1);
    ck_assert_int_eq(pg_config_set(cfg, "nope", "x", &err), PG_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.message, "\"nope\""));
    ck_assert_int_eq(pg_config_clear_list(cfg, "policy", &err), PG_ERR_CONFIG);
    ck_assert_int_eq(pg_config_clear_list(cfg, "nope", &err), PG_ERR_CONFIG);
    ck_assert_int_eq(pg_config_set(cfg, "policy", "Bad", &err), PG_ERR_CONFIG);
    ck_assert_int_eq(pg_config_policy(cfg), PG_POLICY_ALWAYS_VERIFY);
    ck_assert_int_eq(pg_config_set(cfg, "stateDir", "/\xff\xfe", &err), PG_ERR_CONFIG);
    ck_assert_int_eq(pg_config_set(cfg, "hmacKeyFile", "/k", &err), PG_OK);
    ck_assert_int_eq(pg_config_set(cfg, NULL, "x", &err), PG_ERR_INVALID);
    pg_config_free(cfg);
}
END_TEST

/* ----------------------------------------------------------- files */

static char *dir;

static void make_dir(void) { dir = tu_mkdtemp(); }
static void remove_dir(void)
{
    tu_rmrf(dir);
    free(dir);
    dir = NULL;
}

START_TEST(file_loads)
{
    char *path = tu_sprintf("%s/config.json", dir);
    tu_write_file(path, "{\"policy\":\"AlwaysVerify\"}", -1, 0644);
    pg_config *cfg = new_config();
    pg_error err = {0};
    ck_assert_msg(pg_config_load_file(cfg, path, &err) == PG_OK, "%s", err.message);
    ck_assert_int_eq(pg_config_policy(cfg), PG_POLICY_ALWAYS_VERIFY);
    pg_config_free(cfg);
    free(path);
}
END_TEST

START_TEST(file_missing)
{
    char *path = tu_sprintf("%s/none.json", dir);
    pg_config *cfg = new_config();
    pg_error err = {0};
    ck_assert_int_eq(pg_config_load_file(cfg, path, &err), PG_ERR_NOT_FOUND);
    pg_config_free(cfg);
    free(path);
}
END_TEST

START_TEST(file_symlink_refused)
{
    char *target = tu_sprintf("%s/real.json", dir);
    char *link = tu_sprintf("%s/link.json", dir);
    tu_write_file(target, "{\"policy\":\"NeverVerify\"}", -1, 0644);
    ck_assert_int_eq(symlink(target, link), 0);
    pg_config *cfg = new_config();
    pg_error err = {0};
    ck_assert_int_eq(pg_config_load_file(cfg, link, &err), PG_ERR_UNSAFE);
    ck_assert_int_eq(pg_config_policy(cfg), PG_POLICY_NEVER_VERIFY_PRELOADED);
    pg_config_free(cfg);
    free(target);
    free(link);
}
END_TEST

START_TEST(file_writable_by_others_refused)
{
    char *path = tu_sprintf("%s/config.json", dir);
    tu_write_file(path, "{\"policy\":\"NeverVerify\"}", -1, 0666);
    pg_config *cfg = new_config();
    pg_error err = {0};
    ck_assert_int_eq(pg_config_load_file(cfg, path, &err), PG_ERR_UNSAFE);
    ck_assert_int_eq(chmod(path, 0620), 0);
    ck_assert_int_eq(pg_config_load_file(cfg, path, &err), PG_ERR_UNSAFE);
    ck_assert_int_eq(pg_config_policy(cfg), PG_POLICY_NEVER_VERIFY_PRELOADED);
    pg_config_free(cfg);
    free(path);
}
END_TEST

START_TEST(file_oversize_refused)
{
    size_t n = PG_MAX_CONFIG_BYTES + 2;
    char *big = malloc(n + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, ' ', n);
    big[0] = '{';
    big[n - 1] = '}';
    big[n] = '\0';
    char *path = tu_sprintf("%s/big.json", dir);
    tu_write_file(path, big, (long)n, 0600);
    pg_config *cfg = new_config();
    pg_error err = {0};
    ck_assert_int_eq(pg_config_load_file(cfg, path, &err), PG_ERR_LIMIT);
    ck_assert_int_eq(pg_config_load_json(cfg, big, n, &err), PG_ERR_LIMIT);
    pg_config_free(cfg);
    free(path);
    free(big);
}
END_TEST

START_TEST(file_not_regular_refused)
{
    pg_config *cfg = new_config();
    pg_error err = {0};
    ck_assert_int_eq(pg_config_load_file(cfg, dir, &err), PG_ERR_UNSAFE);
    pg_config_free(cfg);
}
END_TEST

/* ------------------------------------------------------- rollback registry */

static int release_cmp(const char *a, const char *b)
{
    int cmp = 99;
    pg_error err = {0};
    ck_assert_msg(pg_release_compare(a, b, &cmp, &err) == PG_OK, "%s", err.message);
    return cmp;
}

START_TEST(release_versions_compare)
{
    ck_assert_int_eq(release_cmp("1.0.0", "1.0.0"), 0);
    ck_assert_int_eq(release_cmp("1.0.0-1", "1.0.0"), 0); /* a package revision */
    ck_assert_int_eq(release_cmp("1.1.0~rc1-1", "1.1.0"), 0);
    ck_assert_int_lt(release_cmp("1.0.0", "1.1.0"), 0);
    ck_assert_int_gt(release_cmp("1.10.0", "1.9.3"), 0); /* numbers, not strings */
    ck_assert_int_gt(release_cmp("2.0.0", "1.99.99"), 0);
    ck_assert_int_lt(release_cmp("0.9.0", PG_VERSION_STRING), 0);
    int cmp;
    pg_error err = {0};
    const char *bad[] = {"", "1", "1.0", "1.0.x", "v1.0.0", "1.0.0.0", "1..0", "-1.0.0", NULL};
    for (const char **b = bad; *b; b++)
        ck_assert_msg(pg_release_compare(*b, "1.0.0", &cmp, &err) == PG_ERR_INVALID, "%s", *b);
}
END_TEST

/* Whether name is a line of the release's key list (test/data/config-keys/RELEASE). */
static bool listed(char **lines, const char *name)
{
    for (size_t i = 0; lines[i]; i++)
        if (strcmp(lines[i], name) == 0)
            return true;
    return false;
}

static char **read_key_list(const char *path)
{
    size_t len = 0;
    char *text = tu_read_file(path, &len);
    ck_assert_msg(text != NULL, "%s", path);
    char **lines = calloc(len + 1, sizeof *lines);
    size_t n = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (l[0] != '#' && l[0])
            lines[n++] = strdup(l);
    free(text);
    return lines;
}

/*
 * Every key this release reads names the release that first read it, and for every past
 * release whose key list is frozen in test/data/config-keys/, a key is registered as at most
 * that release exactly when that release read it. A key added without registering its
 * release (or registered as older than it is) fails here: a downgrade would otherwise leave it
 * in the file for a release that refuses it (docs/lifecycle.md, "Roll back").
 */
START_TEST(every_key_is_registered)
{
    const char *name;
    for (size_t i = 0; (name = pg_config_key_at(i)) != NULL; i++) {
        const char *since = pg_config_key_since(name);
        ck_assert_msg(since != NULL, "key %s has no release in the rollback registry", name);
        ck_assert_msg(release_cmp(since, PG_VERSION_STRING) <= 0, "key %s: since %s > %s", name,
                      since, PG_VERSION_STRING);
    }
    ck_assert_ptr_null(pg_config_key_since("noSuchKey"));
    char *lists = tu_testdata("config-keys");
    DIR *d = opendir(lists);
    ck_assert_ptr_nonnull(d);
    size_t releases = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *path = tu_sprintf("%s/%s", lists, e->d_name);
        char **keys = read_key_list(path);
        releases++;
        for (size_t i = 0; (name = pg_config_key_at(i)) != NULL; i++) {
            bool older = release_cmp(pg_config_key_since(name), e->d_name) <= 0;
            ck_assert_msg(older == listed(keys, name),
                          "key %s: registered since %s, but release %s %s it: register the "
                          "release that first reads it",
                          name, pg_config_key_since(name), e->d_name,
                          listed(keys, name) ? "reads" : "does not read");
        }
        for (size_t i = 0; keys[i]; i++) {
            ck_assert_msg(pg_config_key_since(keys[i]) != NULL,
                          "release %s's key %s is gone: a rollback registry entry is needed",
                          e->d_name, keys[i]);
            free(keys[i]);
        }
        free(keys);
        free(path);
    }
    closedir(d);
    free(lists);
    ck_assert_uint_ge(releases, 1);
}
END_TEST

/* check-config prints every key the registry lists, and only those. */
START_TEST(registry_is_the_key_table)
{
    pg_config *cfg = new_config();
    pg_error err = {0};
    char *text = pg_config_to_json(cfg, &err);
    ck_assert_ptr_nonnull(text);
    json_t *j = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(j);
    size_t n = 0;
    const char *name;
    for (; (name = pg_config_key_at(n)) != NULL; n++)
        ck_assert_msg(json_object_get(j, name) != NULL, "%s missing from the JSON", name);
    ck_assert_uint_eq(json_object_size(j), n);
    json_decref(j);
    pg_free(text);
    pg_config_free(cfg);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("values");
    tcase_add_test(tc, defaults_match_contract);
    tcase_add_test(tc, contract_example_loads_and_round_trips);
    tcase_add_test(tc, every_key_accepts_valid_values);
    tcase_add_test(tc, every_key_rejects_invalid_values);
    tcase_add_test(tc, unknown_duplicate_and_mistyped_keys);
    tcase_add_test(tc, cri_verify_pulls_is_a_boolean);
    tcase_add_test(tc, failed_load_leaves_config_unchanged);
    tcase_add_test(tc, set_and_clear_list);
    tcase_add_test(tc, release_versions_compare);
    tcase_add_test(tc, every_key_is_registered);
    tcase_add_test(tc, cri_cache_bounds_are_whole_numbers);
    tcase_add_test(tc, registry_is_the_key_table);
    suite_add_tcase(s, tc);
    TCase *files = tcase_create("files");
    tcase_add_checked_fixture(files, make_dir, remove_dir);
    tcase_add_test(files, file_loads);
    tcase_add_test(files, file_missing);
    tcase_add_test(files, file_symlink_refused);
    tcase_add_test(files, file_writable_by_others_refused);
    tcase_add_test(files, file_oversize_refused);
    tcase_add_test(files, file_not_regular_refused);
    suite_add_tcase(s, files);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
