/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of reference.c: ParseNormalizedNamed semantics.
 * Expectations re-derived from distribution/reference's normalize_test.go
 * and regexp.go. */
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define HEX64 "86e0e091d0da6bde2456dbb48306f3956bbeb2eae1b5b9a43045843f69fe4aaa"

typedef struct valid_case {
    const char *in, *domain, *path, *tag, *digest, *full;
} valid_case;

static const valid_case valid_cases[] = {
    {"nginx", "docker.io", "library/nginx", NULL, NULL, "docker.io/library/nginx"},
    {"nginx:1.25", "docker.io", "library/nginx", "1.25", NULL, "docker.io/library/nginx:1.25"},
    {"docker/docker", "docker.io", "docker/docker", NULL, NULL, "docker.io/docker/docker"},
    {"library/debian", "docker.io", "library/debian", NULL, NULL, "docker.io/library/debian"},
    {"docker.io/docker/docker", "docker.io", "docker/docker", NULL, NULL, "docker.io/docker/docker"},
    {"docker.io/debian", "docker.io", "library/debian", NULL, NULL, "docker.io/library/debian"},
    {"index.docker.io/docker/docker", "docker.io", "docker/docker", NULL, NULL,
     "docker.io/docker/docker"},
    {"index.docker.io/debian", "docker.io", "library/debian", NULL, NULL, "docker.io/library/debian"},
    {"docker.io/library/foo/bar", "docker.io", "library/foo/bar", NULL, NULL,
     "docker.io/library/foo/bar"},
    {"127.0.0.1:5000/docker/docker", "127.0.0.1:5000", "docker/docker", NULL, NULL,
     "127.0.0.1:5000/docker/docker"},
    {"192.168.0.1", "docker.io", "library/192.168.0.1", NULL, NULL, "docker.io/library/192.168.0.1"},
    {"192.168.0.1:80", "docker.io", "library/192.168.0.1", "80", NULL,
     "docker.io/library/192.168.0.1:80"},
    {"192.168.0.1:8/debian", "192.168.0.1:8", "debian", NULL, NULL, "192.168.0.1:8/debian"},
    {"[fc00::1]:5000/docker", "[fc00::1]:5000", "docker", NULL, NULL, "[fc00::1]:5000/docker"},
    {"[fc00:1:2:3:4:5:6:7]:5000/library/debian", "[fc00:1:2:3:4:5:6:7]:5000", "library/debian",
     NULL, NULL, "[fc00:1:2:3:4:5:6:7]:5000/library/debian"},
    {"[::1]/foo", "[::1]", "foo", NULL, NULL, "[::1]/foo"},
    {"docker.io/" HEX64, "docker.io", "library/" HEX64, NULL, NULL, "docker.io/library/" HEX64},
    {"Docker/docker", "Docker", "docker", NULL, NULL, "Docker/docker"},
    {"FOO/bar", "FOO", "bar", NULL, NULL, "FOO/bar"},
    {"test_com/foo", "docker.io", "test_com/foo", NULL, NULL, "docker.io/test_com/foo"},
    {"test.com:8080/foo", "test.com:8080", "foo", NULL, NULL, "test.com:8080/foo"},
    {"test-com:8080/foo", "test-com:8080", "foo", NULL, NULL, "test-com:8080/foo"},
    {"xn--n3h.com:18080/foo", "xn--n3h.com:18080", "foo", NULL, NULL, "xn--n3h.com:18080/foo"},
    {"localhost/foo", "localhost", "foo", NULL, NULL, "localhost/foo"},
    {"localhost:5000/foo:bar", "localhost:5000", "foo", "bar", NULL, "localhost:5000/foo:bar"},
    {"localhost:5000", "docker.io", "library/localhost", "5000", NULL,
     "docker.io/library/localhost:5000"},
    {"busybox:latest@sha256:" HEX64, "docker.io", "library/busybox", "latest", "sha256:" HEX64,
     "docker.io/library/busybox:latest@sha256:" HEX64},
    {"redis@sha256:" HEX64, "docker.io", "library/redis", NULL, "sha256:" HEX64,
     "docker.io/library/redis@sha256:" HEX64},
    {"quay.io/a/b@sha512:" HEX64 HEX64, "quay.io", "a/b", NULL, "sha512:" HEX64 HEX64,
     "quay.io/a/b@sha512:" HEX64 HEX64},
    /* 63 hex digits is a name, not an ID */
    {"dbcc1c35ac38df41fd2f5e4130b32ffdb93ebae8b3dbe638c23575912276fc9", "docker.io",
     "library/dbcc1c35ac38df41fd2f5e4130b32ffdb93ebae8b3dbe638c23575912276fc9", NULL, NULL,
     "docker.io/library/dbcc1c35ac38df41fd2f5e4130b32ffdb93ebae8b3dbe638c23575912276fc9"},
    {"thisisthesongthatneverendsitgoesonandonandonthisisthesongthatnev", "docker.io",
     "library/thisisthesongthatneverendsitgoesonandonandonthisisthesongthatnev", NULL, NULL,
     "docker.io/library/thisisthesongthatneverendsitgoesonandonandonthisisthesongthatnev"},
    {"docker---rules/docker", "docker.io", "docker---rules/docker", NULL, NULL,
     "docker.io/docker---rules/docker"},
    {"dock__er/docker", "docker.io", "dock__er/docker", NULL, NULL, "docker.io/dock__er/docker"},
    {"d/docker", "docker.io", "d/docker", NULL, NULL, "docker.io/d/docker"},
    {"jess/t", "docker.io", "jess/t", NULL, NULL, "docker.io/jess/t"},
    {"ubuntu-12.04-base", "docker.io", "library/ubuntu-12.04-base", NULL, NULL,
     "docker.io/library/ubuntu-12.04-base"},
    {"registry.example.com/team-a/app:v1.2_rc-3", "registry.example.com", "team-a/app",
     "v1.2_rc-3", NULL, "registry.example.com/team-a/app:v1.2_rc-3"},
    {"foo:_Tag.X", "docker.io", "library/foo", "_Tag.X", NULL, "docker.io/library/foo:_Tag.X"},
    /* Go quirk: a first component that looks like a domain but is not a
     * valid one is re-read as part of the path, leaving no domain at all. */
    {"a_b.c/foo", "", "a_b.c/foo", NULL, NULL, "a_b.c/foo"},
};

static const char *const invalid_cases[] = {
    "",
    "https://github.com/docker/docker",
    "docker/Docker",
    "-docker",
    "-docker/docker",
    "-docker.io/docker/docker",
    "docker///docker",
    "docker.io/docker/Docker",
    "docker.io/docker///docker",
    "[fc00::1]",
    "[fc00::1]:5000",
    "fc00::1:5000/debian",
    "[fe80::1%eth0]:5000/debian",
    "[2001:db8:3:4::192.0.2.33]:5000/debian",
    HEX64,
    "docker-/docker",
    "-docker-/docker",
    "____/____",
    "_docker/_docker",
    "dock..er/docker",
    "dock_.er/docker",
    "dock-.er/docker",
    "dock___er/docker",
    "docker/",
    "/docker",
    "FOO",
    "Foo:tag",
    "quay.io/Foo/bar",
    "foo:",
    "foo@",
    "foo:-tag",
    "foo:.tag",
    "foo:a:b",
    "foo bar",
    "foo\n",
    "foo\x80",
    "example.com:/foo",
    "example.com:port/foo",
    "exa_mple.com:5000/foo",
    "foo@sha256:abc",
    "foo@sha256:" HEX64 "00",
    "foo@sha256:86E0E091D0DA6BDE2456DBB48306F3956BBEB2EAE1B5B9A43045843F69FE4AAA",
    "foo@md5:0123456789abcdef0123456789abcdef",
    "foo@sha256:" HEX64 "@sha256:" HEX64,
    "foo@1sha256:" HEX64,
    "foo@sha256:" "86e0e091d0da6bde2456dbb48306f3956bbeb2eae1b5b9a43045843f69fe4aag",
    "this_is_not_a_valid_namespace_because_its_lenth_is_greater_than_255_this_is_not_a_valid_"
    "namespace_because_its_lenth_is_greater_than_255_this_is_not_a_valid_namespace_because_its_"
    "lenth_is_greater_than_255_this_is_not_a_valid_namespace_because_its_lenth_is_greater_than_"
    "255/docker",
};

static void check_str(const char *what, const char *in, const char *got, const char *want)
{
    if (!want)
        ck_assert_msg(got == NULL, "%s of \"%s\": want NULL, got \"%s\"", what, in, got);
    else
        ck_assert_msg(got && strcmp(got, want) == 0, "%s of \"%s\": want \"%s\", got \"%s\"", what,
                      in, want, got ? got : "(null)");
}

START_TEST(test_valid)
{
    const valid_case *c = &valid_cases[_i];
    pg_error err = {0};
    pg_ref *ref = pg_ref_parse(c->in, &err);
    ck_assert_msg(ref != NULL, "\"%s\" rejected: %s", c->in, err.message);
    check_str("domain", c->in, pg_ref_domain(ref), c->domain);
    check_str("path", c->in, pg_ref_path(ref), c->path);
    check_str("tag", c->in, pg_ref_tag(ref), c->tag);
    check_str("digest", c->in, pg_ref_digest(ref), c->digest);
    check_str("string", c->in, pg_ref_string(ref), c->full);
    char *want_name = c->domain[0] ? tu_sprintf("%s/%s", c->domain, c->path) : strdup(c->path);
    check_str("name", c->in, pg_ref_name(ref), want_name);
    char *name = pg_image_name(c->in, &err);
    check_str("pg_image_name", c->in, name, want_name);
    pg_free(name);
    free(want_name);
    pg_ref_free(ref);
}
END_TEST

START_TEST(test_invalid)
{
    const char *in = invalid_cases[_i];
    pg_error err = {0};
    pg_ref *ref = pg_ref_parse(in, &err);
    ck_assert_msg(ref == NULL, "\"%s\" accepted as %s", in, ref ? pg_ref_string(ref) : "");
    ck_assert_int_eq(err.code, PG_ERR_INVALID);
    ck_assert_msg(err.message[0] != '\0', "no message for \"%s\"", in);
    ck_assert_ptr_null(strchr(err.message, '\n'));
    ck_assert_ptr_null(pg_image_name(in, NULL));
}
END_TEST

/* A name of n characters after "docker.io/library/" (18 characters). */
static char *official_name(size_t n)
{
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, 'a', n);
    s[n] = '\0';
    return s;
}

START_TEST(test_name_length_limit)
{
    char *ok = official_name(255 - 18), *too_long = official_name(256 - 18);
    pg_error err = {0};
    pg_ref *ref = pg_ref_parse(ok, &err);
    ck_assert_msg(ref != NULL, "%s", err.message);
    ck_assert_uint_eq(strlen(pg_ref_name(ref)), 255);
    pg_ref_free(ref);
    ck_assert_ptr_null(pg_ref_parse(too_long, &err));
    ck_assert_int_eq(err.code, PG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "255"));
    free(ok);
    free(too_long);
}
END_TEST

START_TEST(test_tag_length_limit)
{
    char tag[130];
    memset(tag, 't', sizeof tag - 1);
    tag[129] = '\0';
    char *too_long = tu_sprintf("foo:%s", tag);
    tag[128] = '\0';
    char *ok = tu_sprintf("foo:%s", tag);
    pg_ref *ref = pg_ref_parse(ok, NULL);
    ck_assert_ptr_nonnull(ref);
    ck_assert_str_eq(pg_ref_tag(ref), tag);
    pg_ref_free(ref);
    ck_assert_ptr_null(pg_ref_parse(too_long, NULL));
    free(ok);
    free(too_long);
}
END_TEST

START_TEST(test_input_length_limit)
{
    size_t n = PG_MAX_IMAGE_LEN + 100;
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, 'a', n);
    s[n] = '\0';
    pg_error err = {0};
    ck_assert_ptr_null(pg_ref_parse(s, &err));
    ck_assert_int_eq(err.code, PG_ERR_LIMIT);
    free(s);
}
END_TEST

START_TEST(test_null_and_accessors)
{
    pg_error err = {0};
    ck_assert_ptr_null(pg_ref_parse(NULL, &err));
    ck_assert_int_eq(err.code, PG_ERR_INVALID);
    ck_assert_ptr_null(pg_image_name(NULL, NULL));
    ck_assert_ptr_null(pg_ref_domain(NULL));
    ck_assert_ptr_null(pg_ref_path(NULL));
    ck_assert_ptr_null(pg_ref_tag(NULL));
    ck_assert_ptr_null(pg_ref_digest(NULL));
    ck_assert_ptr_null(pg_ref_name(NULL));
    ck_assert_ptr_null(pg_ref_string(NULL));
    pg_ref_free(NULL);
}
END_TEST

/* Normalising is idempotent: the normalised string parses to itself. */
START_TEST(test_idempotent)
{
    const valid_case *c = &valid_cases[_i];
    pg_ref *ref = pg_ref_parse(c->in, NULL);
    ck_assert_ptr_nonnull(ref);
    if (pg_ref_domain(ref)[0]) {
        pg_ref *again = pg_ref_parse(pg_ref_string(ref), NULL);
        ck_assert_ptr_nonnull(again);
        ck_assert_str_eq(pg_ref_string(again), pg_ref_string(ref));
        pg_ref_free(again);
    }
    pg_ref_free(ref);
}
END_TEST

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *reference_suite(void)
{
    Suite *s = suite_create("reference");
    TCase *tc = tcase_create("parse");
    tcase_add_loop_test(tc, test_valid, 0, N(valid_cases));
    tcase_add_loop_test(tc, test_invalid, 0, N(invalid_cases));
    tcase_add_loop_test(tc, test_idempotent, 0, N(valid_cases));
    tcase_add_test(tc, test_name_length_limit);
    tcase_add_test(tc, test_tag_length_limit);
    tcase_add_test(tc, test_input_length_limit);
    tcase_add_test(tc, test_null_and_accessors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(reference_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
