/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-cri's resident decider: one long-lived record store with the
 * record cache, kept current for the record directories as they are now,
 * shared by the hook server (hook_server.h) and the verification pulls'
 * ImageStatus (verify.h), so both decide with the same store and caches
 * (docs/design.md, "The resident hook"). Thread-safe: any number of readers
 * decide at once; a reopen takes the lock for writing.
 */
#ifndef PULLGATE_CRI_DECIDER_H
#define PULLGATE_CRI_DECIDER_H

#include "internal.h"

typedef struct cri_decider cri_decider;

/* Opens the store now (an error if it cannot be); cfg is borrowed and outlives it. */
cri_decider *cri_decider_new(const pg_config *cfg, pg_error *err);
void cri_decider_free(cri_decider *d);

/*
 * The store to decide with, current for the record directories as they are
 * now (reopened when one appeared, vanished or was replaced), read-locked:
 * release it with cri_decider_release. NULL (nothing to release) when it
 * cannot be opened; that is logged.
 */
pg_store *cri_decider_acquire(cri_decider *d);
void cri_decider_release(cri_decider *d);

#endif
