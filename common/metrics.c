/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The registry of metrics.h. Each metric holds one block of atomic 64-bit
 * slots, allocated when it is defined: one slot per series for counters and
 * gauges (the double's bits), and for histograms per series one count per
 * bucket (not cumulative: an observation lands in exactly one slot, so a
 * render never sees a bucket larger than the next), one for +Inf, one for the
 * sum. _count is the sum of the bucket slots, so it always equals the +Inf
 * bucket of the same render.
 */
#include "metrics.h"

#include "internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const double pg_metrics_latency_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                             0.25,  0.5,    1,     2.5,  5,     10};
const size_t pg_metrics_latency_nbuckets =
    sizeof pg_metrics_latency_buckets / sizeof pg_metrics_latency_buckets[0];

typedef struct label {
    char *name;
    char **values;
    size_t nvalues;
} label;

struct pg_metric {
    char *name, *help;
    pg_metric_type type;
    size_t nlabels;
    label labels[PG_METRICS_MAX_LABELS];
    double *buckets;
    size_t nbuckets;
    size_t nseries, stride; /* slots per series */
    int sparse;
    _Atomic uint64_t *slots;
    _Atomic unsigned char *touched; /* sparse: per series, updated at least once */
    struct pg_metric *next;
};

struct pg_metrics {
    pg_metric *first, *last;
    pg_metrics_collect_fn collect;
    void *collect_ctx;
};

/* ------------------------------------------------------------ doubles in atomics */

static uint64_t bits_of(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double double_of(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static void atomic_add_double(_Atomic uint64_t *slot, double delta)
{
    uint64_t old = atomic_load_explicit(slot, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(slot, &old, bits_of(double_of(old) + delta),
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

/* ------------------------------------------------------------ definitions */

/* Prometheus' metric and label name rules ([a-zA-Z_:][a-zA-Z0-9_:]*, labels without ':'). */
static int valid_name(const char *s, int colon_ok)
{
    if (!s || !*s || (*s >= '0' && *s <= '9'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || (colon_ok && *s == ':')))
            return 0;
    return 1;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

static void free_metric(pg_metric *m)
{
    if (!m)
        return;
    free(m->name);
    free(m->help);
    for (size_t l = 0; l < m->nlabels; l++) {
        for (size_t v = 0; v < m->labels[l].nvalues; v++)
            free(m->labels[l].values[v]);
        free(m->labels[l].values);
        free(m->labels[l].name);
    }
    free(m->buckets);
    free((void *)m->slots);
    free((void *)m->touched);
    free(m);
}

static const char *check_labels(const pg_metric_def *def, size_t *nseries)
{
    if (def->nlabels > PG_METRICS_MAX_LABELS)
        return "too many labels";
    *nseries = 1;
    for (size_t l = 0; l < def->nlabels; l++) {
        const pg_metric_label *lb = &def->labels[l];
        if (!valid_name(lb->name, 0) || strncmp(lb->name, "__", 2) == 0 ||
            strcmp(lb->name, "le") == 0)
            return "invalid label name";
        size_t n = 0;
        while (lb->values && lb->values[n])
            n++;
        if (n == 0 || n > PG_METRICS_MAX_VALUES)
            return "a label needs 1..PG_METRICS_MAX_VALUES values";
        *nseries *= n;
    }
    return *nseries > PG_METRICS_MAX_SERIES ? "too many series" : NULL;
}

static const char *check_def(pg_metrics *reg, const pg_metric_def *def, size_t *nseries)
{
    if (!def->name || !valid_name(def->name, 1))
        return "invalid metric name";
    if (pg_metrics_find(reg, def->name))
        return "metric defined twice";
    if (!def->help)
        return "no help text";
    if (def->type == PG_METRIC_COUNTER && !ends_with(def->name, "_total"))
        return "a counter's name ends in _total";
    if (def->type == PG_METRIC_HISTOGRAM) {
        if (def->nbuckets == 0 || def->nbuckets > PG_METRICS_MAX_BUCKETS || !def->buckets)
            return "a histogram needs 1..PG_METRICS_MAX_BUCKETS buckets";
        for (size_t b = 0; b < def->nbuckets; b++)
            if (!isfinite(def->buckets[b]) || (b && def->buckets[b] <= def->buckets[b - 1]))
                return "histogram buckets must be finite and increasing";
    } else if (def->type != PG_METRIC_COUNTER && def->type != PG_METRIC_GAUGE)
        return "unknown metric type";
    return check_labels(def, nseries);
}

static int copy_labels(pg_metric *m, const pg_metric_def *def)
{
    for (size_t l = 0; l < def->nlabels; l++, m->nlabels++) {
        label *lb = &m->labels[l];
        size_t n = 0;
        while (def->labels[l].values[n])
            n++;
        if (!(lb->name = strdup(def->labels[l].name)) || !(lb->values = calloc(n, sizeof(char *))))
            return -1;
        for (; lb->nvalues < n; lb->nvalues++)
            if (!(lb->values[lb->nvalues] = strdup(def->labels[l].values[lb->nvalues])))
                return -1;
    }
    return 0;
}

pg_metric *pg_metrics_add(pg_metrics *reg, const pg_metric_def *def, pg_error *err)
{
    size_t nseries = 0;
    const char *bad = reg && def ? check_def(reg, def, &nseries) : "no registry or definition";
    if (bad) {
        pg_fail(err, PG_ERR_INVALID, "metric %.100s: %s", def && def->name ? def->name : "?", bad);
        return NULL;
    }
    pg_metric *m = calloc(1, sizeof *m);
    int ok = m && (m->name = strdup(def->name)) && (m->help = strdup(def->help)) &&
             copy_labels(m, def) == 0;
    if (ok) {
        m->type = def->type;
        m->nseries = nseries;
        m->nbuckets = def->type == PG_METRIC_HISTOGRAM ? def->nbuckets : 0;
        m->stride = def->type == PG_METRIC_HISTOGRAM ? m->nbuckets + 2 : 1;
        m->buckets = m->nbuckets ? malloc(m->nbuckets * sizeof(double)) : NULL;
        m->slots = calloc(nseries * m->stride, sizeof(_Atomic uint64_t));
        m->sparse = def->sparse != 0;
        m->touched = m->sparse ? calloc(nseries, sizeof(_Atomic unsigned char)) : NULL;
        ok = m->slots && (!m->nbuckets || m->buckets) && (!m->sparse || m->touched);
    }
    if (!ok) {
        free_metric(m);
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (m->nbuckets)
        memcpy(m->buckets, def->buckets, m->nbuckets * sizeof(double));
    for (size_t i = 0; i < nseries * m->stride; i++)
        atomic_init(&m->slots[i], m->stride == 1 ? bits_of(0.0) : 0);
    if (m->type == PG_METRIC_HISTOGRAM) /* the sum slots hold doubles */
        for (size_t s = 0; s < nseries; s++)
            atomic_store(&m->slots[s * m->stride + m->nbuckets + 1], bits_of(0.0));
    if (reg->last)
        reg->last->next = m;
    else
        reg->first = m;
    reg->last = m;
    return m;
}

pg_metrics *pg_metrics_new(void) { return calloc(1, sizeof(pg_metrics)); }

int pg_metrics_define(const char *version, const char *component, const pg_metric_def *defs,
                      pg_metric **const *slots, size_t n, pg_metrics **out, pg_error *err)
{
    const char *const versions[] = {version, NULL}, *const components[] = {component, NULL};
    const pg_metric_def build_info = {.name = "pullgate_build_info",
                                      .type = PG_METRIC_GAUGE,
                                      .help =
                                          "Always 1; the labels say which pullgate build serves.",
                                      .nlabels = 2,
                                      .labels = {{"version", versions}, {"component", components}}};
    *out = NULL;
    pg_metrics *reg = pg_metrics_new();
    if (!reg)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    pg_error local = {0}, *e = err ? err : &local; /* the code is returned either way */
    pg_metric *info = pg_metrics_add(reg, &build_info, e);
    for (size_t i = 0; info && i < n; i++)
        if (!(*slots[i] = pg_metrics_add(reg, &defs[i], e)))
            info = NULL;
    if (!info) {
        pg_metrics_free(reg);
        return e->code;
    }
    pg_metric_set(info, version, component, 1);
    *out = reg;
    return PG_OK;
}

void pg_metrics_free(pg_metrics *reg)
{
    if (!reg)
        return;
    for (pg_metric *m = reg->first, *next; m; m = next) {
        next = m->next;
        free_metric(m);
    }
    free(reg);
}

pg_metric *pg_metrics_find(pg_metrics *reg, const char *name)
{
    for (pg_metric *m = reg && name ? reg->first : NULL; m; m = m->next)
        if (strcmp(m->name, name) == 0)
            return m;
    return NULL;
}

void pg_metrics_on_collect(pg_metrics *reg, pg_metrics_collect_fn fn, void *ctx)
{
    if (!reg)
        return;
    reg->collect = fn;
    reg->collect_ctx = ctx;
}

/* ------------------------------------------------------------ updates */

int pg_metric_value_index(const pg_metric *m, size_t l, const char *value)
{
    if (!m || l >= m->nlabels)
        return -1;
    const label *lb = &m->labels[l];
    for (size_t v = 0; value && v + 1 < lb->nvalues; v++)
        if (strcmp(lb->values[v], value) == 0)
            return (int)v;
    return (int)lb->nvalues - 1; /* the catch-all */
}

/* The series number of the label value indices idx (one per possible label; 0 for a
 * label the metric does not have), or -1 when an index is out of range. */
static long series_index(const pg_metric *m, const int *idx)
{
    size_t s = 0;
    for (size_t l = 0; l < PG_METRICS_MAX_LABELS; l++) {
        size_t n = l < m->nlabels ? m->labels[l].nvalues : 1;
        if (idx[l] < 0 || (size_t)idx[l] >= n)
            return -1;
        s = s * n + (size_t)idx[l];
    }
    return (long)s;
}

/* The first slot of the series idx for an update (NULL when an index is out of range): a
 * sparse metric's series is shown from now on. */
static _Atomic uint64_t *series_for_update(pg_metric *m, const int *idx)
{
    long s = series_index(m, idx);
    if (s < 0)
        return NULL;
    if (m->sparse)
        atomic_store_explicit(&m->touched[s], 1, memory_order_relaxed);
    return &m->slots[(size_t)s * m->stride];
}

/* Label values by text: a label not given (NULL beyond the values passed) takes its first
 * value when it is the third (the two-value functions), the catch-all otherwise. */
static void indices_of(const pg_metric *m, const char *const *v, size_t nv, int *idx)
{
    for (size_t l = 0; l < PG_METRICS_MAX_LABELS; l++)
        idx[l] = l >= m->nlabels ? 0 : l < nv ? pg_metric_value_index(m, l, v[l]) : 0;
}

/* The first slot of a series by its label values' text, NULL when there is none. */
static _Atomic uint64_t *series_by_text(const pg_metric *m, const char *const *v, size_t nv)
{
    int idx[PG_METRICS_MAX_LABELS];
    indices_of(m, v, nv, idx);
    long s = series_index(m, idx);
    return s < 0 ? NULL : &m->slots[(size_t)s * m->stride];
}

static void add(pg_metric *m, const int *idx, double delta)
{
    if (!m || m->type == PG_METRIC_HISTOGRAM || !isfinite(delta) ||
        (m->type == PG_METRIC_COUNTER && delta < 0))
        return;
    _Atomic uint64_t *slot = series_for_update(m, idx);
    if (slot)
        atomic_add_double(slot, delta);
}

void pg_metric_add_at(pg_metric *m, int i0, int i1, double delta)
{
    add(m, (const int[PG_METRICS_MAX_LABELS]){i0, i1}, delta);
}

static void observe(pg_metric *m, const int *idx, double value)
{
    if (!m || m->type != PG_METRIC_HISTOGRAM || isnan(value))
        return;
    _Atomic uint64_t *slot = series_for_update(m, idx);
    if (!slot)
        return;
    size_t b = 0;
    while (b < m->nbuckets && value > m->buckets[b])
        b++;
    atomic_fetch_add_explicit(&slot[b], 1, memory_order_relaxed);
    atomic_add_double(&slot[m->nbuckets + 1], value);
}

void pg_metric_add3(pg_metric *m, const char *v0, const char *v1, const char *v2, double delta)
{
    int idx[PG_METRICS_MAX_LABELS];
    if (!m)
        return;
    indices_of(m, (const char *const[]){v0, v1, v2}, 3, idx);
    add(m, idx, delta);
}

void pg_metric_inc(pg_metric *m, const char *v0, const char *v1)
{
    pg_metric_add_value(m, v0, v1, 1);
}

void pg_metric_add_value(pg_metric *m, const char *v0, const char *v1, double delta)
{
    if (!m)
        return;
    pg_metric_add_at(m, m->nlabels > 0 ? pg_metric_value_index(m, 0, v0) : 0,
                     m->nlabels > 1 ? pg_metric_value_index(m, 1, v1) : 0, delta);
}

void pg_metric_set(pg_metric *m, const char *v0, const char *v1, double value)
{
    int idx[PG_METRICS_MAX_LABELS];
    if (!m || m->type != PG_METRIC_GAUGE)
        return;
    indices_of(m, (const char *const[]){v0, v1}, 2, idx);
    _Atomic uint64_t *slot = series_for_update(m, idx);
    if (slot)
        atomic_store_explicit(slot, bits_of(value), memory_order_relaxed);
}

void pg_metric_observe(pg_metric *m, const char *v0, const char *v1, double value)
{
    if (!m)
        return;
    int idx[PG_METRICS_MAX_LABELS];
    indices_of(m, (const char *const[]){v0, v1}, 2, idx);
    observe(m, idx, value);
}

static uint64_t histogram_count(const pg_metric *m, _Atomic uint64_t *slot)
{
    uint64_t n = 0;
    for (size_t b = 0; b <= m->nbuckets; b++)
        n += atomic_load_explicit(&slot[b], memory_order_relaxed);
    return n;
}

static double get_value(const pg_metric *m, const char *const *v, size_t nv)
{
    _Atomic uint64_t *slot = m ? series_by_text(m, v, nv) : NULL;
    if (!slot)
        return NAN;
    if (m->type == PG_METRIC_HISTOGRAM)
        return (double)histogram_count(m, slot);
    return double_of(atomic_load_explicit(slot, memory_order_relaxed));
}

double pg_metric_get(const pg_metric *m, const char *v0, const char *v1)
{
    return get_value(m, (const char *const[]){v0, v1}, 2);
}

double pg_metric_get3(const pg_metric *m, const char *v0, const char *v1, const char *v2)
{
    return get_value(m, (const char *const[]){v0, v1, v2}, 3);
}

double pg_metric_sum(const pg_metric *m, const char *v0, const char *v1)
{
    _Atomic uint64_t *slot = m && m->type == PG_METRIC_HISTOGRAM
                                 ? series_by_text(m, (const char *const[]){v0, v1}, 2)
                                 : NULL;
    return slot ? double_of(atomic_load_explicit(&slot[m->nbuckets + 1], memory_order_relaxed))
                : NAN;
}

long long pg_metrics_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* ------------------------------------------------------------ exposition */

/* HELP text escapes \ and newline; label values also escape ". */
static void put_escaped(pg_buf *o, const char *s, int quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            pg_buf_puts(o, "\\\\");
        else if (*s == '\n')
            pg_buf_puts(o, "\\n");
        else if (quote && *s == '"')
            pg_buf_puts(o, "\\\"");
        else
            pg_buf_append(o, s, 1);
    }
}

/* The shortest text that reads back as v (0.1, not 0.10000000000000001). */
static void format_double(char *text, size_t size, double v)
{
    if (isnan(v)) {
        snprintf(text, size, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(text, size, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(text, size, "%.*g", digits, v);
        if (strtod(text, NULL) == v)
            return;
    }
}

static void put_number(pg_buf *o, double v)
{
    char text[64];
    format_double(text, sizeof text, v);
    pg_buf_puts(o, text);
}

/* name{l0="v0",l1="v1"[,le="b"]} value */
static void put_sample(pg_buf *o, const pg_metric *m, const char *suffix, const size_t *vi,
                       const char *le, double value)
{
    pg_buf_puts(o, m->name);
    pg_buf_puts(o, suffix);
    if (m->nlabels || le) {
        pg_buf_puts(o, "{");
        for (size_t l = 0; l < m->nlabels; l++) {
            if (l)
                pg_buf_puts(o, ",");
            pg_buf_puts(o, m->labels[l].name);
            pg_buf_puts(o, "=\"");
            put_escaped(o, m->labels[l].values[vi[l]], 1);
            pg_buf_puts(o, "\"");
        }
        if (le) {
            pg_buf_puts(o, m->nlabels ? ",le=\"" : "le=\"");
            pg_buf_puts(o, le);
            pg_buf_puts(o, "\"");
        }
        pg_buf_puts(o, "}");
    }
    pg_buf_puts(o, " ");
    put_number(o, value);
    pg_buf_puts(o, "\n");
}

static void put_histogram(pg_buf *o, const pg_metric *m, const size_t *vi, _Atomic uint64_t *slot)
{
    uint64_t cumulative = 0;
    char le[64];
    for (size_t b = 0; b < m->nbuckets; b++) {
        cumulative += atomic_load_explicit(&slot[b], memory_order_relaxed);
        format_double(le, sizeof le, m->buckets[b]);
        put_sample(o, m, "_bucket", vi, le, (double)cumulative);
    }
    cumulative += atomic_load_explicit(&slot[m->nbuckets], memory_order_relaxed);
    put_sample(o, m, "_bucket", vi, "+Inf", (double)cumulative);
    put_sample(o, m, "_sum", vi, NULL,
               double_of(atomic_load_explicit(&slot[m->nbuckets + 1], memory_order_relaxed)));
    put_sample(o, m, "_count", vi, NULL, (double)cumulative);
}

static void put_metric(pg_buf *o, const pg_metric *m)
{
    static const char *const type_names[] = {"counter", "gauge", "histogram"};
    pg_buf_puts(o, "# HELP ");
    pg_buf_puts(o, m->name);
    pg_buf_puts(o, " ");
    put_escaped(o, m->help, 0);
    pg_buf_puts(o, "\n# TYPE ");
    pg_buf_puts(o, m->name);
    pg_buf_puts(o, " ");
    pg_buf_puts(o, type_names[m->type]);
    pg_buf_puts(o, "\n");
    for (size_t s = 0; s < m->nseries; s++) {
        if (m->sparse && !atomic_load_explicit(&m->touched[s], memory_order_relaxed))
            continue;
        size_t vi[PG_METRICS_MAX_LABELS] = {0}, rest = s;
        for (size_t l = m->nlabels; l-- > 0;) { /* the series index, label by label */
            vi[l] = rest % m->labels[l].nvalues;
            rest /= m->labels[l].nvalues;
        }
        _Atomic uint64_t *slot = &m->slots[s * m->stride];
        if (m->type == PG_METRIC_HISTOGRAM)
            put_histogram(o, m, vi, slot);
        else
            put_sample(o, m, "", vi, NULL,
                       double_of(atomic_load_explicit(slot, memory_order_relaxed)));
    }
}

char *pg_metrics_render(pg_metrics *reg, size_t *len)
{
    if (!reg)
        return NULL;
    if (reg->collect)
        reg->collect(reg->collect_ctx);
    pg_buf o = {0};
    pg_buf_puts(&o, ""); /* an empty registry renders as "" */
    for (const pg_metric *m = reg->first; m; m = m->next)
        put_metric(&o, m);
    if (o.oom) {
        free(o.p);
        return NULL;
    }
    if (len)
        *len = o.len;
    return o.p;
}
