/* SPDX-License-Identifier: Apache-2.0 */
/*
 * In-process cache of parsed files (record_cache.h): a chained hash table
 * keyed by (directory key, file name), an LRU list for eviction, one mutex.
 * Values are immutable objects behind an atomic reference count, so a reader
 * never holds the lock while it decides.
 */
#include "record_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_ENTRIES_LIMIT ((size_t)1 << 24)

struct pg_cached_record {
    atomic_uint refs;
    void *obj;
    pg_cache_free free_obj;
};

/* What a record was parsed from. Equal identities mean the same file version:
 * content changes move size/mtime/ctime, replacement changes dev/ino, and
 * mode/owner/links are what the loader's safety checks looked at. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim, ctim;
    mode_t mode;
    uid_t uid;
    nlink_t nlink;
} file_id;

typedef struct entry {
    struct entry *chain;      /* next in the hash bucket */
    struct entry *newer, *older; /* LRU list */
    uint64_t hash;
    char *dir_key, *name;     /* one allocation, dir_key first */
    file_id id;
    pg_cached_record *ref;    /* the table's reference */
} entry;

struct pg_record_cache {
    pthread_mutex_t lock;
    entry **buckets;
    size_t n_buckets; /* power of two */
    entry *newest, *oldest;
    size_t n_entries, max_entries;
    uint64_t bytes, max_bytes;
    int64_t settle_ns;
    uint64_t hits, misses, evictions;
};

/* ------------------------------------------------------- references */

static pg_cached_record *ref_new(void *obj, pg_cache_free free_obj)
{
    pg_cached_record *r = malloc(sizeof *r);
    if (!r)
        return NULL;
    atomic_init(&r->refs, 1);
    r->obj = obj;
    r->free_obj = free_obj;
    return r;
}

static void ref_acquire(pg_cached_record *r) { atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed); }

void pg_cached_record_release(pg_cached_record *r)
{
    if (!r)
        return;
    /* acq_rel: the last owner must see every other owner's reads finished. */
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1) {
        r->free_obj(r->obj);
        free(r);
    }
}

const void *pg_cached_get(const pg_cached_record *r) { return r ? r->obj : NULL; }

/* ------------------------------------------------------ file identity */

static void id_from_stat(const struct stat *st, file_id *id)
{
    memset(id, 0, sizeof *id);
    id->dev = st->st_dev;
    id->ino = st->st_ino;
    id->size = st->st_size;
    id->mtim = st->st_mtim;
    id->ctim = st->st_ctim;
    id->mode = st->st_mode;
    id->uid = st->st_uid;
    id->nlink = st->st_nlink;
}

/* Bytewise (id_from_stat zeroes padding): unequal padding could only cost a reload. */
static bool id_equal(const file_id *a, const file_id *b) { return memcmp(a, b, sizeof *a) == 0; }

/* A file changed within settle_ns may still change within the same timestamp tick. */
static bool settled(const pg_record_cache *c, const file_id *id)
{
    if (c->settle_ns <= 0)
        return true;
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0)
        return false;
    int64_t age = ((int64_t)now.tv_sec - (int64_t)id->ctim.tv_sec) * 1000000000 +
                  ((int64_t)now.tv_nsec - (int64_t)id->ctim.tv_nsec);
    return age >= c->settle_ns;
}

/* ------------------------------------------------------------- table */

/* FNV-1a over dir_key, a NUL, name. */
static uint64_t key_hash(const char *dir_key, const char *name)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = dir_key;; p++) {
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
        if (!*p)
            break;
    }
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

static entry **bucket_of(const pg_record_cache *c, uint64_t hash)
{
    return &c->buckets[hash & (c->n_buckets - 1)];
}

static entry **find_slot(const pg_record_cache *c, uint64_t hash, const char *dir_key,
                         const char *name)
{
    entry **slot = bucket_of(c, hash);
    while (*slot && ((*slot)->hash != hash || strcmp((*slot)->name, name) != 0 ||
                     strcmp((*slot)->dir_key, dir_key) != 0))
        slot = &(*slot)->chain;
    return slot;
}

static void lru_unlink(pg_record_cache *c, entry *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        c->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        c->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void lru_push_newest(pg_record_cache *c, entry *e)
{
    e->older = c->newest;
    e->newer = NULL;
    if (c->newest)
        c->newest->newer = e;
    c->newest = e;
    if (!c->oldest)
        c->oldest = e;
}

/* Unlinks e from the table; the caller frees it after unlocking (free_detached). */
static void detach(pg_record_cache *c, entry *e, entry **detached)
{
    entry **slot = bucket_of(c, e->hash);
    while (*slot != e)
        slot = &(*slot)->chain;
    *slot = e->chain;
    lru_unlink(c, e);
    c->n_entries--;
    c->bytes -= (uint64_t)e->id.size;
    e->chain = *detached;
    *detached = e;
}

/* Outside the lock: freeing a big record must not stall other lookups. */
static void free_detached(entry *e)
{
    while (e) {
        entry *next = e->chain;
        pg_cached_record_release(e->ref);
        free(e->dir_key);
        free(e);
        e = next;
    }
}

static void evict_to_bounds(pg_record_cache *c, entry **detached)
{
    while (c->oldest && (c->n_entries > c->max_entries || (c->max_bytes && c->bytes > c->max_bytes))) {
        detach(c, c->oldest, detached);
        c->evictions++;
    }
}

static entry *entry_new(uint64_t hash, const char *dir_key, const char *name, const file_id *id,
                        pg_cached_record *ref)
{
    size_t dl = strlen(dir_key) + 1, nl = strlen(name) + 1;
    entry *e = calloc(1, sizeof *e);
    char *keys = malloc(dl + nl);
    if (!e || !keys) {
        free(e);
        free(keys);
        return NULL;
    }
    memcpy(keys, dir_key, dl);
    memcpy(keys + dl, name, nl);
    e->hash = hash;
    e->dir_key = keys;
    e->name = keys + dl;
    e->id = *id;
    e->ref = ref;
    ref_acquire(ref);
    return e;
}

/* Caches ref under the key, replacing an older entry. Out of memory: not cached. */
static void insert(pg_record_cache *c, uint64_t hash, const char *dir_key, const char *name,
                   const file_id *id, pg_cached_record *ref)
{
    entry *detached = NULL;
    entry *e = NULL;
    bool fits = !c->max_bytes || (uint64_t)id->size <= c->max_bytes;
    if (fits)
        e = entry_new(hash, dir_key, name, id, ref);
    pthread_mutex_lock(&c->lock);
    entry *old = *find_slot(c, hash, dir_key, name);
    if (old)
        detach(c, old, &detached);
    if (e) {
        entry **slot = bucket_of(c, hash);
        e->chain = *slot;
        *slot = e;
        lru_push_newest(c, e);
        c->n_entries++;
        c->bytes += (uint64_t)id->size;
        evict_to_bounds(c, &detached);
    }
    pthread_mutex_unlock(&c->lock);
    free_detached(detached);
}

void pg_record_cache_forget(pg_record_cache *c, const char *dir_key, const char *name)
{
    if (!c || !dir_key || !name)
        return;
    uint64_t hash = key_hash(dir_key, name);
    entry *detached = NULL;
    pthread_mutex_lock(&c->lock);
    entry *e = *find_slot(c, hash, dir_key, name);
    if (e)
        detach(c, e, &detached);
    pthread_mutex_unlock(&c->lock);
    free_detached(detached);
}

/* ------------------------------------------------------------ lookup */

/* A reference to the cached record if it is still the file behind the name. */
static pg_cached_record *lookup_valid(pg_record_cache *c, uint64_t hash, const char *dir_key,
                                      const char *name, const file_id *now)
{
    pg_cached_record *ref = NULL;
    pthread_mutex_lock(&c->lock);
    entry *e = *find_slot(c, hash, dir_key, name);
    if (e && now && id_equal(&e->id, now)) {
        ref = e->ref;
        ref_acquire(ref);
        lru_unlink(c, e);
        lru_push_newest(c, e);
        c->hits++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->lock);
    return ref;
}

static int check_args(const pg_record_cache *c, const char *dir_key, const char *name,
                      pg_record_loader load, pg_cache_free free_obj, pg_error *err)
{
    if (!c || !dir_key || !name || !load || !free_obj)
        return pg_fail(err, PG_ERR_INVALID, "record cache: missing argument");
    size_t nl = strnlen(name, NAME_MAX + 1);
    if (nl == 0 || nl > NAME_MAX || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
        return pg_fail(err, PG_ERR_INVALID, "record cache: not a file name");
    if (strnlen(dir_key, PATH_MAX) >= PATH_MAX)
        return pg_fail(err, PG_ERR_INVALID, "record cache: directory key too long");
    return PG_OK;
}

/*
 * The slow path: the loader reads and checks the file as the uncached path
 * would. The result is cached only if the name still shows the identity seen
 * before loading (so what was parsed is that version) and it has settled.
 */
static int load_and_cache(pg_record_cache *c, int dirfd, uint64_t hash, const char *dir_key,
                          const char *name, const file_id *before, pg_record_loader load,
                          pg_cache_free free_obj, void *ud, pg_cached_record **out,
                          pg_error *err)
{
    void *obj = NULL;
    int rc = load(dirfd, name, &obj, err, ud);
    if (rc != PG_OK || !obj) {
        if (obj)
            free_obj(obj);
        pg_record_cache_forget(c, dir_key, name);
        return rc != PG_OK ? rc : pg_fail(err, PG_ERR_INTERNAL, "record cache: loader gave nothing");
    }
    pg_cached_record *ref = ref_new(obj, free_obj);
    if (!ref) {
        free_obj(obj);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    struct stat st;
    file_id after;
    bool same = before && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                (id_from_stat(&st, &after), id_equal(before, &after));
    if (same && settled(c, before))
        insert(c, hash, dir_key, name, before, ref);
    else
        pg_record_cache_forget(c, dir_key, name);
    *out = ref;
    return PG_OK;
}

int pg_record_cache_get(pg_record_cache *c, int dirfd, const char *dir_key, const char *name,
                        pg_record_loader load, pg_cache_free free_obj, void *ud,
                        pg_cached_record **out, pg_error *err)
{
    *out = NULL;
    int rc = check_args(c, dir_key, name, load, free_obj, err);
    if (rc != PG_OK)
        return rc;
    /* Anything but a regular file or nothing at all (a symlink, unreadable) goes
     * to the loader, which reports it exactly as the uncached path does. */
    struct stat st;
    file_id now;
    int found = fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? 1 : errno == ENOENT ? 0 : -1;
    if (found == 0) { /* nothing to load: the loader's own open would say the same */
        pg_record_cache_forget(c, dir_key, name);
        return pg_fail(err, PG_ERR_NOT_FOUND, "%s: not found", name);
    }
    bool regular = found == 1 && S_ISREG(st.st_mode);
    if (regular)
        id_from_stat(&st, &now);
    uint64_t hash = key_hash(dir_key, name);
    *out = lookup_valid(c, hash, dir_key, name, regular ? &now : NULL);
    if (*out)
        return PG_OK;
    return load_and_cache(c, dirfd, hash, dir_key, name, regular ? &now : NULL, load, free_obj, ud,
                          out, err);
}

/* ------------------------------------------------------ life and stats */

pg_record_cache *pg_record_cache_new(size_t max_entries, uint64_t max_bytes, unsigned settle_ms,
                                     pg_error *err)
{
    if (max_entries < 1 || max_entries > MAX_ENTRIES_LIMIT) {
        pg_fail(err, PG_ERR_INVALID, "record cache: max_entries must be 1 to %zu", MAX_ENTRIES_LIMIT);
        return NULL;
    }
    pg_record_cache *c = calloc(1, sizeof *c);
    if (c) {
        for (c->n_buckets = 16; c->n_buckets < max_entries;)
            c->n_buckets <<= 1;
        c->buckets = calloc(c->n_buckets, sizeof *c->buckets);
    }
    if (!c || !c->buckets || pthread_mutex_init(&c->lock, NULL) != 0) {
        if (c)
            free(c->buckets);
        free(c);
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    c->max_entries = max_entries;
    c->max_bytes = max_bytes;
    c->settle_ns = (int64_t)settle_ms * 1000000;
    return c;
}

void pg_record_cache_free(pg_record_cache *c)
{
    if (!c)
        return;
    entry *detached = NULL;
    while (c->oldest)
        detach(c, c->oldest, &detached);
    free_detached(detached);
    pthread_mutex_destroy(&c->lock);
    free(c->buckets);
    free(c);
}

void pg_record_cache_get_stats(pg_record_cache *c, pg_record_cache_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    out->hits = c->hits;
    out->misses = c->misses;
    out->evictions = c->evictions;
    out->entries = c->n_entries;
    out->bytes = c->bytes;
    pthread_mutex_unlock(&c->lock);
}
