/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the engine's files expose for the tests, fuzzers and benchmarks only
 * (as crun's libcrun_testing): nothing in the library or the programs calls
 * these. The defining files include it for their prototypes; include it from
 * test code, never from product code. Not installed.
 */
#ifndef PULLGATE_ENGINE_TESTING_H
#define PULLGATE_ENGINE_TESTING_H

#include "internal.h"

/* config.c: the i-th key this release reads (static storage), NULL past the last. */
const char *pg_config_key_at(size_t i);

/* record.c: strict decode of an ImagePullIntent (*image_out caller frees). */
int pg_intent_parse(const char *buf, size_t len, char **image_out, pg_error *err);
/* record.c: merges creds into rec under image_name, kubelet rules (pg_record_merge_pull
 * without credential times or a share). */
int pg_record_merge(pg_record *rec, const char *image_name, const pg_pull_credentials *creds,
                    pg_error *err);

/* store.c: *exists: an intent file for image is in some directory. An error (a directory
 * that cannot be searched) leaves *exists false. */
int pg_store_intent_exists(const pg_store *store, const char *image, bool *exists,
                           pg_error *err);
/* store.c: pg_store_enable_cache with a settle time (record_cache.h; tests use 0). */
int pg_store_enable_cache_settle(pg_store *store, size_t max_entries, size_t max_bytes,
                                 unsigned settle_ms, pg_error *err);
/* store.c: under the lock, rebuilds the credential index of image_ref's record of the
 * writable directory from its files. */
int pg_store_credidx_build(const pg_store *store, const char *image_ref, pg_error *err);

/* store_lookup.c: pg_lookup_mapping for one caller: the records whole (recs NULL:
 * counts; else caller frees each and the array). */
int pg_store_records_mapping(const pg_store *store, const char *image_name, pg_record ***recs,
                             size_t *n_out, bool *unknown_out, pg_error *err);
/* store_lookup.c: when the credential (a secret or, with secret == NULL, a service
 * account) of image_name in rec was last recorded: the writable directory's
 * credential-times file, the record's lastUpdatedTime otherwise (a decision's times). */
int pg_store_credential_time(const pg_store *store, const pg_record *rec, const char *image_name,
                             const pg_pod_cred *secret, const pg_pod_cred *sa, time_t *out,
                             pg_error *err);

#endif
