/* SPDX-License-Identifier: Apache-2.0 */
#include "prune.h"

#include "cleanup.h"
#include "cri_metrics.h"
#include "grpc_unary.h"
#include "log.h"
#include "pull.h"
#include "store_lookup.h"
#include "thread.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct cri_version {
    const char *list_images, *list_containers;
} cri_version;

static const cri_version versions[] = {
    {"/runtime.v1.ImageService/ListImages", "/runtime.v1.RuntimeService/ListContainers"},
    {"/runtime.v1alpha2.ImageService/ListImages",
     "/runtime.v1alpha2.RuntimeService/ListContainers"},
};

static int list_with(grpc_channel *ch, const cri_version *v, int timeout_ms, pg_strv *refs,
                     size_t *n_images, grpc_status_code *st, pg_error *err)
{
    grpc_slice answer;
    /* Empty requests: no filter, every image and every container. */
    int rc = pg_grpc_unary_call(ch, v->list_images, "", 0, timeout_ms, &answer, st, err);
    if (rc != PG_OK) {
        pg_error_prefix(err, "ListImages: %s", cri_status_name(*st));
        return rc;
    }
    rc = cri_list_images_refs(GRPC_SLICE_START_PTR(answer), GRPC_SLICE_LENGTH(answer), refs,
                              n_images, err);
    grpc_slice_unref(answer);
    if (rc != PG_OK)
        return rc;
    rc = pg_grpc_unary_call(ch, v->list_containers, "", 0, timeout_ms, &answer, st, err);
    if (rc != PG_OK) {
        pg_error_prefix(err, "ListContainers: %s", cri_status_name(*st));
        return rc;
    }
    rc = cri_list_containers_refs(GRPC_SLICE_START_PTR(answer), GRPC_SLICE_LENGTH(answer), refs,
                                  err);
    grpc_slice_unref(answer);
    return rc;
}

int cri_prune_list(grpc_channel *ch, int timeout_ms, char ***in_use, size_t *n_images,
                   pg_error *err)
{
    *in_use = NULL;
    *n_images = 0;
    int rc = PG_ERR_IO;
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        pg_strv refs = {0};
        grpc_status_code st = GRPC_STATUS_OK;
        rc = list_with(ch, &versions[i], timeout_ms, &refs, n_images, &st, err);
        if (rc == PG_OK) {
            *in_use = refs.v;
            return PG_OK;
        }
        pg_strv_clear(&refs);
        *n_images = 0;
        if (st != GRPC_STATUS_UNIMPLEMENTED)
            break; /* only an older CRI version is worth another try */
    }
    return rc;
}

int cri_prune_allowed(size_t n_images, bool force, const char **why)
{
    *why = NULL;
    if (n_images == 0 && !force) {
        *why = "the runtime lists no image (use --force if it truly holds none)";
        return 0;
    }
    return 1;
}

int cri_prune_records(pg_store *store, char **in_use, time_t before, unsigned *pruned,
                      pg_error *err)
{
    int rc = pg_store_prune(store, (const char *const *)in_use, before, pruned, err);
    /* Best effort (a stale cache is refreshed by the next decision that needs it): the
     * read-only directories' names caches made current here, off the container-start path. */
    pg_error ignored = {0};
    if (rc == PG_OK)
        (void)pg_store_refresh_name_caches(store, &ignored);
    return rc;
}

/* ------------------------------------------------------------ the daemon's pruner */

struct cri_pruner {
    grpc_channel *channel;
    pg_store *store;
    int64_t interval_ms;
    cri_thread t;
    bool kicked; /* under t.lock */
};

static void prune_once(cri_pruner *p)
{
    char **in_use = NULL;
    size_t n_images = 0;
    pg_error err = {0};
    const char *why = NULL;
    if (cri_prune_list(p->channel, CRI_PRUNE_LIST_MS, &in_use, &n_images, &err) != PG_OK) {
        cri_log(CRI_LOG_WARNING, "prune skipped: the runtime's image list is unavailable", "error",
                err.message, NULL);
        return;
    }
    if (!cri_prune_allowed(n_images, false, &why)) {
        cri_log(CRI_LOG_WARNING, "prune skipped", "reason", why, NULL);
        pg_strv_free(in_use);
        return;
    }
    unsigned pruned = 0;
    long long t0 = pg_metrics_now_us();
    int rc = cri_prune_records(p->store, in_use, time(NULL) - CRI_PRUNE_MIN_AGE_S, &pruned, &err);
    cri_metric_record_done("prune", rc == PG_OK, NULL, (double)(pg_metrics_now_us() - t0) / 1e6);
    if (rc == PG_OK)
        cri_metric_pruned(pruned);
    pg_strv_free(in_use);
    char n[24], imgs[24];
    snprintf(n, sizeof n, "%u", pruned);
    snprintf(imgs, sizeof imgs, "%zu", n_images);
    if (rc == PG_OK)
        cri_log(CRI_LOG_INFO, "records pruned", "count", n, "runtimeImages", imgs, NULL);
    else
        cri_log(CRI_LOG_ERROR, "prune failed", "error", err.message, NULL);
}

/* The pruner's body (cri_thread): entered and left with the lock held. */
static void pruner_run(void *arg)
{
    cri_pruner *p = arg;
    int64_t next = p->interval_ms > 0 ? pg_monotonic_ms() + p->interval_ms : -1;
    while (!p->t.stopping) {
        if (!p->kicked && (next < 0 || pg_monotonic_ms() < next)) {
            cri_thread_wait(&p->t, next);
            continue;
        }
        p->kicked = false;
        pthread_mutex_unlock(&p->t.lock);
        prune_once(p);
        pthread_mutex_lock(&p->t.lock);
        next = p->interval_ms > 0 ? pg_monotonic_ms() + p->interval_ms : -1;
    }
}

cri_pruner *cri_pruner_start(const char *runtime_endpoint, pg_store *store, int64_t interval_s,
                             pg_error *err)
{
    pg_autofree cri_pruner *p = calloc(1, sizeof *p);
    if (!p || !(p->channel = cri_runtime_channel(runtime_endpoint))) {
        pg_fail(err, PG_ERR_NOMEM, "pruner setup failed");
        return NULL;
    }
    p->store = store;
    p->interval_ms = interval_s * 1000;
    if (cri_thread_start(&p->t, pruner_run, p, "pruner", err) != PG_OK) {
        grpc_channel_destroy(p->channel);
        return NULL;
    }
    return pg_steal(&p); /* the pruner thread runs on it */
}

void cri_pruner_kick(cri_pruner *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->t.lock);
    p->kicked = true;
    pthread_cond_broadcast(&p->t.wake);
    pthread_mutex_unlock(&p->t.lock);
}

int cri_pruner_stop(cri_pruner *p, int timeout_ms)
{
    if (!p)
        return 1;
    if (!cri_thread_stop(&p->t, timeout_ms))
        return 0;
    grpc_channel_destroy(p->channel);
    free(p);
    return 1;
}
