/* SPDX-License-Identifier: Apache-2.0 */
#include "recorder.h"

#include "cleanup.h"
#include "cri_metrics.h"
#include "thread.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef enum job_kind { JOB_INTENT, JOB_PULLED, JOB_FAILED } job_kind;
/* The metrics' stage label of each kind (cri_metric_record_stages). */
static const char *const job_stages[] = {"intent", "record", "release"};

typedef struct job {
    job_kind kind;
    char *image;
    char *image_ref;
    cri_pull_creds creds;
    char **aliases; /* a pulled record's other identities, or NULL */
    cri_record_done done;
    void *arg;
    long long submitted_us; /* for the recording latency metric (microseconds) */
    struct job *next;
} job;

struct cri_recorder {
    pg_store *store;
    cri_thread t; /* t.wake: the queue is not empty, or stopping */
    job *head, *tail;
    size_t queued;   /* jobs in the queue */
    size_t reserved; /* units reserved and not yet used */
};

static void job_free(job *j)
{
    free(j->image);
    free(j->image_ref);
    cri_pull_creds_clear(&j->creds);
    pg_strv_free(j->aliases);
    free(j);
}

/*
 * The record and the image's aliases in one batch (two fsync rounds less than two calls). The
 * aliases are identities pull.c already parsed, so a refusal (PG_ERR_INVALID, checked before
 * anything is written) is not expected; should one come, it must not cost the record, which is
 * then written alone (and fails alike if the refusal was the record's own).
 */
static int record_pulled(pg_store *store, job *j, pg_error *err)
{
    if (j->aliases) {
        int rc = pg_store_record_pulled_aliases(store, j->image, j->image_ref, &j->creds.creds,
                                                (const char *const *)j->aliases, err);
        if (rc != PG_ERR_INVALID)
            return rc;
        *err = (pg_error){0};
    }
    return pg_store_record_pulled(store, j->image, j->image_ref, &j->creds.creds, err);
}

static int run_job(pg_store *store, job *j, pg_error *err)
{
    switch (j->kind) {
    case JOB_INTENT: return pg_store_record_intent(store, j->image, err);
    case JOB_PULLED: return record_pulled(store, j, err);
    case JOB_FAILED: return pg_store_record_failed(store, j->image, err);
    }
    return pg_fail(err, PG_ERR_INTERNAL, "unknown record job");
}

/* The writer's body (cri_thread): entered and left with the lock held. */
static void writer_run(void *arg)
{
    cri_recorder *r = arg;
    for (;;) {
        while (!r->head && !r->t.stopping)
            cri_thread_wait(&r->t, -1);
        if (!r->head)
            return; /* stopping and drained */
        job *j = r->head;
        r->head = j->next;
        if (!r->head)
            r->tail = NULL;
        pthread_mutex_unlock(&r->t.lock);
        pg_error err = {0};
        int rc = run_job(r->store, j, &err); /* the only place that may block on flock */
        cri_metric_record_done(job_stages[j->kind], rc == PG_OK,
                               j->kind == JOB_PULLED ? cri_cred_source_name(j->creds.source) : NULL,
                               (double)(pg_metrics_now_us() - j->submitted_us) / 1e6);
        if (j->done)
            j->done(j->arg, rc, &err);
        job_free(j);
        pthread_mutex_lock(&r->t.lock);
        r->queued--; /* counted until it ran: room is freed only by work done */
    }
}

cri_recorder *cri_recorder_new(pg_store *store, pg_error *err)
{
    pg_autofree cri_recorder *r = calloc(1, sizeof *r);
    if (!r) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    r->store = store;
    if (cri_thread_start(&r->t, writer_run, r, "record writer", err) != PG_OK)
        return NULL;
    return pg_steal(&r); /* the writer thread runs on it */
}

int cri_recorder_stop(cri_recorder *r, int timeout_ms)
{
    if (!r)
        return 1;
    if (!cri_thread_stop(&r->t, timeout_ms))
        return 0;
    free(r);
    return 1;
}

int cri_recorder_reserve(cri_recorder *r, unsigned n, pg_error *err)
{
    pthread_mutex_lock(&r->t.lock);
    bool room = !r->t.stopping && r->queued + r->reserved + n <= CRI_RECORDER_QUEUE_MAX;
    if (room)
        r->reserved += n;
    bool stopping = r->t.stopping;
    pthread_mutex_unlock(&r->t.lock);
    if (room)
        return PG_OK;
    return pg_fail(err, PG_ERR_LIMIT, "record queue %s",
                   stopping ? "stopped" : "full (store blocked?)");
}

void cri_recorder_unreserve(cri_recorder *r, unsigned n)
{
    pthread_mutex_lock(&r->t.lock);
    r->reserved = r->reserved >= n ? r->reserved - n : 0;
    pthread_mutex_unlock(&r->t.lock);
}

/* Queues j on one reserved unit. Queued jobs always run, even while stopping. */
static int submit(cri_recorder *r, job *j)
{
    pthread_mutex_lock(&r->t.lock);
    if (r->reserved > 0)
        r->reserved--;
    r->queued++;
    if (r->tail)
        r->tail->next = j;
    else
        r->head = j;
    r->tail = j;
    pthread_cond_signal(&r->t.wake);
    pthread_mutex_unlock(&r->t.lock);
    return PG_OK;
}

static job *new_job(job_kind kind, const char *image, const char *image_ref, cri_record_done done,
                    void *arg, pg_error *err)
{
    job *j = calloc(1, sizeof *j);
    if (j) {
        j->kind = kind;
        j->submitted_us = pg_metrics_now_us();
        j->done = done;
        j->arg = arg;
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

int cri_record_intent(cri_recorder *r, const char *image, cri_record_done done, void *arg,
                      pg_error *err)
{
    job *j = new_job(JOB_INTENT, image, NULL, done, arg, err);
    return j ? submit(r, j) : PG_ERR_NOMEM;
}

int cri_record_pulled(cri_recorder *r, const char *image, const char *image_ref,
                      cri_pull_creds *creds, char **aliases, cri_record_done done, void *arg,
                      pg_error *err)
{
    job *j = new_job(JOB_PULLED, image, image_ref, done, arg, err);
    if (!j)
        return PG_ERR_NOMEM;
    j->aliases = aliases;
    j->creds = *creds;
    j->creds.creds.secrets = j->creds.secrets; /* the view follows the moved array */
    if (j->creds.creds.n_service_accounts)     /* and the moved namespace marker */
        j->creds.creds.service_accounts = &j->creds.namespace_marker;
    memset(creds, 0, sizeof *creds);
    return submit(r, j);
}

int cri_record_failed(cri_recorder *r, const char *image, cri_record_done done, void *arg,
                      pg_error *err)
{
    job *j = new_job(JOB_FAILED, image, NULL, done, arg, err);
    return j ? submit(r, j) : PG_ERR_NOMEM;
}
