/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A minimal Kubernetes API client on libcurl (OpenSSL): GETs of namespaced
 * objects, and a cached reachability probe for /readyz. TLS is verified
 * against the configured CA and the server's name; the bearer token is re-read
 * whenever its file changes (projected service-account tokens rotate).
 *
 * One bounded pool: WH_API_CLIENTS clients (curl multi handles), each keeping
 * at most WH_API_CLIENT_CONNECTIONS connections, so the webhook never holds
 * more than their product of API connections however many reviews arrive; a
 * review waits for a free client until its deadline. Thread-safe.
 */
#ifndef PULLGATE_WEBHOOK_KUBEAPI_H
#define PULLGATE_WEBHOOK_KUBEAPI_H

#include "review.h"

#define WH_MAX_API_RESPONSE_BYTES (4u * 1024u * 1024u)
#define WH_MAX_TOKEN_BYTES (64u * 1024u)
#define WH_API_CLIENTS 8
#define WH_API_CLIENT_CONNECTIONS 4

typedef struct wh_kubeapi wh_kubeapi;

/* server: "https://host:port" (no trailing path). NULL with err on error. */
wh_kubeapi *wh_kubeapi_new(const char *server, const char *ca_file, const char *token_file,
                           pg_error *err);
void wh_kubeapi_free(wh_kubeapi *api);

/* A wh_get_fn; ctx is the wh_kubeapi. The GETs of one call run concurrently
 * (libcurl multi interface, HTTP/1.1 keep-alive) and end by deadline_ms. */
void wh_kubeapi_get(void *ctx, const char *ns, wh_get_req *reqs, size_t n, int64_t deadline_ms);

/* PG_OK when GET /version answered 200 within a second, or why not; the answer is cached
 * for cache_ms. */
int wh_kubeapi_ready(wh_kubeapi *api, long long cache_ms, pg_error *err);

/* Ends every transfer in progress (they fail) and refuses new ones: shutdown. */
void wh_kubeapi_stop(wh_kubeapi *api);

#endif
