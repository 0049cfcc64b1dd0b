/* SPDX-License-Identifier: Apache-2.0 */
/* The pooled helpers of util.c: the error idiom, hex, UTF-8, clock, buffer, string vector. */
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

START_TEST(error_prefix_keeps_code_and_adds_context)
{
    pg_error err = {0};
    pg_fail(&err, PG_ERR_UNSAFE, "pulled/sha256-ab: is a symlink");
    pg_error_prefix(&err, "record directory %s", "/var/lib/pullgate");
    ck_assert_int_eq(err.code, PG_ERR_UNSAFE);
    ck_assert_str_eq(err.message,
                     "record directory /var/lib/pullgate: pulled/sha256-ab: is a symlink");
    pg_error_prefix(&err, "outer");
    ck_assert_str_eq(err.message,
                     "outer: record directory /var/lib/pullgate: pulled/sha256-ab: is a symlink");
    ck_assert_int_eq(err.code, PG_ERR_UNSAFE);
}
END_TEST

START_TEST(error_prefix_edge_cases)
{
    pg_error_prefix(NULL, "nothing to do"); /* must not crash */
    pg_error err = {0};
    err.code = PG_ERR_NOMEM; /* a code without a message names the code */
    pg_error_prefix(&err, "ctx");
    ck_assert_str_eq(err.message, "ctx: nomem");
    /* A context with a newline stays one line; a long one is truncated, NUL-terminated. */
    pg_fail(&err, PG_ERR_IO, "inner");
    pg_error_prefix(&err, "a\nb");
    ck_assert_str_eq(err.message, "a b: inner");
    char big[2 * PG_ERROR_MESSAGE_MAX];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    pg_error_prefix(&err, "%s", big);
    ck_assert_uint_eq(strlen(err.message), PG_ERROR_MESSAGE_MAX - 1);
    ck_assert_int_eq(err.code, PG_ERR_IO);
}
END_TEST

START_TEST(hex_helpers)
{
    const unsigned char bytes[] = {0x00, 0x7f, 0x80, 0xff, 0x1a};
    char out[2 * sizeof bytes + 1];
    pg_hex_encode(bytes, sizeof bytes, out);
    ck_assert_str_eq(out, "007f80ff1a");
    ck_assert_int_eq(pg_hex_value('0'), 0);
    ck_assert_int_eq(pg_hex_value('f'), 15);
    ck_assert_int_eq(pg_hex_value('F'), 15);
    ck_assert_int_eq(pg_hex_value('g'), -1);
    ck_assert_int_eq(pg_hex_value('/'), -1);
    char h64[65];
    memset(h64, 'a', 64);
    h64[64] = '\0';
    ck_assert(pg_is_hex64(h64));
    h64[10] = 'A'; /* uppercase is not a credentialHash */
    ck_assert(!pg_is_hex64(h64));
    h64[10] = '0';
    h64[63] = '\0'; /* 63 digits */
    ck_assert(!pg_is_hex64(h64));
    ck_assert(!pg_is_hex64(NULL));
    ck_assert(pg_lower_hex_run("00ffZZ", 4)); /* a run inside a longer string */
    ck_assert(!pg_lower_hex_run("00Ff", 4));
    ck_assert(pg_lower_hex_run("", 0));
    ck_assert(pg_is_lower_hex("00ff", 4));
    ck_assert(!pg_is_lower_hex("00ff0", 4)); /* longer than n */
}
END_TEST

START_TEST(utf8_valid_len)
{
    ck_assert_uint_eq(pg_utf8_valid_len((const unsigned char *)"a"), 1);
    ck_assert_uint_eq(pg_utf8_valid_len((const unsigned char *)"\xc3\xa9"), 2);     /* é */
    ck_assert_uint_eq(pg_utf8_valid_len((const unsigned char *)"\xe2\x80\xa8"), 3); /* U+2028 */
    ck_assert_uint_eq(pg_utf8_valid_len((const unsigned char *)"\xf0\x9f\x98\x80"),
                      4);                                                           /* U+1F600 */
    ck_assert_uint_eq(pg_utf8_valid_len((const unsigned char *)"\xc0\xaf"), 0);     /* overlong */
    ck_assert_uint_eq(pg_utf8_valid_len((const unsigned char *)"\xed\xa0\x80"), 0); /* surrogate */
    ck_assert_uint_eq(pg_utf8_valid_len((const unsigned char *)"\xf4\x90\x80\x80"),
                      0);                                                       /* > U+10FFFF */
    ck_assert_uint_eq(pg_utf8_valid_len((const unsigned char *)"\xe2\x80"), 0); /* truncated */
    ck_assert_uint_eq(pg_utf8_valid_len((const unsigned char *)"\xff"), 0);
}
END_TEST

START_TEST(monotonic_clock_advances)
{
    int64_t a = pg_monotonic_ms();
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    int64_t b = pg_monotonic_ms();
    ck_assert_int_ge(b - a, 15);
    ck_assert_int_lt(b - a, 10000);
}
END_TEST

START_TEST(buffer_grows_and_terminates)
{
    pg_buf b = {0};
    for (int i = 0; i < 1000; i++)
        pg_buf_puts(&b, "0123456789");
    pg_buf_append(&b, "\0z", 2); /* binary-safe */
    ck_assert(!b.oom);
    ck_assert_uint_eq(b.len, 10002);
    ck_assert_int_eq(memcmp(b.p + 9990, "0123456789\0z", 12), 0);
    ck_assert_int_eq(b.p[b.len], '\0');
    free(b.p);
}
END_TEST

START_TEST(string_vector)
{
    pg_strv v = {0};
    ck_assert_int_eq(pg_strv_ensure(&v, NULL), PG_OK);
    ck_assert_ptr_nonnull(v.v);
    ck_assert_ptr_null(v.v[0]);
    char item[16];
    for (int i = 0; i < 100; i++) {
        snprintf(item, sizeof item, "s%d", i);
        ck_assert_int_eq(pg_strv_push(&v, item, NULL), PG_OK);
        ck_assert_ptr_null(v.v[v.n]); /* NULL-terminated after every push */
    }
    ck_assert_uint_eq(v.n, 100);
    ck_assert_str_eq(v.v[0], "s0");
    ck_assert_str_eq(v.v[99], "s99");
    pg_strv_clear(&v);
    ck_assert_ptr_null(v.v);
    ck_assert_uint_eq(v.n, 0);
    /* Push without ensure, and hand the result to the public pg_strv_free. */
    ck_assert_int_eq(pg_strv_push(&v, "only", NULL), PG_OK);
    char **owned = v.v;
    ck_assert_str_eq(owned[0], "only");
    ck_assert_ptr_null(owned[1]);
    pg_strv_free(owned);
}
END_TEST

/* The RFC 3339 parser computes the date itself (no timegm: it reads the timezone
 * file); it must agree with timegm everywhere, out-of-range days and leap seconds
 * included (both normalise), and apply the offset. */
START_TEST(rfc3339_agrees_with_timegm)
{
    static const int years[] = {1,    399,  400,  1600, 1899, 1900, 1969, 1970,
                                1972, 2000, 2024, 2038, 2100, 2400, 9999};
    for (size_t y = 0; y < sizeof years / sizeof years[0]; y++)
        for (int mon = 1; mon <= 12; mon++)
            for (int day = 1; day <= 31; day += 3) {
                char text[64];
                snprintf(text, sizeof text, "%04d-%02d-%02dT23:59:60.5+05:30", years[y], mon, day);
                struct tm tm = {.tm_year = years[y] - 1900,
                                .tm_mon = mon - 1,
                                .tm_mday = day,
                                .tm_hour = 23,
                                .tm_min = 59,
                                .tm_sec = 60};
                time_t want = timegm(&tm) - (5 * 3600 + 30 * 60), got = 0;
                pg_error err = {0};
                ck_assert_msg(pg_parse_rfc3339(text, &got, &err) == PG_OK, "%s: %s", text,
                              err.message);
                ck_assert_msg(got == want, "%s: %lld, timegm says %lld", text, (long long)got,
                              (long long)want);
            }
    time_t t = 0;
    ck_assert_int_eq(pg_parse_rfc3339("1970-01-01T00:00:00Z", &t, NULL), PG_OK);
    ck_assert_int_eq((int)t, 0);
    ck_assert_int_ne(pg_parse_rfc3339("1970-13-01T00:00:00Z", &t, NULL), PG_OK);
}
END_TEST

static Suite *util_suite(void)
{
    Suite *s = suite_create("util");
    TCase *tc = tcase_create("helpers");
    tcase_add_test(tc, error_prefix_keeps_code_and_adds_context);
    tcase_add_test(tc, error_prefix_edge_cases);
    tcase_add_test(tc, hex_helpers);
    tcase_add_test(tc, utf8_valid_len);
    tcase_add_test(tc, monotonic_clock_advances);
    tcase_add_test(tc, buffer_grows_and_terminates);
    tcase_add_test(tc, string_vector);
    tcase_add_test(tc, rfc3339_agrees_with_timegm);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(util_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
