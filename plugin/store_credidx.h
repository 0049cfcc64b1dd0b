/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Focused record lookups for the decision, and the per-record credential
 * index that makes them cheap for records holding many credentials
 * (design and measurements: bench/README.md, "Focused lookups, credential
 * index, record cache").
 *
 * A decision reads one mapping of a record (the image's name) and, in it,
 * only the credentials the pod presents. A *focused* record holds exactly
 * that: the record's imageRef, directory and times, the one mapping (with its
 * nodePodsAccessible flag, present even when empty) and only the recorded
 * secrets and service accounts that match a presented one, in record order.
 * The decision over a focused record is the decision over the full record.
 *
 * Where a focused record comes from, cheapest first:
 *  1. the store's in-process record cache (long-lived hosts that enabled it):
 *     the cached full record, projected;
 *  2. pullgate-credidx/<record file> in the writable directory: a compact
 *     line index of the record, written under the store lock after every
 *     record write, used ONLY when the record file's fstatat identity and the
 *     credential-times file's equal what the index was built from, read
 *     strictly and parsed strictly (anything unexpected: not used);
 *  3. the record file itself, parsed (what every other case falls back to).
 * A missing, stale or malformed index is never evidence of anything: the
 * lookup then reads the record exactly as without an index.
 *
 * Internal to the engine; nothing outside plugin/ includes it.
 */
#ifndef PULLGATE_STORE_CREDIDX_H
#define PULLGATE_STORE_CREDIDX_H

#include "internal.h"

#include <stdbool.h>
#include <time.h>

/* What a decision reads of a record. */
typedef struct pg_record_focus {
    const char *image_name;        /* the credentialMapping key */
    const pg_presented *presented; /* NULL: no credentials presented */
    /* The pod's identity as the runtime sets it (NULL: unknown): pod bindings
     * of this pod are kept (pg_pod_binding_matches). */
    const char *pod_namespace, *pod_uid;
} pg_record_focus;

/*
 * The pulled record of image_ref in directory i, focused (focus NULL: the full
 * record). Same results and errors as pg_store_get_in: PG_ERR_NOT_FOUND when
 * absent; any other error: the file exists but is unusable. *out caller frees.
 */
int pg_store_get_focused_in(const pg_store *store, size_t i, const char *image_ref,
                            const pg_record_focus *focus, pg_record **out, pg_error *err);

/*
 * The recorded times of a focused record's credentials, in the order of its
 * mapping's secrets and service accounts, when it came from a current index
 * (known); otherwise the caller asks pg_store_credential_time, as without it.
 */
typedef struct pg_cred_times {
    bool known;
    bool index_unusable; /* the index was tried for this record and not usable */
    time_t *secrets, *sas;
} pg_cred_times;

void pg_cred_times_clear(pg_cred_times *t);

/* pg_store_get_focused_in that also fills *times (may be NULL; cleared first;
 * the caller clears it after use). One index read serves record and times. */
int pg_store_get_focused_timed_in(const pg_store *store, size_t i, const char *image_ref,
                                  const pg_record_focus *focus, pg_record **out,
                                  pg_cred_times *times, pg_error *err);

/* full projected onto focus (a new record; full is not changed). */
int pg_record_project(const pg_record *full, const pg_record_focus *focus, pg_record **out,
                      pg_error *err);

/*
 * From the index only: when the credential (secret, or with secret NULL the
 * service account sa) of image_name in the writable directory's record of
 * image_ref was last recorded. PG_ERR_NOT_FOUND when the index is absent,
 * stale, malformed or does not hold that credential: the caller then reads
 * the credential-times file as without an index.
 */
int pg_st_credidx_time(const pg_store *store, const char *image_ref, const char *image_name,
                       const pg_pod_cred *secret, const pg_pod_cred *sa, time_t *out);

/*
 * Under the store lock, after the writable directory's pulled/<file> (rec) and
 * its credential times were written: rewrites pullgate-credidx/<file>. Not
 * fsync'd: the index is a validated cache, so a torn or lost one after a crash
 * only costs a parse. On failure the old index is removed (it could only be
 * stale); the caller may ignore the result.
 */
int pg_st_credidx_write_locked(const pg_store *store, const pg_record *rec, const char *file,
                               pg_error *err);

/* Under the store lock: rebuilds the index of image_ref's record from the file. */
int pg_store_credidx_build(const pg_store *store, const char *image_ref, pg_error *err);

/* Removes pullgate-credidx/<file> of the writable directory (delete, prune). */
void pg_st_credidx_remove(const pg_store *store, const char *file);

/*
 * The focused record an index text describes, without reading files or
 * checking stamps (for the fuzz target; credential times are parsed as a decision
 * parses them): PG_ERR_NOT_FOUND when malformed.
 */
int pg_credidx_decode(const char *data, size_t len, const char *image_ref,
                      const pg_record_focus *focus, pg_record **out);

/* After a write or removal of dir's pulled/<file>: drops the cached copy
 * (memory only: a cached record is re-validated on every use anyway). */
void pg_st_cache_forget(const pg_store *store, const char *dir, const char *file);

/* pg_store_enable_cache with a settle time (record_cache.h; tests use 0). */
int pg_store_enable_cache_settle(pg_store *store, size_t max_entries, size_t max_bytes,
                                 unsigned settle_ms, pg_error *err);

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
