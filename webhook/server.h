/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTPS endpoints of pullgate-webhook on libmicrohttpd (server.c). */
#ifndef PULLGATE_WEBHOOK_SERVER_H
#define PULLGATE_WEBHOOK_SERVER_H

#include "kubeapi.h"

#include <sys/socket.h>

#define WH_REVIEW_BUDGET_MS 2000L /* well inside the configuration's timeoutSeconds (3) */
#define WH_READY_CACHE_MS 3000LL

typedef struct wh_server_config {
    const char *annotation_key;
    const char *hmac_key_file; /* NULL or "": annotations are not signed */
    wh_kubeapi *api;
    long budget_ms;
} wh_server_config;

typedef struct wh_server wh_server;

/* Starts serving on addr (TLS from wh_tls_retrieve). NULL with msg on error. */
wh_server *wh_server_start(const struct sockaddr *addr, int ipv6, const wh_server_config *cfg,
                           char *msg, size_t msg_size);
/* Stops accepting, lets requests in flight finish (up to grace_ms), stops. */
void wh_server_stop(wh_server *s, long grace_ms);

#endif
