/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime the records were made against: pullgate-cri writes the runtime endpoint it
 * forwards to into its state directory when it starts (CRI_RUNTIME_MARK), and
 * `pullgate-cri --prune` (the packaged hourly pullgate-prune) prunes only against that same
 * runtime. One source of truth for the endpoint: a prune that would list another runtime
 * (the config naming one, a drop-in giving the daemon another) refuses, since every record
 * of an image the other runtime lacks would be deleted while the image is still in the
 * daemon's runtime, where it would then count as preloaded (docs/interfaces.md §10).
 */
#ifndef PULLGATE_CRI_RUNTIME_MARK_H
#define PULLGATE_CRI_RUNTIME_MARK_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>

#define CRI_RUNTIME_MARK "pullgate-cri-runtime" /* in stateDir; never read by a kubelet */
#define CRI_RUNTIME_MARK_MAX 4096

/* Writes endpoint into state_dir/CRI_RUNTIME_MARK, atomically and durably (0600). */
int cri_runtime_mark_write(const char *state_dir, const char *endpoint, pg_error *err);

/*
 * Whether a prune listing `endpoint` may prune the records of state_dir: PG_OK, or a code
 * whose message says both endpoints. explicit_endpoint: the endpoint was given on the command
 * line (--runtime-endpoint), which is taken when no daemon recorded one.
 */
int cri_runtime_mark_check(const char *state_dir, const char *endpoint, bool explicit_endpoint,
                           pg_error *err);

#endif
