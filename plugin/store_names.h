/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 5 of the record store (store_names.c): the name index of the
 * writable directory, the name lookup of every directory (the "preloaded"
 * proof), prune's upkeep of the index.
 * Private to the engine (store_impl.h: the store's layers).
 */
#ifndef PULLGATE_STORE_NAMES_H
#define PULLGATE_STORE_NAMES_H

#include "store_dircache.h"

/*
 * Every pulled record in any directory whose credentialMapping maps
 * image_name (pullgate's name index for the writable directory, a cache
 * rebuilt on change for each read-only one). With recs == NULL only counts
 * (*n_out); otherwise loads them (caller frees each and the array).
 * *unknown_out is set when some record could not be read, so its names are
 * unknown (callers treat that as "may map it": the strict side).
 */
int pg_store_records_mapping(const pg_store *store, const char *image_name, pg_record ***recs,
                             size_t *n_out, bool *unknown_out, pg_error *err);

/*
 * Brings the names cache of every directory the writable one cannot index
 * (read-only directories; the writable one before its name index is
 * complete) up to date, so that decisions find it current and query it
 * without building it in the container-start path. Cheap when nothing
 * changed (one fstatat and one header read per directory); otherwise a
 * listing and an fstatat per record, reading only records that changed.
 * For long-lived hosts (pullgate-cri: after the kubelet recorded a pull, or
 * on a timer) and prune. Needs a writable directory (else no cache: PG_OK).
 */
int pg_store_refresh_name_caches(const pg_store *store, pg_error *err);

/* Under the lock: adds `file` to the name index of every name rec maps (the
 * changed name files staged in b). */
int pg_st_names_add_locked(const pg_store *s, pg_st_batch *b, const pg_record *rec,
                           const char *file, pg_error *err);
/* One line of the name index: record file `file` maps the name hashing to hex. */
typedef struct pg_st_name_line {
    char hex[PG_HASH_HEX_LEN + 1];
    file_name file;
} pg_st_name_line;
typedef struct pg_st_name_lines {
    pg_st_name_line *v;
    size_t n, cap;
} pg_st_name_lines;
/* Appends the lines of rec (record file `file`): one per name it maps. */
int pg_st_name_lines_add(pg_st_name_lines *l, const pg_record *rec, const char *file,
                         pg_error *err);
void pg_st_name_lines_free(pg_st_name_lines *l);
/* Prune, NOT under the lock (it locks in short steps): every name file made to
 * list exactly the records present that map its name, from `lines` (every
 * readable record's, collected by prune's walk; sorted here) and the files'
 * own lines; unchanged files untouched; the completeness marker written last
 * when it was missing. */
int pg_st_names_upkeep(const pg_store *s, pg_st_name_lines *lines, pg_error *err);
/* A new layout (pulled/ empty): the name index is complete from the start. */
void pg_st_names_mark_complete_if_empty(const record_dir *d);

#endif
