/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the webhook holds in memory, in one place (memory.c):
 *
 *  - wh_account: the bytes one request holds (its body, its JSON, its API
 *    transfers). Every charge also counts against the process-wide budget
 *    set by wh_memory_init; a checked charge over either limit fails and the
 *    request is refused, so the reviews in flight never hold more than the
 *    budget whatever arrives.
 *  - the allocators given to jansson (json_set_alloc_funcs) and libcurl
 *    (curl_global_init_mem): they charge the account of the calling thread
 *    (wh_account_enter) and wipe every block they free, so the JSON of a
 *    Secret, the dockerconfig parsed from it and curl's receive buffers
 *    leave nothing behind. libcurl's allocations can be refused (it handles
 *    that); jansson's never are, because jansson 2.14's lexer ignores a
 *    failed allocation (lex_save) and would then read past its buffer:
 *  - wh_parse_begin/end: a JSON text is parsed only after an upper bound of
 *    what jansson allocates for it (wh_json_parse_cost) was charged, checked;
 *    that bound is what refuses a review too large to parse.
 *  - wh_buf: a bounded byte buffer that charges its account (checked) and
 *    wipes every block it lets go (never realloc, which would leave a copy).
 *
 * The allocator hooks are process-wide (a program may set them, the library
 * may not): wh_memory_init is called once by main before any thread starts.
 * Without it (the fuzzer) nothing is charged and every parse is admitted.
 */
#ifndef PULLGATE_WEBHOOK_MEMORY_H
#define PULLGATE_WEBHOOK_MEMORY_H

#include <stddef.h>

typedef struct wh_account {
    size_t used;  /* bytes charged now (saturating: frees of older blocks never underflow) */
    size_t limit; /* this request's own limit */
    size_t peak;  /* the most it held at once */
    int over;     /* a checked charge failed: the request is refused */
} wh_account;

/* Installs the hooks (jansson, libcurl); global_limit bytes for all accounts together.
 * Returns -1 when libcurl refuses the allocator (called too late). */
int wh_memory_init(size_t global_limit);

void wh_account_init(wh_account *a, size_t limit);
/* Allocations of this thread through the hooks charge a until wh_account_leave. */
void wh_account_enter(wh_account *a);
/* Stops charging from this thread (the answer to a refused review must still be
 * built); what a holds stays charged until wh_account_leave. */
void wh_account_suspend(void);
/* Stops charging a from this thread and returns everything a still holds to the budget. */
void wh_account_leave(wh_account *a);
/* The account this thread charges now, or NULL. */
wh_account *wh_account_current(void);
/* Charges n bytes (0) or marks a over and charges nothing (-1). */
int wh_charge(wh_account *a, size_t n);
void wh_uncharge(wh_account *a, size_t n);
/* Bytes charged by all accounts together (for logs and tests). */
size_t wh_memory_used(void);

/* Admits a JSON parse that allocates at most cost bytes (0), or refuses it (-1, no parse). */
int wh_parse_begin(size_t cost);
/* Ends the parse: its bound is replaced by what the parse still holds. */
void wh_parse_end(void);

/* A bounded buffer of bytes, NUL-terminated after every append. */
typedef struct wh_buf {
    char *data;
    size_t len, cap, max;
    wh_account *acct; /* may be NULL: bounded, not charged */
} wh_buf;

void wh_buf_init(wh_buf *b, size_t max, wh_account *acct);
/* 0, or -1 when the bytes would pass max or the account's budget (b unchanged). */
int wh_buf_append(wh_buf *b, const void *data, size_t n);
/* Wipes and frees the contents; b can be reused (same max and account). */
void wh_buf_wipe(wh_buf *b);

#endif
