/* SPDX-License-Identifier: Apache-2.0 */
#include "kubeapi.h"

#include "files.h"

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDLE_HANDLES 16 /* keeps that many TLS connections to the API server warm */
#define READY_TIMEOUT_MS 1000L
#define CA_CACHE_SECONDS 60L /* a rotated API CA file is picked up within a minute */

struct wh_kubeapi {
    char *server, *ca_file, *token_file;
    pthread_mutex_t lock; /* token, idle handles, readiness cache */
    char *token;
    wh_file_id token_id;
    CURL *idle[IDLE_HANDLES];
    size_t n_idle;
    CURLM *idle_multi[IDLE_HANDLES]; /* each keeps its own pool of API connections */
    size_t n_idle_multi;
    int ready;
    long long ready_at_ms;
    char ready_msg[WH_MESSAGE_MAX];
};

typedef struct body {
    char *data;
    size_t len, cap;
} body;

static void body_wipe(body *b)
{
    if (b->data)
        OPENSSL_cleanse(b->data, b->cap);
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    body *b = userdata;
    size_t n = size * nmemb;
    if (n > WH_MAX_API_RESPONSE_BYTES - b->len)
        return 0; /* over the bound: curl fails the transfer */
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        /* Not realloc: the old block may hold secret data and must be wiped. */
        char *grown = malloc(cap);
        if (!grown)
            return 0;
        if (b->data)
            memcpy(grown, b->data, b->len);
        body_wipe(&(body){b->data, b->len, b->cap});
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

wh_kubeapi *wh_kubeapi_new(const char *server, const char *ca_file, const char *token_file,
                           char *msg, size_t msg_size)
{
    if (!server || strncmp(server, "https://", 8) != 0 || strlen(server) > 512) {
        snprintf(msg, msg_size, "the API server URL must start with https://");
        return NULL;
    }
    wh_kubeapi *api = calloc(1, sizeof *api);
    if (!api || !(api->server = strdup(server)) || !(api->ca_file = strdup(ca_file)) ||
        !(api->token_file = strdup(token_file))) {
        wh_kubeapi_free(api);
        snprintf(msg, msg_size, "out of memory");
        return NULL;
    }
    size_t n = strlen(api->server);
    while (n > 8 && api->server[n - 1] == '/')
        api->server[--n] = '\0';
    pthread_mutex_init(&api->lock, NULL);
    return api;
}

void wh_kubeapi_free(wh_kubeapi *api)
{
    if (!api)
        return;
    for (size_t i = 0; i < api->n_idle; i++)
        curl_easy_cleanup(api->idle[i]);
    for (size_t i = 0; i < api->n_idle_multi; i++)
        curl_multi_cleanup(api->idle_multi[i]);
    if (api->token)
        OPENSSL_cleanse(api->token, strlen(api->token));
    free(api->token);
    free(api->server);
    free(api->ca_file);
    free(api->token_file);
    pthread_mutex_destroy(&api->lock);
    free(api);
}

/* Re-reads the token when the file behind the path changed. Called with the lock held. */
static int refresh_token(wh_kubeapi *api, char *msg, size_t msg_size)
{
    wh_file_id id;
    if (wh_file_id_of(api->token_file, &id) != 0) {
        snprintf(msg, msg_size, "service account token %.200s unreadable", api->token_file);
        return -1;
    }
    if (api->token && wh_file_id_equal(&id, &api->token_id))
        return 0;
    char *text;
    size_t len;
    if (wh_read_file(api->token_file, WH_MAX_TOKEN_BYTES, 0, &text, &len, msg, msg_size) != 0)
        return -1;
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
        text[--len] = '\0';
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] <= ' ' || (unsigned char)text[i] > '~') {
            OPENSSL_cleanse(text, len);
            free(text);
            snprintf(msg, msg_size, "service account token %.200s: not a bearer token",
                     api->token_file);
            return -1;
        }
    if (api->token)
        OPENSSL_cleanse(api->token, strlen(api->token));
    free(api->token);
    api->token = text;
    api->token_id = id;
    return 0;
}

/* "Authorization: Bearer <token>" as a header list; wiped by free_headers. */
static struct curl_slist *auth_headers(wh_kubeapi *api, char *msg, size_t msg_size)
{
    pthread_mutex_lock(&api->lock);
    struct curl_slist *headers = NULL;
    if (refresh_token(api, msg, msg_size) == 0) {
        size_t n = strlen(api->token) + sizeof "Authorization: Bearer ";
        char *line = malloc(n);
        if (line) {
            snprintf(line, n, "Authorization: Bearer %s", api->token);
            headers = curl_slist_append(NULL, line);
            OPENSSL_cleanse(line, n);
            free(line);
        }
        if (headers)
            headers = curl_slist_append(headers, "Accept: application/json");
        if (!headers)
            snprintf(msg, msg_size, "out of memory");
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

static CURL *take_handle(wh_kubeapi *api)
{
    pthread_mutex_lock(&api->lock);
    CURL *h = api->n_idle ? api->idle[--api->n_idle] : NULL;
    pthread_mutex_unlock(&api->lock);
    if (h)
        curl_easy_reset(h); /* keeps its live connection and TLS session */
    return h ? h : curl_easy_init();
}

static void return_handle(wh_kubeapi *api, CURL *h)
{
    pthread_mutex_lock(&api->lock);
    if (api->n_idle < IDLE_HANDLES) {
        api->idle[api->n_idle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&api->lock);
    if (h)
        curl_easy_cleanup(h);
}

/* The options of every GET: TLS verified against the CA and the server name, https only. */
static void setup_handle(wh_kubeapi *api, CURL *h, const char *url, struct curl_slist *headers,
                         long timeout_ms, body *b, char *errbuf)
{
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_CAINFO, api->ca_file);
    curl_easy_setopt(h, CURLOPT_CA_CACHE_TIMEOUT, CA_CACHE_SECONDS);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for DNS timeouts */
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "pullgate-webhook/" PG_WEBHOOK_VERSION);
}

/* One GET; *status gets the HTTP status (0 when none). */
static int http_get(wh_kubeapi *api, const char *path, long timeout_ms, body *b, long *status,
                    char *msg, size_t msg_size)
{
    *status = 0;
    struct curl_slist *headers = auth_headers(api, msg, msg_size);
    if (!headers)
        return -1;
    char url[1024];
    snprintf(url, sizeof url, "%s%s", api->server, path);
    CURL *h = take_handle(api);
    char errbuf[CURL_ERROR_SIZE] = "";
    CURLcode rc = CURLE_OUT_OF_MEMORY;
    if (h) {
        setup_handle(api, h, url, headers, timeout_ms, b, errbuf);
        rc = curl_easy_perform(h);
        if (rc == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
        return_handle(api, h);
    }
    free_headers(headers);
    if (rc != CURLE_OK) {
        snprintf(msg, msg_size, "API server %s: %s", api->server,
                 errbuf[0] ? errbuf : curl_easy_strerror(rc));
        return -1;
    }
    return 0;
}

static const char *string_at(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

static int same(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* A 404 is "not found" only when it is the API's NotFound Status for exactly this object. */
static int is_not_found(const json_t *status, const char *resource, const char *name)
{
    const json_t *details = json_object_get(status, "details");
    return same(string_at(status, "kind"), "Status") &&
           same(string_at(status, "reason"), "NotFound") && same(string_at(details, "name"), name) &&
           same(string_at(details, "kind"), resource);
}

static wh_lookup interpret(long status, json_t *obj, const char *resource, const char *ns,
                           const char *name, char *msg, size_t msg_size)
{
    const char *kind = strcmp(resource, "secrets") == 0 ? "Secret" : "ServiceAccount";
    const json_t *meta = json_object_get(obj, "metadata");
    if (status == 200) {
        if (same(string_at(obj, "kind"), kind) && same(string_at(meta, "name"), name) &&
            same(string_at(meta, "namespace"), ns))
            return WH_FOUND;
        snprintf(msg, msg_size, "HTTP 200 without the %s %s/%.64s", kind, ns, name);
        return WH_FAILED;
    }
    if (status == 404 && is_not_found(obj, resource, name))
        return WH_NOT_FOUND;
    const char *why = string_at(obj, "message");
    snprintf(msg, msg_size, "HTTP %ld%s%.200s", status, why ? ": " : "", why ? why : "");
    return WH_FAILED;
}

static CURLM *take_multi(wh_kubeapi *api)
{
    pthread_mutex_lock(&api->lock);
    CURLM *m = api->n_idle_multi ? api->idle_multi[--api->n_idle_multi] : NULL;
    pthread_mutex_unlock(&api->lock);
    return m ? m : curl_multi_init();
}

static void return_multi(wh_kubeapi *api, CURLM *m)
{
    pthread_mutex_lock(&api->lock);
    if (api->n_idle_multi < IDLE_HANDLES) {
        api->idle_multi[api->n_idle_multi++] = m;
        m = NULL;
    }
    pthread_mutex_unlock(&api->lock);
    if (m)
        curl_multi_cleanup(m);
}

/* One transfer of a concurrent round. */
typedef struct transfer {
    CURL *h;
    body b;
    char errbuf[CURL_ERROR_SIZE];
    CURLcode rc;
    int done;
} transfer;

static void fail_all(wh_get_req *reqs, size_t n, const char *msg)
{
    for (size_t i = 0; i < n; i++) {
        reqs[i].result = WH_FAILED;
        snprintf(reqs[i].msg, sizeof reqs[i].msg, "%s", msg);
    }
}

/* Adds one easy handle per request to m; -1 when a request is invalid or memory runs out. */
static int start_transfers(wh_kubeapi *api, CURLM *m, const char *ns, wh_get_req *reqs, size_t n,
                           transfer *t, struct curl_slist *headers, long timeout_ms)
{
    for (size_t i = 0; i < n; i++) {
        if ((strcmp(reqs[i].resource, "secrets") != 0 &&
             strcmp(reqs[i].resource, "serviceaccounts") != 0) ||
            !wh_is_dns_label(ns) || !wh_is_dns_subdomain(reqs[i].name)) {
            fail_all(reqs, n, "refusing to look up an invalid object name");
            return -1;
        }
        char url[1024];
        snprintf(url, sizeof url, "%s/api/v1/namespaces/%s/%s/%s", api->server, ns,
                 reqs[i].resource, reqs[i].name);
        if (!(t[i].h = curl_easy_init())) {
            fail_all(reqs, n, "out of memory");
            return -1;
        }
        setup_handle(api, t[i].h, url, headers, timeout_ms, &t[i].b, t[i].errbuf);
        curl_easy_setopt(t[i].h, CURLOPT_PRIVATE, (void *)&t[i]);
        curl_multi_add_handle(m, t[i].h);
    }
    return 0;
}

/* Drives the round until every transfer finished (each is bounded by its own timeout). */
static void run_transfers(CURLM *m, long timeout_ms)
{
    long long until = wh_now_ms() + timeout_ms + 100;
    int running = 1;
    while (running && wh_now_ms() < until) {
        if (curl_multi_perform(m, &running) != CURLM_OK)
            break;
        if (running)
            curl_multi_poll(m, NULL, 0, 50, NULL);
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

static void finish_transfer(wh_kubeapi *api, transfer *t, const char *ns, wh_get_req *req)
{
    long status = 0;
    if (!t->done) {
        snprintf(req->msg, sizeof req->msg, "API server %s: time limit exceeded", api->server);
        return;
    }
    if (t->rc != CURLE_OK) {
        snprintf(req->msg, sizeof req->msg, "API server %s: %s", api->server,
                 t->errbuf[0] ? t->errbuf : curl_easy_strerror(t->rc));
        return;
    }
    curl_easy_getinfo(t->h, CURLINFO_RESPONSE_CODE, &status);
    json_t *parsed = t->b.data ? json_loadb(t->b.data, t->b.len, JSON_REJECT_DUPLICATES, NULL)
                               : NULL;
    req->result = interpret(status, parsed, req->resource, ns, req->name, req->msg,
                            sizeof req->msg);
    if (req->result == WH_FOUND)
        req->obj = parsed;
    else
        json_decref(parsed); /* a Status: no secret material */
}

void wh_kubeapi_get(void *ctx, const char *ns, wh_get_req *reqs, size_t n, long timeout_ms)
{
    wh_kubeapi *api = ctx;
    char msg[WH_MESSAGE_MAX] = "";
    for (size_t i = 0; i < n; i++) {
        reqs[i].result = WH_FAILED;
        reqs[i].obj = NULL;
        reqs[i].msg[0] = '\0';
    }
    struct curl_slist *headers = auth_headers(api, msg, sizeof msg);
    CURLM *m = headers ? take_multi(api) : NULL;
    transfer *t = m ? calloc(n, sizeof *t) : NULL;
    if (!t) {
        fail_all(reqs, n, msg[0] ? msg : "out of memory");
    } else if (start_transfers(api, m, ns, reqs, n, t, headers, timeout_ms) == 0) {
        run_transfers(m, timeout_ms);
        for (size_t i = 0; i < n; i++)
            finish_transfer(api, &t[i], ns, &reqs[i]);
    }
    for (size_t i = 0; t && i < n; i++) {
        if (t[i].h) {
            curl_multi_remove_handle(m, t[i].h);
            curl_easy_cleanup(t[i].h);
        }
        body_wipe(&t[i].b);
    }
    free(t);
    if (m)
        return_multi(api, m);
    free_headers(headers);
}

int wh_kubeapi_ready(wh_kubeapi *api, long long cache_ms, char *msg, size_t msg_size)
{
    long long now = wh_now_ms();
    pthread_mutex_lock(&api->lock);
    int cached = api->ready_at_ms && now - api->ready_at_ms < cache_ms;
    int ready = api->ready;
    snprintf(msg, msg_size, "%s", api->ready_msg);
    pthread_mutex_unlock(&api->lock);
    if (cached)
        return ready;
    body b = {0};
    long status = 0;
    msg[0] = '\0';
    ready = http_get(api, "/version", READY_TIMEOUT_MS, &b, &status, msg, msg_size) == 0 &&
            status == 200;
    if (!ready && !msg[0])
        snprintf(msg, msg_size, "API server answered HTTP %ld to GET /version", status);
    body_wipe(&b);
    pthread_mutex_lock(&api->lock);
    api->ready = ready;
    api->ready_at_ms = wh_now_ms();
    snprintf(api->ready_msg, sizeof api->ready_msg, "%s", ready ? "" : msg);
    pthread_mutex_unlock(&api->lock);
    return ready;
}
