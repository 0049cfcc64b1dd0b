/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pruning records from the truth (cri/README.md, "Prune from the truth"): the records of
 * images the configured runtime no longer lists are deleted. A listing that fails prunes
 * nothing; an empty one nothing unless forced (a runtime that lost its store, or the wrong
 * socket, must not wipe every record: where the runtime names image IDs a deleted record
 * makes an image look preloaded); records younger than CRI_PRUNE_MIN_AGE_S are kept.
 */
#ifndef PULLGATE_CRI_PRUNE_H
#define PULLGATE_CRI_PRUNE_H

#include "grpc_util.h"
#include "internal.h"

#define CRI_PRUNE_MIN_AGE_S 3600
#define CRI_PRUNE_LIST_MS 30000

/*
 * Every identity the runtime behind ch holds an image under (ListImages: IDs in
 * both spellings, repo tags, repo digests) or runs a container of
 * (ListContainers: image_ref, image), runtime.v1 first, then runtime.v1alpha2.
 * *in_use is NULL-terminated (pg_strv_free); *n_images the images listed.
 * PG_ERR_IO (the runtime did not answer) or PG_ERR_INVALID (an answer that
 * does not decode): nothing may be pruned then.
 */
int cri_prune_list(grpc_channel *ch, int timeout_ms, char ***in_use, size_t *n_images,
                   pg_error *err);

/* Whether a listing of n_images may prune: 1, or 0 with *why (static text). */
int cri_prune_allowed(size_t n_images, bool force, const char **why);

/*
 * pg_store_prune, then the read-only directories' names caches refreshed (best effort). Runs
 * on the caller's thread, never the record writer's: the store takes its lock only in short
 * steps, so pulls queued behind the writer wait milliseconds, not the whole prune.
 */
int cri_prune_records(pg_store *store, char **in_use, time_t before, unsigned *pruned,
                      pg_error *err);

/* pullgate-cri's own prune on its own thread, every interval_s, and on cri_pruner_kick; store
 * is shared with the writer and the decider (a pg_store may be shared by threads). */
typedef struct cri_pruner cri_pruner;
cri_pruner *cri_pruner_start(const char *runtime_endpoint, pg_store *store, int64_t interval_s,
                             pg_error *err);
/* Prunes now (async-signal-unsafe: call from a normal thread). */
void cri_pruner_kick(cri_pruner *p);
/* 1 when stopped and freed, 0 when it is stuck (left to exit). */
int cri_pruner_stop(cri_pruner *p, int timeout_ms);

#endif
