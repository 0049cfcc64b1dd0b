/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One background thread with the lock of the state it serves: the shape the worker,
 * the record writer and the pruner share. Its body runs with the lock held, waits with
 * cri_thread_wait and returns (lock held) once it sees `stopping` and has nothing left
 * to do; cri_thread_stop waits a bounded time for that, so a thread stuck in a store
 * lock is left to process exit instead of holding up shutdown.
 */
#ifndef PULLGATE_CRI_THREAD_H
#define PULLGATE_CRI_THREAD_H

#include "internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

typedef struct cri_thread {
    pthread_mutex_t lock; /* the owner's state lock */
    pthread_cond_t wake;  /* the thread waits on it: work, a kick, or stopping */
    bool stopping;        /* under lock: cri_thread_stop was called */
    bool exited;          /* under lock: the body returned (wake is broadcast then) */
    /* private */
    pthread_cond_t exited_cond;
    pthread_t thread;
    void (*body)(void *owner);
    void *owner;
} cri_thread;

/* Starts body(owner) on a new thread (what names it in the error). */
int cri_thread_start(cri_thread *t, void (*body)(void *owner), void *owner, const char *what,
                     pg_error *err);
/* Lock held: sleeps until woken, or until until_ms (pg_monotonic_ms clock; < 0: no limit). */
void cri_thread_wait(cri_thread *t, int64_t until_ms);
/* Sets stopping, wakes the thread and waits at most timeout_ms for its body to return.
 * 1 when it did (joined; the lock and conditions destroyed), 0 when it still runs. */
int cri_thread_stop(cri_thread *t, int timeout_ms);
/* The timespec of a pg_monotonic_ms instant (the conditions use CLOCK_MONOTONIC). */
struct timespec cri_timespec_at(int64_t ms);

#endif
