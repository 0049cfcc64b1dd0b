/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Files the webhook re-reads when they change: the service-account token
 * (projected tokens rotate), the serving certificate and key (cert-manager
 * rotates them) and the annotation HMAC key. Kubernetes volumes publish them
 * through symlinks (..data/...) swapped atomically, so these helpers follow
 * symlinks and compare the identity of the file behind them.
 */
#ifndef PULLGATE_WEBHOOK_FILES_H
#define PULLGATE_WEBHOOK_FILES_H

#include "annotation_mac.h"

#include <stddef.h>
#include <sys/types.h>
#include <time.h>

typedef struct wh_file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} wh_file_id;

/* The identity of the file path names now (symlinks followed); -1 with errno on failure. */
int wh_file_id_of(const char *path, wh_file_id *id);
int wh_file_id_equal(const wh_file_id *a, const wh_file_id *b);

/*
 * Reads a regular file of at most max bytes (symlinks followed, O_NONBLOCK so
 * a FIFO cannot block), NUL-terminated. private_ refuses a file any "other"
 * user may read or any group may write (PG_ERR_UNSAFE). *buf is malloc'd; wipe
 * it (OPENSSL_cleanse) before free when secret. Nothing is kept on failure.
 */
int wh_read_file(const char *path, size_t max, int private_, char **buf, size_t *len,
                 pg_error *err);

/* The annotation key (a Secret volume: symlinks followed, no access for others): a
 * pg_key_loader for the holder that reloads it when it changes (common/keyholder.h). */
int wh_load_key(const char *path, pg_mac_key **out, pg_error *err);

#endif
