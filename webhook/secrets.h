/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Everything the webhook does with the bytes of a pull secret, in one file
 * (secrets.c): the Secret object as the API returned it -> its dockerconfig
 * -> the annotation builder. Nothing derived from the secret's data reaches
 * a message: failures are described by field name and error code only.
 * Every buffer that held decoded data is wiped; the JSON holding the encoded
 * data is wiped by the allocator when the caller releases it (memory.h).
 */
#ifndef PULLGATE_WEBHOOK_SECRETS_H
#define PULLGATE_WEBHOOK_SECRETS_H

#include "annotation_build.h"
#include "skim.h"

#include <stdint.h>

/* Entries x images one review may match (a legitimate pod with 64 secrets of 10 entries and
 * 256 images is 164k): one library call that no deadline interrupts, started only when its
 * estimated duration ends before the deadline (docs/webhook.md, "Bounded", matching). */
#define WH_MAX_MATCHING 1000000u

typedef struct wh_matching {
    size_t left;         /* entries x images the review may still match */
    int64_t deadline_ms; /* the review's (pg_monotonic_ms()) */
} wh_matching;

/* Measures the cost of one entry x image on this machine (main, before serving). */
void wh_matching_calibrate(void);
/* The current estimate, picoseconds per entry x image (for the log). */
unsigned long long wh_matching_cost_ps(void);

/* 1 when secret (an object from the API) has a pull secret type; the kubelet ignores others. */
int wh_secret_is_pull_secret(const json_t *secret);

/*
 * Adds the credentials of the pull secret ns/name (secret: the object from the
 * API, already checked to be that Secret) to a, for every image a holds. The
 * message of a failure names the field only: PG_ERR_NOMEM when the memory
 * budget refuses its parse, PG_ERR_IO when the secret cannot be used (not a
 * pull secret, no uid, its data missing, not base64, not a docker config, more
 * entries than the review matches, or not matched in time): to the review, a
 * read that failed.
 */
int wh_secret_add(pg_annotation *a, const char *ns, const char *name, const json_t *secret,
                  wh_matching *m, pg_error *err);

#endif
