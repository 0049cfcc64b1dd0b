/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One HTTP answer through libmicrohttpd, shared by the daemons' listeners
 * (pullgate-webhook's admission and health ports, pullgate-cri's /metrics).
 */
#ifndef PULLGATE_COMMON_HTTP_RESPOND_H
#define PULLGATE_COMMON_HTTP_RESPOND_H

#include <microhttpd.h>

/*
 * Queues status with body (a malloc'd, NUL-terminated string; ownership passes
 * here in every case, freed by libmicrohttpd once sent) as content_type.
 * MHD_NO, which closes the connection, when body is NULL (the caller's
 * allocation failed) or the response cannot be made.
 */
enum MHD_Result pg_http_respond(struct MHD_Connection *c, unsigned int status,
                                const char *content_type, char *body);

#endif
