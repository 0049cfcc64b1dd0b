/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small Prometheus registry shared by pullgate-cri and pullgate-webhook
 * (docs/metrics.md): counters, gauges and histograms whose label values are
 * fixed when the metric is defined, rendered in the text exposition format
 * 0.0.4 (HELP, TYPE, escaping).
 *
 * Label values are fixed at definition (docs/metrics.md, "What is never in a
 * metric"): bounded series, and an increment is an index lookup plus one atomic
 * operation without a lock, so hot paths count freely. A value not in the list
 * counts under the list's LAST value, the catch-all ("other" by convention).
 *
 * Thread-safe: definition happens before serving (pg_metrics_add), then
 * increments, sets, observations and renders may run concurrently from any
 * thread. Every update function accepts a NULL metric and does nothing, so
 * code paths built without a registry (unit tests, tools) need no checks.
 */
#ifndef PULLGATE_COMMON_METRICS_H
#define PULLGATE_COMMON_METRICS_H

#include "pullgate/pullgate.h"

#include <stddef.h>

#define PG_METRICS_MAX_LABELS 3
#define PG_METRICS_MAX_VALUES 64 /* per label */
#define PG_METRICS_MAX_BUCKETS 24
#define PG_METRICS_MAX_SERIES 1024 /* per metric: the product of its labels' value counts */

typedef enum pg_metric_type {
    PG_METRIC_COUNTER,
    PG_METRIC_GAUGE,
    PG_METRIC_HISTOGRAM
} pg_metric_type;

/* One label: its name and every value it may take, NULL-terminated; the last
 * value is the catch-all for anything not listed. */
typedef struct pg_metric_label {
    const char *name;
    const char *const *values;
} pg_metric_label;

/* A metric's definition. Strings are copied by pg_metrics_add. */
typedef struct pg_metric_def {
    const char *name; /* pullgate_..., counters end in _total */
    pg_metric_type type;
    const char *help;
    size_t nlabels; /* 0..PG_METRICS_MAX_LABELS */
    pg_metric_label labels[PG_METRICS_MAX_LABELS];
    const double *buckets; /* histograms: upper bounds, strictly increasing, finite */
    size_t nbuckets;       /* (+Inf is implicit) */
    /* 0: every series is rendered from the start. 1: only series that were ever
     * updated (for large label products such as method x code; a series once shown
     * stays shown, so rate() still sees its first increment after the first scrape). */
    int sparse;
} pg_metric_def;

typedef struct pg_metrics pg_metrics;
typedef struct pg_metric pg_metric;

/* Called at the start of every render, to set gauges that are read, not counted
 * (records on disk, a certificate's expiry). Runs in the rendering thread. */
typedef void (*pg_metrics_collect_fn)(void *ctx);

/* A new, empty registry (NULL: out of memory). The caller frees it with pg_metrics_free. */
pg_metrics *pg_metrics_new(void);
void pg_metrics_free(pg_metrics *reg);

/*
 * Defines a metric; the registry owns it (valid until pg_metrics_free). NULL with
 * err when the definition is invalid (PG_ERR_INVALID: name, labels, buckets, a
 * counter without _total, a name defined twice, too many series) or memory runs
 * out. Not concurrent with renders: define everything before serving.
 */
pg_metric *pg_metrics_add(pg_metrics *reg, const pg_metric_def *def, pg_error *err);
/*
 * A daemon's registry into *out (the caller frees it): pullgate_build_info{version,
 * component} (always 1) first, then defs[0..n) in order, each metric into *slots[i].
 * Fails as pg_metrics_add does, nothing kept.
 */
int pg_metrics_define(const char *version, const char *component, const pg_metric_def *defs,
                      pg_metric **const *slots, size_t n, pg_metrics **out, pg_error *err);
/* The metric of that name, or NULL. */
pg_metric *pg_metrics_find(pg_metrics *reg, const char *name);
/* Sets the collect callback (one per registry; NULL removes it). */
void pg_metrics_on_collect(pg_metrics *reg, pg_metrics_collect_fn fn, void *ctx);

/* The index of value in label l of m (the catch-all's index when not listed); -1 when
 * m is NULL or has no label l. */
int pg_metric_value_index(const pg_metric *m, size_t l, const char *value);

/* Label values by text (NULL for a label the metric does not have). A metric with a
 * third label is updated in its first value by these; pg_metric_add3 names all three. */
void pg_metric_inc(pg_metric *m, const char *v0, const char *v1);
void pg_metric_add_value(pg_metric *m, const char *v0, const char *v1, double delta);
void pg_metric_set(pg_metric *m, const char *v0, const char *v1, double value);
void pg_metric_observe(pg_metric *m, const char *v0, const char *v1, double value);
void pg_metric_add3(pg_metric *m, const char *v0, const char *v1, const char *v2, double delta);
/* pg_metric_add_value by value indices (0 for a label the metric does not have; the third
 * label's first value). Counters ignore negative, NaN and infinite deltas: a counter never
 * goes down. */
void pg_metric_add_at(pg_metric *m, int i0, int i1, double delta);

/* Reads (tests, collectors): a counter's or gauge's value; a histogram's count. */
double pg_metric_get(const pg_metric *m, const char *v0, const char *v1);
double pg_metric_get3(const pg_metric *m, const char *v0, const char *v1, const char *v2);
/* A histogram's sum of observations. */
double pg_metric_sum(const pg_metric *m, const char *v0, const char *v1);

/* The exposition text (text/plain; version=0.0.4), NUL-terminated, in definition
 * order; the caller frees it with free(). NULL when memory runs out. */
char *pg_metrics_render(pg_metrics *reg, size_t *len);

#define PG_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* CLOCK_MONOTONIC in microseconds: latency = (end - start) / 1e6 seconds. */
long long pg_metrics_now_us(void);

/* Default latency buckets (seconds): 1 ms .. 10 s. */
extern const double pg_metrics_latency_buckets[];
extern const size_t pg_metrics_latency_nbuckets;

#endif
