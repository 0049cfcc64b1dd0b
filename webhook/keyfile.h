/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How the webhook reads its annotation key (a Secret volume: symlinks followed, no access for
 * others), for the shared holder that reloads it when it changes (common/keyholder.h).
 */
#ifndef PULLGATE_WEBHOOK_KEYFILE_H
#define PULLGATE_WEBHOOK_KEYFILE_H

#include "keyholder.h"

/* A pg_key_loader. */
int wh_load_key(const char *path, pg_mac_key **out, char *msg, size_t msg_size);
/* A pg_key_logger: the webhook's log. */
void wh_log_key(const char *level, const char *what, const char *detail);

#endif
