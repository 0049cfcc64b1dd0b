/* SPDX-License-Identifier: Apache-2.0 */
/*
 * In-process cache of parsed files (pulled records, their credential times),
 * for long-lived hosts (pullgate-cri, the webhook, a dlopen host). Not used by
 * the one-shot hook.
 *
 * A decision reads one record file by name. Parsing it (jansson, one
 * allocation per string) is most of a decision's cost; the cache keeps the
 * parsed object with the file identity it was parsed from, so a repeated
 * lookup costs one fstatat(2) and a hash lookup. Never trusted blindly: every
 * lookup re-stats the name (AT_SYMLINK_NOFOLLOW) and compares device, inode,
 * size, mtime, ctime, mode, owner and link count with what was parsed. A
 * missing name is PG_ERR_NOT_FOUND at once; any difference, or anything that
 * is not a regular file goes back to the loader, which applies every check
 * the uncached path applies (so a cached lookup decides exactly as an
 * uncached one). Missing files are never cached: a lookup that finds nothing
 * is not evidence. Measurements: bench/README.md, "Record cache for
 * long-lived hosts"; the store uses it when a host calls
 * pg_store_enable_cache (plugin/store/store_lookup.c).
 *
 * Thread-safe: one mutex guards the table; loading and parsing run outside it.
 * Records handed out are immutable and reference-counted, so readers keep
 * theirs while a writer replaces or evicts the entry. Internal (not exported).
 */
#ifndef PULLGATE_RECORD_CACHE_H
#define PULLGATE_RECORD_CACHE_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pg_record_cache pg_record_cache;

/* A counted reference to a cached, immutable object. */
typedef struct pg_cached_record pg_cached_record;

/*
 * Reads and fully checks file `name` relative to dirfd (the store's
 * subdirectory descriptor): the same function the uncached path uses
 * (safe-read flags, strict parse, content matches the name). PG_ERR_NOT_FOUND
 * when the file is absent. *out is owned by the cache on success, freed with
 * the pg_cache_free given with the loader.
 */
typedef int (*pg_record_loader)(int dirfd, const char *name, void **out, pg_error *err, void *ud);
typedef void (*pg_cache_free)(void *obj);

/* Default settle time: see pg_record_cache_new. */
#define PG_RECORD_CACHE_SETTLE_MS 1000

/*
 * max_entries: at most this many records are kept (1 .. 2^24).
 * max_bytes: at most this many bytes of record files (their st_size) are kept,
 * a bound on memory for hostile large records; 0 = no byte bound.
 * settle_ms: a file changed less than this long ago (its ctime) is served but
 * not cached. File timestamps are coarse (a kernel tick), so two versions
 * written within one tick, of the same size, into a recycled inode number,
 * would look identical; a settled file cannot be rewritten unnoticed (any
 * later write moves its ctime). Use PG_RECORD_CACHE_SETTLE_MS; tests use 0.
 * Least recently used entries are evicted first. NULL with err on failure.
 */
pg_record_cache *pg_record_cache_new(size_t max_entries, uint64_t max_bytes, unsigned settle_ms,
                                     pg_error *err);
/* Drops the cache's references; records still held by readers stay valid. */
void pg_record_cache_free(pg_record_cache *cache);

/*
 * The object parsed from file `name` of the directory open as dirfd. dir_key
 * names that directory in the cache (two directories must have different
 * keys). On PG_OK *out is a new reference: read it with pg_cached_get and give
 * it back with pg_cached_record_release (from any thread). On error *out is
 * NULL and err says why (the loader's error, unchanged).
 */
int pg_record_cache_get(pg_record_cache *cache, int dirfd, const char *dir_key, const char *name,
                        pg_record_loader load, pg_cache_free free_obj, void *load_ud,
                        pg_cached_record **out, pg_error *err);

/* The object behind a reference (read only; valid until the reference is released). */
const void *pg_cached_get(const pg_cached_record *ref);
/* Gives a reference back; the object is freed with its last reference. NULL-safe. */
void pg_cached_record_release(pg_cached_record *ref);

/* Drops the entry for (dir_key, name) if any, e.g. after the store deleted it. */
void pg_record_cache_forget(pg_record_cache *cache, const char *dir_key, const char *name);

typedef struct pg_record_cache_stats {
    uint64_t hits;      /* served from the cache after a matching fstatat */
    uint64_t misses;    /* loaded (absent, changed or never seen) */
    uint64_t evictions; /* dropped to respect max_entries / max_bytes */
    size_t entries;     /* entries now */
    uint64_t bytes;     /* st_size sum of the entries now */
} pg_record_cache_stats;

void pg_record_cache_get_stats(pg_record_cache *cache, pg_record_cache_stats *out);

#endif
