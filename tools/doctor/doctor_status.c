/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-doctor's status section, like `cilium status`: what pullgate-cri says about
 * itself (version, uptime, records and intents on disk, denials in the last hour, its last
 * prune), read from its own /metrics on criMetricsListen with libcurl. Not a check: a
 * node may turn the metrics off (criMetricsListen: none), and the checks already say
 * whether pullgate-cri answers. The answer is bounded and only a few samples are read.
 */
#include "doctor.h"

#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_METRICS_BYTES (4u << 20)

typedef struct body {
    char *data;
    size_t len;
    bool too_large;
} body;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ctx)
{
    body *b = ctx;
    size_t n = size * nmemb;
    if (b->len + n > MAX_METRICS_BYTES) {
        b->too_large = true;
        return 0; /* stops the transfer */
    }
    char *grown = realloc(b->data, b->len + n + 1);
    if (!grown)
        return 0;
    memcpy(grown + b->len, ptr, n);
    b->data = grown;
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

/* http://ADDR/metrics from criMetricsListen ("IPv4:PORT" or "[IPv6]:PORT"); a wildcard
 * address is asked on loopback. false when the metrics are off. */
static bool metrics_url(const char *listen, char *url, size_t n)
{
    if (!listen || !*listen || strcmp(listen, "none") == 0)
        return false;
    const char *port = strrchr(listen, ':');
    if (!port)
        return false;
    if (strncmp(listen, "0.0.0.0:", 8) == 0)
        snprintf(url, n, "http://127.0.0.1%s/metrics", port);
    else if (strncmp(listen, "[::]:", 5) == 0)
        snprintf(url, n, "http://[::1]%s/metrics", port);
    else
        snprintf(url, n, "http://%s/metrics", listen);
    return true;
}

static int fetch(const char *url, int timeout_ms, body *b, pg_error *why)
{
    CURL *c = curl_easy_init();
    if (!c)
        return pg_fail(why, PG_ERR_NOMEM, "libcurl could not start");
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(c, CURLOPT_PROXY, ""); /* never an environment's proxy for a local port */
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    if (rc == CURLE_OK)
        return PG_OK;
    return pg_fail(why, PG_ERR_IO, "no answer on %s (%s)", url,
                   b->too_large ? "larger than 4 MiB"
                   : errbuf[0]  ? errbuf
                                : curl_easy_strerror(rc));
}

static double sample(const body *b, const char *name)
{
    double v = NAN;
    return pgd_prom_sample(b->data, b->len, name, NULL, NULL, 0, &v) == 0 ? v : NAN;
}

void pgd_read_status(const pgd_node *n, pgd_status *st)
{
    memset(st, 0, sizeof *st);
    st->start_time = st->pulled = st->intents = st->denials_hour = st->last_prune = NAN;
    const char *listen = n->cfg ? pg_config_cri_metrics_listen(n->cfg) : NULL;
    if (!n->cfg) {
        snprintf(st->why, sizeof st->why, "no usable configuration names criMetricsListen");
        return;
    }
    if (!metrics_url(listen, st->source, sizeof st->source)) {
        snprintf(st->why, sizeof st->why, "criMetricsListen is %s: pullgate-cri serves no metrics",
                 listen && *listen && strcmp(listen, "none") ? listen : "none");
        return;
    }
    body b = {0};
    curl_global_init(CURL_GLOBAL_NOTHING);
    pg_error why = {0};
    int fetched = fetch(st->source, n->opt->timeout_ms, &b, &why);
    snprintf(st->why, sizeof st->why, "%s", why.message);
    if (fetched == PG_OK && b.data) {
        double one = 0;
        if (pgd_prom_sample(b.data, b.len, "pullgate_build_info", "version", st->version,
                            sizeof st->version, &one) != 0)
            snprintf(st->why, sizeof st->why, "%s does not look like pullgate-cri's metrics",
                     st->source);
        else
            st->available = true;
        st->start_time = sample(&b, "pullgate_cri_start_timestamp_seconds");
        st->pulled = sample(&b, "pullgate_cri_ondisk_pulledrecords");
        st->intents = sample(&b, "pullgate_cri_ondisk_pullintents");
        st->denials_hour = sample(&b, "pullgate_cri_hook_denials_last_hour");
        st->last_prune = sample(&b, "pullgate_cri_last_prune_timestamp_seconds");
    }
    free(b.data);
    curl_global_cleanup();
}
