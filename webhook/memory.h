/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the webhook holds in memory, in one place (memory.c; docs/webhook.md,
 * "Memory" and "Secrets in memory and in messages"): a wh_account per request,
 * charged against the process-wide budget too; the allocators given to jansson
 * and libcurl, which charge the calling thread's account and wipe every block
 * they free; wh_parse_begin/end, which admit a parse by an upper bound of what
 * jansson allocates (jansson's own allocations are never refused: its 2.14
 * lexer ignores a failed one and reads past its buffer); wh_buf, a bounded
 * buffer that wipes every block it lets go (never realloc).
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
