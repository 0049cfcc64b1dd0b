/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the webhook's skims and memory accounting (skim.c, memory.c):
 *  - the uid of a review from its first bytes, as kube-apiserver writes them, and nothing from
 *    anything else (cut before the uid, an escaped or overlong uid, request not an object);
 *  - wh_json_parse_cost is an upper bound of what jansson really allocates for a text (counted
 *    here through jansson's own allocator hook), on the shapes that cost the most per byte and on
 *    a review: a jansson that allocates more fails this test, not the webhook's budget;
 *  - accounts: the per-request and the global limit refuse a charge and mark the account; a
 *    bounded buffer refuses past its bound and charges what it holds.
 */
#include "memory.h"
#include "review.h"

#include <check.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the uid skim */

static int uid_of(const char *text, char *uid)
{
    return wh_review_uid_of_prefix(text, strlen(text), uid, WH_MAX_UID_BYTES + 1);
}

START_TEST(uid_as_kube_apiserver_writes_it)
{
    char uid[WH_MAX_UID_BYTES + 1];
    ck_assert_int_eq(uid_of("{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\","
                            "\"request\":{\"uid\":\"0d9f-11\",\"kind\":{\"group\":\"\"",
                            uid),
                     0);
    ck_assert_str_eq(uid, "0d9f-11");
    /* members before "request" of every kind, strings with escaped quotes and braces */
    ck_assert_int_eq(uid_of(" { \"a\" : [1, {\"x\":\"}\\\"]\"}, true, null, -2.5e3],"
                            "\"b\":{\"request\":{\"uid\":\"wrong\"}}, \"request\" : "
                            "{ \"uid\" : \"right\" ",
                            uid),
                     0);
    ck_assert_str_eq(uid, "right");
}
END_TEST

START_TEST(uid_refused_when_unsure)
{
    char uid[WH_MAX_UID_BYTES + 1];
    static const char *const bad[] = {
        "",
        "{\"kind\":\"AdmissionReview\",\"request\":{\"kind\":{}", /* cut before the uid */
        "{\"request\":{\"uid\":\"abc",                            /* uid cut */
        "{\"request\":{\"uid\":\"a\\\"b\"}}",                     /* escaped */
        "{\"request\":{\"uid\":\"\"}}",                           /* empty */
        "{\"request\":{\"uid\":7}}",                              /* not a string */
        "{\"request\":[{\"uid\":\"x\"}]}",                        /* request not an object */
        "[{\"request\":{\"uid\":\"x\"}}]",                        /* not an object */
        "{\"request\":{\"kind\":{\"uid\":\"x\"}}}",               /* uid of another object */
        "{\"request\":{\"uid\":\"\x01\"}}",                       /* control character */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(uid_of(bad[i], uid) == -1, "accepted: %s", bad[i]);
    char long_uid[300] = "{\"request\":{\"uid\":\"";
    memset(long_uid + strlen(long_uid), 'a', WH_MAX_UID_BYTES + 1);
    strcat(long_uid, "\"}}");
    ck_assert_int_eq(uid_of(long_uid, uid), -1);
}
END_TEST

/* ------------------------------------------------------------ parse cost */

static size_t live, peak;

static void *counting_malloc(size_t n)
{
    void *p = malloc(n);
    if (p) {
        live += malloc_usable_size(p) + 16; /* the chunk header glibc keeps */
        peak = live > peak ? live : peak;
    }
    return p;
}

static void counting_free(void *p)
{
    if (p) {
        live -= malloc_usable_size(p) + 16;
        free(p);
    }
}

/* Checks the bound on text; returns the measured peak. */
static size_t assert_bound(const char *what, const char *text, size_t len)
{
    json_set_alloc_funcs(counting_malloc, counting_free);
    live = peak = 0;
    json_t *j = json_loadb(text, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, NULL);
    json_decref(j);
    json_set_alloc_funcs(malloc, free);
    size_t bound = wh_json_parse_cost(text, len);
    ck_assert_msg(j != NULL, "%s: not parsed", what);
    ck_assert_msg(peak <= bound, "%s: jansson took %zu bytes, the bound is %zu", what, peak, bound);
    return peak;
}

/* "[" unit x n "]" without the last comma. */
static char *repeated(const char *open, const char *unit, size_t n, const char *close, size_t *len)
{
    size_t u = strlen(unit), o = strlen(open), c = strlen(close);
    char *b = malloc(o + u * n + c + 1);
    memcpy(b, open, o);
    for (size_t i = 0; i < n; i++)
        memcpy(b + o + i * u, unit, u);
    if (n && unit[u - 1] == ',')
        b[o + u * n - 1] = ' ';
    memcpy(b + o + u * n, close, c + 1);
    *len = o + u * n + c;
    return b;
}

START_TEST(cost_bounds_what_jansson_allocates)
{
    static const struct {
        const char *what, *open, *unit, *close;
        size_t n;
    } shapes[] = {
        {"objects", "[", "{},", "]", 100000},
        {"arrays", "[", "[],", "]", 100000},
        {"numbers", "[", "0,", "]", 100000},
        {"reals", "[", "-1.5e3,", "]", 100000},
        {"literals", "[", "null,true,", "]", 100000},
        {"empty strings", "[", "\"\",", "]", 100000},
        {"escapes", "[", "\"\\u003c\\u0000\\n\",", "]", 100000},
        {"objects of members", "[", "{\"k\":{},\"v\":[0]},", "]", 50000},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        size_t len;
        char *text = repeated(shapes[i].open, shapes[i].unit, shapes[i].n, shapes[i].close, &len);
        assert_bound(shapes[i].what, text, len);
        free(text);
    }
    char nested[4001];
    memset(nested, '[', 2000);
    memset(nested + 2000, ']', 2000);
    nested[4000] = '\0';
    assert_bound("nested 2000 deep", nested, 4000);
    /* Many distinct keys (the hashtable grows), and one long string (the lexer's buffer). */
    char *keys = malloc(100000 * 24 + 2);
    size_t n = 0;
    keys[n++] = '{';
    for (int i = 0; i < 100000; i++)
        n += (size_t)sprintf(keys + n, "%s\"key%d\":%d", i ? "," : "", i, i);
    keys[n++] = '}';
    assert_bound("distinct members", keys, n);
    free(keys);
    size_t big = (3u << 20) + 7;
    char *s = malloc(big + 3);
    s[0] = '"';
    for (size_t i = 0; i < big; i += 6)
        memcpy(s + 1 + i, "\\u003c", big - i < 6 ? big - i : 6);
    memset(s + 1 + big / 6 * 6, 'a', big - big / 6 * 6);
    s[big + 1] = '"';
    s[big + 2] = '\0';
    assert_bound("a 3 MiB escaped string", s, big + 2);
    free(s);
}
END_TEST

START_TEST(cost_of_a_review)
{
    static const char review[] =
        "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\",\"request\":{"
        "\"uid\":\"u\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
        "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},"
        "\"namespace\":\"team-a\",\"operation\":\"CREATE\",\"object\":{\"kind\":\"Pod\","
        "\"metadata\":{\"name\":\"a\",\"namespace\":\"team-a\",\"labels\":{\"app\":\"x\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"nginx:1.25\",\"env\":[{\"name\":"
        "\"A\",\"value\":\"\\u003chtml\\u003e\"}],\"resources\":{}}],"
        "\"imagePullSecrets\":[{\"name\":\"regcred\"}]}},\"dryRun\":false}}";
    size_t peak_seen = assert_bound("a review", review, sizeof review - 1);
    /* A bound, not a guess: at most a few times what it bounds on a real review. */
    ck_assert_uint_le(wh_json_parse_cost(review, sizeof review - 1), 8 * peak_seen + 8192);
}
END_TEST

/* ------------------------------------------------------------ accounts */

START_TEST(accounts_refuse_over_their_limits)
{
    wh_account a, b;
    wh_account_init(&a, 1000);
    wh_account_init(&b, 1u << 30);
    ck_assert_int_eq(wh_charge(&a, 600), 0);
    ck_assert_int_eq(wh_charge(&a, 600), -1); /* over its own limit */
    ck_assert(a.over);
    ck_assert_uint_eq(a.used, 600);
    wh_uncharge(&a, 5000); /* more than it holds: saturates */
    ck_assert_uint_eq(a.used, 0);
    ck_assert_uint_eq(a.peak, 600);
    wh_buf buf;
    wh_buf_init(&buf, 10000, &b);
    char chunk[4000];
    memset(chunk, 'x', sizeof chunk);
    ck_assert_int_eq(wh_buf_append(&buf, chunk, sizeof chunk), 0);
    ck_assert_int_eq(wh_buf_append(&buf, chunk, sizeof chunk), 0);
    ck_assert_int_eq(wh_buf_append(&buf, chunk, sizeof chunk), -1); /* past its bound */
    ck_assert_uint_eq(buf.len, 8000);
    ck_assert_uint_ge(b.used, 8001);
    wh_buf_wipe(&buf);
    ck_assert_uint_eq(b.used, 0);
    ck_assert_ptr_null(buf.data);
}
END_TEST

START_TEST(the_global_budget_refuses_too)
{
    ck_assert_int_eq(wh_memory_init(64 * 1024), 0); /* once per process: this test's fork */
    wh_account a, b;
    wh_account_init(&a, 1u << 20);
    wh_account_init(&b, 1u << 20);
    ck_assert_int_eq(wh_charge(&a, 40 * 1024), 0);
    ck_assert_int_eq(wh_charge(&b, 40 * 1024), -1); /* 80 KiB > 64 KiB in all */
    ck_assert(b.over);
    ck_assert_uint_eq(wh_memory_used(), 40 * 1024);
    wh_account_init(&b, 1u << 20);
    wh_account_enter(&b); /* a parse is admitted by its bound, then charged what it keeps */
    ck_assert_int_eq(wh_parse_begin(30 * 1024), -1);
    wh_account_init(&b, 1u << 20);
    wh_account_enter(&b);
    wh_account_leave(&a);
    ck_assert_int_eq(wh_parse_begin(30 * 1024), 0);
    json_t *j = json_loads("{\"a\":[1,2,3]}", 0, NULL);
    wh_parse_end();
    ck_assert_uint_lt(wh_memory_used(), 30 * 1024);
    ck_assert_uint_gt(wh_memory_used(), 0);
    json_decref(j);
    wh_account_leave(&b);
    ck_assert_uint_eq(wh_memory_used(), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("webhook_memory");
    TCase *t = tcase_create("all");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, uid_as_kube_apiserver_writes_it);
    tcase_add_test(t, uid_refused_when_unsure);
    tcase_add_test(t, cost_bounds_what_jansson_allocates);
    tcase_add_test(t, cost_of_a_review);
    tcase_add_test(t, accounts_refuse_over_their_limits);
    tcase_add_test(t, the_global_budget_refuses_too);
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
