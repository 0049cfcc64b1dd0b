/* SPDX-License-Identifier: Apache-2.0 */
#include "kubeapi.h"

#include "cleanup.h"
#include "files.h"
#include "internal.h"
#include "memory.h"

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define READY_TIMEOUT_MS 1000L
#define CA_CACHE_SECONDS 60L /* a rotated API CA file is picked up within a minute */
#define POLL_STEP_MS 50      /* how soon a stop or the deadline is noticed */

struct wh_kubeapi {
    char *server, *ca_file, *token_file;
    pthread_mutex_t lock; /* token, pool, readiness cache */
    pthread_cond_t client_free;
    char *token;
    wh_file_id token_id;
    CURLM *idle[WH_API_CLIENTS]; /* each keeps its own API connections */
    size_t n_idle, n_clients;
    atomic_int stopping;
    long long ready_at_ms;
    pg_error ready; /* PG_OK: the last probe was answered */
};

wh_kubeapi *wh_kubeapi_new(const char *server, const char *ca_file, const char *token_file,
                           pg_error *err)
{
    if (!server || strncmp(server, "https://", 8) != 0 || strlen(server) > 512) {
        pg_fail(err, PG_ERR_CONFIG, "the API server URL must start with https://");
        return NULL;
    }
    wh_kubeapi *api = calloc(1, sizeof *api);
    if (!api || !(api->server = strdup(server)) || !(api->ca_file = strdup(ca_file)) ||
        !(api->token_file = strdup(token_file))) {
        if (api) {
            free(api->server);
            free(api->ca_file);
        }
        free(api);
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    size_t n = strlen(api->server);
    while (n > 8 && api->server[n - 1] == '/')
        api->server[--n] = '\0';
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&api->client_free, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&api->lock, NULL);
    return api;
}

void wh_kubeapi_free(wh_kubeapi *api)
{
    if (!api)
        return;
    for (size_t i = 0; i < api->n_idle; i++)
        curl_multi_cleanup(api->idle[i]);
    if (api->token)
        OPENSSL_cleanse(api->token, strlen(api->token));
    free(api->token);
    free(api->server);
    free(api->ca_file);
    free(api->token_file);
    pthread_cond_destroy(&api->client_free);
    pthread_mutex_destroy(&api->lock);
    free(api);
}

void wh_kubeapi_stop(wh_kubeapi *api)
{
    atomic_store(&api->stopping, 1);
    pthread_mutex_lock(&api->lock);
    pthread_cond_broadcast(&api->client_free);
    pthread_mutex_unlock(&api->lock);
}

/* ------------------------------------------------------------ token */

/* Re-reads the token when the file behind the path changed. Called with the lock held. */
static int refresh_token(wh_kubeapi *api, pg_error *err)
{
    wh_file_id id;
    if (wh_file_id_of(api->token_file, &id) != 0)
        return pg_fail(err, PG_ERR_IO, "service account token %.200s unreadable", api->token_file);
    if (api->token && wh_file_id_equal(&id, &api->token_id))
        return PG_OK;
    char *text;
    size_t len;
    int rc = wh_read_file(api->token_file, WH_MAX_TOKEN_BYTES, 0, &text, &len, err);
    if (rc != PG_OK)
        return rc;
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
        text[--len] = '\0';
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] <= ' ' || (unsigned char)text[i] > '~') {
            OPENSSL_cleanse(text, len);
            free(text);
            return pg_fail(err, PG_ERR_INVALID, "service account token %.200s: not a bearer token",
                           api->token_file);
        }
    if (api->token)
        OPENSSL_cleanse(api->token, strlen(api->token));
    free(api->token);
    api->token = text;
    api->token_id = id;
    return PG_OK;
}

/* "Authorization: Bearer <token>" as a header list; wiped by free_headers. */
static struct curl_slist *auth_headers(wh_kubeapi *api, pg_error *err)
{
    pthread_mutex_lock(&api->lock);
    struct curl_slist *headers = NULL;
    if (refresh_token(api, err) == PG_OK) {
        size_t n = strlen(api->token) + sizeof "Authorization: Bearer ";
        char *line = malloc(n);
        if (line) {
            snprintf(line, n, "Authorization: Bearer %s", api->token);
            headers = curl_slist_append(NULL, line);
            OPENSSL_cleanse(line, n);
            free(line);
        }
        struct curl_slist *more =
            headers ? curl_slist_append(headers, "Accept: application/json") : NULL;
        if (!more) {
            curl_slist_free_all(headers);
            headers = NULL;
            pg_fail(err, PG_ERR_NOMEM, "out of memory");
        }
    }
    pthread_mutex_unlock(&api->lock);
    return headers;
}

static void free_headers(struct curl_slist *headers)
{
    for (struct curl_slist *h = headers; h; h = h->next)
        OPENSSL_cleanse(h->data, strlen(h->data));
    curl_slist_free_all(headers);
}

/* ------------------------------------------------------------ the pool */

static CURLM *new_client(void)
{
    CURLM *m = curl_multi_init();
    if (m) {
        curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)WH_API_CLIENT_CONNECTIONS);
        curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)WH_API_CLIENT_CONNECTIONS);
        curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)WH_API_CLIENT_CONNECTIONS);
    }
    return m;
}

/* A free client, waiting for one until deadline_ms; NULL with err when none came. */
static CURLM *take_client(wh_kubeapi *api, int64_t deadline_ms, pg_error *err)
{
    CURLM *m = NULL;
    int create = 0;
    pthread_mutex_lock(&api->lock);
    while (!atomic_load(&api->stopping) && !api->n_idle && api->n_clients == WH_API_CLIENTS) {
        struct timespec until = {(time_t)(deadline_ms / 1000),
                                 (long)(deadline_ms % 1000) * 1000000L};
        if (pthread_cond_timedwait(&api->client_free, &api->lock, &until) != 0 &&
            pg_monotonic_ms() >= deadline_ms)
            break;
    }
    if (!atomic_load(&api->stopping)) {
        if (api->n_idle)
            m = api->idle[--api->n_idle];
        else if (api->n_clients < WH_API_CLIENTS) {
            api->n_clients++;
            create = 1;
        }
    }
    pthread_mutex_unlock(&api->lock);
    if (create && !(m = new_client())) {
        pthread_mutex_lock(&api->lock);
        api->n_clients--;
        pthread_mutex_unlock(&api->lock);
    }
    if (m)
        return m;
    if (atomic_load(&api->stopping))
        pg_fail(err, PG_ERR_IO, "the webhook is stopping");
    else if (create)
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
    else
        pg_fail(err, PG_ERR_TIMEOUT, "time limit exceeded waiting for an API client");
    return NULL;
}

static void return_client(wh_kubeapi *api, CURLM *m)
{
    pthread_mutex_lock(&api->lock);
    api->idle[api->n_idle++] = m;
    pthread_cond_signal(&api->client_free);
    pthread_mutex_unlock(&api->lock);
}

/* ------------------------------------------------------------ transfers */

/* One transfer of a round. */
typedef struct transfer {
    CURL *h;
    wh_buf body; /* wiped: it holds the Secret as the API returned it */
    int cut;     /* over the response bound or the memory budget */
    char errbuf[CURL_ERROR_SIZE];
    CURLcode rc;
    int done;
} transfer;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    transfer *t = userdata;
    size_t n = size * nmemb;
    if (wh_buf_append(&t->body, ptr, n) != 0) {
        t->cut = 1;
        return 0; /* curl fails the transfer */
    }
    return n;
}

/* Plaintext received over TLS is wiped from OpenSSL's buffers once curl has it. */
static CURLcode on_ssl_ctx(CURL *h, void *ssl_ctx, void *arg)
{
    (void)h, (void)arg;
    SSL_CTX_set_options(ssl_ctx, SSL_OP_CLEANSE_PLAINTEXT);
    return CURLE_OK;
}

/* The options of every GET: TLS verified against the CA and the server name, https only. */
static CURL *new_transfer(wh_kubeapi *api, transfer *t, const char *url, struct curl_slist *headers,
                          int64_t deadline_ms)
{
    long timeout_ms = (long)(deadline_ms - pg_monotonic_ms());
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    wh_buf_init(&t->body, WH_MAX_API_RESPONSE_BYTES, wh_account_current());
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_CAINFO, api->ca_file);
    curl_easy_setopt(h, CURLOPT_CA_CACHE_TIMEOUT, CA_CACHE_SECONDS);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
    /* HTTP/1.1: each response lands in this handle's buffers, freed (wiped) with it;
     * HTTP/2 would keep frames in a buffer of the pooled connection. */
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms > 1 ? timeout_ms : 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms > 1 ? timeout_ms : 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for DNS timeouts */
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(h, CURLOPT_PRIVATE, (void *)t);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "pullgate-webhook/" PG_WEBHOOK_VERSION);
    return h;
}

/* Drives the round until every transfer finished, the deadline passed or the webhook stops. */
static void run_transfers(wh_kubeapi *api, CURLM *m, int64_t deadline_ms)
{
    int running = 1;
    while (running && pg_monotonic_ms() < deadline_ms && !atomic_load(&api->stopping)) {
        if (curl_multi_perform(m, &running) != CURLM_OK)
            break;
        if (running)
            curl_multi_poll(m, NULL, 0, POLL_STEP_MS, NULL);
    }
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        transfer *t = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
        if (t) {
            t->rc = msg->data.result;
            t->done = 1;
        }
    }
}

static void end_transfers(CURLM *m, transfer *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (t[i].h) {
            curl_multi_remove_handle(m, t[i].h);
            curl_easy_cleanup(t[i].h);
            t[i].h = NULL;
        }
        wh_buf_wipe(&t[i].body);
    }
}

/* PG_OK when a transfer has an answer; otherwise why not, and its metrics kind. */
static int transfer_failure(wh_kubeapi *api, const transfer *t, pg_error *err, const char **kind)
{
    if (!t->done || t->rc == CURLE_OPERATION_TIMEDOUT) { /* curl's timeout is the deadline */
        *kind = "timeout";
        if (atomic_load(&api->stopping))
            return pg_fail(err, PG_ERR_IO, "API server %s: the webhook is stopping", api->server);
        return pg_fail(err, PG_ERR_TIMEOUT, "API server %s: time limit exceeded", api->server);
    }
    if (t->cut) {
        *kind = "too-large";
        return pg_fail(err, PG_ERR_LIMIT,
                       "API server %s: response larger than %u bytes or than the memory budget "
                       "allows",
                       api->server, WH_MAX_API_RESPONSE_BYTES);
    }
    if (t->rc != CURLE_OK) {
        *kind = "connection";
        return pg_fail(err, PG_ERR_IO, "API server %s: %s", api->server,
                       t->errbuf[0] ? t->errbuf : curl_easy_strerror(t->rc));
    }
    return PG_OK;
}

/* ------------------------------------------------------------ GETs */

static int same(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* A 404 is "not found" only when it is the API's NotFound Status for exactly this object. */
static int is_not_found(const json_t *status, const char *resource, const char *name)
{
    const json_t *details = json_object_get(status, "details");
    return same(wh_text_at(status, "kind"), "Status") &&
           same(wh_text_at(status, "reason"), "NotFound") &&
           same(wh_text_at(details, "name"), name) && same(wh_text_at(details, "kind"), resource);
}

static wh_lookup interpret(long status, json_t *obj, const char *resource, const char *ns,
                           const char *name, pg_error *err, const char **fail_kind)
{
    const char *kind = strcmp(resource, "secrets") == 0 ? "Secret" : "ServiceAccount";
    const json_t *meta = json_object_get(obj, "metadata");
    if (status == 200) {
        if (same(wh_text_at(obj, "kind"), kind) && same(wh_text_at(meta, "name"), name) &&
            same(wh_text_at(meta, "namespace"), ns))
            return WH_FOUND;
        pg_fail(err, PG_ERR_IO, "HTTP 200 without the %s %s/%.64s", kind, ns, name);
        *fail_kind = "invalid-response";
        return WH_FAILED;
    }
    if (status == 404 && is_not_found(obj, resource, name))
        return WH_NOT_FOUND;
    const char *why = wh_text_at(obj, "message");
    pg_fail(err, PG_ERR_IO, "HTTP %ld%s%.200s", status, why ? ": " : "", why ? why : "");
    *fail_kind = "http-error";
    return WH_FAILED;
}

static void finish_get(wh_kubeapi *api, transfer *t, const char *ns, wh_get_req *req)
{
    long status = 0;
    if (transfer_failure(api, t, &req->err, &req->fail_kind) != PG_OK)
        return;
    curl_easy_getinfo(t->h, CURLINFO_RESPONSE_CODE, &status);
    json_t *parsed = NULL;
    if (t->body.data && wh_parse_begin(wh_json_parse_cost(t->body.data, t->body.len)) != 0) {
        pg_fail(&req->err, PG_ERR_LIMIT,
                "API server %s: response larger than the memory budget allows now", api->server);
        req->fail_kind = "too-large";
        return;
    }
    if (t->body.data) {
        parsed =
            json_loadb(t->body.data, t->body.len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
        wh_parse_end();
    }
    wh_buf_wipe(&t->body); /* its text is in parsed now, or nowhere */
    req->result =
        interpret(status, parsed, req->resource, ns, req->name, &req->err, &req->fail_kind);
    if (req->result == WH_FOUND)
        req->obj = parsed;
    else
        json_decref(parsed);
}

/* Every request fails as the round did (err: why; kind: its metrics label). */
static void fail_all(wh_get_req *reqs, size_t n, const pg_error *err, const char *kind)
{
    for (size_t i = 0; i < n; i++) {
        reqs[i].result = WH_FAILED;
        reqs[i].fail_kind = kind;
        reqs[i].err = *err;
    }
}

/* Adds one transfer per request to m; -1 (every request failed) on an invalid name or no memory. */
static int start_gets(wh_kubeapi *api, CURLM *m, const char *ns, wh_get_req *reqs, size_t n,
                      transfer *t, struct curl_slist *headers, int64_t deadline_ms)
{
    for (size_t i = 0; i < n; i++) {
        if ((strcmp(reqs[i].resource, "secrets") != 0 &&
             strcmp(reqs[i].resource, "serviceaccounts") != 0) ||
            !wh_is_dns_label(ns) || !wh_is_dns_subdomain(reqs[i].name)) {
            fail_all(reqs, n,
                     &(pg_error){PG_ERR_INVALID, "refusing to look up an invalid object name"},
                     "other");
            return -1;
        }
        char url[1024];
        snprintf(url, sizeof url, "%s/api/v1/namespaces/%s/%s/%s", api->server, ns,
                 reqs[i].resource, reqs[i].name);
        if (!(t[i].h = new_transfer(api, &t[i], url, headers, deadline_ms)) ||
            curl_multi_add_handle(m, t[i].h) != CURLM_OK) {
            fail_all(reqs, n, &(pg_error){PG_ERR_NOMEM, "out of memory"}, "other");
            return -1;
        }
    }
    return 0;
}

void wh_kubeapi_get(void *ctx, const char *ns, wh_get_req *reqs, size_t n, int64_t deadline_ms)
{
    wh_kubeapi *api = ctx;
    pg_error err = {PG_ERR_NOMEM, "out of memory"}; /* what fails the round when nothing says */
    for (size_t i = 0; i < n; i++)
        reqs[i] =
            (wh_get_req){.resource = reqs[i].resource, .name = reqs[i].name, .result = WH_FAILED};
    struct curl_slist *headers = auth_headers(api, &err);
    CURLM *m = headers ? take_client(api, deadline_ms, &err) : NULL;
    pg_autofree transfer *t = m ? calloc(n, sizeof *t) : NULL;
    if (!t) /* no token, no free client before the deadline, or no memory */
        fail_all(reqs, n, &err, !headers ? "token" : !m ? "timeout" : "other");
    else if (start_gets(api, m, ns, reqs, n, t, headers, deadline_ms) == 0) {
        run_transfers(api, m, deadline_ms);
        for (size_t i = 0; i < n; i++)
            finish_get(api, &t[i], ns, &reqs[i]);
    }
    if (t)
        end_transfers(m, t, n);
    if (m)
        return_client(api, m);
    free_headers(headers);
}

/* ------------------------------------------------------------ readiness */

/* GET /version answered 200 by deadline_ms (err not NULL: its code is the answer). */
static int version_ok(wh_kubeapi *api, int64_t deadline_ms, pg_error *err)
{
    struct curl_slist *headers = auth_headers(api, err);
    CURLM *m = headers ? take_client(api, deadline_ms, err) : NULL;
    transfer t = {0};
    long status = 0;
    char url[600];
    snprintf(url, sizeof url, "%s/version", api->server);
    int rc = m ? PG_OK : err->code;
    if (m && (!(t.h = new_transfer(api, &t, url, headers, deadline_ms)) ||
              curl_multi_add_handle(m, t.h) != CURLM_OK))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    else if (m) {
        run_transfers(api, m, deadline_ms);
        const char *kind; /* readiness is not a review's read: not counted */
        if ((rc = transfer_failure(api, &t, err, &kind)) == PG_OK)
            curl_easy_getinfo(t.h, CURLINFO_RESPONSE_CODE, &status);
        if (rc == PG_OK && status != 200)
            rc = pg_fail(err, PG_ERR_IO, "API server answered HTTP %ld to GET /version", status);
    }
    if (m) {
        end_transfers(m, &t, 1);
        return_client(api, m);
    }
    free_headers(headers);
    return rc;
}

int wh_kubeapi_ready(wh_kubeapi *api, long long cache_ms, pg_error *err)
{
    long long now = pg_monotonic_ms();
    pg_error probe = {0};
    pthread_mutex_lock(&api->lock);
    int cached = api->ready_at_ms && now - api->ready_at_ms < cache_ms;
    if (cached)
        probe = api->ready;
    pthread_mutex_unlock(&api->lock);
    if (!cached) {
        version_ok(api, pg_monotonic_ms() + READY_TIMEOUT_MS, &probe);
        pthread_mutex_lock(&api->lock);
        api->ready = probe;
        api->ready_at_ms = pg_monotonic_ms();
        pthread_mutex_unlock(&api->lock);
    }
    if (err && probe.code != PG_OK)
        *err = probe;
    return probe.code;
}
