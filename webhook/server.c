/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTPS on libmicrohttpd, one thread per connection (a review blocks on
 * Kubernetes API reads; a thread per connection keeps one slow review from
 * delaying the others):
 *   POST /mutate   AdmissionReview (review.c)
 *   GET  /healthz  the process serves
 *   GET  /readyz   the API server answers (cached WH_READY_CACHE_MS)
 * and, optionally, the two GETs in plain HTTP on a second address (probes
 * cannot present the client certificate the review port may require), with
 * GET /metrics (Prometheus, whmetrics.h) there only: never on the admission
 * port, whose callers are API servers.
 *
 * Who may hold what is checked before any body is read (docs/webhook.md, "Bounded" and
 * "Connection slots"): the client certificate (tlscert.c) in the handshake and at each request;
 * a connection slot by our accept policy (peers.h), libmicrohttpd's own limits, twice ours,
 * only a backstop; a watchdog that shuts a connection making no progress in time; one request
 * object (wh_request) with the review's deadline and memory account (memory.h). A body over the
 * bound or the budget is not kept, only its first bytes, and the review is refused by the uid
 * in them (HTTP 200): never a call failure that failurePolicy would decide.
 */
#include "server.h"

#include "memory.h"
#include "peers.h"
#include "tlscert.h"
#include "wlog.h"

#include "http_respond.h"
#include "internal.h"

#include <arpa/inet.h>
#include <malloc.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HANDSHAKE_MS 3000LL   /* accept -> complete request headers */
#define IDLE_MS 10000LL       /* an idle keep-alive connection */
#define REVIEW_GRACE_MS 500LL /* after the review deadline, to send the answer */
#define WATCHDOG_STEP_US 100000
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
#define HEALTH_CONNECTIONS 16u
#define HEALTH_PER_PEER 8u
#define TRIM_AFTER_BYTES (8u * 1024u * 1024u)

/* One connection as the policy and the watchdog see it (libmicrohttpd's socket context). */
typedef struct conn {
    wh_slot slot; /* first: peers.c's victims are conns */
    MHD_socket fd;
    const struct endpoint *ep;
    long long progress_by_ms; /* shut down when still open then */
    struct conn *prev, *next;
} conn;

typedef struct endpoint {
    struct wh_server *server;
    struct MHD_Daemon *daemon;
    int health_only; /* the plain-HTTP probe port */
    wh_slot_limits limits;
    const wh_cidr *api_cidrs; /* the review port only */
    size_t n_api_cidrs;
    wh_slot **scratch; /* the policy's view of this endpoint's conns (accept thread only) */
    size_t scratch_size;
    unsigned long long accepted; /* the next slot's seq (accept thread only) */
} endpoint;

struct wh_server {
    wh_server_config cfg;
    endpoint main, health;
    pthread_mutex_t lock; /* conns */
    conn *conns;
    pthread_t watchdog;
    int watchdog_started;
    atomic_int stopping;
    atomic_int reviews_in_flight;
};

typedef enum { REQ_REVIEW, REQ_OTHER } request_kind;

/* One HTTP request, from its first callback to its completion. */
typedef struct wh_request {
    request_kind kind;
    long long start_us;
    int64_t deadline_ms;
    wh_account acct;
    wh_buf body;
    char prefix[WH_REVIEW_PREFIX_BYTES]; /* the first bytes, whatever happens to the rest */
    size_t prefix_len, received;
    const char *cut; /* non-NULL: the body was not kept whole (why) */
    int answered;    /* a response is queued */
} wh_request;

/* ------------------------------------------------------------ watchdog */

static conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* A request starts (busy: not evictable; verified: over a verified client certificate) or
 * ends, and when the connection must have made progress. */
static void mark_conn(wh_server *s, struct MHD_Connection *c, int busy, int verified,
                      long long progress_by_ms)
{
    conn *k = conn_of(c);
    if (!k)
        return;
    pthread_mutex_lock(&s->lock);
    k->slot.busy = (unsigned char)busy;
    k->slot.verified = (unsigned char)(k->slot.verified || verified);
    k->progress_by_ms = progress_by_ms;
    pthread_mutex_unlock(&s->lock);
}

/* Shuts a connection down for good (lock held): its thread sees EOF and ends, and until
 * libmicrohttpd closes it, it holds no slot. */
static void shut_conn(conn *k)
{
    if (k->slot.shut)
        return;
    shutdown(k->fd, SHUT_RDWR);
    k->slot.shut = 1;
}

/* libmicrohttpd's accept policy, before any byte is read (peers.h decides). libmicrohttpd
 * accepts and registers connections in its one listening thread, so the list is up to
 * date here. */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)addrlen;
    endpoint *ep = cls;
    wh_server *s = ep->server;
    unsigned char key[WH_PEER_KEY_BYTES];
    wh_peer_key(addr, key);
    int api = wh_cidrs_match(ep->api_cidrs, ep->n_api_cidrs, key);
    size_t n = 0;
    int overflow = 0;
    pthread_mutex_lock(&s->lock);
    for (conn *k = s->conns; k; k = k->next)
        if (k->ep == ep) {
            if (n == ep->scratch_size) {
                overflow = 1; /* more than libmicrohttpd's limit: cannot be, refuse */
                break;
            }
            ep->scratch[n++] = &k->slot;
        }
    wh_admission a = overflow ? (wh_admission){.kind = WH_REFUSE, .reason = "total"}
                              : wh_slots_admit(&ep->limits, ep->scratch, n, key, api);
    if (a.kind == WH_ADMIT_EVICTING)
        shut_conn((conn *)a.victim);
    pthread_mutex_unlock(&s->lock);
    if (a.kind != WH_ADMIT)
        wh_metrics_connection(s->cfg.metrics, a.kind == WH_ADMIT_EVICTING, a.reason);
    return a.kind == WH_REFUSE ? MHD_NO : MHD_YES;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    endpoint *ep = cls;
    wh_server *s = ep->server;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *tls =
            ep->health_only ? NULL : MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        if (tls)
            wh_tls_session_start((gnutls_session_t)tls->tls_session);
        conn *k = calloc(1, sizeof *k);
        if (!k || !fd) { /* the watchdog cannot see it: shut it at once */
            if (fd)
                shutdown(fd->connect_fd, SHUT_RDWR);
            free(k);
            return;
        }
        k->fd = fd->connect_fd;
        k->ep = ep;
        const union MHD_ConnectionInfo *a =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        wh_peer_key(a ? a->client_addr : NULL, k->slot.peer);
        k->slot.api = (unsigned char)wh_cidrs_match(ep->api_cidrs, ep->n_api_cidrs, k->slot.peer);
        k->slot.seq = ep->accepted++;
        k->progress_by_ms = pg_monotonic_ms() + HANDSHAKE_MS;
        pthread_mutex_lock(&s->lock);
        k->next = s->conns;
        if (s->conns)
            s->conns->prev = k;
        s->conns = k;
        pthread_mutex_unlock(&s->lock);
        *socket_context = k;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        /* Called before libmicrohttpd closes the descriptor: once k is off the
         * list, the watchdog can never shut down a reused descriptor number. */
        conn *k = *socket_context;
        pthread_mutex_lock(&s->lock);
        if (k->prev)
            k->prev->next = k->next;
        else
            s->conns = k->next;
        if (k->next)
            k->next->prev = k->prev;
        pthread_mutex_unlock(&s->lock);
        free(k);
        *socket_context = NULL;
    }
}

static void *watchdog_main(void *arg)
{
    wh_server *s = arg;
    while (!atomic_load(&s->stopping)) {
        long long now = pg_monotonic_ms();
        pthread_mutex_lock(&s->lock);
        for (conn *k = s->conns; k; k = k->next)
            if (!k->slot.shut && now > k->progress_by_ms)
                shut_conn(k);
        pthread_mutex_unlock(&s->lock);
        usleep(WATCHDOG_STEP_US);
    }
    return NULL;
}

/* ------------------------------------------------------------ responses */

static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned int status,
                                    const char *text)
{
    return pg_http_respond(c, status, "text/plain", strdup(text));
}

static enum MHD_Result serve_ready(wh_server *s, struct MHD_Connection *c)
{
    pg_error err = {0};
    if (wh_kubeapi_ready(s->cfg.api, WH_READY_CACHE_MS, &err) == PG_OK)
        return respond_text(c, MHD_HTTP_OK, "ok\n");
    char text[sizeof err.message + 1];
    snprintf(text, sizeof text, "%s\n", err.message);
    return respond_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, text);
}

static enum MHD_Result route_other(endpoint *ep, struct MHD_Connection *c, const char *url,
                                   const char *method)
{
    int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
    int metrics = ep->health_only && ep->server->cfg.metrics && strcmp(url, "/metrics") == 0;
    int known = strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0 || metrics ||
                (!ep->health_only && strcmp(url, "/mutate") == 0);
    if (!known)
        return respond_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
    if (!get || strcmp(url, "/mutate") == 0)
        return respond_text(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                            strcmp(url, "/mutate") == 0 ? "POST an AdmissionReview\n"
                                                        : "unsupported\n");
    if (strcmp(url, "/readyz") == 0)
        return serve_ready(ep->server, c);
    if (metrics)
        return pg_http_respond_metrics(c, ep->server->cfg.metrics->reg);
    return respond_text(c, MHD_HTTP_OK, "ok\n");
}

/* ------------------------------------------------------------ reviews */

static void stop_charging(void *ctx)
{
    (void)ctx;
    wh_account_suspend();
}

static void release_body(void *ctx)
{
    wh_request *q = ctx;
    wh_buf_wipe(&q->body);
}

static void peer_of(struct MHD_Connection *c, char *out, size_t size)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = i ? i->client_addr : NULL;
    snprintf(out, size, "?");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)size);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, (socklen_t)size);
}

static void log_review(struct MHD_Connection *c, wh_request *q, wh_review_result *res)
{
    char peer[64];
    peer_of(c, peer, sizeof peer);
    if (!res->log)
        return;
    json_object_set_new(res->log, "peer", json_string(peer));
    json_object_set_new(res->log, "httpStatus", json_integer(res->http_status));
    json_object_set_new(res->log, "bodyBytes", json_integer((json_int_t)q->received));
    json_object_set_new(res->log, "memoryBytes", json_integer((json_int_t)q->acct.peak));
    json_object_set_new(res->log, "durationMs",
                        json_real((double)(pg_metrics_now_us() - q->start_us) / 1000.0));
    wh_log_fields(res->http_status == 200 ? "info" : "warning", "admission review", res->log);
}

/* A wh_get_fn over the API client that counts each read's result. */
static void counted_get(void *ctx, const char *ns, wh_get_req *reqs, size_t n, int64_t deadline_ms)
{
    wh_server *s = ctx;
    wh_kubeapi_get(s->cfg.api, ns, reqs, n, deadline_ms);
    wh_metrics_api_reads(s->cfg.metrics, reqs, n);
}

static enum MHD_Result serve_review(wh_server *s, struct MHD_Connection *c, wh_request *q)
{
    if (!q->cut && pg_monotonic_ms() >= q->deadline_ms) /* no time left to parse it */
        q->cut = "time limit exceeded receiving the AdmissionReview";
    pg_error key_err = {0};
    pg_key_ref *key = s->cfg.keys ? pg_keyholder_get(s->cfg.keys, &key_err) : NULL;
    wh_review_config rc = {.annotation_key = s->cfg.annotation_key,
                           .key = pg_key_ref_key(key),
                           .key_error = s->cfg.keys && !key ? key_err.message : NULL,
                           .get = counted_get,
                           .get_ctx = s,
                           .deadline_ms = q->deadline_ms,
                           .cut = q->cut,
                           .body_done = release_body,
                           .before_answer = stop_charging,
                           .ctx = q};
    wh_review_result res;
    if (q->cut)
        wh_review_handle(&rc, q->prefix, q->prefix_len, &res);
    else
        wh_review_handle(&rc, q->body.data ? q->body.data : "", q->body.len, &res);
    pg_key_ref_release(key);
    wh_buf_wipe(&q->body);
    log_review(c, q, &res);
    wh_metrics_review(s->cfg.metrics, res.outcome, res.refusal_code,
                      (double)(pg_metrics_now_us() - q->start_us) / 1e6);
    q->answered = 1;
    enum MHD_Result ret =
        pg_http_respond(c, (unsigned int)res.http_status, res.content_type, res.body);
    res.body = NULL; /* owned by the response now */
    wh_review_result_free(&res);
    return ret;
}

/* Keeps a chunk of the body: its first bytes always, the rest within the bounds. */
static void take_chunk(wh_request *q, const char *data, size_t n)
{
    size_t room = sizeof q->prefix - q->prefix_len;
    memcpy(q->prefix + q->prefix_len, data, n < room ? n : room);
    q->prefix_len += n < room ? n : room;
    q->received += n;
    if (q->cut)
        return; /* drained, not kept: the answer is a refusal */
    if (wh_buf_append(&q->body, data, n) != 0) {
        q->cut = q->received > WH_MAX_REVIEW_BYTES
                     ? "AdmissionReview larger than the largest review kube-apiserver sends"
                     : "AdmissionReview larger than the webhook's memory budget allows now";
        wh_buf_wipe(&q->body);
    }
}

static wh_request *request_new(wh_server *s, const endpoint *ep, const char *url,
                               const char *method)
{
    wh_request *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->start_us = pg_metrics_now_us();
    q->deadline_ms = pg_monotonic_ms() + s->cfg.deadline_ms;
    q->kind =
        !ep->health_only && strcmp(method, MHD_HTTP_METHOD_POST) == 0 && strcmp(url, "/mutate") == 0
            ? REQ_REVIEW
            : REQ_OTHER;
    wh_account_init(&q->acct, WH_REQUEST_MEMORY);
    wh_buf_init(&q->body, WH_MAX_REVIEW_BYTES, &q->acct);
    if (q->kind == REQ_REVIEW) {
        atomic_fetch_add(&s->reviews_in_flight, 1);
        wh_account_enter(&q->acct);
    }
    return q;
}

/* With client certificates required, this session's certificate verifies. */
static int caller_allowed(endpoint *ep, struct MHD_Connection *c)
{
    if (ep->health_only)
        return 1;
    const union MHD_ConnectionInfo *tls =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    return wh_tls_client_ok(tls ? (gnutls_session_t)tls->tls_session : NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
    (void)version;
    endpoint *ep = cls;
    wh_server *s = ep->server;
    wh_request *q = *req_cls;
    if (!q) { /* first call, headers only: who asks, and the request's bounds */
        if (!caller_allowed(ep, c) || !(q = request_new(s, ep, url, method)))
            return MHD_NO; /* closes the connection, nothing read */
        *req_cls = q;
        /* With client certificates required, a caller past caller_allowed holds one that
         * verifies: its connection is the API server's from now on (never evicted). */
        mark_conn(s, c, 1, !ep->health_only && wh_tls_clients_required(),
                  q->deadline_ms + REVIEW_GRACE_MS);
        return MHD_YES;
    }
    if (q->answered || q->kind != REQ_REVIEW) {
        if (*upload_data_size) { /* a body we do not want: dropped */
            *upload_data_size = 0;
            return MHD_YES;
        }
        return q->answered ? MHD_YES : route_other(ep, c, url, method);
    }
    if (*upload_data_size) {
        /* Past the deadline the rest is drained, not kept, and the answer is a refusal:
         * answering before the upload ends would break the caller's write, a call
         * failure. A body that never ends is the watchdog's. */
        if (!q->cut && pg_monotonic_ms() >= q->deadline_ms) {
            q->cut = "time limit exceeded receiving the AdmissionReview";
            wh_buf_wipe(&q->body);
        }
        take_chunk(q, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    return serve_review(s, c, q);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    endpoint *ep = cls;
    wh_request *q = *req_cls;
    if (!q)
        return;
    if (q->kind == REQ_REVIEW)
        atomic_fetch_sub(&ep->server->reviews_in_flight, 1);
    wh_buf_wipe(&q->body);
    wh_account_leave(&q->acct);
    if (q->acct.peak > TRIM_AFTER_BYTES) /* the arenas give a large review's pages back */
        malloc_trim(0);
    free(q);
    *req_cls = NULL;
    mark_conn(ep->server, c, 0, 0, pg_monotonic_ms() + IDLE_MS);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    endpoint *ep = cls;
    /* libmicrohttpd says so only in its log: the one place to count it. */
    if (ep && strncmp(fmt, "Server reached connection limit", 31) == 0)
        wh_metrics_connection(ep->server->cfg.metrics, 0, "total");
    char text[512];
    pg_http_log_text(text, sizeof text, fmt, ap);
    wh_log("warning", "http server", text);
}

/* ------------------------------------------------------------ start, stop */

/* libmicrohttpd counts a connection until its thread has ended and been joined; ours stop
 * counting it when it is shut. Its limits, twice ours, leave room for as many connections
 * closing as open (the watchdog shuts every handshake of a burst at once): a slot given up
 * is at once a slot to give, and its limits stay a backstop of ours. */
static struct MHD_Daemon *start_endpoint(endpoint *ep, const struct sockaddr *addr,
                                         wh_slot_limits limits)
{
    ep->limits = limits;
    unsigned int max = 2 * limits.max, per_ip = 2 * limits.per_peer;
    ep->scratch_size = max; /* every connection libmicrohttpd may hold */
    if (!(ep->scratch = calloc(max, sizeof *ep->scratch)))
        return NULL;
    unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                         MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG |
                         (addr->sa_family == AF_INET6 ? MHD_USE_IPv6 : 0) |
                         (ep->health_only ? 0 : MHD_USE_TLS);
    /* TLS for the review port only (an array ends at its first MHD_OPTION_END). */
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)wh_tls_retrieve},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)TLS_PRIORITIES},
        {MHD_OPTION_END, 0, NULL}};
    /* The logger first: libmicrohttpd uses its own until it has seen this option. */
    return MHD_start_daemon(
        flags, 0, accept_policy, ep, on_request, ep, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, ep,
        MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_ARRAY, tls + (ep->health_only ? 2 : 0),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)(IDLE_MS / 1000), MHD_OPTION_CONNECTION_LIMIT,
        max, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        ep, MHD_OPTION_NOTIFY_CONNECTION, on_connection, ep, MHD_OPTION_END);
}

static void free_server(wh_server *s)
{
    free(s->main.scratch);
    free(s->health.scratch);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

wh_server *wh_server_start(const struct sockaddr *addr, const struct sockaddr *health,
                           const wh_server_config *cfg, pg_error *err)
{
    wh_server *s = calloc(1, sizeof *s);
    if (!s) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    pthread_mutex_init(&s->lock, NULL);
    s->main = (endpoint){.server = s, .api_cidrs = cfg->api_cidrs, .n_api_cidrs = cfg->n_api_cidrs};
    s->health = (endpoint){.server = s, .health_only = 1};
    if (pthread_create(&s->watchdog, NULL, watchdog_main, s) != 0) {
        pg_fail(err, PG_ERR_IO, "cannot start a thread");
        free_server(s);
        return NULL;
    }
    s->watchdog_started = 1;
    wh_slot_limits reviews = {.max = cfg->max_connections,
                              .per_peer = cfg->max_per_peer,
                              .reserved = cfg->reserved_connections},
                   probes = {.max = HEALTH_CONNECTIONS, .per_peer = HEALTH_PER_PEER};
    s->main.daemon = start_endpoint(&s->main, addr, reviews);
    if (s->main.daemon && health)
        s->health.daemon = start_endpoint(&s->health, health, probes);
    if (!s->main.daemon || (health && !s->health.daemon)) {
        pg_fail(err, PG_ERR_IO, "cannot start the %s server (address in use or TLS setup)",
                s->main.daemon ? "health" : "HTTPS");
        wh_server_stop(s, 0);
        return NULL;
    }
    return s;
}

void wh_server_stop(wh_server *s, long grace_ms)
{
    if (!s)
        return;
    MHD_socket listener = s->main.daemon ? MHD_quiesce_daemon(s->main.daemon)
                                         : MHD_INVALID_SOCKET; /* no new connections */
    long long until = pg_monotonic_ms() + grace_ms;
    while (pg_monotonic_ms() < until && atomic_load(&s->reviews_in_flight) > 0)
        usleep(20000);
    /* What is still running ends now: API reads fail, reviews are refused. */
    if (s->cfg.api)
        wh_kubeapi_stop(s->cfg.api);
    if (s->health.daemon)
        MHD_stop_daemon(s->health.daemon);
    if (s->main.daemon)
        MHD_stop_daemon(s->main.daemon);
    if (listener != MHD_INVALID_SOCKET) /* quiescing handed it to us */
        close(listener);
    atomic_store(&s->stopping, 1);
    if (s->watchdog_started)
        pthread_join(s->watchdog, NULL);
    free_server(s);
}
