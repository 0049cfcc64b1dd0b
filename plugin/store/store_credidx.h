/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 3 of the record store (store_credidx.c: the format, and why it is
 * trusted only while it describes the record's current version): the
 * credential index of the writable directory, so that a decision in a fresh
 * process over a record holding many credentials parses neither the record
 * nor its credential times. A missing, stale or malformed index is never
 * evidence of anything: the lookup then reads the record as without it.
 * Private to the record store (store_impl.h: the layers).
 */
#ifndef PULLGATE_STORE_CREDIDX_H
#define PULLGATE_STORE_CREDIDX_H

#include "store_read.h"

#include <sys/stat.h>

/*
 * Under the store lock, after w's pulled/<file> (rec) and its credential times
 * (times: their object, NULL when the record has no times file) were written:
 * rewrites pullgate-credidx/<file>. Not fsync'd: a lost or torn index after a
 * crash only costs a parse. On failure the old index is removed (it could only
 * be stale); the caller may ignore the result.
 */
int pg_st_credidx_write_locked(const record_dir *w, const pg_record *rec, const json_t *times,
                               const char *file, pg_error *err);
/* Removes pullgate-credidx/<file> of w (a record deleted). */
void pg_st_credidx_remove(const record_dir *w, const char *file);

/*
 * The focused record (with its credentials' times) of w's record file `file`
 * from its index, read through idx_fd (pullgate-credidx/): rec_st is the
 * record file's fstatat, times_st the credential-times file's (NULL: absent).
 * PG_OK; PG_ERR_NOT_FOUND: no usable index; PG_ERR_NOMEM.
 */
int pg_st_credidx_load(const record_dir *w, int idx_fd, const char *file, const struct stat *rec_st,
                       const struct stat *times_st, const pg_record_focus *focus, pg_focused *out);

/*
 * The focused record an index text describes, without reading files or
 * checking stamps (for the fuzz target; credential times are parsed as a
 * decision parses them): PG_ERR_NOT_FOUND when malformed.
 */
int pg_credidx_decode(const char *data, size_t len, const char *image_ref,
                      const pg_record_focus *focus, pg_record **out);

#endif
