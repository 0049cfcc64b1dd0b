/* SPDX-License-Identifier: Apache-2.0 */
#include "recorder.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum job_kind { JOB_INTENT, JOB_PULLED, JOB_FAILED, JOB_ALIASES } job_kind;

typedef struct job {
    job_kind kind;
    char *image;
    char *image_ref;
    cri_pull_creds creds;
    char **aliases;
    int refs; /* the waiter and the writer; under the recorder's lock */
    bool done;
    int rc;
    pg_error err;
    struct job *next;
} job;

struct cri_recorder {
    pg_store *store;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work; /* queue not empty, or stopping */
    pthread_cond_t done; /* a job finished, or the writer exited */
    job *head, *tail;
    size_t queued;
    bool stopping;
    bool exited;
};

int64_t cri_now_ms(void) { return pg_monotonic_ms(); }

static void job_free(job *j)
{
    free(j->image);
    free(j->image_ref);
    cri_pull_creds_clear(&j->creds);
    pg_strv_free(j->aliases);
    free(j);
}

/* Under r->lock. */
static void job_unref(job *j)
{
    if (--j->refs == 0)
        job_free(j);
}

static int run_job(pg_store *store, job *j)
{
    switch (j->kind) {
    case JOB_INTENT: return pg_store_record_intent(store, j->image, &j->err);
    case JOB_PULLED:
        return pg_store_record_pulled(store, j->image, j->image_ref, &j->creds.creds, &j->err);
    case JOB_FAILED: return pg_store_record_failed(store, j->image, &j->err);
    case JOB_ALIASES:
        return pg_store_record_aliases(store, j->image_ref, (const char *const *)j->aliases,
                                       &j->err);
    }
    return pg_fail(&j->err, PG_ERR_INTERNAL, "unknown record job");
}

static void *writer_main(void *arg)
{
    cri_recorder *r = arg;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (!r->head && !r->stopping)
            pthread_cond_wait(&r->work, &r->lock);
        if (!r->head)
            break; /* stopping and drained */
        job *j = r->head;
        r->head = j->next;
        if (!r->head)
            r->tail = NULL;
        r->queued--;
        pthread_mutex_unlock(&r->lock);
        int rc = run_job(r->store, j); /* the only place that may block on flock */
        pthread_mutex_lock(&r->lock);
        j->rc = rc;
        j->done = true;
        job_unref(j);
        pthread_cond_broadcast(&r->done);
    }
    r->exited = true;
    pthread_cond_broadcast(&r->done);
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

cri_recorder *cri_recorder_new(pg_store *store, pg_error *err)
{
    cri_recorder *r = calloc(1, sizeof *r);
    if (!r) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    r->store = store;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->work, &ca);
    pthread_cond_init(&r->done, &ca);
    pthread_condattr_destroy(&ca);
    int e = pthread_create(&r->thread, NULL, writer_main, r);
    if (e != 0) {
        pthread_cond_destroy(&r->work);
        pthread_cond_destroy(&r->done);
        pthread_mutex_destroy(&r->lock);
        free(r);
        pg_fail_errno(err, e, "record writer thread");
        return NULL;
    }
    return r;
}

static void abs_time(int64_t deadline_ms, struct timespec *ts)
{
    ts->tv_sec = (time_t)(deadline_ms / 1000);
    ts->tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
}

int cri_recorder_stop(cri_recorder *r, int timeout_ms)
{
    if (!r)
        return 1;
    struct timespec until;
    abs_time(cri_now_ms() + timeout_ms, &until);
    pthread_mutex_lock(&r->lock);
    r->stopping = true;
    pthread_cond_signal(&r->work);
    int e = 0;
    while (!r->exited && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&r->done, &r->lock, &until);
    bool exited = r->exited;
    pthread_mutex_unlock(&r->lock);
    if (!exited)
        return 0;
    pthread_join(r->thread, NULL);
    pthread_cond_destroy(&r->work);
    pthread_cond_destroy(&r->done);
    pthread_mutex_destroy(&r->lock);
    free(r);
    return 1;
}

/* Queues j (taking one reference for the writer) and waits for it until deadline_ms. */
static int submit_and_wait(cri_recorder *r, job *j, int64_t deadline_ms, pg_error *err)
{
    j->refs = 2;
    pthread_mutex_lock(&r->lock);
    if (r->stopping || r->queued >= CRI_RECORDER_QUEUE_MAX) {
        pthread_mutex_unlock(&r->lock);
        job_free(j);
        return pg_fail(err, PG_ERR_LIMIT, "record queue %s",
                       r->stopping ? "stopped" : "full (store blocked?)");
    }
    if (r->tail)
        r->tail->next = j;
    else
        r->head = j;
    r->tail = j;
    r->queued++;
    pthread_cond_signal(&r->work);
    struct timespec until;
    abs_time(deadline_ms, &until);
    int e = 0;
    while (!j->done && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&r->done, &r->lock, &until);
    int rc;
    if (j->done) {
        rc = j->rc;
        if (rc != PG_OK && err)
            *err = j->err;
    } else {
        rc = pg_fail(err, CRI_RECORD_TIMEOUT,
                     "store did not answer in time (lock held?); the operation stays queued");
    }
    job_unref(j);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

static job *new_job(job_kind kind, const char *image, const char *image_ref, pg_error *err)
{
    job *j = calloc(1, sizeof *j);
    if (j) {
        j->kind = kind;
        j->image = image ? pg_strdup(image) : NULL;
        j->image_ref = image_ref ? pg_strdup(image_ref) : NULL;
        if ((image && !j->image) || (image_ref && !j->image_ref)) {
            job_free(j);
            j = NULL;
        }
    }
    if (!j)
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
    return j;
}

int cri_record_intent(cri_recorder *r, const char *image, int64_t deadline_ms, pg_error *err)
{
    job *j = new_job(JOB_INTENT, image, NULL, err);
    return j ? submit_and_wait(r, j, deadline_ms, err) : PG_ERR_NOMEM;
}

int cri_record_pulled(cri_recorder *r, const char *image, const char *image_ref,
                      cri_pull_creds *creds, int64_t deadline_ms, pg_error *err)
{
    job *j = new_job(JOB_PULLED, image, image_ref, err);
    if (!j) {
        cri_pull_creds_clear(creds);
        return PG_ERR_NOMEM;
    }
    j->creds = *creds;
    j->creds.creds.secrets = j->creds.secrets; /* the view follows the moved array */
    memset(creds, 0, sizeof *creds);
    return submit_and_wait(r, j, deadline_ms, err);
}

int cri_record_failed(cri_recorder *r, const char *image, int64_t deadline_ms, pg_error *err)
{
    job *j = new_job(JOB_FAILED, image, NULL, err);
    return j ? submit_and_wait(r, j, deadline_ms, err) : PG_ERR_NOMEM;
}

int cri_record_aliases(cri_recorder *r, const char *image_ref, char **aliases, int64_t deadline_ms,
                       pg_error *err)
{
    job *j = new_job(JOB_ALIASES, NULL, image_ref, err);
    if (!j) {
        pg_strv_free(aliases);
        return PG_ERR_NOMEM;
    }
    j->aliases = aliases;
    return submit_and_wait(r, j, deadline_ms, err);
}
