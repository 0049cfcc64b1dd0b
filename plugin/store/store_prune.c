/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prune (pg_store_prune): the records of images no longer in use leave the
 * writable directory, and with them what only they justified. Walks run
 * outside the store lock; changes are made in short locked steps
 * (pg_st_in_steps), each re-checking what the walk saw. The steps' order is
 * what power loss needs: docs/design.md, "Prune". The read-only directories'
 * names caches are not refreshed here: that can take seconds at 100k kubelet
 * records, and pullgate-cri runs prune on its writer thread.
 */
#include "store_impl.h"
#include "store_index.h"
#include "store_names.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct prune {
    const pg_store *s;
    const record_dir *d;
    const char **in_use; /* sorted */
    size_t n_in_use;
    time_t before;
    int pulled_fd;
    const char *sub; /* the subdirectory of the current sweep */
    int sub_fd;      /* and its descriptor */
    pg_error *err;   /* for the walks' callbacks */
    pg_strv todo;    /* the current phase's items, found outside the lock */
    pg_st_name_lines lines;
    unsigned pruned;
} prune;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool in_use(const prune *p, const char *ref)
{
    return p->n_in_use && bsearch(&ref, p->in_use, p->n_in_use, sizeof *p->in_use, cmp_str) != NULL;
}

static bool is_pinned(const pg_store *s, const pg_record *rec)
{
    for (size_t i = 0; i < rec->n_maps; i++)
        if (pg_pinned_match((const char *const *)s->pinned, rec->maps[i].image_name))
            return true;
    return false;
}

static bool must_keep(const prune *p, const pg_record *rec)
{
    return in_use(p, rec->image_ref) || (p->before && rec->last_updated >= p->before) ||
           is_pinned(p->s, rec);
}

/* ------------------------------------------------------ 1. temporary files */

static bool is_temp(const char *name)
{
    size_t n = strlen(name);
    return strncmp(name, NAME_PREFIX, strlen(NAME_PREFIX)) == 0 && n > strlen(TMP_SUFFIX) &&
           strcmp(name + n - strlen(TMP_SUFFIX), TMP_SUFFIX) == 0;
}

static int list_temp(int dirfd, const record_dir *d, const char *name, void *ud)
{
    (void)dirfd;
    (void)d;
    prune *p = ud;
    char rel[128];
    snprintf(rel, sizeof rel, "%s/%s", p->sub, name);
    return pg_strv_push(&p->todo, rel, p->err);
}

/* A subdirectory that cannot be listed is skipped: its temporary files stay. */
static int list_temps(prune *p, pg_error *err)
{
    static const char *const subs[] = {SUB_PULLING, SUB_PULLED,    SUB_INTENTS,  SUB_IMAGES,
                                       SUB_NAMES,   SUB_CREDTIMES, SUB_DIRCACHE, SUB_CREDIDX};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        pg_error ignored = {0};
        p->sub = subs[i];
        if (pg_st_walk(p->d, subs[i], is_temp, list_temp, p, &ignored) == PG_ERR_NOMEM)
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    return PG_OK;
}

/*
 * A writer holds the lock while its temporary file exists, except for the
 * name caches of read-only directories and prune's own name files (written
 * and synced before the lock is taken for their renames); either only fails
 * to be written when its temporary file goes (a second prune at the same
 * time reports the error). So one seen before the lock was taken is, under
 * it, gone or stale.
 */
static int remove_temp(void *ctx, size_t i, pg_error *err)
{
    prune *p = ctx;
    if (pg_st_sys_unlinkat(p->d->fd, p->todo.v[i]) != 0 && errno != ENOENT)
        return pg_fail_errno(err, errno, "remove %s/%s", p->d->path, p->todo.v[i]);
    return PG_OK;
}

/* ------------------------------------------------------------ 2. records */

/* The walk: every readable record's names; the ones to prune. Invalid files
 * are left alone: pruning is not the place to destroy evidence. */
static int plan_entry(int dirfd, const record_dir *d, const char *name, void *ud)
{
    prune *p = ud;
    pg_record *rec;
    pg_error ignored = {0};
    if (pg_st_read_record_at(dirfd, d, name, &rec, &ignored) != PG_OK)
        return PG_OK;
    int rc = pg_st_name_lines_add(&p->lines, rec, name, p->err);
    if (rc == PG_OK && !must_keep(p, rec))
        rc = pg_strv_push(&p->todo, name, p->err);
    pg_record_free(rec);
    return rc;
}

/* Under the lock: the record as it is now, removed unless it must be kept. */
static int remove_record(void *ctx, size_t i, pg_error *err)
{
    prune *p = ctx;
    const char *name = p->todo.v[i];
    pg_record *rec;
    pg_error ignored = {0};
    if (pg_st_read_record_at(p->pulled_fd, p->d, name, &rec, &ignored) != PG_OK)
        return PG_OK;              /* gone, or no longer a valid record: left alone */
    bool keep = must_keep(p, rec); /* re-pulled since the walk: kept */
    pg_record_free(rec);
    if (keep)
        return PG_OK;
    int rc = pg_st_unlink(p->pulled_fd, p->d->path, SUB_PULLED, name, err);
    if (rc != PG_OK)
        return rc;
    pg_st_cache_forget(p->s, name);
    p->pruned++;
    return PG_OK;
}

/*
 * The removals made durable, outside the lock (an fsync on a busy disk can
 * take hundreds of ms; a pull must not wait for it), and before any side file
 * goes: the sweeps of step 3 remove credential times and credential indexes
 * only after this, re-checking under the lock that their record is still
 * absent. One fsync for the whole prune.
 */
static int records_durable(prune *p, pg_error *err)
{
    if (p->pruned && pg_st_fsync_retry(p->pulled_fd) != 0)
        return pg_fail_errno(err, errno, "fsync %s/%s", p->d->path, SUB_PULLED);
    return PG_OK;
}

/* ---------------------------------------------- 3, 4. side files, index */

static int list_side_orphan(int dirfd, const record_dir *d, const char *name, void *ud)
{
    (void)dirfd;
    (void)d;
    prune *p = ud;
    return pg_st_absent_at(p->pulled_fd, name) ? pg_strv_push(&p->todo, name, p->err) : PG_OK;
}

static int remove_side_orphan(void *ctx, size_t i, pg_error *err)
{
    prune *p = ctx;
    const char *name = p->todo.v[i];
    return pg_st_absent_at(p->pulled_fd, name) ? pg_st_unlink(p->sub_fd, p->d->path, p->sub, name, err)
                                               : PG_OK;
}

static int list_index_orphan(int dirfd, const record_dir *d, const char *name, void *ud)
{
    (void)d;
    prune *p = ud;
    return pg_st_index_orphan(p->d, dirfd, p->pulled_fd, name)
               ? pg_strv_push(&p->todo, name, p->err)
               : PG_OK;
}

static int remove_index_orphan(void *ctx, size_t i, pg_error *err)
{
    prune *p = ctx;
    const char *name = p->todo.v[i];
    /* Rewritten since the walk (the image pulled again): it names a record now. */
    return pg_st_index_orphan(p->d, p->sub_fd, p->pulled_fd, name)
               ? pg_st_unlink(p->sub_fd, p->d->path, SUB_IMAGES, name, err)
               : PG_OK;
}

/* Finds the items of a sweep of sub outside the lock, then removes them in steps. */
static int sweep(prune *p, const char *sub, pg_st_entry_fn list, pg_st_step_item remove,
                 pg_error *err)
{
    pg_strv_clear(&p->todo);
    p->sub = sub;
    int rc = pg_st_open_subdir(p->d, sub, &p->sub_fd, err);
    if (rc == PG_ERR_NOT_FOUND)
        return PG_OK; /* pullgate-credidx/ is made on first use */
    if (rc == PG_OK)
        rc = pg_st_walk(p->d, sub, pg_st_is_record_name, list, p, err);
    if (rc == PG_OK)
        rc = pg_st_in_steps(p->d, p->todo.n, remove, NULL, p, err);
    close(p->sub_fd);
    p->sub_fd = -1;
    return rc;
}

/* ----------------------------------------------------------------- prune */

static int prune_all(prune *p, pg_error *err)
{
    int rc = pg_st_open_subdir(p->d, SUB_PULLED, &p->pulled_fd, err);
    if (rc == PG_OK)
        rc = list_temps(p, err);
    if (rc == PG_OK)
        rc = pg_st_in_steps(p->d, p->todo.n, remove_temp, NULL, p, err);
    if (rc == PG_OK) {
        pg_strv_clear(&p->todo);
        rc = pg_st_walk(p->d, SUB_PULLED, pg_st_is_record_name, plan_entry, p, err);
    }
    if (rc == PG_OK)
        rc = pg_st_in_steps(p->d, p->todo.n, remove_record, NULL, p, err);
    if (rc == PG_OK)
        rc = records_durable(p, err);
    if (rc == PG_OK)
        rc = sweep(p, SUB_CREDTIMES, list_side_orphan, remove_side_orphan, err);
    if (rc == PG_OK)
        rc = sweep(p, SUB_CREDIDX, list_side_orphan, remove_side_orphan, err);
    if (rc == PG_OK)
        rc = sweep(p, SUB_IMAGES, list_index_orphan, remove_index_orphan, err);
    if (rc == PG_OK)
        rc = pg_st_names_upkeep(p->d, &p->lines, err);
    return rc;
}

PG_API int pg_store_prune(pg_store *store, const char *const *in_use_refs, time_t before,
                          unsigned *pruned_out, pg_error *err)
{
    if (pruned_out)
        *pruned_out = 0;
    int rc = pg_st_require_writable(store, err);
    if (rc != PG_OK)
        return rc;
    prune p = {.s = store,
               .d = &store->dirs[0],
               .before = before,
               .pulled_fd = -1,
               .sub_fd = -1,
               .err = err};
    while (in_use_refs && in_use_refs[p.n_in_use])
        p.n_in_use++;
    if (p.n_in_use && !(p.in_use = malloc(p.n_in_use * sizeof *p.in_use)))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < p.n_in_use; i++)
        p.in_use[i] = in_use_refs[i];
    if (p.n_in_use)
        qsort(p.in_use, p.n_in_use, sizeof *p.in_use, cmp_str);
    rc = prune_all(&p, err);
    pg_cleanup_close(&p.pulled_fd);
    pg_strv_clear(&p.todo);
    pg_st_name_lines_free(&p.lines);
    free(p.in_use);
    if (pruned_out)
        *pruned_out = p.pruned;
    if (p.pruned && store->notifier)
        pg_notify_records_pruned(store->notifier, p.pruned);
    return rc;
}
