/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Verification pulls (docs/interfaces.md §10, cri/README.md "ImageStatus"):
 * the kubelet's ImageStatus carrying the pod's annotations is forwarded, then
 * decided as the hook would decide for that pod (the resident decider's store,
 * the identities the runtime's answer gives, the pod's credentials
 * annotation); when a pull with the pod's own credentials could cure the
 * denial, the kubelet hears "not present" (ImageStatusResponse{}) and pulls,
 * and the registry decides. Every other case, and every failure, answers the
 * runtime's own answer unchanged. Runs on the event loop (verify.c says why);
 * the D-Bus signal is sent on the worker.
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
