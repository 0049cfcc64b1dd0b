/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The annotation key (hmacKeyFile): read once at start, and again only when
 * the file behind its path changes (a rotated Secret volume swaps a symlink),
 * checked before every review with one stat(). A review holds a reference to
 * the key it started with, so a rotation never frees a key in use. When the
 * changed file is unusable, reviews are refused (with why) until it is fixed:
 * the webhook never goes on sealing with a key the administrator replaced.
 */
#ifndef PULLGATE_WEBHOOK_KEYHOLDER_H
#define PULLGATE_WEBHOOK_KEYHOLDER_H

#include "annotation_mac.h"

#include <stddef.h>

typedef struct wh_keyholder wh_keyholder;
typedef struct wh_key_ref wh_key_ref;

/* Loads path now; NULL with msg when it is unusable. */
wh_keyholder *wh_keyholder_new(const char *path, char *msg, size_t msg_size);
void wh_keyholder_free(wh_keyholder *h);

/* The current key (reloaded first if the file changed), or NULL with msg. Release it. */
wh_key_ref *wh_keyholder_get(wh_keyholder *h, char *msg, size_t msg_size);
const pg_mac_key *wh_key_ref_key(const wh_key_ref *r);
void wh_key_ref_release(wh_key_ref *r);

#endif
