/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store writer of pullgate-cri: one thread that runs record operations in
 * the order they were submitted, so an intent is always written before the
 * pull's result. Nobody waits on it: each operation reports its outcome
 * through a callback when it ran, and its submitter decides how long it waits
 * (the store's flock(2) wait is unbounded; a hung lock holder must never hold
 * up the proxy). An operation is never dropped once queued: whoever may need
 * to queue reserves room first (cri_recorder_reserve), so a queued pull can
 * always queue its result, and only a new pull finds the queue full.
 */
#ifndef PULLGATE_CRI_RECORDER_H
#define PULLGATE_CRI_RECORDER_H

#include "attribution.h"

#include <stdint.h>

/* Queued operations plus reserved room, at most. */
#define CRI_RECORDER_QUEUE_MAX 1024

typedef struct cri_recorder cri_recorder;

/*
 * Called on the writer thread once the operation ran: rc PG_OK (durable) or
 * the store's error in err. Must not block; it typically hands the outcome to
 * another thread.
 */
typedef void (*cri_record_done)(void *arg, int rc, const pg_error *err);

/* Starts the writer thread. store is borrowed and must outlive the recorder. */
cri_recorder *cri_recorder_new(pg_store *store, pg_error *err);
/*
 * Stops the writer after it ran what is queued, waiting at most timeout_ms.
 * Returns 1 when it stopped (everything freed), 0 when it is stuck in the
 * store (then the recorder and the store must be left alone: process exit).
 */
int cri_recorder_stop(cri_recorder *r, int timeout_ms);


/*
 * Reserves room for n operations. PG_ERR_LIMIT when the queue (operations
 * plus reservations) would exceed CRI_RECORDER_QUEUE_MAX or the recorder is
 * stopping. Each submission below uses one reserved unit;
 * what is left is returned with cri_recorder_unreserve.
 */
int cri_recorder_reserve(cri_recorder *r, unsigned n, pg_error *err);
void cri_recorder_unreserve(cri_recorder *r, unsigned n);

/*
 * Queue one operation on a reserved unit; done (may be NULL) is called with
 * its outcome once it ran. They fail only for PG_ERR_NOMEM (nothing queued,
 * done not called, the unit stays reserved).
 */
int cri_record_intent(cri_recorder *r, const char *image, cri_record_done done, void *arg,
                      pg_error *err);
/*
 * Takes ownership of *creds (left empty) and of aliases (NULL-terminated, pg_strv_free; may be
 * NULL: the image's other identities, indexed in the record's own batch) when it succeeds.
 */
int cri_record_pulled(cri_recorder *r, const char *image, const char *image_ref,
                      cri_pull_creds *creds, char **aliases, cri_record_done done, void *arg,
                      pg_error *err);
/* Releases one intent reference of image (pg_store_record_failed). */
int cri_record_failed(cri_recorder *r, const char *image, cri_record_done done, void *arg,
                      pg_error *err);
#endif
