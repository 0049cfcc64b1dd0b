/* The loadable-module entry point, through dlopen of the real shared library. */
#include "pullgate/pullgate.h"
#include "testutil.h"

#include <check.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define REF "sha256:3333333333333333333333333333333333333333333333333333333333333333"
#define IMAGE "registry.example.com/team-a/app:1.0"

typedef const pg_module_v1 *(*get_fn)(uint32_t abi);

static void *lib;
static const pg_module_v1 *m;

static void open_library(void)
{
    const char *path = getenv("PG_LIBRARY");
    ck_assert_msg(path != NULL, "PG_LIBRARY is not set (run the tests through ctest)");
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != NULL, "dlopen %s: %s", path, dlerror());
    get_fn get;
    *(void **)&get = dlsym(lib, PG_MODULE_SYMBOL);
    ck_assert_msg(get != NULL, "dlsym %s: %s", PG_MODULE_SYMBOL, dlerror());
    m = get(PG_MODULE_ABI_V1);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_null(get(0));
    ck_assert_ptr_null(get(2));
    ck_assert_ptr_eq(get(PG_MODULE_ABI_V1), m);
}

static void close_library(void)
{
    if (lib)
        dlclose(lib);
    lib = NULL;
    m = NULL;
}

START_TEST(table_is_complete)
{
    ck_assert_uint_eq(m->abi, PG_MODULE_ABI_V1);
    ck_assert_uint_ge(m->size, sizeof(pg_module_v1));
    ck_assert_str_eq(m->version(), PG_VERSION_STRING);
    ck_assert(m->config_new && m->config_load_file && m->config_set && m->config_free &&
              m->store_open && m->store_free && m->decide && m->record_pulled &&
              m->credential_hash);
}
END_TEST

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
    pg_request req = {.image = IMAGE, .image_ref = REF, .namespace_ = "team-a",
                      .credentials = annotation};
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

static Suite *module_suite(void)
{
    Suite *s = suite_create("module");
    TCase *tc = tcase_create("module");
    tcase_add_checked_fixture(tc, open_library, close_library);
    tcase_add_test(tc, table_is_complete);
    tcase_add_test(tc, record_then_decide);
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
