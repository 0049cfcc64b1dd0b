/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The intercepted PullImage (cri/README.md, "PullImage"): reaches the runtime only once its
 * intent is durable (docs/interfaces.md §10). Each call is a state machine on the worker
 * thread; a pull holds a counted slot while in flight, and one that finds none waits
 * (bounded) or is refused, never forwarded.
 */
#ifndef PULLGATE_CRI_INTERCEPT_H
#define PULLGATE_CRI_INTERCEPT_H

#include "grpc_util.h"
#include "keyholder.h"
#include "runtime_facts.h"
#include "nodecreds.h"
#include "pull.h"
#include "recorder.h"
#include "worker.h"

#define CRI_MAX_PULL_SLOTS 64       /* pulls in flight towards the runtime */
#define CRI_MAX_SLOT_WAITERS 256    /* pulls waiting for a slot; beyond that: refused */
#define CRI_RECORD_UNITS_PER_PULL 2 /* intent, then pulled (with aliases) | failed | release */

typedef struct cri_verifier cri_verifier;

typedef struct cri_intercept_options {
    cri_verifier *verifier;    /* told of each successful pull (loop bound); may be NULL */
    grpc_channel *channel;     /* to the runtime; borrowed */
    grpc_completion_queue *cq; /* the event loop's queue; borrowed */
    cri_worker *worker;        /* borrowed */
    cri_recorder *recorder;    /* borrowed */
    const char *annotation_key;
    pg_keyholder *keys;        /* hmacKeyFile, reloaded when it changes; NULL: not keyed */
    bool mac_required;         /* hmacKeyFile set (then a NULL key opens nothing) */
    cri_node_creds *node;      /* the node's docker config; used on the worker only; borrowed */
    cri_runtime_facts *facts;  /* the runtime's own namespace credentials; NULL: none */
    unsigned max_slots;        /* 0: CRI_MAX_PULL_SLOTS */
    int slot_wait_ms;          /* waiting for a pull slot before refusing */
    int intent_budget_ms;      /* waiting for the intent before refusing */
    int record_budget_ms;      /* waiting for the result records before answering */
    int image_status_ms;       /* the proxy's own ImageStatus calls, at most */
} cri_intercept_options;

typedef struct cri_intercept cri_intercept;

/* Options are copied, strings included (not the borrowed objects). */
cri_intercept *cri_intercept_new(const cri_intercept_options *o, pg_error *err);
/* After every intercepted call finished and the worker stopped. */
void cri_intercept_free(cri_intercept *x);

/*
 * Takes over an incoming call of an intercepted method: the call, its details
 * and metadata (all moved: the caller keeps nothing). Called on the event loop.
 */
void cri_intercept_start(cri_intercept *x, const cri_method *m, grpc_call *incoming,
                         grpc_call_details *details, grpc_metadata_array *md);

#endif
