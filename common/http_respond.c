/* SPDX-License-Identifier: Apache-2.0 */
#include "http_respond.h"

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
