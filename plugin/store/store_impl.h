/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store's top layer: the store itself (struct pg_store), shared by
 * store.c, store_prune.c and store_lookup.c. The layers below work on record
 * directories, never on the store; each layer's functions are declared in its
 * own header, which includes only the headers of layers below it, so a call
 * upwards does not compile (docs/design.md, "Parts and data flow";
 * test_store_layers):
 *   1 store_fs.c        (store_fs.h) the layout, a record directory,
 *                       safe-filesystem primitives: directory checks, strict
 *                       reads, atomic durable writes and write batches, the
 *                       lock and its short steps, directory walks
 *   2 store_read.c      (store_read.h) reading a record, credential times, an
 *                       index entry; a record focused on what a decision reads
 *   3 store_intent.c    (store_intent.h) intents and their reference counts
 *     store_index.c     (store_index.h) writing the identity -> imageRef index
 *     store_credtimes.c (store_credtimes.h) writing per-credential times
 *     store_credidx.c   (store_credidx.h) the credential index (one-shot lookups)
 *     store_names.c     (store_names.h) the writable directory's name index
 *     store_dircache.c  (store_dircache.h) names caches of the other directories
 *   4 store_impl.h      this header: the store
 *   5 store.c           open/free, get, record_pulled and the other writes,
 *                       list, delete, the long-lived caches
 *     store_prune.c     prune
 *   6 store_lookup.c    (store_lookup.h) a decision's lookups, each file read
 *                       once: for the engine above the store (decide.c)
 * Beside them, below the top layer: lookup_cache.c (absences), record_cache.c
 * (parsed files). Not installed; nothing outside the engine includes these
 * headers.
 */
#ifndef PULLGATE_STORE_IMPL_H
#define PULLGATE_STORE_IMPL_H

#include "lookup_cache.h"
#include "store_fs.h"

#include <stdatomic.h>

/* The subdirectories a decision reads, per record directory: the absence cache's
 * (lookup_cache.h), then two only the writable directory has. */
enum { PG_SUB_CREDIDX = PG_LC_SUBS, PG_SUB_NAMES, PG_STORE_SUBS };

struct pg_store {
    record_dir *dirs; /* dirs[0] is the writable one when writable */
    size_t n_dirs;
    bool writable;
    char *api_version;
    char **pinned; /* NULL-terminated copy of pinnedImages */
    pg_notifier *notifier;
    /* Every record directory's subdirectories a decision reads, kept open:
     * kept[i * PG_STORE_SUBS + sub], -1 none (yet). A one-shot store keeps the first
     * one a decision opened (atomically: decisions may share the store); a
     * long-lived one opens them all at pg_store_enable_cache and uses one only
     * while the absence cache's watches say it is the directory at its path. */
    atomic_int *kept;
    /* pg_store_enable_cache (long-lived hosts), NULL otherwise: parsed records,
     * credential times and index entries (record_cache.h), absences
     * (lookup_cache.h; NULL when inotify cannot be used). */
    struct pg_record_cache *cache;
    struct pg_lookup_cache *lookups;
    int test_stop_after; /* tests only: record_pulled's batch stops (pg_st_batch) */
};

/* INVALID unless store was opened writable. */
int pg_st_require_writable(const pg_store *store, pg_error *err);
/* After a write or removal of the writable directory's pulled/<file>: its parsed
 * record and credential times dropped from the cache (memory only: a cached file
 * is re-validated on every use anyway). */
void pg_st_cache_forget(const pg_store *s, const char *file);
/* The cache's key of subdirectory sub of d (caller frees; NULL: out of memory). */
char *pg_st_cache_key(const record_dir *d, const char *sub);

#endif
