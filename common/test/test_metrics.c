/* SPDX-License-Identifier: Apache-2.0 */
/* The daemons' Prometheus registry (common/metrics.h): definitions refused and
 * accepted, bounded labels, counters, gauges, histograms, the exposition text,
 * concurrent increments. `test_metrics --render` prints a sample registry for
 * promtool_check.sh. */
#include "metrics.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const methods[] = {"PullImage", "ImageStatus", "other", NULL};
static const char *const codes[] = {"OK", "UNAVAILABLE", "other", NULL};
static const char *const versions[] = {"1.2.3", NULL};
static const char *const hostile[] = {"a\"b", "back\\slash", "new\nline", NULL};
static const double buckets[] = {0.01, 0.1, 1};

static pg_metric_def counter_def(void)
{
    return (pg_metric_def){.name = "pullgate_test_calls_total",
                           .type = PG_METRIC_COUNTER,
                           .help = "Calls by method and code.",
                           .nlabels = 2,
                           .labels = {{"method", methods}, {"code", codes}}};
}

/* sample() also runs outside Check (--render). */
#define NEED(x)                                                                                    \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #x);                                \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A registry of every kind, as promtool sees it. */
static pg_metrics *sample(void)
{
    pg_metrics *reg = pg_metrics_new();
    NEED(reg);
    pg_metric_def c = counter_def();
    pg_metric_def g = {.name = "pullgate_build_info",
                       .type = PG_METRIC_GAUGE,
                       .help = "Build information; the value is 1.",
                       .nlabels = 1,
                       .labels = {{"version", versions}}};
    pg_metric_def h = {.name = "pullgate_test_duration_seconds",
                       .type = PG_METRIC_HISTOGRAM,
                       .help = "Latency with a \\ backslash\nand a newline in its help.",
                       .nlabels = 1,
                       .labels = {{"method", methods}},
                       .buckets = buckets,
                       .nbuckets = 3};
    pg_metric_def e = {.name = "pullgate_test_escapes",
                       .type = PG_METRIC_GAUGE,
                       .help = "Hostile label values.",
                       .nlabels = 1,
                       .labels = {{"value", hostile}}};
    pg_metric_def u = {
        .name = "pullgate_test_records", .type = PG_METRIC_GAUGE, .help = "No labels."};
    pg_error err = {0};
    pg_metric *mc = pg_metrics_add(reg, &c, &err);
    pg_metric *mg = pg_metrics_add(reg, &g, &err);
    pg_metric *mh = pg_metrics_add(reg, &h, &err);
    pg_metric *me = pg_metrics_add(reg, &e, &err);
    pg_metric *mu = pg_metrics_add(reg, &u, &err);
    NEED(mc && mg && mh && me && mu);
    pg_metric_inc(mc, "PullImage", "OK");
    pg_metric_set(mg, "1.2.3", NULL, 1);
    pg_metric_observe(mh, "PullImage", NULL, 0.05);
    pg_metric_observe(mh, "PullImage", NULL, 7);
    pg_metric_set(me, "new\nline", NULL, -2.5);
    pg_metric_set(mu, NULL, NULL, 12);
    return reg;
}

START_TEST(invalid_definitions_are_refused)
{
    pg_metrics *reg = pg_metrics_new();
    pg_error err = {0};
    pg_metric_def d = counter_def();
    d.name = "pullgate_calls"; /* a counter without _total */
    ck_assert_ptr_null(pg_metrics_add(reg, &d, &err));
    ck_assert_ptr_nonnull(strstr(err.message, "_total"));
    d.name = "9bad_total";
    ck_assert_ptr_null(pg_metrics_add(reg, &d, &err));
    d.name = "pullgate-dash_total";
    ck_assert_ptr_null(pg_metrics_add(reg, &d, &err));
    d = counter_def();
    d.labels[0].name = "le"; /* reserved for buckets */
    ck_assert_ptr_null(pg_metrics_add(reg, &d, &err));
    d = counter_def();
    d.labels[1].name = "__reserved";
    ck_assert_ptr_null(pg_metrics_add(reg, &d, &err));
    static const char *const none[] = {NULL};
    d = counter_def();
    d.labels[1].values = none;
    ck_assert_ptr_null(pg_metrics_add(reg, &d, &err));
    static const double down[] = {1, 0.5};
    pg_metric_def h = {.name = "pullgate_h_seconds",
                       .type = PG_METRIC_HISTOGRAM,
                       .help = "h",
                       .buckets = down,
                       .nbuckets = 2};
    ck_assert_ptr_null(pg_metrics_add(reg, &h, &err));
    h.nbuckets = 0;
    ck_assert_ptr_null(pg_metrics_add(reg, &h, &err));
    d = counter_def();
    ck_assert_ptr_nonnull(pg_metrics_add(reg, &d, &err));
    ck_assert_ptr_null(pg_metrics_add(reg, &d, &err)); /* twice */
    ck_assert_ptr_nonnull(strstr(err.message, "twice"));
    ck_assert_int_eq(err.code, PG_ERR_INVALID);
    pg_metrics_free(reg);
}
END_TEST

/* A daemon's registry: build info first, then its table, each metric in its slot; one bad
 * definition and there is no registry, with the reason. */
START_TEST(a_daemon_registry_is_defined_in_one_call)
{
    pg_metric *calls = NULL, *records = NULL;
    pg_metric_def defs[] = {
        counter_def(),
        {.name = "pullgate_test_records", .type = PG_METRIC_GAUGE, .help = "No labels."}};
    pg_metric **slots[] = {&calls, &records};
    pg_error err = {0};
    pg_metrics *reg = NULL;
    int rc = pg_metrics_define("9.8.7", "test", defs, slots, 2, &reg, &err);
    ck_assert_msg(rc == PG_OK && reg, "%s", err.message);
    ck_assert_ptr_eq(calls, pg_metrics_find(reg, "pullgate_test_calls_total"));
    ck_assert_ptr_eq(records, pg_metrics_find(reg, "pullgate_test_records"));
    char *text = pg_metrics_render(reg, NULL);
    ck_assert_ptr_nonnull(text);
    const char *info =
        strstr(text, "pullgate_build_info{version=\"9.8.7\",component=\"test\"} 1\n");
    ck_assert_msg(info && info < strstr(text, "pullgate_test_calls_total"), "%s", text);
    free(text);
    pg_metrics_free(reg);
    defs[1].name = "pullgate_test_calls_total"; /* defined twice */
    ck_assert_int_eq(pg_metrics_define("9.8.7", "test", defs, slots, 2, &reg, &err),
                     PG_ERR_INVALID);
    ck_assert_ptr_null(reg);
    ck_assert_ptr_nonnull(strstr(err.message, "pullgate_test_calls_total"));
}
END_TEST

START_TEST(unknown_label_values_count_under_the_catch_all)
{
    pg_metrics *reg = pg_metrics_new();
    pg_metric_def d = counter_def();
    pg_metric *m = pg_metrics_add(reg, &d, NULL);
    ck_assert_ptr_nonnull(m);
    pg_metric_inc(m, "PullImage", "OK");
    pg_metric_inc(m, "/runtime.v1.RuntimeService/Evil", "OK");
    pg_metric_inc(m, "another-unknown", "NOT_A_CODE");
    pg_metric_inc(m, NULL, NULL);
    ck_assert(pg_metric_get(m, "PullImage", "OK") == 1);
    ck_assert(pg_metric_get(m, "other", "OK") == 1);
    ck_assert(pg_metric_get(m, "other", "other") == 2);
    size_t len = 0;
    char *text = pg_metrics_render(reg, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(len, strlen(text));
    ck_assert_ptr_null(strstr(text, "Evil")); /* a caller's text never becomes a series */
    ck_assert_ptr_null(strstr(text, "NOT_A_CODE"));
    /* every series exists from the start: 3 methods x 3 codes */
    size_t lines = 0;
    for (const char *p = text; (p = strstr(p, "pullgate_test_calls_total{")); p++)
        lines++;
    ck_assert_uint_eq(lines, 9);
    ck_assert_ptr_nonnull(
        strstr(text, "pullgate_test_calls_total{method=\"other\",code=\"other\"} 2\n"));
    free(text);
    pg_metrics_free(reg);
}
END_TEST

START_TEST(counters_never_go_down_and_gauges_are_set)
{
    pg_metrics *reg = pg_metrics_new();
    pg_metric_def d = counter_def();
    pg_metric *c = pg_metrics_add(reg, &d, NULL);
    pg_metric_def g = {.name = "pullgate_g", .type = PG_METRIC_GAUGE, .help = "g"};
    pg_metric *gm = pg_metrics_add(reg, &g, NULL);
    pg_metric_add_value(c, "ImageStatus", "OK", 2.5);
    pg_metric_add_value(c, "ImageStatus", "OK", -1);
    pg_metric_add_value(c, "ImageStatus", "OK", NAN);
    pg_metric_add_value(c, "ImageStatus", "OK", INFINITY);
    pg_metric_set(c, "ImageStatus", "OK", 0); /* set is for gauges only */
    ck_assert(pg_metric_get(c, "ImageStatus", "OK") == 2.5);
    pg_metric_set(gm, NULL, NULL, 5);
    pg_metric_add_value(gm, NULL, NULL, -7);
    ck_assert(pg_metric_get(gm, NULL, NULL) == -2);
    /* out-of-range indices and NULL metrics are ignored, never a crash */
    pg_metric_add_at(c, 3, 0, 1);
    pg_metric_add_at(c, -1, 0, 1);
    pg_metric_add_at(NULL, 0, 0, 1);
    pg_metric_inc(NULL, "x", "y");
    pg_metric_observe(NULL, NULL, NULL, 1);
    ck_assert_int_eq(pg_metric_value_index(c, 2, "x"), -1);
    ck_assert_int_eq(pg_metric_value_index(c, 0, "ImageStatus"), 1);
    pg_metrics_free(reg);
}
END_TEST

START_TEST(histograms_are_cumulative_with_sum_and_count)
{
    pg_metrics *reg = sample();
    pg_metric *h = pg_metrics_find(reg, "pullgate_test_duration_seconds");
    ck_assert_ptr_nonnull(h);
    pg_metric_observe(h, "PullImage", NULL, 0.01); /* on a bound: that bucket (le) */
    pg_metric_observe(h, "PullImage", NULL, NAN);  /* ignored */
    ck_assert(pg_metric_get(h, "PullImage", NULL) == 3);
    ck_assert(fabs(pg_metric_sum(h, "PullImage", NULL) - 7.06) < 1e-9);
    char *text = pg_metrics_render(reg, NULL);
    ck_assert_ptr_nonnull(text);
    const char *want[] = {
        "# TYPE pullgate_test_duration_seconds histogram\n",
        "pullgate_test_duration_seconds_bucket{method=\"PullImage\",le=\"0.01\"} 1\n",
        "pullgate_test_duration_seconds_bucket{method=\"PullImage\",le=\"0.1\"} 2\n",
        "pullgate_test_duration_seconds_bucket{method=\"PullImage\",le=\"1\"} 2\n",
        "pullgate_test_duration_seconds_bucket{method=\"PullImage\",le=\"+Inf\"} 3\n",
        "pullgate_test_duration_seconds_count{method=\"PullImage\"} 3\n",
        "pullgate_test_duration_seconds_bucket{method=\"ImageStatus\",le=\"+Inf\"} 0\n",
        "# HELP pullgate_test_duration_seconds Latency with a \\\\ backslash\\nand a newline in "
        "its "
        "help.\n",
        "pullgate_test_escapes{value=\"a\\\"b\"} 0\n",
        "pullgate_test_escapes{value=\"back\\\\slash\"} 0\n",
        "pullgate_test_escapes{value=\"new\\nline\"} -2.5\n",
        "pullgate_build_info{version=\"1.2.3\"} 1\n",
        "# TYPE pullgate_test_calls_total counter\n",
        "pullgate_test_records 12\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(text, want[i]), "missing: %s\nin:\n%s", want[i], text);
    free(text);
    pg_metrics_free(reg);
}
END_TEST

static void collect(void *ctx)
{
    pg_metric *g = ctx;
    pg_metric_set(g, NULL, NULL, pg_metric_get(g, NULL, NULL) + 1);
}

START_TEST(collect_runs_before_each_render)
{
    pg_metrics *reg = sample();
    pg_metric *g = pg_metrics_find(reg, "pullgate_test_records");
    pg_metrics_on_collect(reg, collect, g);
    char *a = pg_metrics_render(reg, NULL), *b = pg_metrics_render(reg, NULL);
    ck_assert_ptr_nonnull(strstr(a, "pullgate_test_records 13\n"));
    ck_assert_ptr_nonnull(strstr(b, "pullgate_test_records 14\n"));
    free(a);
    free(b);
    pg_metrics_free(reg);
}
END_TEST

START_TEST(sparse_metrics_show_updated_series_only)
{
    pg_metrics *reg = pg_metrics_new();
    pg_metric_def d = counter_def();
    d.sparse = 1;
    pg_metric *m = pg_metrics_add(reg, &d, NULL);
    ck_assert_ptr_nonnull(m);
    char *text = pg_metrics_render(reg, NULL);
    ck_assert_ptr_nonnull(strstr(text, "# TYPE pullgate_test_calls_total counter\n"));
    ck_assert_ptr_null(strstr(text, "pullgate_test_calls_total{"));
    free(text);
    pg_metric_inc(m, "ImageStatus", "UNAVAILABLE");
    pg_metric_add_value(m, "PullImage", "OK", 0); /* an update of 0 shows the series too */
    text = pg_metrics_render(reg, NULL);
    ck_assert_ptr_nonnull(
        strstr(text, "pullgate_test_calls_total{method=\"ImageStatus\",code=\"UNAVAILABLE\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(text, "pullgate_test_calls_total{method=\"PullImage\",code=\"OK\"} 0\n"));
    size_t lines = 0;
    for (const char *p = text; (p = strstr(p, "pullgate_test_calls_total{")); p++)
        lines++;
    ck_assert_uint_eq(lines, 2);
    free(text);
    pg_metrics_free(reg);
}
END_TEST

START_TEST(a_third_label_is_addressed_by_add3)
{
    static const char *const paths[] = {"resident", "local", "other", NULL};
    pg_metrics *reg = pg_metrics_new();
    pg_metric_def d = counter_def();
    d.nlabels = 3;
    d.labels[2] = (pg_metric_label){"path", paths};
    d.sparse = 1;
    pg_metric *m = pg_metrics_add(reg, &d, NULL);
    ck_assert_ptr_nonnull(m);
    pg_metric_inc(m, "PullImage", "OK"); /* the two-value form: the third label's first value */
    pg_metric_add3(m, "PullImage", "OK", "local", 2);
    pg_metric_add3(m, "PullImage", "OK", "elsewhere", 1); /* unlisted: the catch-all */
    pg_metric_add3(m, "PullImage", "OK", "local", -1);    /* a counter never goes down */
    ck_assert(pg_metric_get(m, "PullImage", "OK") == 1);
    ck_assert(pg_metric_get3(m, "PullImage", "OK", "resident") == 1);
    ck_assert(pg_metric_get3(m, "PullImage", "OK", "local") == 2);
    ck_assert(pg_metric_get3(m, "PullImage", "OK", "other") == 1);
    char *text = pg_metrics_render(reg, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(
        text, "pullgate_test_calls_total{method=\"PullImage\",code=\"OK\",path=\"local\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(
        text, "pullgate_test_calls_total{method=\"PullImage\",code=\"OK\",path=\"resident\"} 1\n"));
    free(text);
    static const char *const many[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k",
                                       "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v",
                                       "w", "x", "y", "z", "aa", "bb", "cc", "dd", "ee", "ff",
                                       "gg", "hh", "ii", "jj", "kk", "ll", "mm", "nn", "oo",
                                       "pp", "qq", "rr", "ss", "tt", "uu", "vv", "ww", "xx", NULL};
    pg_metric_def big = counter_def();
    big.name = "pullgate_test_big_total";
    big.nlabels = 3;
    big.labels[0].values = many;
    big.labels[1].values = many;
    big.labels[2] = (pg_metric_label){"path", paths};
    pg_error err = {0};
    ck_assert_ptr_null(pg_metrics_add(reg, &big, &err)); /* 50 x 50 x 3 series */
    ck_assert_ptr_nonnull(strstr(err.message, "too many series"));
    pg_metrics_free(reg);
}
END_TEST

#define THREADS 4
#define PER_THREAD 100000

static void *hammer(void *arg)
{
    pg_metrics *reg = arg;
    pg_metric *c = pg_metrics_find(reg, "pullgate_test_calls_total");
    pg_metric *h = pg_metrics_find(reg, "pullgate_test_duration_seconds");
    for (int i = 0; i < PER_THREAD; i++) {
        pg_metric_inc(c, "ImageStatus", "UNAVAILABLE");
        pg_metric_observe(h, "ImageStatus", NULL, 0.5);
        if (i % 10000 == 0)
            free(pg_metrics_render(reg, NULL));
    }
    return NULL;
}

START_TEST(concurrent_updates_are_all_counted)
{
    pg_metrics *reg = sample();
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, hammer, reg), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pg_metric *c = pg_metrics_find(reg, "pullgate_test_calls_total");
    pg_metric *h = pg_metrics_find(reg, "pullgate_test_duration_seconds");
    ck_assert(pg_metric_get(c, "ImageStatus", "UNAVAILABLE") == (double)THREADS * PER_THREAD);
    ck_assert(pg_metric_get(h, "ImageStatus", NULL) == (double)THREADS * PER_THREAD);
    ck_assert(pg_metric_sum(h, "ImageStatus", NULL) == 0.5 * THREADS * PER_THREAD);
    pg_metrics_free(reg);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--render") == 0) {
        pg_metrics *reg = sample();
        char *text = pg_metrics_render(reg, NULL);
        fputs(text ? text : "", stdout);
        free(text);
        pg_metrics_free(reg);
        return text ? 0 : 1;
    }
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, invalid_definitions_are_refused);
    tcase_add_test(tc, a_daemon_registry_is_defined_in_one_call);
    tcase_add_test(tc, unknown_label_values_count_under_the_catch_all);
    tcase_add_test(tc, counters_never_go_down_and_gauges_are_set);
    tcase_add_test(tc, histograms_are_cumulative_with_sum_and_count);
    tcase_add_test(tc, collect_runs_before_each_render);
    tcase_add_test(tc, concurrent_updates_are_all_counted);
    tcase_add_test(tc, sparse_metrics_show_updated_series_only);
    tcase_add_test(tc, a_third_label_is_addressed_by_add3);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
