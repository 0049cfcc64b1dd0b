/* SPDX-License-Identifier: Apache-2.0 */
#include "worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct cri_worker {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t exited_cond;
    cri_task *head, *tail; /* posted tasks, under lock */
    cri_timer *timers;     /* armed timers, worker thread only */
    bool stopping, exited;
};

static void abs_time(int64_t ms, struct timespec *ts)
{
    ts->tv_sec = (time_t)(ms / 1000);
    ts->tv_nsec = (long)(ms % 1000) * 1000000L;
}

void cri_worker_post(cri_worker *w, cri_task *t)
{
    t->next = NULL;
    pthread_mutex_lock(&w->lock);
    if (w->tail)
        w->tail->next = t;
    else
        w->head = t;
    w->tail = t;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
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

static void *worker_main(void *arg)
{
    cri_worker *w = arg;
    for (;;) {
        int64_t next_due = fire_due(w);
        pthread_mutex_lock(&w->lock);
        if (!w->head && w->stopping && next_due < 0)
            break;
        if (!w->head) {
            if (next_due < 0) {
                pthread_cond_wait(&w->wake, &w->lock);
            } else {
                struct timespec until;
                abs_time(next_due, &until);
                pthread_cond_timedwait(&w->wake, &w->lock, &until);
            }
        }
        cri_task *batch = w->head;
        w->head = w->tail = NULL;
        pthread_mutex_unlock(&w->lock);
        while (batch) {
            cri_task *t = batch;
            batch = t->next;
            t->next = NULL;
            t->fn(t);
        }
    }
    w->exited = true;
    pthread_cond_broadcast(&w->exited_cond);
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

cri_worker *cri_worker_new(pg_error *err)
{
    cri_worker *w = calloc(1, sizeof *w);
    if (!w) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, &ca);
    pthread_cond_init(&w->exited_cond, &ca);
    pthread_condattr_destroy(&ca);
    int e = pthread_create(&w->thread, NULL, worker_main, w);
    if (e != 0) {
        pthread_cond_destroy(&w->wake);
        pthread_cond_destroy(&w->exited_cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
        pg_fail_errno(err, e, "worker thread");
        return NULL;
    }
    return w;
}

int cri_worker_stop(cri_worker *w, int timeout_ms)
{
    if (!w)
        return 1;
    struct timespec until;
    abs_time(pg_monotonic_ms() + timeout_ms, &until);
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_signal(&w->wake);
    int e = 0;
    while (!w->exited && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&w->exited_cond, &w->lock, &until);
    bool exited = w->exited;
    pthread_mutex_unlock(&w->lock);
    if (!exited)
        return 0;
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->exited_cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
    return 1;
}
