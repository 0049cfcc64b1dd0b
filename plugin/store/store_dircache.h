/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 3 of the record store (store_dircache.c): the names caches of the
 * record directories the writable one cannot index as it writes.
 * Private to the record store (store_impl.h: the layers).
 */
#ifndef PULLGATE_STORE_DIRCACHE_H
#define PULLGATE_STORE_DIRCACHE_H

#include "store_read.h"

/* The raw SHA-256 of an image name (the names caches' key). */
int pg_st_name_hash(const char *name, unsigned char out[32], pg_error *err);
/* The names of record directory d's records, asked by name: its cache (kept in
 * the writable directory w; NULL: none) when current; else built now (from the
 * old cache when there is one), written back when d is quiet, and answered
 * from memory. out NULL: only d's cache made current, nothing kept open. */
typedef struct pg_st_dirnames pg_st_dirnames;
int pg_st_dirnames_get(const record_dir *w, const record_dir *d, pg_st_dirnames **out,
                       pg_error *err);
/* fn(file) for each record file of the directory listed under the name's hash:
 * PG_OK to go on, < 0 to stop (not an error), else an error. *unknown: some
 * record could not be read, its names are unknown. */
typedef int (*pg_st_dirnames_fn)(const char *file, void *ud, pg_error *err);
int pg_st_dirnames_find(const pg_st_dirnames *v, const unsigned char name[32], pg_st_dirnames_fn fn,
                        void *ud, bool *unknown, pg_error *err);
void pg_st_dirnames_free(pg_st_dirnames *v);
/* The cache file at fd as a lookup, when it is usable (ours, whole) and its
 * stamp is `stamp`: 0 (takes fd); else -1 (fd closed). For the fuzz target. */
int pg_st_dirnames_from_fd(int fd, const char *stamp, pg_st_dirnames **out);

#endif
