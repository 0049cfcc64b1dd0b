/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store writer of pullgate-cri: one thread that runs record operations in
 * the order they were submitted, so an intent is always written before the
 * pull's result. Callers wait for their operation only until a deadline:
 * the store's flock(2) wait is unbounded, and a hung lock holder must never
 * hold up a pull. An operation whose caller gave up still runs when the lock
 * frees (it only lands late); the queue is bounded.
 */
#ifndef PULLGATE_CRI_RECORDER_H
#define PULLGATE_CRI_RECORDER_H

#include "pull.h"

#include <stdint.h>

#define CRI_RECORDER_QUEUE_MAX 1024
/* Returned (and set in err) when the deadline passed before the operation ran. */
#define CRI_RECORD_TIMEOUT PG_ERR_LIMIT

typedef struct cri_recorder cri_recorder;

/* Starts the writer thread. store is borrowed and must outlive the recorder. */
cri_recorder *cri_recorder_new(pg_store *store, pg_error *err);
/*
 * Stops the writer after it ran what is queued, waiting at most timeout_ms.
 * Returns 1 when it stopped (everything freed), 0 when it is stuck in the
 * store (then the recorder and the store must be left alone: process exit).
 */
int cri_recorder_stop(cri_recorder *r, int timeout_ms);

/* Monotonic clock in milliseconds. */
int64_t cri_now_ms(void);

/* Each waits until the operation ran or deadline_ms (cri_now_ms() clock) passed. */
int cri_record_intent(cri_recorder *r, const char *image, int64_t deadline_ms, pg_error *err);
/* Takes ownership of *creds (left empty). */
int cri_record_pulled(cri_recorder *r, const char *image, const char *image_ref,
                      cri_pull_creds *creds, int64_t deadline_ms, pg_error *err);
int cri_record_failed(cri_recorder *r, const char *image, int64_t deadline_ms, pg_error *err);
/* Takes ownership of aliases (NULL-terminated, pg_strv_free). */
int cri_record_aliases(cri_recorder *r, const char *image_ref, char **aliases, int64_t deadline_ms,
                       pg_error *err);

#endif
