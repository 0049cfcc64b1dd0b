/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTPS on libmicrohttpd, one thread per connection: a review blocks on
 * Kubernetes API lookups (bounded by the review's time budget), and a thread
 * per connection keeps one slow review from delaying the others.
 *   POST /mutate   AdmissionReview (review.c)
 *   GET  /healthz  the process serves
 *   GET  /readyz   the API server answers (cached WH_READY_CACHE_MS)
 */
#include "server.h"

#include "files.h"
#include "tlscert.h"
#include "wlog.h"

#include <microhttpd.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONNECTION_TIMEOUT_S 30u
#define CONNECTION_LIMIT 256u
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

struct wh_server {
    struct MHD_Daemon *daemon;
    wh_server_config cfg;
};

/* The body of one POST, bounded by WH_MAX_REVIEW_BYTES. */
typedef struct upload {
    char *data;
    size_t len, cap;
    int too_large;
} upload;

static enum MHD_Result respond(struct MHD_Connection *c, unsigned int status,
                               const char *content_type, char *body)
{
    if (!body)
        return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned int status,
                                    const char *text)
{
    return respond(c, status, "text/plain", strdup(text));
}

static int append(upload *u, const char *data, size_t n)
{
    if (n > WH_MAX_REVIEW_BYTES - u->len) {
        u->too_large = 1;
        return -1;
    }
    if (u->len + n + 1 > u->cap) {
        size_t cap = u->cap ? u->cap : 16384;
        while (cap < u->len + n + 1)
            cap *= 2;
        char *grown = realloc(u->data, cap);
        if (!grown)
            return -1;
        u->data = grown;
        u->cap = cap;
    }
    memcpy(u->data + u->len, data, n);
    u->len += n;
    return 0;
}

/* The HMAC key of this review; re-read every time, so a rotated Secret applies at once. */
static pg_mac_key *load_key(const char *path, char *msg, size_t msg_size)
{
    char *bytes;
    size_t len;
    if (wh_read_file(path, PG_MAC_KEY_MAX_BYTES, 1, &bytes, &len, msg, msg_size) != 0)
        return NULL;
    pg_error err = {0};
    pg_mac_key *key = NULL;
    if (pg_mac_key_from_bytes(bytes, len, &key, &err) != PG_OK)
        snprintf(msg, msg_size, "%.200s: %.250s", path, err.message);
    OPENSSL_cleanse(bytes, len);
    free(bytes);
    return key;
}

static enum MHD_Result serve_review(wh_server *s, struct MHD_Connection *c, const upload *u)
{
    long long start = wh_now_us();
    char key_msg[WH_MESSAGE_MAX] = "";
    pg_mac_key *key = NULL;
    if (s->cfg.hmac_key_file && *s->cfg.hmac_key_file)
        key = load_key(s->cfg.hmac_key_file, key_msg, sizeof key_msg);
    wh_review_config rc = {.annotation_key = s->cfg.annotation_key,
                           .key = key,
                           .key_error = key_msg[0] ? key_msg : NULL,
                           .get = wh_kubeapi_get,
                           .get_ctx = s->cfg.api,
                           .budget_ms = s->cfg.budget_ms};
    wh_review_result res;
    wh_review_handle(&rc, u->data ? u->data : "", u->len, &res);
    pg_mac_key_free(key);
    if (res.log) {
        json_object_set_new(res.log, "httpStatus", json_integer(res.http_status));
        json_object_set_new(res.log, "durationMs", json_real((double)(wh_now_us() - start) / 1000.0));
    }
    wh_log_fields(res.http_status == 200 ? "info" : "warning", "admission review", res.log);
    enum MHD_Result ret = respond(c, (unsigned int)res.http_status, res.content_type, res.body);
    res.body = NULL; /* owned by the response now */
    wh_review_result_free(&res);
    return ret;
}

static enum MHD_Result serve_ready(wh_server *s, struct MHD_Connection *c)
{
    char msg[WH_MESSAGE_MAX];
    if (wh_kubeapi_ready(s->cfg.api, WH_READY_CACHE_MS, msg, sizeof msg))
        return respond_text(c, MHD_HTTP_OK, "ok\n");
    size_t n = strlen(msg) + 2;
    char *text = malloc(n);
    if (text)
        snprintf(text, n, "%s\n", msg);
    return respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", text);
}

static enum MHD_Result route_get(wh_server *s, struct MHD_Connection *c, const char *url)
{
    if (strcmp(url, "/healthz") == 0)
        return respond_text(c, MHD_HTTP_OK, "ok\n");
    if (strcmp(url, "/readyz") == 0)
        return serve_ready(s, c);
    if (strcmp(url, "/mutate") == 0)
        return respond_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "POST an AdmissionReview\n");
    return respond_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
    (void)version;
    wh_server *s = cls;
    int is_post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    if (!is_post || strcmp(url, "/mutate") != 0) {
        if (*upload_data_size) { /* a body we do not want: drop it */
            *upload_data_size = 0;
            return MHD_YES;
        }
        if (strcmp(method, MHD_HTTP_METHOD_GET) == 0)
            return route_get(s, c, url);
        return respond_text(c, strcmp(url, "/mutate") == 0 || strcmp(url, "/healthz") == 0 ||
                                       strcmp(url, "/readyz") == 0
                                   ? MHD_HTTP_METHOD_NOT_ALLOWED
                                   : MHD_HTTP_NOT_FOUND,
                            "unsupported\n");
    }
    upload *u = *req_cls;
    if (!u) { /* first call: headers only */
        if (!(u = calloc(1, sizeof *u)))
            return MHD_NO;
        *req_cls = u;
        return MHD_YES;
    }
    if (*upload_data_size) {
        int failed = append(u, upload_data, *upload_data_size) != 0;
        *upload_data_size = 0;
        if (failed) /* answer now; libmicrohttpd closes the connection after it */
            return u->too_large ? respond_text(c, MHD_HTTP_CONTENT_TOO_LARGE,
                                               "AdmissionReview larger than 4 MiB\n")
                                : MHD_NO;
        return MHD_YES;
    }
    return serve_review(s, c, u);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    upload *u = *req_cls;
    if (u) {
        free(u->data);
        free(u);
        *req_cls = NULL;
    }
}

/* libmicrohttpd's own format strings: the pragma is scoped to this adapter. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char text[512];
    vsnprintf(text, sizeof text, fmt, ap);
    size_t n = strlen(text);
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        text[--n] = '\0';
    wh_log("warning", "http server", text);
}
#pragma GCC diagnostic pop

wh_server *wh_server_start(const struct sockaddr *addr, int ipv6, const wh_server_config *cfg,
                           char *msg, size_t msg_size)
{
    wh_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(msg, msg_size, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    unsigned int flags = MHD_USE_TLS | MHD_USE_THREAD_PER_CONNECTION |
                         MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                         MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0);
    /* The logger first: libmicrohttpd uses its own until it has seen this option. */
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, addr,
        MHD_OPTION_HTTPS_CERT_CALLBACK, wh_tls_retrieve, MHD_OPTION_HTTPS_PRIORITIES,
        TLS_PRIORITIES, MHD_OPTION_CONNECTION_TIMEOUT, CONNECTION_TIMEOUT_S,
        MHD_OPTION_CONNECTION_LIMIT, CONNECTION_LIMIT, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        NULL, MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(msg, msg_size, "cannot start the HTTPS server (address in use or TLS setup)");
        free(s);
        return NULL;
    }
    return s;
}

void wh_server_stop(wh_server *s, long grace_ms)
{
    if (!s)
        return;
    MHD_socket listener = MHD_quiesce_daemon(s->daemon); /* no new connections */
    long long until = wh_now_ms() + grace_ms;
    while (wh_now_ms() < until) {
        const union MHD_DaemonInfo *info =
            MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        if (!info || info->num_connections == 0)
            break;
        usleep(20000);
    }
    MHD_stop_daemon(s->daemon);
    if (listener != MHD_INVALID_SOCKET) /* quiescing handed it to us */
        close(listener);
    free(s);
}
