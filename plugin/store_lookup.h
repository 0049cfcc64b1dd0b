/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-directory lookups of the record store, used by the decision to gather
 * everything every record directory says about one image (docs/design.md,
 * "Image identity"). Internal to the engine; implemented in plugin/store_identity.c
 * and plugin/store_names.c.
 */
#ifndef PULLGATE_STORE_LOOKUP_H
#define PULLGATE_STORE_LOOKUP_H

#include "internal.h"

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

/*
 * When the credential (a secret or, with secret == NULL, a service account)
 * of image_name in rec was last recorded: pullgate's per-credential time for a
 * record of its writable directory, the record's lastUpdatedTime otherwise.
 */
int pg_store_credential_time(const pg_store *store, const pg_record *rec, const char *image_name,
                             const pg_pod_cred *secret, const pg_pod_cred *sa, time_t *out,
                             pg_error *err);
/* The same, not trying the credential index (the caller found it unusable just now:
 * the credential-times file it falls back to gives the same answer). */
int pg_store_credential_time_noindex(const pg_store *store, const pg_record *rec,
                                     const char *image_name, const pg_pod_cred *secret,
                                     const pg_pod_cred *sa, time_t *out, pg_error *err);

#endif
