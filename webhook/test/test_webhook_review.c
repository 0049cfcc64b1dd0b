/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the webhook's choice of pull secrets (review.c, read_credentials), with the
 * Kubernetes API behind a stub that answers fixed objects and counts what it was asked:
 *  - a pod that lists pull secrets gets none of its service account's, even when every name it
 *    lists is skipped (a name that cannot be an object name, an empty reference): the
 *    ServiceAccount admission plugin fills in only an empty list, so the kubelet pulls with none;
 *  - a pod that lists none (absent, null, empty list) gets the service account's;
 *  - each secret type is read in its own form (the kubelet's): .dockerconfigjson's "auths" only,
 *    .dockercfg's bare map;
 *  - every kind of refusal is answered with its status (review.c's one table from pg_code to
 *    HTTP status), its message kept.
 */
#include "gocompat.h"
#include "review.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* {"auths":{"registry.example.com":{"auth":"YWxpY2U6czNjcmV0"}}} */
static const char *const SECRET_JSON =
    "{\"kind\":\"Secret\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"regcred\","
    "\"namespace\":\"team-a\",\"uid\":\"uid-1\"},\"type\":\"kubernetes.io/dockerconfigjson\","
    "\"data\":{\".dockerconfigjson\":\"eyJhdXRocyI6eyJyZWdpc3RyeS5leGFtcGxlLmNvbSI6eyJhdXRoIjoi"
    "WVd4cFkyVTZjek5qY21WMCJ9fX0=\"}}";
/* The same entry in the other form of each type: the kubelet reads neither (no credentials). */
static const char *const BARE_IN_DOCKERCONFIGJSON =
    "{\"kind\":\"Secret\",\"metadata\":{\"name\":\"bare\",\"uid\":\"uid-bare\"},"
    "\"type\":\"kubernetes.io/dockerconfigjson\",\"data\":{\".dockerconfigjson\":\"eyJyZWdpc3RyeS5leGFtcGxlLmNvbSI6eyJhdXRoIjoiWVd4cFkyVTZjek5qY21WMCJ9fQ==\"}}";
static const char *const AUTHS_IN_DOCKERCFG =
    "{\"kind\":\"Secret\",\"metadata\":{\"name\":\"auths\",\"uid\":\"uid-auths\"},"
    "\"type\":\"kubernetes.io/dockercfg\",\"data\":{\".dockercfg\":\"eyJhdXRocyI6eyJyZWdpc3RyeS5leGFtcGxlLmNvbSI6eyJhdXRoIjoi"
    "WVd4cFkyVTZjek5qY21WMCJ9fX0=\"}}";
static const char *const BARE_IN_DOCKERCFG =
    "{\"kind\":\"Secret\",\"metadata\":{\"name\":\"legacy\",\"uid\":\"uid-legacy\"},"
    "\"type\":\"kubernetes.io/dockercfg\",\"data\":{\".dockercfg\":\"eyJyZWdpc3RyeS5leGFtcGxlLmNvbSI6eyJhdXRoIjoiWVd4cFkyVTZjek5qY21WMCJ9fQ==\"}}";
/* A dockerconfigjson secret whose data is not base64. */
static const char *const NOT_BASE64 =
    "{\"kind\":\"Secret\",\"metadata\":{\"name\":\"broken\",\"uid\":\"uid-b\"},"
    "\"type\":\"kubernetes.io/dockerconfigjson\",\"data\":{\".dockerconfigjson\":\"!!!\"}}";
static const char *const SA_JSON =
    "{\"kind\":\"ServiceAccount\",\"metadata\":{\"name\":\"default\",\"uid\":\"uid-sa\"},"
    "\"imagePullSecrets\":[{\"name\":\"regcred\"}]}";

typedef struct asked {
    int service_accounts, secrets;
} asked;

static void stub_get(void *ctx, const char *ns, wh_get_req *reqs, size_t n, int64_t deadline_ms)
{
    (void)ns, (void)deadline_ms;
    asked *a = ctx;
    for (size_t i = 0; i < n; i++) {
        int sa = strcmp(reqs[i].resource, "serviceaccounts") == 0;
        a->service_accounts += sa;
        a->secrets += !sa;
        if (strcmp(reqs[i].name, "fail") == 0) { /* the API's failure */
            pg_fail(&reqs[i].err, PG_ERR_IO, "HTTP 403: forbidden");
            reqs[i].result = WH_FAILED;
            continue;
        }
        const char *text = sa                                    ? SA_JSON
                           : strcmp(reqs[i].name, "bare") == 0   ? BARE_IN_DOCKERCONFIGJSON
                           : strcmp(reqs[i].name, "auths") == 0  ? AUTHS_IN_DOCKERCFG
                           : strcmp(reqs[i].name, "legacy") == 0 ? BARE_IN_DOCKERCFG
                           : strcmp(reqs[i].name, "broken") == 0 ? NOT_BASE64
                                                                 : SECRET_JSON;
        reqs[i].obj = json_loads(text, 0, NULL);
        reqs[i].result = reqs[i].obj ? WH_FOUND : WH_FAILED;
    }
}

/* The annotation value the review's JSONPatch sets (caller frees), or NULL. */
static char *annotation_of(const char *body)
{
    json_t *out = json_loads(body, 0, NULL);
    const char *b64 = json_string_value(json_object_get(json_object_get(out, "response"), "patch"));
    ck_assert_msg(b64 != NULL, "no patch in %s", body);
    size_t n = strlen(b64), len = 0;
    unsigned char *raw = malloc(n + 1);
    ck_assert(raw && pg_go_base64_decode(b64, n, true, raw, &len));
    json_t *patch = json_loadb((const char *)raw, len, 0, NULL);
    free(raw);
    json_decref(out);
    char *value = NULL;
    size_t i;
    json_t *op;
    json_array_foreach(patch, i, op)
    {
        const json_t *v = json_object_get(op, "value");
        const char *text = json_is_string(v)
                               ? json_string_value(v)
                               : json_string_value(json_object_get(v, "pullgate.dev/credentials"));
        if (text)
            value = strdup(text);
    }
    json_decref(patch);
    return value;
}

/* An AdmissionReview of a pod of namespace team-a whose spec holds pull_secrets (a JSON member
 * or "") and its containers (a JSON value). */
static void pod_review(char *body, size_t size, const char *pull_secrets, const char *containers)
{
    snprintf(body, size,
             "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\","
             "\"request\":{\"uid\":\"u-1\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":"
             "\"Pod\"},\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},"
             "\"namespace\":\"team-a\",\"operation\":\"CREATE\",\"object\":{\"metadata\":"
             "{\"name\":\"p\",\"namespace\":\"team-a\"},\"spec\":{%s%s\"containers\":%s}}}}",
             pull_secrets, *pull_secrets ? "," : "", containers);
}

static const char *const ONE_CONTAINER =
    "[{\"name\":\"c\",\"image\":\"registry.example.com/team-a/app:1\"}]";

/* Reviews a pod of namespace team-a whose spec holds pull_secrets (a JSON member or ""). */
static char *review_pod(const char *pull_secrets, asked *a)
{
    char body[2048];
    pod_review(body, sizeof body, pull_secrets, ONE_CONTAINER);
    *a = (asked){0};
    wh_review_config cfg = {.annotation_key = "pullgate.dev/credentials",
                            .get = stub_get,
                            .get_ctx = a,
                            .deadline_ms = pg_monotonic_ms() + 60000};
    wh_review_result res;
    wh_review_handle(&cfg, body, strlen(body), &res);
    ck_assert_int_eq(res.http_status, 200);
    char *value = annotation_of(res.body);
    wh_review_result_free(&res);
    ck_assert_msg(value != NULL, "no annotation for %s", pull_secrets);
    return value;
}

START_TEST(own_list_of_impossible_names_gets_no_service_account_secrets)
{
    static const char *const own[] = {
        "\"imagePullSecrets\":[{\"name\":\"../../team-b/secrets/regcred\"}]",
        "\"imagePullSecrets\":[{\"name\":\"Not_A_Name\"},{\"name\":\"a/b\"}]",
        "\"imagePullSecrets\":[{\"name\":\"\"}]", /* the kubelet skips it; the list is not empty */
        "\"imagePullSecrets\":[{}]",
    };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        asked a;
        char *value = review_pod(own[i], &a);
        ck_assert_msg(strstr(value, "regcred") == NULL, "%s presents %s", own[i], value);
        ck_assert_msg(a.secrets == 0, "%s: %d secrets read", own[i], a.secrets);
        ck_assert_int_eq(a.service_accounts, 1); /* the service account itself is presented */
        ck_assert_msg(strstr(value, "uid-sa") != NULL, "%s: %s", own[i], value);
        free(value);
    }
}
END_TEST

START_TEST(no_own_list_gets_the_service_accounts_secrets)
{
    static const char *const none[] = {"", "\"imagePullSecrets\":null", "\"imagePullSecrets\":[]"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        asked a;
        char *value = review_pod(none[i], &a);
        ck_assert_msg(strstr(value, "\"regcred\"") != NULL, "%s: %s", none[i], value);
        ck_assert_int_eq(a.secrets, 1);
        free(value);
    }
}
END_TEST

START_TEST(own_valid_name_is_read_and_the_service_accounts_are_not_added)
{
    asked a;
    char *value = review_pod("\"imagePullSecrets\":[{\"name\":\"bad/x\"},{\"name\":\"mine\"}]", &a);
    ck_assert_int_eq(a.secrets, 1); /* "mine" only; the stub answers it with regcred's object */
    ck_assert_msg(strstr(value, "uid-1") != NULL, "%s", value);
    free(value);
}
END_TEST

/* The kubelet reads .dockerconfigjson for its "auths" only and .dockercfg as the bare map. */
START_TEST(each_secret_type_is_read_in_its_own_form)
{
    asked a;
    char *value = review_pod("\"imagePullSecrets\":[{\"name\":\"bare\"},{\"name\":\"auths\"}]", &a);
    ck_assert_int_eq(a.secrets, 2);
    ck_assert_msg(strstr(value, "\"kubernetesSecrets\":[]") != NULL, "%s", value);
    free(value);
    value = review_pod("\"imagePullSecrets\":[{\"name\":\"legacy\"}]", &a);
    ck_assert_msg(strstr(value, "uid-legacy") != NULL, "the bare map of a dockercfg: %s", value);
    free(value);
}
END_TEST

/* Every kind of refusal: HTTP 200, allowed false, its status code in the answer and for the
 * metrics, and its message. */
START_TEST(each_refusal_answers_its_status)
{
    static const struct {
        const char *secrets, *containers, *cut, *key_error, *message;
        long late_ms; /* > 0: the deadline passed that long ago */
        int status;
    } cases[] = {
        {"", "{}", NULL, NULL, "spec.containers is not a list", 0, 400},
        {"", "[{\"name\":\"c\",\"image\":\"Not A Ref\"}]", NULL, NULL, "image", 0, 400},
        {"\"imagePullSecrets\":[{\"name\":\"fail\"}]", NULL, NULL, NULL,
         "cannot read secrets team-a/fail: HTTP 403: forbidden", 0, 500},
        {"\"imagePullSecrets\":[{\"name\":\"broken\"}]", NULL, NULL, NULL,
         "secret team-a/broken: data[\".dockerconfigjson\"] is not base64", 0, 500},
        {"", NULL, NULL, "the key file is gone",
         "the annotation key is unusable: the key file is "
         "gone",
         0, 500},
        {"", NULL, NULL, NULL, "time limit exceeded", 1000, 504},
        {"", NULL, "over the bound", NULL, "over the bound", 0, 413},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[2048];
        pod_review(body, sizeof body, cases[i].secrets,
                   cases[i].containers ? cases[i].containers : ONE_CONTAINER);
        asked a = {0};
        wh_review_config cfg = {.annotation_key = "pullgate.dev/credentials",
                                .key_error = cases[i].key_error,
                                .get = stub_get,
                                .get_ctx = &a,
                                .cut = cases[i].cut,
                                .deadline_ms = pg_monotonic_ms() +
                                               (cases[i].late_ms ? -cases[i].late_ms : 60000)};
        wh_review_result res;
        wh_review_handle(&cfg, body, cases[i].cut ? 200 : strlen(body), &res);
        json_t *answer = json_loads(res.body, 0, NULL);
        json_t *resp = json_object_get(answer, "response");
        const char *message =
            json_string_value(json_object_get(json_object_get(resp, "status"), "message"));
        ck_assert_msg(res.http_status == 200 && json_is_false(json_object_get(resp, "allowed")),
                      "case %zu: %d %s", i, res.http_status, res.body);
        ck_assert_int_eq(
            json_integer_value(json_object_get(json_object_get(resp, "status"), "code")),
            cases[i].status);
        ck_assert_int_eq(res.refusal_code, cases[i].status);
        ck_assert_str_eq(res.outcome, "refused");
        ck_assert_msg(message && strstr(message, cases[i].message), "case %zu: %s", i, message);
        json_decref(answer);
        wh_review_result_free(&res);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("webhook_review");
    TCase *t = tcase_create("pull secrets");
    tcase_add_test(t, own_list_of_impossible_names_gets_no_service_account_secrets);
    tcase_add_test(t, no_own_list_gets_the_service_accounts_secrets);
    tcase_add_test(t, own_valid_name_is_read_and_the_service_accounts_are_not_added);
    tcase_add_test(t, each_secret_type_is_read_in_its_own_form);
    tcase_add_test(t, each_refusal_answers_its_status);
    suite_add_tcase(s, t);
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
