/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-webhook's metrics (docs/metrics.md), served as GET /metrics on the
 * plain-HTTP health address only (--health-listen), never on the admission
 * port. Every name, label and value the webhook exports is defined here.
 */
#ifndef PULLGATE_WEBHOOK_WHMETRICS_H
#define PULLGATE_WEBHOOK_WHMETRICS_H

#include "metrics.h"
#include "review.h"
#include "tlscert.h"

typedef struct wh_metrics {
    pg_metrics *reg;
    pg_metric *reviews;        /* pullgate_webhook_reviews_total{outcome} */
    pg_metric *review_seconds; /* pullgate_webhook_review_duration_seconds{outcome} */
    pg_metric *refusals;       /* pullgate_webhook_refusals_total{reason} */
    pg_metric *api_reads;      /* pullgate_webhook_api_reads_total{resource,result} */
    pg_metric *api_errors;     /* pullgate_webhook_api_read_errors_total{kind} */
    pg_metric *cert_expiry;    /* pullgate_webhook_certificate_expiry_timestamp_seconds */
    pg_metric *conns_refused;  /* pullgate_webhook_connections_refused_total{reason} */
    pg_metric *conns_evicted;  /* pullgate_webhook_connections_evicted_total{reason} */
    wh_tls *tls;               /* read at each scrape for the expiry; may be NULL */
} wh_metrics;

/* Defines every metric (pullgate_build_info{component="webhook"} too). tls may be NULL (no
 * expiry gauge value). */
int wh_metrics_init(wh_metrics *m, wh_tls *tls, pg_error *err);
void wh_metrics_free(wh_metrics *m);

/* One review answered: its outcome (review.c's log "outcome"), the refusal's HTTP-style
 * code (0 when not refused) and its duration. m may be NULL. */
void wh_metrics_review(wh_metrics *m, const char *outcome, int refusal_code, double seconds);
/* The results of one batch of API reads (wh_get_fn's requests). m may be NULL. */
void wh_metrics_api_reads(wh_metrics *m, const wh_get_req *reqs, size_t n);
/* A connection refused before any byte was read, or (evicted) shut to give its slot to a new
 * one, by the bound reached: "per-peer", "share" or "total" (peers.h). m may be NULL. */
void wh_metrics_connection(wh_metrics *m, int evicted, const char *reason);

#endif
