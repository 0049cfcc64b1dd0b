/* SPDX-License-Identifier: Apache-2.0 */
/* Policy helpers: CRI-O pinned-image patterns and kubelet allowlist patterns. */
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(pinned_exact_prefix_keyword)
{
    const char *const pats[] = {"registry.k8s.io/pause*", "quay.io/team/app:1.0", "*etcd*", NULL};
    ck_assert_int_eq(pg_pinned_match(pats, "registry.k8s.io/pause:3.10"), 1);
    ck_assert_int_eq(pg_pinned_match(pats, "registry.k8s.io/pause"), 1);
    ck_assert_int_eq(pg_pinned_match(pats, "registry.k8s.io/pausex:1"), 1); /* CRI-O glob */
    ck_assert_int_eq(pg_pinned_match(pats, "quay.io/team/app:1.0"), 1);
    ck_assert_int_eq(pg_pinned_match(pats, "quay.io/team/app:1.1"), 0);
    ck_assert_int_eq(pg_pinned_match(pats, "registry.k8s.io/etcd:3.5"), 1);
    ck_assert_int_eq(pg_pinned_match(pats, "registry.k8s.io/kube-proxy:1.33"), 0);
    ck_assert_int_eq(pg_pinned_match(pats, "k8s.io/pause:3.10"), 0);
}
END_TEST

START_TEST(pinned_matches_normalised_form)
{
    const char *const pats[] = {"docker.io/library/busybox:1.36", NULL};
    ck_assert_int_eq(pg_pinned_match(pats, "busybox:1.36"), 1);
    ck_assert_int_eq(pg_pinned_match(pats, "docker.io/library/busybox:1.36"), 1);
    ck_assert_int_eq(pg_pinned_match(pats, "busybox:1.37"), 0);
    const char *const prefix[] = {"docker.io/library/*", NULL};
    ck_assert_int_eq(pg_pinned_match(prefix, "nginx"), 1);
    ck_assert_int_eq(pg_pinned_match(prefix, "team/nginx"), 0);
}
END_TEST

START_TEST(pinned_degenerate_patterns_match_nothing)
{
    const char *const pats[] = {"*", "**", "*foo", "", NULL};
    ck_assert_int_eq(pg_pinned_match(pats, "foo"), 0);
    ck_assert_int_eq(pg_pinned_match(pats, "registry.example.com/foo:1"), 0);
    const char *const empty[] = {NULL};
    ck_assert_int_eq(pg_pinned_match(empty, "foo"), 0);
    ck_assert_int_eq(pg_pinned_match(NULL, "foo"), 0);
    const char *const any[] = {"foo", NULL};
    ck_assert_int_eq(pg_pinned_match(any, NULL), 0);
    ck_assert_int_eq(pg_pinned_match(any, ""), 0);
}
END_TEST

START_TEST(allowlist_validate_accepts)
{
    const char *good[] = {
        "registry.example.com/team-a/*",
        "registry.example.com/*",
        "docker.io/*",
        "docker.io/library/*",
        "docker.io/library/nginx",
        "registry.example.com:5000/x/y",
        "registry.example.com:5000/*",
        "localhost/app",
        "quay.io/team/app",
        /* The kubelet's familiar names (kubelet #137629): the image they name. */
        "nginx",
        "library/nginx",
        "secretorg/myimage",
        "index.docker.io/library/nginx",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        pg_error err = {0};
        ck_assert_msg(pg_allowlist_validate(good[i], &err) == PG_OK, "%s: %s", good[i],
                      err.message);
    }
}
END_TEST

START_TEST(allowlist_validate_rejects)
{
    static const struct {
        const char *pattern, *needle;
    } bad[] = {
        {"", "empty"},
        {" docker.io/library/nginx", "spaces"},
        {"docker.io/library/nginx ", "spaces"},
        {"docker.io/library/nginx:1.25", "tag nor digest"},
        {"docker.io/library/nginx@sha256:"
         "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
         "tag nor digest"},
        {"registry.example.com/*/app", "trailing"},
        {"registry.example.com/app*", "trailing"},
        {"*", "trailing"},
        {"registry.example.com/**", "trailing"},
        {"/*", "registry host"},
        {"nginx:1.25", "tag nor digest"},
        {"library/*", "never matches"},
        {"Registry.example.com/App", "parse"},
        {"registry.example.com//*", "prefix"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pg_error err = {0};
        ck_assert_msg(pg_allowlist_validate(bad[i].pattern, &err) == PG_ERR_INVALID, "%s accepted",
                      bad[i].pattern);
        ck_assert_msg(strstr(err.message, bad[i].needle), "%s: \"%s\" lacks \"%s\"",
                      bad[i].pattern, err.message, bad[i].needle);
    }
    ck_assert_int_eq(pg_allowlist_validate(NULL, NULL), PG_ERR_INVALID);
}
END_TEST

START_TEST(allowlist_match_normalised_names)
{
    const char *const pats[] = {"registry.example.com/team-a/*", "docker.io/library/nginx", NULL};
    ck_assert_int_eq(pg_allowlist_match(pats, "registry.example.com/team-a/app:1.0"), 1);
    ck_assert_int_eq(pg_allowlist_match(pats, "registry.example.com/team-a/sub/app"), 1);
    ck_assert_int_eq(pg_allowlist_match(pats, "registry.example.com/team-ab/app"), 0);
    ck_assert_int_eq(pg_allowlist_match(pats, "registry.example.com/team-a"), 0);
    ck_assert_int_eq(pg_allowlist_match(pats, "nginx"), 1);
    ck_assert_int_eq(pg_allowlist_match(pats, "nginx:1.25"), 1);
    ck_assert_int_eq(pg_allowlist_match(pats, "docker.io/library/nginx@sha256:"
                                              "0123456789abcdef0123456789abcdef0123456789abcdef"
                                              "0123456789abcdef"), 1);
    ck_assert_int_eq(pg_allowlist_match(pats, "nginx-extra"), 0);
    ck_assert_int_eq(pg_allowlist_match(pats, "other.io/library/nginx"), 0);
    ck_assert_int_eq(pg_allowlist_match(pats, "NOT A REF"), 0);
    ck_assert_int_eq(pg_allowlist_match(NULL, "nginx"), 0);
    const char *const none[] = {NULL};
    ck_assert_int_eq(pg_allowlist_match(none, "nginx"), 0);
    const char *const hub[] = {"docker.io/*", NULL};
    ck_assert_int_eq(pg_allowlist_match(hub, "busybox"), 1);
    ck_assert_int_eq(pg_allowlist_match(hub, "quay.io/busybox"), 0);
    /* A familiar pattern names its image, whichever way the pod spells it. */
    const char *const familiar[] = {"ubuntu", "secretorg/myimage", NULL};
    ck_assert_int_eq(pg_allowlist_match(familiar, "ubuntu:tagged"), 1);
    ck_assert_int_eq(pg_allowlist_match(familiar, "docker.io/library/ubuntu"), 1);
    ck_assert_int_eq(pg_allowlist_match(familiar, "index.docker.io/secretorg/myimage:1"), 1);
    ck_assert_int_eq(pg_allowlist_match(familiar, "quay.io/ubuntu"), 0);
    ck_assert_int_eq(pg_allowlist_match(familiar, "ubuntu-extra"), 0);
}
END_TEST

static Suite *policy_suite(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, pinned_exact_prefix_keyword);
    tcase_add_test(tc, pinned_matches_normalised_form);
    tcase_add_test(tc, pinned_degenerate_patterns_match_nothing);
    tcase_add_test(tc, allowlist_validate_accepts);
    tcase_add_test(tc, allowlist_validate_rejects);
    tcase_add_test(tc, allowlist_match_normalised_names);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(policy_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
