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

#include "review.h"

typedef enum wh_secret_outcome {
    WH_SECRET_ADDED,   /* its entries that apply were added (possibly none) */
    WH_SECRET_SKIPPED, /* not a pull secret type: the kubelet ignores it too */
    WH_SECRET_FAILED   /* msg says why, by field name only */
} wh_secret_outcome;

/*
 * Matching a dockerconfig against the images costs its entries x the images (in
 * one library call, which no deadline interrupts: 14,000 entries x 256 images
 * took 2 s here). One review does at most this much of it, counted before each
 * call; a legitimate pod with 64 secrets of 10 entries and 256 images is 164k.
 */
#define WH_MAX_MATCHING 1000000u

/*
 * Adds the credentials of the pull secret ns/name (secret: the object from the
 * API, already checked to be that Secret) to a, for every image a holds.
 * *matching_left is what the review may still spend (WH_MAX_MATCHING at first).
 */
wh_secret_outcome wh_secret_add(pg_annotation *a, const char *ns, const char *name,
                                const json_t *secret, size_t *matching_left, char *msg,
                                size_t msg_size);

#endif
