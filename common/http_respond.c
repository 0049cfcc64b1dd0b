/* SPDX-License-Identifier: Apache-2.0 */
#include "http_respond.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum MHD_Result pg_http_respond(struct MHD_Connection *c, unsigned int status,
                                const char *content_type, char *body)
{
    if (!body)
        return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result pg_http_respond_metrics(struct MHD_Connection *c, pg_metrics *reg)
{
    char *text = pg_metrics_render(reg, NULL);
    if (!text)
        return pg_http_respond(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain",
                               strdup("out of memory\n"));
    return pg_http_respond(c, MHD_HTTP_OK, PG_METRICS_CONTENT_TYPE, text);
}

int pg_http_parse_address(const char *text, struct sockaddr_storage *ss)
{
    char host[128];
    const char *colon = strrchr(text, ':');
    if (!colon || (size_t)(colon - text) >= sizeof host || !colon[1])
        return -1;
    size_t n = (size_t)(colon - text);
    memcpy(host, text, n);
    host[n] = '\0';
    char *h = host;
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host[n - 1] = '\0';
        h++;
    }
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(h, colon + 1, &hints, &ai) != 0 || !ai)
        return -1;
    memset(ss, 0, sizeof *ss);
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    return 0;
}

/* libmicrohttpd's own format strings: the pragma is scoped to this adapter. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
void pg_http_log_text(char *text, size_t size, const char *fmt, va_list ap)
{
    vsnprintf(text, size, fmt, ap);
    size_t n = strlen(text);
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        text[--n] = '\0';
}
#pragma GCC diagnostic pop
