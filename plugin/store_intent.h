/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 3 of the record store (store_intent.c): intents and their counts.
 * Private to the record store (store_impl.h: the layers).
 */
#ifndef PULLGATE_STORE_INTENT_H
#define PULLGATE_STORE_INTENT_H

#include "store_fs.h"

/* Under the lock: count-- of image's intents (both spellings); at 0 they go. Not
 * synced: a release lost in a crash leaves an intent, the strict side. */
int pg_st_release_intents(const pg_store *s, const char *image, pg_error *err);

#endif
