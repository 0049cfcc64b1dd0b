/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One JSON object per line on stderr: {"time","level","msg", fields...}.
 * Lines are written whole under a lock, so concurrent requests never
 * interleave. Callers never pass secret material.
 */
#ifndef PULLGATE_WEBHOOK_WLOG_H
#define PULLGATE_WEBHOOK_WLOG_H

#include <jansson.h>

/* fields: borrowed, may be NULL; its members are copied into the line. */
void wh_log_fields(const char *level, const char *msg, const json_t *fields);
void wh_log(const char *level, const char *msg, const char *detail);

#endif
