/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Verification pulls (docs/interfaces.md §10, cri/README.md "ImageStatus"): an ImageStatus
 * carrying the pod's annotations is forwarded, then decided as the hook would decide for
 * that pod; a denial a pull with the pod's own credentials could cure is answered "not
 * present", everything else (every failure too) the runtime's own answer, unchanged.
 */
#ifndef PULLGATE_CRI_VERIFY_H
#define PULLGATE_CRI_VERIFY_H

#include "decider.h"
#include "grpc_util.h"
#include "pull.h"
#include "verify_memory.h"
#include "worker.h"

typedef struct cri_verifier_options {
    grpc_channel *channel;     /* to the runtime; borrowed */
    grpc_completion_queue *cq; /* the event loop's queue; borrowed */
    cri_worker *worker;        /* borrowed */
    const pg_config *cfg;      /* borrowed: the configuration the hook server decides with */
    cri_decider *decider;      /* borrowed */
    pg_notifier *notifier;     /* borrowed; NULL: no signal */
} cri_verifier_options;

typedef struct cri_verifier cri_verifier;

cri_verifier *cri_verifier_new(const cri_verifier_options *o, pg_error *err);
/* After every ImageStatus call finished (a signal still queued on the worker does not use v). */
void cri_verifier_free(cri_verifier *v);

/* Takes over an incoming ImageStatus call (all moved). Called on the event loop. */
void cri_verifier_start(cri_verifier *v, grpc_call *incoming, grpc_call_details *details,
                        grpc_metadata_array *md);

/*
 * Any thread (PullImage's worker): a PullImage of image with this credentials
 * annotation and config.seen succeeded; a pod told "not present" for it has
 * now pulled (the loop bound, verify_memory.h).
 */
void cri_verifier_pulled(cri_verifier *v, const char *image, const char *annotation,
                         size_t annotation_len, const char *config_seen);

#endif
