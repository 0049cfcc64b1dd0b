/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the daemons' libmicrohttpd listeners share (pullgate-webhook's
 * admission and health ports, pullgate-cri's /metrics): one HTTP answer, the
 * metrics answer, the listen address, and libmicrohttpd's log lines.
 */
#ifndef PULLGATE_COMMON_HTTP_RESPOND_H
#define PULLGATE_COMMON_HTTP_RESPOND_H

#include "metrics.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <sys/socket.h>

/*
 * Queues status with body (a malloc'd, NUL-terminated string; ownership passes
 * here in every case, freed by libmicrohttpd once sent) as content_type.
 * MHD_NO, which closes the connection, when body is NULL (the caller's
 * allocation failed) or the response cannot be made.
 */
enum MHD_Result pg_http_respond(struct MHD_Connection *c, unsigned int status,
                                const char *content_type, char *body);
/* GET /metrics: reg's exposition text (500 when memory runs out). */
enum MHD_Result pg_http_respond_metrics(struct MHD_Connection *c, pg_metrics *reg);

/* "ADDR:PORT" or "[V6ADDR]:PORT", numeric only (no name is resolved), into ss: 0, or -1. */
int pg_http_parse_address(const char *text, struct sockaddr_storage *ss);

/* One of libmicrohttpd's log lines (its format fmt and ap) as one line of text. */
void pg_http_log_text(char *text, size_t size, const char *fmt, va_list ap);

#endif
