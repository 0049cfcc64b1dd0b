/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 2 of the record store (store_read.c): the subdirectory descriptors a
 * lookup reads through (kept, checked, trusted) and reading one pulled record.
 * Private to the record store (store_impl.h: the layers).
 */
#ifndef PULLGATE_STORE_READ_H
#define PULLGATE_STORE_READ_H

#include "store_fs.h"

/* pg_store_enable_cache: keeps every subdirectory a decision reads open (pulled/
 * already is), so repeated decisions probe through descriptors the cache watches. */
void pg_st_keep_lookup_fds(pg_store *s);
/* The descriptor of d/sub the store keeps (-1 when none is kept or trusted). */
int pg_st_kept_fd(const record_dir *d, const char *sub);
/* d/sub for a lookup: the kept descriptor, or one opened and checked now and kept
 * from then on (*owned false), or, when another thread kept one first or the
 * store's cache does not trust it, a new one (*owned true: caller closes).
 * Missing: PG_ERR_NOT_FOUND (not remembered: one created later is seen). */
int pg_st_lookup_fd(const record_dir *d, const char *sub, int *fd, bool *owned, pg_error *err);

/* Reads and checks pulled/<name> (content must match the name). NOT_FOUND when absent. */
int pg_st_read_record_at(int pulled_fd, const record_dir *d, const char *name, pg_record **out,
                         pg_error *err);
int pg_st_get_from_dir(const record_dir *d, const char *name, pg_record **out, pg_error *err);

#endif
