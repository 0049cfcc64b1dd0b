/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A decision's lookups in the record store (store_lookup.c), for the engine
 * above the store (decide.c) and the tests. One context per decision: it reads
 * each file at most once (a record, an index entry, credential times, a name
 * index file) and probes each name at most once, however many spellings and
 * steps ask for it, and opens each subdirectory at most once. Records come
 * focused (store_read.h) with their credentials' times.
 * Files of the store itself never include this header (store_impl.h: the layers).
 */
#ifndef PULLGATE_STORE_LOOKUP_H
#define PULLGATE_STORE_LOOKUP_H

#include "store_impl.h"
#include "store_read.h"

/* Which per-key entry of a record directory. */
typedef enum pg_entry_kind {
    PG_ENTRY_PULLED = 0, /* pulled/<hash(imageRef)>: a pulled record */
    PG_ENTRY_INTENT = 1, /* pulling/<hash(image)>: an intent */
    PG_ENTRY_INDEX = 2   /* pullgate-images/<hash(identity)>: identity -> imageRef */
} pg_entry_kind;

typedef struct pg_lookup pg_lookup;

/*
 * A decision's lookups in store (NULL: no store, every lookup fails). focus:
 * what the decision reads of a record (borrowed: it must outlive the context);
 * NULL: records come whole, without times. Starts by applying what changed in
 * the record directories to the store's absence cache (long-lived stores), so
 * the lookups see the store as it is now. NULL when out of memory.
 */
pg_lookup *pg_lookup_new(const pg_store *store, const pg_record_focus *focus);
void pg_lookup_free(pg_lookup *l);
size_t pg_lookup_dirs(const pg_lookup *l);

/* The pulled record of key (an imageRef spelling) in directory i: *out belongs to
 * l (the same pointer for the same file, whatever the key). PG_ERR_NOT_FOUND when
 * absent; any other error: the file exists but is unusable. */
int pg_lookup_record(pg_lookup *l, size_t i, const char *key, const pg_focused **out,
                     pg_error *err);
/* The imageRef directory i's image index gives key (*ref_out belongs to l).
 * PG_ERR_NOT_FOUND when absent. */
int pg_lookup_index(pg_lookup *l, size_t i, const char *key, const char **ref_out, pg_error *err);
/* Whether directory i has an entry of that kind for key: a probe (fstatat, never
 * read); an entry that cannot be stat'ed counts too (the strict side). */
bool pg_lookup_exists(pg_lookup *l, size_t i, pg_entry_kind kind, const char *key);
/*
 * Every pulled record in any directory whose credentialMapping maps image_name
 * (the writable directory's name index, every other directory's names cache).
 * load false: counts them, stopping at the first (*n_out 0 or 1); load true:
 * *recs (an array the caller frees; the records belong to l, and with a focus
 * the name must be its image_name). *unknown_out: some record could not be
 * read, so its names are unknown (callers take it as "may map it").
 */
int pg_lookup_mapping(pg_lookup *l, const char *image_name, bool load, const pg_focused ***recs,
                      size_t *n_out, bool *unknown_out, pg_error *err);

/*
 * Brings the names cache of every directory the writable one cannot index
 * (read-only directories; the writable one before its name index is
 * complete) up to date, so that decisions find it current and query it
 * without building it in the container-start path. Cheap when nothing
 * changed (one fstatat and one header read per directory); otherwise a
 * listing and an fstatat per record, reading only records that changed.
 * For long-lived hosts (pullgate-cri: on its prune thread) and prune. Needs a
 * writable directory (else no cache: PG_OK).
 */
int pg_store_refresh_name_caches(const pg_store *store, pg_error *err);

#endif
