/* SPDX-License-Identifier: Apache-2.0 */
/* The loadable-module entry point, through dlopen of the real shared library: one ABI, 2,
 * running the whole lifecycle with nothing but the table; ABI 1 (removed) and any other
 * number give NULL. */
#include "pullgate/pullgate.h"
#include "testutil.h"

#include <check.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define REF "sha256:3333333333333333333333333333333333333333333333333333333333333333"
#define IMAGE "registry.example.com/team-a/app:1.0"

typedef const pg_module_v2 *(*get_fn)(uint32_t abi);

static void *lib;
static const pg_module_v2 *m;

static void open_library(void)
{
    const char *path = getenv("PG_LIBRARY");
    ck_assert_msg(path != NULL, "PG_LIBRARY is not set (run the tests through ctest)");
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != NULL, "dlopen %s: %s", path, dlerror());
    get_fn get;
    *(void **)&get = dlsym(lib, PG_MODULE_SYMBOL);
    ck_assert_msg(get != NULL, "dlsym %s: %s", PG_MODULE_SYMBOL, dlerror());
    m = get(PG_MODULE_ABI_V2);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_eq(get(PG_MODULE_ABI_V2), m);
    ck_assert_ptr_eq(PG_MODULE_V2(get(PG_MODULE_ABI_V2)), m); /* 1.0.0's spelling */
    ck_assert_ptr_null(get(0));
    ck_assert_ptr_null(get(1)); /* ABI 1: removed in 1.1.0 */
    ck_assert_ptr_null(get(3));
}

static void close_library(void)
{
    if (lib)
        dlclose(lib);
    lib = NULL;
    m = NULL;
}

START_TEST(record_then_decide)
{
    pg_error err = {0};
    char *dir = tu_mkdtemp();
    char *state = tu_sprintf("%s/state", dir);
    pg_config *cfg = m->config_new(&err);
    ck_assert_msg(cfg != NULL, "%s", err.message);
    ck_assert_int_eq(m->config_set(cfg, "stateDir", state, &err), PG_OK);
    ck_assert_int_eq(m->config_set(cfg, "policy", "AlwaysVerify", &err), PG_OK);
    ck_assert_int_eq(m->config_set(cfg, "nope", "x", &err), PG_ERR_CONFIG);
    pg_store *store = m->store_open(cfg, NULL, &err);
    ck_assert_msg(store != NULL, "%s", err.message);

    char hash[PG_HASH_HEX_LEN + 1];
    ck_assert_int_eq(m->credential_hash("user", "secret", NULL, hash, &err), PG_OK);
    pg_secret secret = {"team-a", "regcred", "uid-1", hash};
    pg_pull_credentials creds = {.secrets = &secret, .n_secrets = 1};
    ck_assert_msg(m->record_pulled(store, IMAGE, REF, &creds, &err) == PG_OK, "%s", err.message);

    char *annotation = tu_sprintf("{\"registry.example.com/team-a/app\":{\"kubernetesSecrets\":"
                                  "[{\"namespace\":\"team-a\",\"name\":\"mine\",\"uid\":\"u\","
                                  "\"credentialHash\":\"%s\"}]}}",
                                  hash);
    pg_request req = {
        .image = IMAGE, .image_ref = REF, .namespace_ = "team-a", .credentials = annotation};
    pg_decision d;
    ck_assert_msg(m->decide(cfg, store, &req, &d) == 1, "%d %s", d.reason, d.text);
    ck_assert_int_eq(d.reason, PG_REASON_SECRET_MATCH);

    req.credentials = NULL;
    ck_assert_int_eq(m->decide(cfg, store, &req, &d), 0);
    ck_assert_int_eq(d.reason, PG_REASON_NO_CREDENTIALS);
    req.namespace_ = "team-b";
    req.credentials = annotation;
    ck_assert_int_eq(m->decide(cfg, store, &req, &d), 0);

    m->store_free(store);
    m->config_free(cfg);
    free(annotation);
    tu_rmrf(dir);
    free(state);
    free(dir);
}
END_TEST

/* Every member of the table is set. */
START_TEST(v2_table_is_complete)
{
    ck_assert_uint_eq(m->abi, PG_MODULE_ABI_V2);
    ck_assert_uint_ge(m->size, sizeof(pg_module_v2));
    ck_assert_str_eq(m->version(), PG_VERSION_STRING);
    const void *const *fn = (const void *const *)(const void *)&m->version;
    size_t n = (sizeof(pg_module_v2) - offsetof(pg_module_v2, version)) / sizeof(void *);
    ck_assert_uint_ge(n, 40);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fn[i] != NULL, "member %zu of pg_module_v2 is NULL", i);
}
END_TEST

static int count_record(const pg_record *rec, void *ud)
{
    (void)rec;
    ++*(int *)ud;
    return 0;
}

/* A host that only has the v2 table: configure, record a pull, decide, inspect, prune, free. */
START_TEST(v2_full_lifecycle)
{
    pg_error err = {0};
    char *dir = tu_mkdtemp();
    char *state = tu_sprintf("%s/state", dir);
    char *config = tu_sprintf("{\"stateDir\":\"%s\",\"readOnlyRecordDirs\":[],"
                              "\"policy\":\"AlwaysVerify\",\"dbus\":\"none\"}",
                              state);
    pg_config *cfg = m->config_new(&err);
    ck_assert_msg(cfg != NULL, "%s", err.message);
    ck_assert_msg(m->config_load_json(cfg, config, strlen(config), &err) == PG_OK, "%s",
                  err.message);
    ck_assert_int_eq(m->config_policy(cfg), PG_POLICY_ALWAYS_VERIFY);
    ck_assert_str_eq(m->config_state_dir(cfg), state);
    ck_assert_str_eq(m->config_dbus(cfg), "none");
    ck_assert_str_eq(m->config_annotation(cfg), "pullgate.dev/credentials");
    char *json = m->config_to_json(cfg, &err);
    ck_assert_ptr_nonnull(strstr(json, "\"AlwaysVerify\""));
    m->mem_free(json);
    /* An error through the table: code, name, clear. */
    ck_assert_int_eq(m->config_set(cfg, "nope", "x", &err), PG_ERR_CONFIG);
    ck_assert_str_eq(m->code_name(err.code), "config");
    m->error_clear(&err);
    ck_assert_int_eq(err.code, PG_OK);
    ck_assert_str_eq(err.message, "");
    ck_assert_int_eq(m->allowlist_validate("registry.example.com/team-a/*", &err), PG_OK);
    ck_assert_int_ne(m->allowlist_validate("registry.example.com/app:1.0", &err), PG_OK);

    pg_notifier *n = m->notifier_new("none", 100, &err);
    ck_assert_msg(n != NULL, "%s", err.message);
    pg_store *store = m->store_open(cfg, n, &err);
    ck_assert_msg(store != NULL, "%s", err.message);

    /* The pull, as a runtime reports it: intent, pulled with a secret, the ID alias. */
    char hash[PG_HASH_HEX_LEN + 1];
    ck_assert_int_eq(m->credential_hash("alice", "s3cret", NULL, hash, &err), PG_OK);
    const char *dockerconfig =
        "{\"auths\":{\"registry.example.com\":{\"auth\":\"YWxpY2U6czNjcmV0\"}}}";
    char **hashes = NULL;
    ck_assert_int_eq(
        m->dockerconfig_hashes(dockerconfig, strlen(dockerconfig), IMAGE, &hashes, &err), PG_OK);
    ck_assert_str_eq(hashes[0], hash); /* auth "alice:s3cret" hashes like the plain fields */
    ck_assert_ptr_null(hashes[1]);
    m->strv_free(hashes);
    ck_assert_msg(m->record_intent(store, IMAGE, &err) == PG_OK, "%s", err.message);
    pg_secret secret = {"team-a", "regcred", "uid-1", hash};
    pg_pull_credentials creds = {.secrets = &secret, .n_secrets = 1};
    ck_assert_msg(m->record_pulled(store, IMAGE, REF, &creds, &err) == PG_OK, "%s", err.message);
    const char *aliases[] = {"registry.example.com/team-a/app@sha256:"
                             "4444444444444444444444444444444444444444444444444444444444444444",
                             NULL};
    ck_assert_msg(m->record_aliases(store, REF, aliases, &err) == PG_OK, "%s", err.message);
    ck_assert_msg(m->record_intent(store, "registry.example.com/team-a/failed:1", &err) == PG_OK,
                  "%s", err.message);
    ck_assert_msg(m->record_failed(store, "registry.example.com/team-a/failed:1", &err) == PG_OK,
                  "%s", err.message);

    char *resolved = NULL;
    ck_assert_msg(m->resolve_image(store, IMAGE, &resolved, &err) == PG_OK, "%s", err.message);
    ck_assert_str_eq(resolved, REF);
    m->mem_free(resolved);
    char *name = m->image_name(IMAGE, &err);
    ck_assert_str_eq(name, "registry.example.com/team-a/app");
    m->mem_free(name);

    pg_record *rec = NULL;
    ck_assert_msg(m->store_get(store, REF, &rec, &err) == PG_OK, "%s", err.message);
    ck_assert_str_eq(m->record_image_ref(rec), REF);
    ck_assert_int_gt((long)m->record_last_updated(rec), 0);
    char *rec_json = m->record_to_json(rec, &err);
    ck_assert_ptr_nonnull(strstr(rec_json, hash));
    m->mem_free(rec_json);
    m->record_free(rec);
    int records = 0;
    ck_assert_int_eq(m->store_list(store, count_record, NULL, &records, &err), PG_OK);
    ck_assert_int_eq(records, 1);

    /* Decisions: the owner's namespace allows, another namespace and no credentials deny. */
    char *annotation =
        tu_sprintf("{\"registry.example.com/team-a/app\":{\"kubernetesSecrets\":"
                   "[{\"namespace\":\"team-a\",\"name\":\"regcred\",\"uid\":\"uid-1\","
                   "\"credentialHash\":\"%s\"}]}}",
                   hash);
    pg_request req = {
        .image = IMAGE, .image_ref = REF, .namespace_ = "team-a", .credentials = annotation};
    pg_decision d;
    ck_assert_msg(m->decide(cfg, store, &req, &d) == 1, "%d %s", d.reason, d.text);
    ck_assert_str_eq(m->reason_name(d.reason), "secret-match");
    /* The identity form: same answer without spellings; a malformed spelling denies. */
    ck_assert_int_eq(m->decide_identity(cfg, store, &req, NULL, NULL, &d), 1);
    const char *bad_hints[] = {"SHA256:not-an-image-id", NULL};
    ck_assert_int_eq(m->decide_identity(cfg, store, &req, NULL, bad_hints, &d), 0);
    ck_assert_str_eq(m->reason_name(d.reason), "bad-request");
    req.namespace_ = "team-b";
    ck_assert_int_eq(m->decide(cfg, store, &req, &d), 0);
    ck_assert_int_eq(d.allow, 0);
    req.namespace_ = "team-a";
    req.credentials = NULL;
    ck_assert_int_eq(m->decide(cfg, store, &req, &d), 0);
    ck_assert_str_eq(m->reason_name(d.reason), "no-credentials");
    m->notify_container(n, d.allow, "c1", "team-a", IMAGE, REF, m->reason_name(d.reason));
    ck_assert_ptr_null(m->notifier_last_error(n)); /* dbus "none": nothing to fail */

    /* Prune keeps what is in use, then deletes; the decision follows. */
    const char *in_use[] = {REF, NULL};
    unsigned pruned = 99;
    ck_assert_int_eq(m->store_prune(store, in_use, 0, &pruned, &err), PG_OK);
    ck_assert_uint_eq(pruned, 0);
    ck_assert_msg(m->store_delete(store, REF, &err) == PG_OK, "%s", err.message);
    ck_assert_int_eq(m->store_get(store, REF, &rec, &err), PG_ERR_NOT_FOUND);
    req.credentials = annotation;
    ck_assert_int_eq(m->decide(cfg, store, &req, &d), 0);

    /* A read-only host sees the same directories without writing. */
    ck_assert_int_eq(m->config_clear_list(cfg, "readOnlyRecordDirs", &err), PG_OK);
    pg_store *ro = m->store_open_readonly(cfg, &err);
    ck_assert_msg(ro != NULL, "%s", err.message);
    m->store_free(ro);

    m->store_free(store);
    m->notifier_free(n);
    m->config_free(cfg);
    free(annotation);
    free(config);
    tu_rmrf(dir);
    free(state);
    free(dir);
}
END_TEST

static Suite *module_suite(void)
{
    Suite *s = suite_create("module");
    TCase *tc = tcase_create("module");
    tcase_add_checked_fixture(tc, open_library, close_library);
        tcase_add_test(tc, record_then_decide);
    tcase_add_test(tc, v2_table_is_complete);
    tcase_add_test(tc, v2_full_lifecycle);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(module_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
