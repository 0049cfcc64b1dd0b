/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 4 of the record store (store_identity.c): per-directory lookups for
 * the decision (entries, records, index entries), through the store's absence
 * cache.
 * Private to the engine (store_impl.h: the store's layers).
 */
#ifndef PULLGATE_STORE_IDENTITY_H
#define PULLGATE_STORE_IDENTITY_H

#include "store_index.h"

#include <stdbool.h>
#include <sys/stat.h>

/* Which per-key entry of a record directory. */
typedef enum pg_entry_kind {
    PG_ENTRY_PULLED = 0, /* pulled/<hash(imageRef)>: a pulled record */
    PG_ENTRY_INTENT = 1, /* pulling/<hash(image)>: an intent */
    PG_ENTRY_INDEX = 2   /* pullgate-images/<hash(identity)>: identity -> imageRef */
} pg_entry_kind;

size_t pg_store_dir_count(const pg_store *store);

/* Before a decision's lookups: applies what changed in the record directories
 * to the store's absence cache (lookup_cache.h; only after pg_store_enable_cache). */
void pg_store_lookups_refresh(const pg_store *store);

/*
 * 1 if directory i has an entry of that kind for key (a probe: fstatat only,
 * never read; an entry that cannot be stat'ed counts too: the strict side).
 */
int pg_store_entry_exists(const pg_store *store, size_t i, pg_entry_kind kind, const char *key);

/* The pulled record of image_ref in directory i. PG_ERR_NOT_FOUND when absent;
 * any other error: the file exists but is unusable. */
int pg_store_get_in(const pg_store *store, size_t i, const char *image_ref, pg_record **out,
                    pg_error *err);

/* The index entry of key in directory i: *ref_out (caller frees). NOT_FOUND when absent. */
int pg_store_index_in(const pg_store *store, size_t i, const char *key, char **ref_out,
                      pg_error *err);

/*
 * d/sub/file stat'ed for a lookup of directory i (sub: a pg_lc_sub), the store's
 * absence cache first: 1 present (*st filled), 0 absent, -1 cannot tell. Through
 * the subdirectory's kept descriptor (checked at open); without one, `checked`
 * opens and checks the subdirectory first (an answer that can lead to an allow),
 * else stats by path (a probe, where "present" is the strict side).
 */
int pg_st_stat_sub(const pg_store *s, size_t i, int sub, const char *file, bool checked,
                   struct stat *st);

#endif
