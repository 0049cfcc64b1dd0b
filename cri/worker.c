/* SPDX-License-Identifier: Apache-2.0 */
#include "worker.h"

#include "cleanup.h"
#include "thread.h"

#include <stdlib.h>

struct cri_worker {
    cri_thread t;
    cri_task *head, *tail; /* posted tasks, under t.lock */
    cri_timer *timers;     /* armed timers, worker thread only */
};

void cri_worker_post(cri_worker *w, cri_task *t)
{
    t->next = NULL;
    pthread_mutex_lock(&w->t.lock);
    if (w->tail)
        w->tail->next = t;
    else
        w->head = t;
    w->tail = t;
    pthread_cond_signal(&w->t.wake);
    pthread_mutex_unlock(&w->t.lock);
}

void cri_worker_disarm(cri_worker *w, cri_timer *t)
{
    if (!t->armed)
        return;
    for (cri_timer **p = &w->timers; *p; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            break;
        }
    t->armed = false;
    t->next = NULL;
}

void cri_worker_arm(cri_worker *w, cri_timer *t, int64_t due_ms)
{
    cri_worker_disarm(w, t);
    t->due_ms = due_ms;
    t->armed = true;
    t->next = w->timers;
    w->timers = t;
}

/* The earliest armed timer (a few dozen at most: one per pull in flight). */
static cri_timer *earliest(const cri_worker *w)
{
    cri_timer *best = NULL;
    for (cri_timer *t = w->timers; t; t = t->next)
        if (!best || t->due_ms < best->due_ms)
            best = t;
    return best;
}

/* Fires every due timer; returns the next due time, or -1 when none is armed. */
static int64_t fire_due(cri_worker *w)
{
    for (;;) {
        cri_timer *t = earliest(w);
        if (!t)
            return -1;
        if (t->due_ms > pg_monotonic_ms())
            return t->due_ms;
        cri_worker_disarm(w, t);
        t->task.fn(&t->task);
    }
}

/* The worker's body (cri_thread): entered and left with the lock held. */
static void worker_run(void *arg)
{
    cri_worker *w = arg;
    for (;;) {
        pthread_mutex_unlock(&w->t.lock);
        int64_t next_due = fire_due(w);
        pthread_mutex_lock(&w->t.lock);
        if (!w->head && w->t.stopping && next_due < 0)
            return;
        if (!w->head)
            cri_thread_wait(&w->t, next_due);
        cri_task *batch = w->head;
        w->head = w->tail = NULL;
        pthread_mutex_unlock(&w->t.lock);
        while (batch) {
            cri_task *t = batch;
            batch = t->next;
            t->next = NULL;
            t->fn(t);
        }
        pthread_mutex_lock(&w->t.lock);
    }
}

cri_worker *cri_worker_new(pg_error *err)
{
    pg_autofree cri_worker *w = calloc(1, sizeof *w);
    if (!w) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (cri_thread_start(&w->t, worker_run, w, "worker", err) != PG_OK)
        return NULL;
    return pg_steal(&w); /* the worker thread runs on it */
}

int cri_worker_stop(cri_worker *w, int timeout_ms)
{
    if (!w)
        return 1;
    if (!cri_thread_stop(&w->t, timeout_ms))
        return 0;
    free(w);
    return 1;
}
