/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store's top layer: the store itself (struct pg_store), shared by
 * store.c, store_prune.c and store_lookup.c. Each layer's functions are
 * declared in its own header, which includes only the headers of layers below
 * it, so a call upwards does not compile (test_store_layers). From the ground
 * up: 1 store_fs; 2 store_read; 3 store_intent, store_index, store_credtimes,
 * store_credidx, store_names, store_dircache (each on a record directory,
 * never on the store); 4 this header; 5 store.c, store_prune.c;
 * 6 store_lookup (the store's face to the engine above it). Beside them, below
 * the top layer: lookup_cache and record_cache. What each file does:
 * docs/design.md, "Parts and data flow". Not installed.
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
