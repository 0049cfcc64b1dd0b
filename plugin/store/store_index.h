/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 3 of the record store (store_index.c): writing the identity ->
 * imageRef index (pullgate-images/) of the writable directory w, aliases, and
 * prune's test for entries whose record is gone.
 * Private to the record store (store_impl.h: the layers).
 */
#ifndef PULLGATE_STORE_INDEX_H
#define PULLGATE_STORE_INDEX_H

#include "store_read.h"

/* Under the lock: the index entries of a pull (as written, normalised, name@digest),
 * staged in b (unchanged entries are not). */
int pg_st_update_index(const record_dir *w, pg_st_batch *b, const char *image,
                       const char *normalised, const char *digest_only, const char *image_ref,
                       pg_error *err);
/* Prune: images/<entry> is readable and names an imageRef with no record in
 * pulled/ (descriptors of w's subdirectories). */
bool pg_st_index_orphan(const record_dir *w, int images_fd, int pulled_fd, const char *entry);
/* The index keys of aliases (each validated, with its other spelling), or
 * *keys NULL when there are none; caller frees with pg_strv_free. */
int pg_st_alias_keys(const char *const *aliases, char ***keys, pg_error *err);
/* Under the lock: the index entries keys -> image_ref staged in b (unchanged ones are not). */
int pg_st_stage_aliases(const record_dir *w, pg_st_batch *b, char *const *keys,
                        const char *image_ref, pg_error *err);

#endif
