/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A decision's lookups (store_lookup.h): every answer about a file of a record
 * directory is kept for the rest of the decision, keyed by (directory,
 * subdirectory, file name). Where a record comes from, cheapest first (a
 * long-lived store's caches, the credential index, the file parsed):
 * docs/design.md, "What the lookups cost".
 */
#include "store_lookup.h"

#include "engine_testing.h" /* pg_store_records_mapping, pg_store_credential_time */
#include "record_cache.h"
#include "store_credidx.h"
#include "store_dircache.h"
#include "store_names.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FD_UNTRIED (-2)
#define FD_REFUSED (-3)
#define FD_KEPT (-4) /* opened by this decision, now the store's */
#define N_SUBS PG_STORE_SUBS

static const char *sub_name(int sub)
{
    return sub == PG_SUB_CREDIDX ? SUB_CREDIDX
           : sub == PG_SUB_NAMES ? SUB_NAMES
                                 : pg_lc_sub_name((pg_lc_sub)sub);
}

/* What the decision learnt about one file. */
typedef enum { M_UNKNOWN, M_PRESENT, M_ABSENT, M_LOADED, M_FAILED } m_state;

typedef struct memo {
    size_t dir;
    int sub;
    file_name file;
    m_state state;
    pg_focused rec; /* pulled/, M_LOADED */
    char *ref;      /* pullgate-images/, M_LOADED */
    pg_error err;   /* M_FAILED: why, replayed to every asker */
} memo;

struct pg_lookup {
    const pg_store *s;
    const pg_record_focus *focus;
    int *fds; /* n_dirs * N_SUBS opened by this decision (or FD_UNTRIED, -1 missing, FD_REFUSED,
               * FD_KEPT) */
    memo **m; /* one allocation each: callers keep pointers to their records */
    size_t n, cap;
};

pg_lookup *pg_lookup_new(const pg_store *s, const pg_record_focus *focus)
{
    pg_lookup *l = calloc(1, sizeof *l);
    size_t n_fds = s ? s->n_dirs * N_SUBS : 0;
    if (!l || (n_fds && !(l->fds = malloc(n_fds * sizeof *l->fds)))) {
        free(l);
        return NULL;
    }
    for (size_t k = 0; k < n_fds; k++)
        l->fds[k] = FD_UNTRIED;
    l->s = s;
    l->focus = focus;
    if (s)
        pg_lookup_cache_refresh(s->lookups); /* the store as it is now */
    return l;
}

void pg_lookup_free(pg_lookup *l)
{
    if (!l)
        return;
    for (size_t k = 0; l->s && k < l->s->n_dirs * N_SUBS; k++)
        pg_cleanup_close(&l->fds[k]);
    for (size_t i = 0; i < l->n; i++) {
        pg_focused_clear(&l->m[i]->rec);
        free(l->m[i]->ref);
        free(l->m[i]);
    }
    free(l->m);
    free(l->fds);
    free(l);
}

size_t pg_lookup_dirs(const pg_lookup *l) { return l && l->s ? l->s->n_dirs : 0; }

/* --------------------------------------------------------- descriptors */

/* An already open descriptor of directory i's subdirectory, or -1 (none opened):
 * the store's kept one (long-lived: trusted while the absence cache's watches
 * say it is still the one at its path; pulled/ from store open), or the
 * decision's own. */
static int open_fd(const pg_lookup *l, size_t i, int sub)
{
    const pg_store *s = l->s;
    int kept = atomic_load(&s->kept[i * PG_STORE_SUBS + sub]);
    if (kept >= 0 && (!s->lookups || sub >= PG_LC_SUBS ||
                      pg_lookup_cache_trusted(s->lookups, i, (pg_lc_sub)sub)))
        return kept;
    if (sub == PG_LC_PULLED && s->dirs[i].pulled_fd >= 0 && !s->cache)
        return s->dirs[i].pulled_fd;
    int fd = l->fds[i * N_SUBS + sub];
    return fd >= 0 ? fd : -1;
}

/* Directory i's subdirectory for reading: open_fd's, else opened and checked now,
 * once per decision, and kept by a one-shot store for its next decisions (a
 * long-lived one keeps only what its absence cache watches). -1: missing
 * (PG_ERR_NOT_FOUND) or refused (the error). */
static int sub_fd(pg_lookup *l, size_t i, int sub, int *rc, pg_error *err)
{
    int fd = open_fd(l, i, sub);
    int *mine = &l->fds[i * N_SUBS + sub];
    *rc = PG_OK;
    if (fd >= 0)
        return fd;
    if (*mine == FD_UNTRIED || *mine == FD_REFUSED) { /* a refusal says why each time */
        *rc = pg_st_open_subdir(&l->s->dirs[i], sub_name(sub), mine, err);
        if (*rc != PG_OK)
            *mine = *rc == PG_ERR_NOT_FOUND ? -1 : FD_REFUSED;
    } else if (*mine < 0) {
        *rc = PG_ERR_NOT_FOUND;
    }
    int none = -1;
    if (*rc == PG_OK && !l->s->cache &&
        atomic_compare_exchange_strong(&l->s->kept[i * PG_STORE_SUBS + sub], &none, *mine)) {
        fd = *mine;
        *mine = FD_KEPT;
        return fd;
    }
    return *rc == PG_OK ? *mine : -1;
}

/* ---------------------------------------------------------------- memo */

static memo *memo_get(pg_lookup *l, size_t i, int sub, const char *file)
{
    for (size_t k = 0; k < l->n; k++)
        if (l->m[k]->dir == i && l->m[k]->sub == sub && strcmp(l->m[k]->file, file) == 0)
            return l->m[k];
    memo **grown = pg_st_grow(l->m, &l->cap, l->n, sizeof *grown, 32);
    if (!grown)
        return NULL;
    l->m = grown;
    memo *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    *e = (memo){.dir = i, .sub = sub, .state = M_UNKNOWN};
    snprintf(e->file, sizeof e->file, "%s", file);
    l->m[l->n++] = e;
    return e;
}

/* The answer of a settled entry (absent, loaded, failed). */
static int memo_result(const memo *e, pg_error *err)
{
    if (e->state == M_ABSENT)
        return PG_ERR_NOT_FOUND;
    if (e->state == M_FAILED) {
        if (err)
            *err = e->err;
        return e->err.code;
    }
    return PG_OK;
}

/* Settles the entry with a failure (absent, or the file unusable). */
static int memo_fail(memo *e, int rc, const pg_error *why, pg_error *err)
{
    e->state = rc == PG_ERR_NOT_FOUND ? M_ABSENT : M_FAILED;
    if (e->state == M_FAILED) {
        e->err = *why;
        e->err.code = rc;
        if (!e->err.message[0])
            snprintf(e->err.message, sizeof e->err.message, "%s", pg_code_name(rc));
    }
    return memo_result(e, err);
}

static bool settled(const memo *e) { return e->state >= M_ABSENT; }

/* ---------------------------------------------------------------- probes */

/* stat of sub/file in directory i: 1 present, 0 absent, -1 cannot tell (the
 * caller decides which side that is). The absence cache first. */
static int stat_file(pg_lookup *l, size_t i, int sub, const char *file, struct stat *st)
{
    uint64_t gen = 0;
    pg_lookup_cache *lc = sub < PG_LC_SUBS ? l->s->lookups : NULL;
    if (pg_lookup_cache_absent(lc, i, (pg_lc_sub)sub, file, &gen))
        return 0;
    int fd = open_fd(l, i, sub), rc;
    if (fd >= 0) {
        rc = fstatat(fd, file, st, AT_SYMLINK_NOFOLLOW);
    } else {
        char path[64 + FILE_NAME_LEN];
        snprintf(path, sizeof path, "%s/%s", sub_name(sub), file);
        rc = fstatat(l->s->dirs[i].fd, path, st, AT_SYMLINK_NOFOLLOW);
    }
    if (rc == 0)
        return 1;
    if (errno != ENOENT)
        return -1;
    pg_lookup_cache_note_absent(lc, i, (pg_lc_sub)sub, file, gen);
    return 0;
}

static bool exists_file(pg_lookup *l, size_t i, int sub, const char *file)
{
    memo *e = memo_get(l, i, sub, file);
    if (!e)
        return true; /* out of memory: the strict side */
    if (e->state == M_UNKNOWN) {
        struct stat st;
        /* Cannot tell: present, the strict side. */
        e->state = stat_file(l, i, sub, file, &st) != 0 ? M_PRESENT : M_ABSENT;
    }
    return e->state != M_ABSENT;
}

static int sub_of(pg_entry_kind kind)
{
    return kind == PG_ENTRY_PULLED   ? PG_LC_PULLED
           : kind == PG_ENTRY_INTENT ? PG_LC_PULLING
                                     : PG_LC_IMAGES;
}

/* The file name of key (a `what`) in directory i of l's store. */
static int key_file(const pg_lookup *l, size_t i, const char *what, const char *key,
                    file_name file, pg_error *err)
{
    int rc = l && l->s && i < l->s->n_dirs ? pg_st_check_input(what, key, err)
                                           : pg_fail(err, PG_ERR_INVALID, "no record store");
    return rc == PG_OK ? pg_record_file_name(key, file, err) : rc;
}

bool pg_lookup_exists(pg_lookup *l, size_t i, pg_entry_kind kind, const char *key)
{
    file_name file;
    return key_file(l, i, "key", key, file, NULL) == PG_OK && exists_file(l, i, sub_of(kind), file);
}

/* The object of `file` in directory i's subdirectory sub (open as fd) through a
 * long-lived store's cache, which re-validates it by fstatat; an absence found
 * there goes to the absence cache (gen: read before). */
static int cached_get(pg_lookup *l, size_t i, pg_lc_sub sub, int fd, const char *file,
                      uint64_t gen, pg_record_loader load, pg_cache_free free_obj, void *ud,
                      pg_cached_record **ref, pg_error *err)
{
    const pg_store *s = l->s;
    pg_autofree char *key = pg_st_cache_key(&s->dirs[i], pg_lc_sub_name(sub));
    int rc = key ? pg_record_cache_get(s->cache, fd, key, file, load, free_obj, ud, ref, err)
                 : pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc == PG_ERR_NOT_FOUND) /* the cache's own fstatat/openat said ENOENT */
        pg_lookup_cache_note_absent(s->lookups, i, sub, file, gen);
    return rc;
}

/* ---------------------------------------------------------- credential times */

/* The credential times of a record, for the cache's loader. */
typedef struct times_of_record {
    const record_dir *w;
    const char *image_ref;
} times_of_record;

static int load_times(int fd, const char *name, void **out, pg_error *err, void *ud)
{
    const times_of_record *t = ud;
    json_t *times = NULL;
    int rc = pg_st_credtimes_read(fd, t->w, name, t->image_ref, &times, err);
    *out = times;
    return rc;
}

static void free_json(void *obj) { json_decref(obj); }

/* The credential-times object of w's record file for rec (new reference; NULL: none). */
static int times_parsed(pg_lookup *l, const char *file, const pg_record *rec, json_t **times,
                        pg_error *err)
{
    int rc;
    *times = NULL;
    int fd = sub_fd(l, 0, PG_LC_CREDTIMES, &rc, err);
    if (rc == PG_OK)
        rc = pg_st_credtimes_read(fd, &l->s->dirs[0], file, rec->image_ref, times, err);
    return rc == PG_ERR_NOT_FOUND ? PG_OK : rc; /* no times file (or no directory): none */
}

/* The same from a long-lived store's cache (*ref: the reference to give back). */
static int times_cached(pg_lookup *l, const char *file, const pg_record *rec,
                        pg_cached_record **ref, pg_error *err)
{
    const pg_store *s = l->s;
    uint64_t gen = 0;
    int rc;
    *ref = NULL;
    if (pg_lookup_cache_absent(s->lookups, 0, PG_LC_CREDTIMES, file, &gen))
        return PG_OK;
    int fd = sub_fd(l, 0, PG_LC_CREDTIMES, &rc, err);
    times_of_record t = {&s->dirs[0], rec->image_ref};
    if (rc == PG_OK)
        rc = cached_get(l, 0, PG_LC_CREDTIMES, fd, file, gen, load_times, free_json, &t, ref, err);
    return rc == PG_ERR_NOT_FOUND ? PG_OK : rc;
}

/* The times of f's kept credentials: the times file's entries, else lastUpdatedTime. */
static int fill_times(pg_focused *f, const json_t *times, pg_error *err)
{
    const pg_rec_mapping *m = f->rec->n_maps ? &f->rec->maps[0] : NULL;
    size_t n_s = m ? m->n_secrets : 0, n_a = m ? m->n_sas : 0;
    f->secret_times = calloc(n_s + 1, sizeof *f->secret_times);
    f->sa_times = calloc(n_a + 1, sizeof *f->sa_times);
    int rc = f->secret_times && f->sa_times ? PG_OK : pg_fail(err, PG_ERR_NOMEM, "out of memory");
    time_t fallback = f->rec->last_updated;
    for (size_t j = 0; rc == PG_OK && j < n_s; j++)
        rc = pg_st_credential_time(times, m->image_name, &m->secrets[j], NULL, fallback,
                                   &f->secret_times[j], err);
    for (size_t j = 0; rc == PG_OK && j < n_a; j++)
        rc = pg_st_credential_time(times, m->image_name, NULL, &m->sas[j], fallback,
                                   &f->sa_times[j], err);
    return rc;
}

/* The writable directory's records have per-credential times; read only when a
 * credential is kept (a decision judges no other). */
static bool wants_times(const pg_lookup *l, size_t i, const pg_focused *f)
{
    const pg_rec_mapping *m = f->rec->n_maps ? &f->rec->maps[0] : NULL;
    return i == 0 && l->s->writable && m && m->n_secrets + m->n_sas > 0;
}

/* ------------------------------------------------------------- records */

static int load_record(int fd, const char *name, void **out, pg_error *err, void *ud)
{
    pg_record *rec = NULL;
    int rc = pg_st_read_record_at(fd, ud, name, &rec, err);
    *out = rec;
    return rc;
}

static void free_record(void *obj) { pg_record_free(obj); }

/* From a long-lived store's cache: the record, then (when wanted) its times. */
static int record_cached(pg_lookup *l, size_t i, int fd, memo *e, pg_error *err)
{
    const pg_store *s = l->s;
    const record_dir *d = &s->dirs[i];
    uint64_t gen = 0;
    if (pg_lookup_cache_absent(s->lookups, i, PG_LC_PULLED, e->file, &gen))
        return PG_ERR_NOT_FOUND;
    pg_cached_record *ref = NULL, *tref = NULL;
    int rc = cached_get(l, i, PG_LC_PULLED, fd, e->file, gen, load_record, free_record, (void *)d,
                        &ref, err);
    const pg_record *full = pg_cached_get(ref);
    if (rc == PG_OK) {
        e->rec.maps_any = full->n_maps > 0;
        rc = pg_record_project(full, l->focus, &e->rec.rec, err);
    }
    if (rc == PG_OK && wants_times(l, i, &e->rec))
        rc = times_cached(l, e->file, full, &tref, err);
    if (rc == PG_OK)
        rc = fill_times(&e->rec, pg_cached_get(tref), err);
    pg_cached_record_release(tref);
    pg_cached_record_release(ref);
    return rc;
}

/* From the writable directory's credential index, when it is current: PG_OK;
 * PG_ERR_NOT_FOUND (*absent: the record is; else no usable index); NOMEM. */
static int record_indexed(pg_lookup *l, int pulled_fd, memo *e, bool *absent)
{
    struct stat rec_st, times_st;
    pg_error ignored = {0};
    int rc;
    *absent = false;
    /* The record's stat first: it answers "absent" in one call and is the stamp
     * the index is checked against. */
    if (fstatat(pulled_fd, e->file, &rec_st, AT_SYMLINK_NOFOLLOW) != 0) {
        *absent = errno == ENOENT;
        return PG_ERR_NOT_FOUND;
    }
    /* The times file's stamp through its checked directory: "absent" can lead to an allow. */
    int times_fd = sub_fd(l, 0, PG_LC_CREDTIMES, &rc, &ignored);
    int found = rc == PG_ERR_NOT_FOUND                                            ? 0
                : rc != PG_OK                                                     ? -1
                : fstatat(times_fd, e->file, &times_st, AT_SYMLINK_NOFOLLOW) == 0 ? 1
                : errno == ENOENT                                                 ? 0
                                                                                  : -1;
    int idx_fd = found >= 0 ? sub_fd(l, 0, PG_SUB_CREDIDX, &rc, &ignored) : -1;
    if (idx_fd < 0)
        return PG_ERR_NOT_FOUND;
    return pg_st_credidx_load(&l->s->dirs[0], idx_fd, e->file, &rec_st, found ? &times_st : NULL,
                              l->focus, &e->rec);
}

/* Parsed from the file (and, when wanted, its credential times). */
static int record_parsed(pg_lookup *l, size_t i, int fd, memo *e, pg_error *err)
{
    pg_record *full = NULL;
    int rc = pg_st_read_record_at(fd, &l->s->dirs[i], e->file, &full, err);
    if (rc != PG_OK)
        return rc;
    e->rec.maps_any = full->n_maps > 0;
    if (!l->focus) { /* whole, without times */
        e->rec.rec = full;
        return PG_OK;
    }
    rc = pg_record_project(full, l->focus, &e->rec.rec, err);
    pg_record_free(full);
    pg_autojson json_t *times = NULL;
    if (rc == PG_OK && wants_times(l, i, &e->rec))
        rc = times_parsed(l, e->file, e->rec.rec, &times, err);
    if (rc == PG_OK)
        rc = fill_times(&e->rec, times, err);
    return rc;
}

static int read_record(pg_lookup *l, size_t i, memo *e, pg_error *err)
{
    int rc;
    int fd = sub_fd(l, i, PG_LC_PULLED, &rc, err);
    if (rc != PG_OK) /* no pulled/: no records */
        return rc;
    if (l->s->cache && l->focus)
        return record_cached(l, i, fd, e, err);
    bool absent = false;
    rc =
        l->focus && i == 0 && l->s->writable ? record_indexed(l, fd, e, &absent) : PG_ERR_NOT_FOUND;
    return rc == PG_ERR_NOT_FOUND && !absent ? record_parsed(l, i, fd, e, err) : rc;
}

static int record_file(pg_lookup *l, size_t i, const char *file, const pg_focused **out,
                       pg_error *err)
{
    *out = NULL;
    memo *e = memo_get(l, i, PG_LC_PULLED, file);
    if (!e)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (!settled(e)) {
        pg_error why = {0};
        int rc = read_record(l, i, e, &why);
        if (rc != PG_OK) {
            pg_focused_clear(&e->rec);
            return memo_fail(e, rc, &why, err);
        }
        e->state = M_LOADED;
    }
    *out = e->state == M_LOADED ? &e->rec : NULL;
    return memo_result(e, err);
}

int pg_lookup_record(pg_lookup *l, size_t i, const char *key, const pg_focused **out, pg_error *err)
{
    file_name file;
    *out = NULL;
    int rc = key_file(l, i, "imageRef", key, file, err);
    return rc == PG_OK ? record_file(l, i, file, out, err) : rc;
}

/* ----------------------------------------------------------- index entries */

static int load_index(int fd, const char *name, void **out, pg_error *err, void *ud)
{
    char *ref = NULL;
    int rc = pg_st_index_read(fd, ud, name, &ref, err);
    *out = ref;
    return rc;
}

/* The entry, through a long-lived store's cache (re-validated by fstatat). */
static int read_index(pg_lookup *l, size_t i, memo *e, pg_error *err)
{
    const pg_store *s = l->s;
    const record_dir *d = &s->dirs[i];
    uint64_t gen = 0;
    int rc;
    int fd = sub_fd(l, i, PG_LC_IMAGES, &rc, err);
    if (rc == PG_OK && pg_lookup_cache_absent(s->lookups, i, PG_LC_IMAGES, e->file, &gen))
        return PG_ERR_NOT_FOUND;
    if (rc == PG_OK && !s->cache)
        return pg_st_index_read(fd, d, e->file, &e->ref, err);
    pg_cached_record *ref = NULL;
    if (rc == PG_OK)
        rc = cached_get(l, i, PG_LC_IMAGES, fd, e->file, gen, load_index, free, (void *)d, &ref,
                        err);
    if (rc == PG_OK && !(e->ref = strdup(pg_cached_get(ref))))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    pg_cached_record_release(ref);
    return rc;
}

int pg_lookup_index(pg_lookup *l, size_t i, const char *key, const char **ref_out, pg_error *err)
{
    file_name file;
    *ref_out = NULL;
    int rc = key_file(l, i, "image", key, file, err);
    memo *e = rc == PG_OK ? memo_get(l, i, PG_LC_IMAGES, file) : NULL;
    if (rc == PG_OK && !e)
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc != PG_OK)
        return rc;
    /* Probed first unless the subdirectory is open (the read's own openat then
     * tells absence): most spellings have no entry. */
    if (e->state == M_UNKNOWN && open_fd(l, i, PG_LC_IMAGES) < 0)
        exists_file(l, i, PG_LC_IMAGES, file);
    if (!settled(e)) {
        pg_error why = {0};
        rc = read_index(l, i, e, &why);
        if (rc != PG_OK)
            return memo_fail(e, rc, &why, err);
        e->state = M_LOADED;
    }
    *ref_out = e->ref;
    return memo_result(e, err);
}

/* ------------------------------------------------------------ names */

static int collect_file(const char *file, void *ud, pg_error *err)
{
    return pg_strv_push(ud, file, err);
}

/* The record files of directory i listed under image_name (pushed to files). */
static int files_mapping(pg_lookup *l, size_t i, const char *image_name, pg_strv *files,
                         bool *unknown, pg_error *err)
{
    const pg_store *s = l->s;
    const record_dir *w = s->writable ? &s->dirs[0] : NULL;
    int rc;
    if (i == 0 && w && pg_st_names_complete(w)) {
        int fd = sub_fd(l, 0, PG_SUB_NAMES, &rc, err);
        if (rc == PG_OK)
            rc = pg_st_names_files(w, fd, image_name, files, err);
        return rc == PG_ERR_NOT_FOUND ? PG_OK : rc;
    }
    unsigned char raw[32];
    pg_st_dirnames *v = NULL;
    bool unk = false;
    rc = pg_st_name_hash(image_name, raw, err);
    if (rc == PG_OK)
        rc = pg_st_dirnames_get(w, &s->dirs[i], &v, err);
    if (rc == PG_OK)
        rc = pg_st_dirnames_find(v, raw, collect_file, files, &unk, err);
    *unknown |= unk;
    pg_st_dirnames_free(v);
    return rc;
}

/* Adds rec to the list unless there (the same file under two names of one directory). */
static int add_hit(const pg_focused ***v, size_t *n, const pg_focused *rec, pg_error *err)
{
    for (size_t k = 0; k < *n; k++)
        if ((*v)[k] == rec)
            return PG_OK;
    const pg_focused **grown = realloc(*v, (*n + 1) * sizeof *grown);
    if (!grown)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    grown[(*n)++] = rec;
    *v = grown;
    return PG_OK;
}

/* The hits of one directory's files: counted (a record there, even unreadable) or
 * loaded (a record gone since its line was written is skipped). */
static int dir_hits_of(pg_lookup *l, size_t i, const char *image_name, const pg_strv *files,
                       bool load, const pg_focused ***recs, size_t *n, pg_error *err)
{
    int rc = PG_OK;
    for (size_t k = 0; rc == PG_OK && k < files->n && (load || !*n); k++) {
        if (!load) {
            /* Counting (the preloaded proof): the record file existing is enough.
             * A record never loses a mapping (merges only add), and anything at
             * that name, even unreadable, errs on the strict side. */
            *n += exists_file(l, i, PG_LC_PULLED, files->v[k]);
            continue;
        }
        const pg_focused *f = NULL;
        rc = record_file(l, i, files->v[k], &f, err);
        if (rc == PG_ERR_NOT_FOUND)
            rc = PG_OK;
        else if (rc == PG_OK && pg_record_find(f->rec, image_name))
            rc = add_hit(recs, n, f, err);
    }
    return rc;
}

int pg_lookup_mapping(pg_lookup *l, const char *image_name, bool load, const pg_focused ***recs,
                      size_t *n_out, bool *unknown_out, pg_error *err)
{
    *n_out = 0;
    *unknown_out = false;
    if (recs)
        *recs = NULL;
    int rc = l && l->s ? pg_st_check_input("image name", image_name, err)
                       : pg_fail(err, PG_ERR_INVALID, "no record store");
    const pg_focused **v = NULL;
    size_t n = 0;
    for (size_t i = 0; rc == PG_OK && i < l->s->n_dirs && (load || !n); i++) {
        pg_strv files = {0};
        rc = files_mapping(l, i, image_name, &files, unknown_out, err);
        if (rc == PG_OK)
            rc = dir_hits_of(l, i, image_name, &files, load, &v, &n, err);
        pg_strv_clear(&files);
    }
    if (rc != PG_OK) {
        free(v);
        return rc;
    }
    *n_out = n;
    if (recs)
        *recs = v;
    else
        free(v);
    return PG_OK;
}

int pg_store_records_mapping(const pg_store *store, const char *image_name, pg_record ***recs,
                             size_t *n_out, bool *unknown_out, pg_error *err)
{
    pg_lookup *l = pg_lookup_new(store, NULL);
    const pg_focused **found = NULL;
    *n_out = 0;
    if (recs)
        *recs = NULL;
    int rc = l ? pg_lookup_mapping(l, image_name, recs != NULL, &found, n_out, unknown_out, err)
               : pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc == PG_OK && recs && !(*recs = calloc(*n_out + 1, sizeof **recs)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    for (size_t k = 0; rc == PG_OK && recs && k < *n_out; k++) {
        pg_focused *f = (pg_focused *)found[k]; /* handed over: the context forgets it */
        (*recs)[k] = f->rec;
        f->rec = NULL;
    }
    free(found);
    pg_lookup_free(l);
    return rc;
}

int pg_store_refresh_name_caches(const pg_store *store, pg_error *err)
{
    if (!store || !store->writable)
        return PG_OK; /* no cache without a writable directory */
    const record_dir *w = &store->dirs[0];
    int rc = PG_OK;
    for (size_t i = pg_st_names_complete(w) ? 1 : 0; rc == PG_OK && i < store->n_dirs; i++)
        rc = pg_st_dirnames_get(w, &store->dirs[i], NULL, err);
    return rc;
}

int pg_store_credential_time(const pg_store *store, const pg_record *rec, const char *image_name,
                             const pg_pod_cred *secret, const pg_pod_cred *sa, time_t *out,
                             pg_error *err)
{
    *out = rec->last_updated;
    if (!store || !store->writable || !rec->dir || strcmp(rec->dir, store->dirs[0].path) != 0)
        return PG_OK;
    file_name file;
    pg_autoclose int fd = -1;
    pg_autojson json_t *times = NULL;
    int rc = pg_record_file_name(rec->image_ref, file, err);
    if (rc == PG_OK)
        rc = pg_st_open_subdir(&store->dirs[0], SUB_CREDTIMES, &fd, err);
    if (rc == PG_OK)
        rc = pg_st_credtimes_read(fd, &store->dirs[0], file, rec->image_ref, &times, err);
    if (rc == PG_ERR_NOT_FOUND)
        rc = PG_OK;
    if (rc == PG_OK)
        rc = pg_st_credential_time(times, image_name, secret, sa, rec->last_updated, out, err);
    return rc;
}
