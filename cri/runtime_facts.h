/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What pullgate-cri knows of the runtime it forwards to: its name and version, from CRI
 * RuntimeService/Version, asked on a thread of its own at start and again every second until
 * it answers; and from them whether an uncredentialed pull may have used credentials the
 * runtime holds for the pod's namespace (common/crio_auth.h). Until the runtime answered, it may.
 */
#ifndef PULLGATE_CRI_RUNTIME_FACTS_H
#define PULLGATE_CRI_RUNTIME_FACTS_H

#include "crio_auth.h"
#include "internal.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct cri_runtime_facts cri_runtime_facts;

/* configured: the config's runtime (PG_RUNTIME_CRIO makes it CRI-O whatever Version says). */
cri_runtime_facts *cri_runtime_facts_start(const char *endpoint, pg_runtime configured,
                                           const char *crio_config, const char *crio_config_dir,
                                           pg_error *err);

/*
 * Whether a pull without credentials that names a pod namespace may have been made with the
 * runtime's own credentials for that namespace (out->namespaced, returned too); out->why (for
 * the record's log line) says how it was decided. CRI-O's files are read at every call (a few
 * small files): a change takes effect at the next pull. f NULL: no.
 */
bool cri_runtime_facts_namespaced_auth(cri_runtime_facts *f, cri_crio_auth *out);

/* Waits at most timeout_ms for the runtime's first answer (start-up: pulls that come before it
 * are taken as namespace-bound). true when it answered. */
bool cri_runtime_facts_wait(cri_runtime_facts *f, int timeout_ms);

/* 1 when stopped and freed, 0 when the thread is stuck in a call (left to exit). */
int cri_runtime_facts_stop(cri_runtime_facts *f, int timeout_ms);

#endif
