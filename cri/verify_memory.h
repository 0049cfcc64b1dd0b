/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verification pulls' loop bound (docs/interfaces.md §10): which pods were
 * told "not present" for an image, and which of them pulled since. A pod whose
 * verified pull still cannot match (its annotation does not list the
 * credentials it pulled with) is then answered the runtime's truth, so the
 * kubelet does not pull on every retry. In memory only, bounded (the oldest
 * entry makes room) and with a TTL; keyed by cri_verify_key() (image,
 * credentials annotation, the kubelet's config.seen: what both calls carry).
 * Forgetting an entry costs one more pull, never a decision: the hook decides.
 * Not thread-safe: verify.c holds a lock around every use (the event loop asks,
 * the worker notes pulls).
 */
#ifndef PULLGATE_CRI_VERIFY_MEMORY_H
#define PULLGATE_CRI_VERIFY_MEMORY_H

#include "internal.h"

#include <stdbool.h>
#include <stdint.h>

#define CRI_VERIFY_MEMORY_ENTRIES 4096
#define CRI_VERIFY_MEMORY_TTL_MS (60 * 60 * 1000) /* an hour */

typedef struct cri_verify_memory cri_verify_memory;

cri_verify_memory *cri_verify_memory_new(size_t cap, int64_t ttl_ms, pg_error *err);
void cri_verify_memory_free(cri_verify_memory *m);

/*
 * A curable denial for key at now_ms: true to answer "not present" (noted:
 * the pod is asked to pull), false when the pod was asked before and pulled
 * since (within the TTL): answer the runtime's truth.
 */
bool cri_verify_memory_ask(cri_verify_memory *m, const uint8_t key[32], int64_t now_ms);

/* A PullImage for key succeeded: a pod asked to pull has pulled. False when no pod was asked. */
bool cri_verify_memory_pulled(cri_verify_memory *m, const uint8_t key[32], int64_t now_ms);

#endif
