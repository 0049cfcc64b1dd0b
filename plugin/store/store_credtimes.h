/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 3 of the record store (store_credtimes.c): writing the per-credential
 * times files (pullgate-credtimes/) beside the records pullgate writes.
 * Private to the record store (store_impl.h: the layers).
 */
#ifndef PULLGATE_STORE_CREDTIMES_H
#define PULLGATE_STORE_CREDTIMES_H

#include "store_read.h"

/* One record_pulled call, normalised. */
typedef struct pull {
    const char *image, *image_ref;
    const pg_pull_credentials *creds;
    char *image_name;  /* normalised, no tag/digest: the credentialMapping key */
    char *full_name;   /* normalised with tag/digest: the index key */
    char *digest_only; /* "name@digest" when a digest is given, else NULL */
    char **alias_keys; /* index keys of the aliases recorded with it (pg_st_alias_keys), or NULL */
} pull;

/*
 * Under the lock: the per-credential times of rec (record file `file` of the
 * writable directory w) after pull p, staged in b. old_keys: the credential-time
 * keys of the record on disk before the merge (NULL: a new record), which the
 * side file keeps covering until the new record is durable. *ordered: the file
 * must be durable before the record (false when a crash keeping the old file
 * beside the new record can give no credential a later time: a new record, or
 * an old file that covers every credential of the old record). *times_out: the
 * times object staged (new reference, caller releases).
 */
int pg_st_credtimes_update_locked(const record_dir *w, pg_st_batch *b, const pg_record *rec,
                                  const json_t *old_keys, const char *file, const pull *p,
                                  time_t previous, bool *ordered, json_t **times_out,
                                  pg_error *err);
/* The credential-time keys of rec's credentials, as a JSON object of keys (new
 * reference; NULL when out of memory). */
json_t *pg_st_credtimes_keys(const pg_record *rec);

#endif
