/* SPDX-License-Identifier: Apache-2.0 */
/* The resident decider (decider.h): a store kept current, behind a read-write lock. */
#include "decider.h"

#include "hook.h"
#include "log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/*
 * Which record directories (and their pulled/) exist and what they are: checked before each
 * decision, the store reopened when one appeared, vanished or was replaced, so the daemon
 * never decides on fewer records than a fresh hook would (docs/design.md, "The resident hook").
 */
typedef struct dir_identity {
    int present;
    dev_t dev;
    ino_t ino;
} dir_identity;

typedef struct store_view {
    dir_identity *ids;
    size_t n;
} store_view;

static dir_identity identity_of(const char *dir, const char *sub)
{
    char path[4096];
    struct stat st;
    dir_identity id = {0};
    if (snprintf(path, sizeof path, "%s%s", dir, sub) < (int)sizeof path && lstat(path, &st) == 0) {
        id.present = 1;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
    }
    return id;
}

static size_t view_size(const pg_config *cfg)
{
    size_t n = 1;
    const char *const *ro = pg_config_read_only_dirs(cfg);
    for (size_t i = 0; ro && ro[i]; i++)
        n++;
    return 2 * n;
}

static void view_take(const pg_config *cfg, store_view *v)
{
    const char *state_dir = pg_config_state_dir(cfg);
    const char *const *ro = pg_config_read_only_dirs(cfg);
    size_t k = 0;
    v->ids[k++] = identity_of(state_dir ? state_dir : "", "");
    v->ids[k++] = identity_of(state_dir ? state_dir : "", "/pulled");
    for (size_t i = 0; ro && ro[i]; i++) {
        v->ids[k++] = identity_of(ro[i], "");
        v->ids[k++] = identity_of(ro[i], "/pulled");
    }
}

static int view_equal(const store_view *a, const store_view *b)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->ids[i].present != b->ids[i].present || a->ids[i].dev != b->ids[i].dev ||
            a->ids[i].ino != b->ids[i].ino)
            return 0;
    return 1;
}

struct cri_decider {
    const pg_config *cfg;
    pthread_rwlock_t store_lock; /* readers decide; a reopen takes it for writing */
    pg_store *store;
    store_view view;
};

static pg_store *open_cached_store(const pg_config *cfg, pg_error *err)
{
    pg_store *store = hook_open_store(cfg, err);
    /* The bounds are configuration (criRecordCache*, criAbsenceCacheEntries). */
    if (store && pg_store_enable_caches(store, pg_config_cri_record_cache_entries(cfg),
                                        pg_config_cri_record_cache_bytes(cfg),
                                        pg_config_cri_absence_cache_entries(cfg), err) != PG_OK) {
        pg_store_free(store);
        store = NULL;
    }
    return store;
}

pg_store *cri_decider_acquire(cri_decider *s)
{
    dir_identity ids[s->view.n]; /* 2 per record directory: a few, from the configuration */
    store_view now = {ids, s->view.n};
    view_take(s->cfg, &now);
    pthread_rwlock_rdlock(&s->store_lock);
    if (s->store && view_equal(&now, &s->view))
        return s->store;
    pthread_rwlock_unlock(&s->store_lock);

    pthread_rwlock_wrlock(&s->store_lock);
    pg_error err = {0};
    /* Taken again under the lock: the newest view goes with the store opened after it. */
    view_take(s->cfg, &now);
    if (!s->store || !view_equal(&now, &s->view)) {
        pg_store_free(s->store);
        memcpy(s->view.ids, ids, sizeof ids);
        s->store = open_cached_store(s->cfg, &err);
        cri_log(s->store ? CRI_LOG_INFO : CRI_LOG_WARNING, "decider: record store reopened",
                "error", s->store ? NULL : err.message, NULL);
    }
    pthread_rwlock_unlock(&s->store_lock);
    pthread_rwlock_rdlock(&s->store_lock);
    if (s->store)
        return s->store;
    pthread_rwlock_unlock(&s->store_lock);
    return NULL;
}

void cri_decider_release(cri_decider *d) { pthread_rwlock_unlock(&d->store_lock); }

void cri_decider_free(cri_decider *d)
{
    if (!d)
        return;
    pg_store_free(d->store);
    pthread_rwlock_destroy(&d->store_lock);
    free(d->view.ids);
    free(d);
}

cri_decider *cri_decider_new(const pg_config *cfg, pg_error *err)
{
    cri_decider *d = calloc(1, sizeof *d);
    if (!d) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    pthread_rwlock_init(&d->store_lock, NULL);
    d->cfg = cfg;
    d->view.n = view_size(cfg);
    if (!(d->view.ids = calloc(d->view.n, sizeof *d->view.ids))) {
        cri_decider_free(d);
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    view_take(cfg, &d->view);
    if (!(d->store = open_cached_store(cfg, err))) {
        cri_decider_free(d);
        return NULL;
    }
    return d;
}
