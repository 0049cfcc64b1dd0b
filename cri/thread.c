/* SPDX-License-Identifier: Apache-2.0 */
#include "thread.h"

#include <errno.h>

struct timespec cri_timespec_at(int64_t ms)
{
    return (struct timespec){.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
}

static void *thread_main(void *arg)
{
    cri_thread *t = arg;
    pthread_mutex_lock(&t->lock);
    t->body(t->owner);
    t->exited = true;
    pthread_cond_broadcast(&t->exited_cond);
    pthread_cond_broadcast(&t->wake); /* others waiting on the owner's state */
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static void destroy(cri_thread *t)
{
    pthread_cond_destroy(&t->wake);
    pthread_cond_destroy(&t->exited_cond);
    pthread_mutex_destroy(&t->lock);
}

int cri_thread_start(cri_thread *t, void (*body)(void *owner), void *owner, const char *what,
                     pg_error *err)
{
    t->body = body;
    t->owner = owner;
    t->stopping = t->exited = false;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->wake, &ca);
    pthread_cond_init(&t->exited_cond, &ca);
    pthread_condattr_destroy(&ca);
    int e = pthread_create(&t->thread, NULL, thread_main, t);
    if (e == 0)
        return PG_OK;
    destroy(t);
    return pg_fail_errno(err, e, "%s thread", what);
}

void cri_thread_wait(cri_thread *t, int64_t until_ms)
{
    if (until_ms < 0) {
        pthread_cond_wait(&t->wake, &t->lock);
        return;
    }
    struct timespec until = cri_timespec_at(until_ms);
    pthread_cond_timedwait(&t->wake, &t->lock, &until);
}

int cri_thread_stop(cri_thread *t, int timeout_ms)
{
    struct timespec until = cri_timespec_at(pg_monotonic_ms() + timeout_ms);
    pthread_mutex_lock(&t->lock);
    t->stopping = true;
    pthread_cond_broadcast(&t->wake);
    int e = 0;
    while (!t->exited && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&t->exited_cond, &t->lock, &until);
    bool exited = t->exited;
    pthread_mutex_unlock(&t->lock);
    if (!exited)
        return 0;
    pthread_join(t->thread, NULL);
    destroy(t);
    return 1;
}
