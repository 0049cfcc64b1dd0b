/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A minimal Kubernetes API client on libcurl (OpenSSL): GET of one namespaced
 * object, and a cached reachability probe for /readyz. TLS is verified
 * against the configured CA and the server's name; the bearer token is re-read
 * whenever its file changes (projected service-account tokens rotate).
 * Thread-safe: one client serves every connection thread.
 */
#ifndef PULLGATE_WEBHOOK_KUBEAPI_H
#define PULLGATE_WEBHOOK_KUBEAPI_H

#include "review.h"

#define WH_MAX_API_RESPONSE_BYTES (4u * 1024u * 1024u)
#define WH_MAX_TOKEN_BYTES (64u * 1024u)

typedef struct wh_kubeapi wh_kubeapi;

/* server: "https://host:port" (no trailing path). NULL with msg on error. */
wh_kubeapi *wh_kubeapi_new(const char *server, const char *ca_file, const char *token_file,
                           char *msg, size_t msg_size);
void wh_kubeapi_free(wh_kubeapi *api);

/* A wh_get_fn; ctx is the wh_kubeapi. The GETs of one call run concurrently
 * (libcurl multi interface), over connections kept open between calls. */
void wh_kubeapi_get(void *ctx, const char *ns, wh_get_req *reqs, size_t n, long timeout_ms);

/* 1 when GET /version answered 200 within a second; the answer is cached for cache_ms. */
int wh_kubeapi_ready(wh_kubeapi *api, long long cache_ms, char *msg, size_t msg_size);

#endif
