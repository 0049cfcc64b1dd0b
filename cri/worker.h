/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-cri's worker: one thread that runs the intercepted calls' state
 * machines (the PullImage flow, cri/intercept.c), so their state needs no
 * lock and their gRPC batches are started from one thread, as gRPC requires
 * of a call. Tasks are posted from any thread (the event loop's completions,
 * the record writer's outcomes); timers fire on the worker. Nothing on the
 * worker blocks for long: waits are tasks that come back, never sleeps.
 */
#ifndef PULLGATE_CRI_WORKER_H
#define PULLGATE_CRI_WORKER_H

#include "internal.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct cri_task cri_task;
typedef void (*cri_task_fn)(cri_task *t);

/* Embedded in its owner; posted at most once at a time. */
struct cri_task {
    cri_task_fn fn;
    void *owner;
    int ok;       /* a completion's success flag, or an outcome code */
    pg_error err; /* an outcome's error (record operations) */
    cri_task *next;
};

/* A one-shot timer on the worker, embedded in its owner. */
typedef struct cri_timer {
    cri_task task; /* posted when it fires */
    int64_t due_ms;
    bool armed;
    struct cri_timer *next;
} cri_timer;

typedef struct cri_worker cri_worker;

cri_worker *cri_worker_new(pg_error *err);
/* Thread-safe: queues t (its fn runs on the worker). */
void cri_worker_post(cri_worker *w, cri_task *t);
/* Worker thread only: (re)arms t to fire at due_ms (pg_monotonic_ms clock). */
void cri_worker_arm(cri_worker *w, cri_timer *t, int64_t due_ms);
/* Worker thread only: a disarmed timer never fires. */
void cri_worker_disarm(cri_worker *w, cri_timer *t);
/* Runs what is posted until none is left and no timer is armed, or timeout_ms;
 * 1 when stopped and freed, 0 when something still runs (left to exit()). */
int cri_worker_stop(cri_worker *w, int timeout_ms);

#endif
