/* SPDX-License-Identifier: Apache-2.0 */
#include "memory.h"

#include <curl/curl.h>
#include <jansson.h>
#include <malloc.h>
#include <openssl/crypto.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_size_t global_used;
static size_t global_limit = (size_t)-1;
/* The account the allocations of this thread charge (one request per connection thread). */
static _Thread_local wh_account *current;
/* A parse in progress on this thread: its admitted bound, and what it allocated net. */
static _Thread_local int parsing;
static _Thread_local size_t parse_bound;
static _Thread_local long long parse_net;

void wh_account_init(wh_account *a, size_t limit)
{
    a->used = a->peak = 0;
    a->limit = limit;
    a->over = 0;
}

int wh_charge(wh_account *a, size_t n)
{
    if (!a)
        return 0;
    if (a->over || n > a->limit || a->used > a->limit - n) {
        a->over = 1;
        return -1;
    }
    size_t before = atomic_fetch_add(&global_used, n);
    if (before > global_limit || n > global_limit - before) {
        atomic_fetch_sub(&global_used, n);
        a->over = 1;
        return -1;
    }
    a->used += n;
    if (a->used > a->peak)
        a->peak = a->used;
    return 0;
}

/* A charge that cannot fail: what jansson allocates (see memory.h). */
static void charge_anyway(wh_account *a, size_t n)
{
    atomic_fetch_add(&global_used, n);
    a->used += n;
    if (a->used > a->peak)
        a->peak = a->used;
}

void wh_uncharge(wh_account *a, size_t n)
{
    if (!a)
        return;
    if (n > a->used) /* a block allocated before this account was entered */
        n = a->used;
    a->used -= n;
    atomic_fetch_sub(&global_used, n);
}

void wh_account_enter(wh_account *a) { current = a; }

void wh_account_suspend(void) { current = NULL; }

wh_account *wh_account_current(void) { return current; }

void wh_account_leave(wh_account *a)
{
    if (current == a)
        current = NULL;
    if (a)
        wh_uncharge(a, a->used);
}

size_t wh_memory_used(void) { return atomic_load(&global_used); }

/* Counts a block leaving (freed) or entering (allocated) this thread's books. */
static void book(size_t n, int allocated)
{
    if (parsing)
        parse_net += allocated ? (long long)n : -(long long)n;
    else if (current && allocated)
        charge_anyway(current, n);
    else if (current)
        wh_uncharge(current, n);
}

/* Wipes and frees a block from malloc (or from the hooks); NULL is fine. */
static void free_wiped(void *p)
{
    if (!p)
        return;
    size_t n = malloc_usable_size(p);
    OPENSSL_cleanse(p, n);
    book(n, 0);
    free(p);
}

/* ------------------------------------------------ the hooks (jansson, curl) */

/* jansson's: counted, never refused. */
static void *counted_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p)
        book(malloc_usable_size(p), 1);
    return p;
}

/* libcurl's: refused over the budget (curl fails the transfer). */
static void *charged_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p && current && !parsing && wh_charge(current, malloc_usable_size(p)) != 0) {
        free(p); /* never held anything */
        return NULL;
    }
    return p;
}

static void *charged_calloc(size_t count, size_t size)
{
    if (size && count > (size_t)-1 / size)
        return NULL;
    void *p = charged_malloc(count * size);
    if (p)
        memset(p, 0, count * size);
    return p;
}

/* realloc would leave the old block unwiped: copy, then wipe the old one. */
static void *charged_realloc(void *old, size_t n)
{
    if (!old)
        return charged_malloc(n);
    void *p = charged_malloc(n);
    if (!p)
        return NULL;
    size_t keep = malloc_usable_size(old);
    memcpy(p, old, keep < n ? keep : n);
    free_wiped(old);
    return p;
}

static char *charged_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = charged_malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

int wh_parse_begin(size_t cost)
{
    if (current && wh_charge(current, cost) != 0)
        return -1;
    parsing = 1;
    parse_bound = current ? cost : 0;
    parse_net = 0;
    return 0;
}

void wh_parse_end(void)
{
    parsing = 0;
    if (!current)
        return;
    wh_uncharge(current, parse_bound);
    if (parse_net > 0)
        charge_anyway(current, (size_t)parse_net);
}

int wh_memory_init(size_t limit)
{
    global_limit = limit;
    json_set_alloc_funcs(counted_malloc, free_wiped);
    return curl_global_init_mem(CURL_GLOBAL_DEFAULT, charged_malloc, free_wiped, charged_realloc,
                                charged_strdup, charged_calloc) == CURLE_OK
               ? 0
               : -1;
}

/* ------------------------------------------------------------ wh_buf */

void wh_buf_init(wh_buf *b, size_t max, wh_account *acct)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->max = max;
    b->acct = acct;
}

static void release_block(wh_buf *b, char *data, size_t cap)
{
    if (!data)
        return;
    OPENSSL_cleanse(data, cap);
    free(data);
    wh_uncharge(b->acct, cap);
}

int wh_buf_append(wh_buf *b, const void *data, size_t n)
{
    if (n > b->max - b->len)
        return -1;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap = cap > (b->max + 1) / 2 ? b->max + 1 : cap * 2;
        if (wh_charge(b->acct, cap) != 0)
            return -1;
        char *grown = malloc(cap);
        if (!grown) {
            wh_uncharge(b->acct, cap);
            return -1;
        }
        if (b->len)
            memcpy(grown, b->data, b->len);
        release_block(b, b->data, b->cap);
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

void wh_buf_wipe(wh_buf *b)
{
    release_block(b, b->data, b->cap);
    b->data = NULL;
    b->len = b->cap = 0;
}
