/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The namespace marker (docs/interfaces.md §5, §10): a pull made without credentials while the
 * runtime may have used its own for the pod's namespace (CRI-O's namespaced auth) is recorded as
 * the service account {namespace, PG_NAMESPACE_MARKER_NAME, ""}. Written by the store as
 * pullgate-cri writes it, it lets every pod of that namespace (each presents its service
 * account) run the image, and no pod of another namespace, nor a pod presenting no service
 * account; a pod presenting a service account of that name but another namespace is ignored.
 */
#include "decision_cases.h"
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define REF "sha256:3333333333333333333333333333333333333333333333333333333333333333"
#define IMAGE "registry.example.com/team-a/app:1.0"
#define NAME "registry.example.com/team-a/app"

static char *sa_annotation(const char *ns, const char *name, const char *uid)
{
    return tu_sprintf("{\"" NAME "\":{\"kubernetesServiceAccounts\":[{\"namespace\":\"%s\","
                      "\"name\":\"%s\",\"uid\":\"%s\"}]}}",
                      ns, name, uid);
}

static pg_decision decide(pg_config *cfg, pg_store *store, const char *ns, const char *creds)
{
    pg_request req = {.image = IMAGE, .image_ref = REF, .namespace_ = ns, .credentials = creds};
    pg_decision d;
    pg_decide(cfg, store, &req, &d);
    return d;
}

START_TEST(the_marker_admits_its_namespace_only)
{
    char *root = tu_mkdtemp();
    char *state = tu_sprintf("%s/state", root);
    dc_make_record_dir(state);
    pg_error err = {0};
    pg_config *cfg = pg_config_new(&err);
    ck_assert_int_eq(pg_config_set(cfg, "stateDir", state, &err), PG_OK);
    ck_assert_int_eq(pg_config_clear_list(cfg, "readOnlyRecordDirs", &err), PG_OK);
    dc_config_set(cfg, "policy", "AlwaysVerify");
    pg_store *store = pg_store_open(cfg, NULL, &err);
    ck_assert_msg(store != NULL, "%s", err.message);
    pg_service_account marker = {"team-a", PG_NAMESPACE_MARKER_NAME, ""};
    pg_pull_credentials creds = {.service_accounts = &marker, .n_service_accounts = 1};
    ck_assert_int_eq(pg_store_record_intent(store, IMAGE, &err), PG_OK);
    ck_assert_msg(pg_store_record_pulled(store, IMAGE, REF, &creds, &err) == PG_OK, "%s",
                  err.message);

    char *own = sa_annotation("team-a", "default", "uid-sa-a");
    pg_decision d = decide(cfg, store, "team-a", own);
    ck_assert_msg(d.allow && d.reason == PG_REASON_SERVICE_ACCOUNT_MATCH, "%s", d.text);
    ck_assert_ptr_nonnull(strstr(d.text, "namespace the runtime pulled for"));

    char *other = sa_annotation("team-b", "default", "uid-sa-b");
    d = decide(cfg, store, "team-b", other);
    ck_assert_msg(!d.allow, "another namespace: %s", d.text);
    /* the marker's own name presented from another namespace (an unkeyed forgery) */
    char *forged = sa_annotation("team-b", PG_NAMESPACE_MARKER_NAME, "");
    d = decide(cfg, store, "team-b", forged);
    ck_assert_msg(!d.allow, "forged in another namespace: %s", d.text);
    /* team-a's annotation copied into team-b: entries of other namespaces are ignored */
    d = decide(cfg, store, "team-b", own);
    ck_assert_msg(!d.allow, "copied: %s", d.text);
    d = decide(cfg, store, "team-a", "{}");
    ck_assert_msg(!d.allow, "no service account presented: %s", d.text);
    d = decide(cfg, store, "team-a", NULL);
    ck_assert_msg(!d.allow, "no annotation: %s", d.text);
    char *secret_only =
        tu_sprintf("{\"" NAME "\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"r\","
                   "\"uid\":\"u\",\"credentialHash\":\"%064d\"}]}}",
                   7);
    d = decide(cfg, store, "team-a", secret_only);
    ck_assert_msg(!d.allow, "a secret is not the namespace's service account: %s", d.text);

    free(secret_only);
    free(forged);
    free(other);
    free(own);
    pg_store_free(store);
    pg_config_free(cfg);
    tu_rmrf(root);
    free(state);
    free(root);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("namespace_marker");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, the_marker_admits_its_namespace_only);
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
