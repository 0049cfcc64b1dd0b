/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Absence cache for long-lived hosts (lookup_cache.h): an open-addressing
 * table of (subdirectory, file name, generation), one inotify instance, one
 * mutex. Dropping a subdirectory's absences is a generation bump (O(1)); the
 * table is cleared when it fills.
 */
#include "cleanup.h"
#include "lookup_cache.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define INITIAL_CAP 1024 /* entries; 1024 * ~96 bytes */
#define NAME_MAX_CACHED 80 /* "sha256-" + 64 hex fits; longer names are not cached */

/*
 * A name can only appear in a directory by creat/open(O_CREAT), link, mknod,
 * symlink, mkdir (IN_CREATE) or a rename into it (IN_MOVED_TO): those are the
 * events that can end an absence. The self events say the watched inode is
 * gone or no longer at its path.
 */
#define SUB_MASK (IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
/* On the record directory itself: a subdirectory created, removed or renamed
 * (its kept descriptor may no longer be the one at its path). */
#define DIR_MASK                                                                                   \
    (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)

typedef struct lc_slot {
    int wd;             /* -1: not watched, never cached */
    atomic_bool cached; /* watched and still trusted (read without the lock) */
    uint64_t gen;
} lc_slot;

typedef struct entry {
    uint32_t key; /* 1 + slot index; 0: empty (so calloc'd pages stay untouched) */
    uint64_t gen;
    char name[NAME_MAX_CACHED + 1];
} entry;

struct pg_lookup_cache {
    pthread_mutex_t lock;
    int ifd;
    size_t n_dirs;
    lc_slot *slots; /* n_dirs * PG_LC_SUBS */
    int *dir_wds;   /* n_dirs; -1: none */
    entry *table;
    size_t cap; /* power of two; grows with n up to >= 2 * max (grow_table) */
    size_t n, max;
    pg_lookup_cache_stats stats;
};

static const char *const sub_names[PG_LC_SUBS] = {"pulled", "pulling", "pullgate-images",
                                                  "pullgate-credtimes"};

const char *pg_lc_sub_name(pg_lc_sub sub) { return sub < PG_LC_SUBS ? sub_names[sub] : ""; }

/* ------------------------------------------------------------ watching */

static bool same_inode(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/*
 * A watch on path, kept only if path named the inode fd holds before and
 * after the watch was added (so the events are about the directory the
 * store reads). -1: not watched.
 */
static int watch_verified(int ifd, const char *path, int fd, uint32_t mask)
{
    struct stat held, before, after;
    if (fd < 0 || fstat(fd, &held) != 0 || lstat(path, &before) != 0 || !same_inode(&held, &before))
        return -1;
    int wd = inotify_add_watch(ifd, path, mask | IN_ONLYDIR | IN_DONT_FOLLOW);
    if (wd < 0)
        return -1;
    /* On a mismatch the watch stays (removing it could remove a twin slot's
     * watch on the same inode); its events only drop absences. */
    if (lstat(path, &after) != 0 || !same_inode(&held, &after))
        return -1;
    return wd;
}

static int watch_dirs(pg_lookup_cache *lc, const char *const *paths, const int *dir_fds,
                      const int *sub_fds)
{
    for (size_t i = 0; i < lc->n_dirs; i++) {
        lc->dir_wds[i] = watch_verified(lc->ifd, paths[i], dir_fds[i], DIR_MASK);
        for (size_t k = 0; k < PG_LC_SUBS; k++) {
            lc_slot *s = &lc->slots[i * PG_LC_SUBS + k];
            s->wd = -1;
            s->gen = 1;
            if (lc->dir_wds[i] < 0) /* a replaced subdirectory would go unnoticed */
                continue;
            pg_autofree char *path = NULL;
            if (asprintf(&path, "%s/%s", paths[i], sub_names[k]) < 0)
                return PG_ERR_NOMEM;
            s->wd = watch_verified(lc->ifd, path, sub_fds[i * PG_LC_SUBS + k], SUB_MASK);
            atomic_init(&s->cached, s->wd >= 0);
            lc->stats.watched += s->wd >= 0;
        }
    }
    return PG_OK;
}

pg_lookup_cache *pg_lookup_cache_new(size_t n_dirs, const char *const *paths, const int *dir_fds,
                                     const int *sub_fds, size_t max_entries, pg_error *err)
{
    if (max_entries < 1 || max_entries > ((size_t)1 << 24)) {
        pg_fail(err, PG_ERR_INVALID, "absence cache: max entries out of range");
        return NULL;
    }
    pg_lookup_cache *lc = calloc(1, sizeof *lc);
    if (!lc || pthread_mutex_init(&lc->lock, NULL) != 0) {
        free(lc);
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    lc->ifd = -1;
    lc->n_dirs = n_dirs;
    lc->max = max_entries;
    /* Memory follows the working set: the table starts small and doubles. */
    lc->cap = 2 * max_entries < INITIAL_CAP ? 16 : INITIAL_CAP;
    while (lc->cap < 2 * max_entries && lc->cap < INITIAL_CAP)
        lc->cap *= 2;
    lc->slots = calloc(n_dirs ? n_dirs * PG_LC_SUBS : 1, sizeof *lc->slots);
    lc->dir_wds = calloc(n_dirs ? n_dirs : 1, sizeof *lc->dir_wds);
    lc->table = calloc(lc->cap, sizeof *lc->table);
    int rc = !lc->slots || !lc->dir_wds || !lc->table ? PG_ERR_NOMEM
             : (lc->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0
                 ? pg_fail_errno(err, errno, "inotify_init1")
                 : watch_dirs(lc, paths, dir_fds, sub_fds);
    if (rc != PG_OK) {
        if (rc == PG_ERR_NOMEM)
            pg_fail(err, rc, "out of memory");
        pg_lookup_cache_free(lc);
        return NULL;
    }
    return lc;
}

void pg_lookup_cache_free(pg_lookup_cache *lc)
{
    if (!lc)
        return;
    if (lc->ifd >= 0)
        close(lc->ifd); /* removes every watch */
    pthread_mutex_destroy(&lc->lock);
    free(lc->slots);
    free(lc->dir_wds);
    free(lc->table);
    free(lc);
}

/* ------------------------------------------------------------- events */

static void drop(pg_lookup_cache *lc, lc_slot *s, bool for_good)
{
    s->gen++;
    lc->stats.drops++;
    if (for_good && atomic_exchange(&s->cached, false))
        lc->stats.watched--;
}

static void drop_all(pg_lookup_cache *lc, bool for_good)
{
    for (size_t i = 0; i < lc->n_dirs * PG_LC_SUBS; i++)
        drop(lc, &lc->slots[i], for_good);
}

static bool self_event(uint32_t mask)
{
    return mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT);
}

/* An event on record directory i itself: a subdirectory's name changed, or i went. */
static void dir_event(pg_lookup_cache *lc, size_t i, const struct inotify_event *ev)
{
    for (size_t k = 0; k < PG_LC_SUBS; k++)
        if (self_event(ev->mask) || (ev->len && strcmp(ev->name, sub_names[k]) == 0))
            drop(lc, &lc->slots[i * PG_LC_SUBS + k], true);
}

static void apply(pg_lookup_cache *lc, const struct inotify_event *ev)
{
    if (ev->mask & IN_Q_OVERFLOW) {
        lc->stats.overflows++;
        drop_all(lc, false); /* events were lost: forget every absence */
        return;
    }
    /* Every slot and directory with this wd: one inode may be listed twice. */
    for (size_t i = 0; i < lc->n_dirs; i++) {
        if (lc->dir_wds[i] == ev->wd)
            dir_event(lc, i, ev);
        for (size_t k = 0; k < PG_LC_SUBS; k++) {
            lc_slot *s = &lc->slots[i * PG_LC_SUBS + k];
            if (s->wd == ev->wd)
                drop(lc, s, self_event(ev->mask));
        }
    }
}

/* Under the lock. */
static void drain(pg_lookup_cache *lc)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(lc->ifd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) { /* cannot tell what happened: stop caching */
            lc->stats.overflows++;
            drop_all(lc, true);
            return;
        }
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            apply(lc, ev);
            p += sizeof *ev + ev->len;
        }
    }
}

void pg_lookup_cache_refresh(pg_lookup_cache *lc)
{
    if (!lc)
        return;
    pthread_mutex_lock(&lc->lock);
    drain(lc);
    pthread_mutex_unlock(&lc->lock);
}

/* -------------------------------------------------------------- table */

static size_t hash_of(uint32_t key, const char *name)
{
    uint64_t h = 1469598103934665603ull ^ key;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

/* The entry of (key, name), or the empty one where it would go. */
static entry *find(pg_lookup_cache *lc, uint32_t key, const char *name)
{
    size_t mask = lc->cap - 1;
    for (size_t i = hash_of(key, name) & mask;; i = (i + 1) & mask) {
        entry *e = &lc->table[i];
        if (e->key == 0 || (e->key == key && strcmp(e->name, name) == 0))
            return e;
    }
}

/* Doubles the table while it is more than half full and below its bound
 * (2 * max); on no memory it stays as it is (the caller then starts over). */
static void grow_table(pg_lookup_cache *lc)
{
    if (lc->n < lc->cap / 2 || lc->cap >= 2 * lc->max)
        return;
    entry *old = lc->table;
    size_t old_cap = lc->cap;
    entry *bigger = calloc(old_cap * 2, sizeof *bigger);
    if (!bigger)
        return;
    lc->table = bigger;
    lc->cap = old_cap * 2;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key != 0)
            *find(lc, old[i].key, old[i].name) = old[i];
    free(old);
}

static lc_slot *slot_of(pg_lookup_cache *lc, size_t dir, pg_lc_sub sub)
{
    return dir < lc->n_dirs && sub < PG_LC_SUBS ? &lc->slots[dir * PG_LC_SUBS + sub] : NULL;
}

bool pg_lookup_cache_absent(pg_lookup_cache *lc, size_t dir, pg_lc_sub sub, const char *file,
                            uint64_t *gen)
{
    *gen = 0;
    if (!lc || strlen(file) > NAME_MAX_CACHED)
        return false;
    bool hit = false;
    pthread_mutex_lock(&lc->lock);
    lc_slot *s = slot_of(lc, dir, sub);
    if (s && atomic_load(&s->cached)) {
        *gen = s->gen;
        entry *e = find(lc, (uint32_t)(dir * PG_LC_SUBS + sub) + 1, file);
        hit = e->key != 0 && e->gen == s->gen;
        lc->stats.hits += hit;
    }
    pthread_mutex_unlock(&lc->lock);
    return hit;
}

void pg_lookup_cache_note_absent(pg_lookup_cache *lc, size_t dir, pg_lc_sub sub, const char *file,
                                 uint64_t gen)
{
    if (!lc || gen == 0 || strlen(file) > NAME_MAX_CACHED)
        return;
    pthread_mutex_lock(&lc->lock);
    drain(lc); /* an event since the probe began must win over its result */
    lc_slot *s = slot_of(lc, dir, sub);
    if (s && atomic_load(&s->cached) && s->gen == gen) {
        uint32_t key = (uint32_t)(dir * PG_LC_SUBS + sub) + 1;
        grow_table(lc);
        entry *e = find(lc, key, file);
        if (e->key == 0 && (lc->n >= lc->max || lc->n + 1 >= lc->cap)) { /* full: start over */
            for (size_t i = 0; i < lc->cap; i++)
                lc->table[i].key = 0;
            lc->n = 0;
            e = find(lc, key, file);
        }
        if (e->key == 0) {
            e->key = key;
            snprintf(e->name, sizeof e->name, "%s", file);
            lc->n++;
        }
        e->gen = gen;
        lc->stats.inserts++;
    }
    pthread_mutex_unlock(&lc->lock);
}

bool pg_lookup_cache_trusted(const pg_lookup_cache *lc, size_t dir, pg_lc_sub sub)
{
    return lc && dir < lc->n_dirs && sub < PG_LC_SUBS &&
           atomic_load(&lc->slots[dir * PG_LC_SUBS + sub].cached);
}

void pg_lookup_cache_get_stats(pg_lookup_cache *lc, pg_lookup_cache_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!lc)
        return;
    pthread_mutex_lock(&lc->lock);
    *out = lc->stats;
    out->entries = lc->n;
    out->capacity = lc->cap;
    pthread_mutex_unlock(&lc->lock);
}
