/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The annotation key (hmacKeyFile) of a long-running reader or producer, reloaded when it
 * changes: pullgate-webhook (which seals with it) and pullgate-cri (which opens pods' seals to
 * attribute pulls). The files behind the path and behind PATH.previous (the key a rotation
 * retired, docs/annotation-hmac.md) are compared with one stat() each before every use; a
 * change reloads through the program's own loader. A user holds a reference to the key it
 * started with, so a rotation never frees a key in use. A changed file that cannot be used
 * makes every later get fail (with why) until it is fixed: a program never goes on with a key
 * the administrator replaced. Thread-safe.
 */
#ifndef PULLGATE_COMMON_KEYHOLDER_H
#define PULLGATE_COMMON_KEYHOLDER_H

#include "annotation_mac.h"

#include <stddef.h>

typedef struct pg_keyholder pg_keyholder;
typedef struct pg_key_ref pg_key_ref;

/* Loads the key at path into *out; a failure's message never holds key material. */
typedef int (*pg_key_loader)(const char *path, pg_mac_key **out, pg_error *err);
/* Says that the key changed ("info") or became unusable ("error"); detail never holds key
 * material. */
typedef void (*pg_key_logger)(const char *level, const char *what, const char *detail);

/*
 * A holder for path, loaded now. NULL only when out of memory; a key that cannot be loaded
 * now leaves the holder in its error state (pg_keyholder_get fails with why) until the file
 * changes and loads.
 */
pg_keyholder *pg_keyholder_new(const char *path, pg_key_loader load, pg_key_logger log);
void pg_keyholder_free(pg_keyholder *h);

/* The current key (reloaded first if a file changed), or NULL with err (the last load's
 * failure). Release it. */
pg_key_ref *pg_keyholder_get(pg_keyholder *h, pg_error *err);
const pg_mac_key *pg_key_ref_key(const pg_key_ref *r);
void pg_key_ref_release(pg_key_ref *r);

#endif
