/* SPDX-License-Identifier: Apache-2.0 */
/* pullgate-webhook's metric definitions and the helpers server.c calls (whmetrics.h). */
#include "whmetrics.h"

#include <string.h>

#ifndef PG_WEBHOOK_VERSION
#define PG_WEBHOOK_VERSION "unknown"
#endif

/* review.c's outcomes (its log's "outcome"). */
static const char *const outcomes[] = {"allowed",  "patched",  "warned",  "ignored",
                                          "restored", "stripped", "refused", "bad-request",
                                          "error",    "other",    NULL};
static const char *const refusal_reasons[] = {"invalid-request", "too-large", "server-error",
                                                 "timeout",         "other",     NULL};
/* wh_get_req.fail_kind (kubeapi.c). */
static const char *const api_errors[] = {
    "timeout", "connection", "http-error", "invalid-response", "too-large", "token", "other", NULL};
static const char *const resources[] = {"secrets", "serviceaccounts", "other", NULL};
static const char *const api_results[] = {"found", "not-found", "failed", NULL};
static const char *const conn_reasons[] = {"per-peer", "share", "total", NULL};

static const double review_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                        0.1,   0.25,   0.5,   1,    2.5,   5};

static void collect(void *ctx)
{
    wh_metrics *m = ctx;
    long long not_after = m->tls ? wh_tls_not_after(m->tls) : -1;
    if (not_after >= 0)
        pg_metric_set(m->cert_expiry, NULL, NULL, (double)not_after);
}

int wh_metrics_init(wh_metrics *m, wh_tls *tls, pg_error *err)
{
    memset(m, 0, sizeof *m);
    m->tls = tls;
    const pg_metric_def defs[] = {
        {.name = "pullgate_webhook_reviews_total",
         .type = PG_METRIC_COUNTER,
         .help = "AdmissionReviews answered, by outcome (refused: the pod is refused; "
                 "bad-request/error: no AdmissionReview answer could be made).",
         .nlabels = 1,
         .labels = {{"outcome", outcomes}}},
        {.name = "pullgate_webhook_review_duration_seconds",
         .type = PG_METRIC_HISTOGRAM,
         .help = "Time from a review's headers to its answer, by outcome.",
         .nlabels = 1,
         .labels = {{"outcome", outcomes}},
         .buckets = review_buckets,
         .nbuckets = sizeof review_buckets / sizeof review_buckets[0]},
        {.name = "pullgate_webhook_refusals_total",
         .type = PG_METRIC_COUNTER,
         .help = "Pods refused (allowed: false), by reason.",
         .nlabels = 1,
         .labels = {{"reason", refusal_reasons}}},
        {.name = "pullgate_webhook_api_reads_total",
         .type = PG_METRIC_COUNTER,
         .help = "Kubernetes API reads (Secrets, ServiceAccounts), by resource and result.",
         .nlabels = 2,
         .labels = {{"resource", resources}, {"result", api_results}}},
        {.name = "pullgate_webhook_api_read_errors_total",
         .type = PG_METRIC_COUNTER,
         .help = "Kubernetes API reads that failed (the pod is refused), by kind.",
         .nlabels = 1,
         .labels = {{"kind", api_errors}}},
        {.name = "pullgate_webhook_certificate_expiry_timestamp_seconds",
         .type = PG_METRIC_GAUGE,
         .help = "When the serving certificate in use expires (notAfter, Unix time)."},
        {.name = "pullgate_webhook_connections_refused_total",
         .type = PG_METRIC_COUNTER,
         .help = "Connections closed before any byte was read because a bound was reached "
                 "and no connection could give up its slot (per-peer: "
                 "--max-connections-per-peer; share: --max-connections minus "
                 "--reserved-connections, for callers not known as the API server; total: "
                 "--max-connections).",
         .nlabels = 1,
         .labels = {{"reason", conn_reasons}}},
        {.name = "pullgate_webhook_connections_evicted_total",
         .type = PG_METRIC_COUNTER,
         .help = "Connections in their handshake or idle that were shut to give their slot to a "
                 "new connection, by the bound that was reached (per-peer, share, total).",
         .nlabels = 1,
         .labels = {{"reason", conn_reasons}}},
    };
    pg_metric **slots[] = {&m->reviews,       &m->review_seconds, &m->refusals,
                           &m->api_reads,     &m->api_errors,     &m->cert_expiry,
                           &m->conns_refused, &m->conns_evicted};
    _Static_assert(sizeof defs / sizeof defs[0] == sizeof slots / sizeof slots[0],
                   "one slot per definition");
    int rc = pg_metrics_define(PG_WEBHOOK_VERSION, "webhook", defs, slots,
                               sizeof defs / sizeof defs[0], &m->reg, err);
    if (rc == PG_OK)
        pg_metrics_on_collect(m->reg, collect, m);
    return rc;
}

void wh_metrics_free(wh_metrics *m)
{
    if (!m)
        return;
    pg_metrics_free(m->reg);
    memset(m, 0, sizeof *m);
}

/* The refusal reason label for a refusal's HTTP status (500: an API read failed, the key is
 * unusable, out of memory). */
static const char *refusal_reason(int code)
{
    switch (code) {
    case 400: return "invalid-request";
    case 413: return "too-large";
    case 500: return "server-error";
    case 504: return "timeout";
    default: return "other";
    }
}

void wh_metrics_review(wh_metrics *m, const char *outcome, int refusal_code, double seconds)
{
    if (!m)
        return;
    pg_metric_inc(m->reviews, outcome, NULL);
    pg_metric_observe(m->review_seconds, outcome, NULL, seconds);
    if (outcome && strcmp(outcome, "refused") == 0)
        pg_metric_inc(m->refusals, refusal_reason(refusal_code), NULL);
}

void wh_metrics_api_reads(wh_metrics *m, const wh_get_req *reqs, size_t n)
{
    if (!m)
        return;
    for (size_t i = 0; i < n; i++) {
        const char *result = reqs[i].result == WH_FOUND       ? "found"
                             : reqs[i].result == WH_NOT_FOUND ? "not-found"
                                                              : "failed";
        pg_metric_inc(m->api_reads, reqs[i].resource, result);
        if (reqs[i].result != WH_FOUND && reqs[i].result != WH_NOT_FOUND)
            pg_metric_inc(m->api_errors, reqs[i].fail_kind ? reqs[i].fail_kind : "other", NULL);
    }
}

void wh_metrics_connection(wh_metrics *m, int evicted, const char *reason)
{
    if (m)
        pg_metric_inc(evicted ? m->conns_evicted : m->conns_refused, reason, NULL);
}
