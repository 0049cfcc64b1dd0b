/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 3 of the record store (store_intent.c): intents and their counts in
 * the writable directory w.
 * Private to the record store (store_impl.h: the layers).
 */
#ifndef PULLGATE_STORE_INTENT_H
#define PULLGATE_STORE_INTENT_H

#include "store_fs.h"

/* Under the lock, image's intents (both spellings): take: count++ and the intents
 * written if absent, durable on return; else count--, at 0 they go (not synced:
 * a release lost in a crash leaves an intent, the strict side). */
int pg_st_intents(const record_dir *w, const char *api_version, const char *image, bool take,
                  pg_error *err);

#endif
