/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 3 of the record store (store_credtimes.c): the per-credential times
 * files (pullgate-credtimes/) beside the records pullgate writes.
 * Private to the record store (store_impl.h: the layers).
 */
#ifndef PULLGATE_STORE_CREDTIMES_H
#define PULLGATE_STORE_CREDTIMES_H

#include "store_fs.h"

#include <jansson.h>
#include <time.h>

/* The key of one credential in the credential-times file; caller frees; NULL: ENOMEM. */
char *pg_st_credential_key(const char *image_name, const pg_pod_cred *s, const pg_pod_cred *sa);
/* The times object of the credential-times file `file` (open subdir fd); new reference. */
int pg_st_credtimes_load(const pg_store *s, int fd, const char *file, const char *image_ref,
                         json_t **times, pg_error *err);
/* Under the lock: the per-credential times of rec (record file `file`) after pull p,
 * staged in b. */
int pg_st_credtimes_update_locked(const pg_store *s, pg_st_batch *b, const pg_record *rec,
                                  const json_t *old_keys, const char *file, const pull *p,
                                  time_t previous, pg_error *err);
/* The credential-time keys of rec's credentials, as a JSON object of keys (new
 * reference; NULL when out of memory). old_keys above: those of the record on
 * disk before the merge, so the side file keeps covering it until the new
 * record is durable (NULL: a new record). */
json_t *pg_st_credtimes_keys(const pg_record *rec);

#endif
