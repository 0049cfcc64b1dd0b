/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The generic CRI proxy (cri/README.md): every call, of any method, is
 * forwarded as bytes to the runtime with the same method, deadline and
 * metadata, and the runtime's answer comes back unchanged. The intercepted
 * methods (PullImage) go through intercept.h: recorded, or refused.
 */
#ifndef PULLGATE_CRI_PROXY_H
#define PULLGATE_CRI_PROXY_H

#include "intercept.h"
#include "verify.h"

#include <stdbool.h>

#define CRI_DEFAULT_DRAIN_MS 10000

typedef struct cri_proxy_options {
    const char *listen;         /* "unix:///run/pullgate/cri.sock" */
    const char *runtime;        /* "unix:///run/containerd/containerd.sock" */
    cri_worker *worker;         /* runs the intercepted calls; borrowed */
    cri_recorder *recorder;     /* borrowed */
    const char *annotation_key; /* config credentialsAnnotation; copied */
    pg_keyholder *keys;         /* hmacKeyFile, reloaded when it changes; NULL: not keyed */
    bool mac_required;          /* hmacKeyFile set (then a NULL key verifies nothing) */
    cri_node_creds *node_creds; /* the node's docker config files; worker only; borrowed */
    cri_runtime_facts *facts;   /* what the runtime is (CRI-O's namespaced auth); borrowed */
    unsigned max_pulls;         /* pull slots; 0: CRI_MAX_PULL_SLOTS */
    int slot_wait_ms;           /* waiting for a pull slot before refusing */
    int intent_budget_ms;       /* waiting for the intent before refusing a pull */
    int record_budget_ms;       /* waiting for the result records before answering */
    /* Verification pulls (verify.h), when cfg says criVerifyPulls and a decider is given: */
    const pg_config *cfg;  /* borrowed, outlives the proxy */
    cri_decider *decider;  /* borrowed, outlives the proxy; NULL: ImageStatus as bytes */
    pg_notifier *notifier; /* borrowed; PullRequired signals */
} cri_proxy_options;

typedef struct cri_proxy cri_proxy;

/* Binds the listening socket and starts serving. Options are copied (not the borrowed objects). */
cri_proxy *cri_proxy_start(const cri_proxy_options *opts, pg_error *err);

/*
 * Stops accepting, lets in-flight calls finish for up to drain_ms, then
 * cancels the rest (which ends them promptly). Returns 1 when everything was
 * released, 0 when something is still running after a further bound (the
 * caller should then just exit). The worker and the recorder outlive it.
 */
int cri_proxy_stop(cri_proxy *p, int drain_ms);

#endif
