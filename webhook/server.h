/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTPS endpoints of pullgate-webhook on libmicrohttpd (server.c). */
#ifndef PULLGATE_WEBHOOK_SERVER_H
#define PULLGATE_WEBHOOK_SERVER_H

#include "keyholder.h"
#include "kubeapi.h"
#include "peers.h"
#include "whmetrics.h"

#include <sys/socket.h>

#define WH_REVIEW_DEADLINE_MS 2500L /* from a review's headers to its answer; timeoutSeconds is 3 */
#define WH_READY_CACHE_MS 3000LL
/* What one review may hold: the largest legal review (28 MiB) while jansson parses it
 * (its strings at their escaped length, 27 MiB, and the lexer's buffer at twice the
 * longest, 36 MiB; wh_json_parse_cost), then its secrets. */
#define WH_REQUEST_MEMORY (96u * 1024u * 1024u)

typedef struct wh_server_config {
    const char *annotation_key;
    pg_keyholder *keys; /* NULL: unkeyed annotations (explicit opt-out) */
    wh_kubeapi *api;
    long deadline_ms; /* the whole review, from its headers to its answer */
    unsigned int max_connections;
    unsigned int max_per_peer; /* connections from one address */
    /* Of max_connections, never held by anonymous connections: for peers in api_cidrs and
     * connections with a verified client certificate (peers.h). < max_connections. */
    unsigned int reserved_connections;
    const wh_cidr *api_cidrs; /* the API server's source addresses; owned by the caller */
    size_t n_api_cidrs;
    wh_metrics *metrics; /* NULL: nothing counted, no GET /metrics */
} wh_server_config;

typedef struct wh_server wh_server;

/* Starts serving on addr (TLS from wh_tls_retrieve) and, when health is not NULL,
 * plain-HTTP /healthz, /readyz and (with cfg->metrics) /metrics on health. NULL with
 * err on error. */
wh_server *wh_server_start(const struct sockaddr *addr, const struct sockaddr *health,
                           const wh_server_config *cfg, pg_error *err);
/* Stops accepting, lets reviews in flight finish (up to grace_ms), ends the rest, stops. */
void wh_server_stop(wh_server *s, long grace_ms);

#endif
