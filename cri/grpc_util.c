/* SPDX-License-Identifier: Apache-2.0 */
#include "grpc_util.h"

#include "cri_metrics.h"
#include "internal.h"
#include "log.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <grpc/slice_buffer.h>
#include <openssl/crypto.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RECONNECT_BACKOFF_MS 1000

grpc_op cri_op(grpc_op_type type)
{
    grpc_op o;
    memset(&o, 0, sizeof o);
    o.op = type;
    return o;
}

size_t cri_answer_ops(grpc_op ops[3], grpc_status_code code, grpc_slice *details,
                      grpc_metadata *initial, size_t n_initial, grpc_metadata *trailing,
                      size_t n_trailing, grpc_byte_buffer *message)
{
    size_t n = 0;
    ops[n] = cri_op(GRPC_OP_SEND_INITIAL_METADATA);
    ops[n].data.send_initial_metadata.count = n_initial;
    ops[n].data.send_initial_metadata.metadata = initial;
    n++;
    if (message) {
        ops[n] = cri_op(GRPC_OP_SEND_MESSAGE);
        ops[n].data.send_message.send_message = message;
        n++;
    }
    ops[n] = cri_op(GRPC_OP_SEND_STATUS_FROM_SERVER);
    ops[n].data.send_status_from_server.status = code;
    ops[n].data.send_status_from_server.status_details = details;
    ops[n].data.send_status_from_server.trailing_metadata_count = n_trailing;
    ops[n].data.send_status_from_server.trailing_metadata = trailing;
    return n + 1;
}

/* The code names are cri_metric_codes' (the metrics' code label): one table, indexed by code. */
const char *cri_status_name(grpc_status_code s)
{
    return (unsigned)s <= GRPC_STATUS_UNAUTHENTICATED ? cri_metric_codes[s] : "?";
}

void cri_log_call_end(const char *method, grpc_status_code status, int64_t start_ms, int delivered)
{
    if (!cri_log_enabled(CRI_LOG_DEBUG)) /* every call ends here: no formatting for nothing */
        return;
    char code[16], ms[24];
    snprintf(code, sizeof code, "%d", (int)status);
    snprintf(ms, sizeof ms, "%lld", (long long)(pg_monotonic_ms() - start_ms));
    cri_log(CRI_LOG_DEBUG, "call", "method", method, "code", code, "status",
            cri_status_name(status), "delivered", delivered ? "yes" : "no", "durationMs", ms, NULL);
}

static bool slice_eq(grpc_slice s, const char *text)
{
    size_t n = strlen(text);
    return GRPC_SLICE_LENGTH(s) == n && memcmp(GRPC_SLICE_START_PTR(s), text, n) == 0;
}

/*
 * Headers that belong to the HTTP/2 and gRPC transport of one hop, not to
 * the application: gRPC core generates them for the next hop itself (and
 * refuses some of them from an application). Everything else is forwarded.
 */
static bool forwardable(grpc_slice key)
{
    static const char *const hop[] = {"te",
                                      "content-type",
                                      "user-agent",
                                      "host",
                                      "grpc-timeout",
                                      "grpc-encoding",
                                      "grpc-accept-encoding",
                                      "accept-encoding",
                                      "content-encoding",
                                      "grpc-status",
                                      "grpc-message",
                                      "grpc-previous-rpc-attempts",
                                      "grpc-retry-pushback-ms",
                                      NULL};
    if (GRPC_SLICE_LENGTH(key) == 0 || GRPC_SLICE_START_PTR(key)[0] == ':')
        return false;
    if (GRPC_SLICE_LENGTH(key) > 14 && memcmp(GRPC_SLICE_START_PTR(key), "grpc-internal-", 14) == 0)
        return false;
    for (size_t i = 0; hop[i]; i++)
        if (slice_eq(key, hop[i]))
            return false;
    return true;
}

void cri_filter_md(const grpc_metadata_array *md, grpc_metadata **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (md->count == 0 || !(*out = calloc(md->count, sizeof **out)))
        return; /* out of memory: forward no metadata rather than fail the call */
    for (size_t i = 0; i < md->count; i++)
        if (forwardable(md->metadata[i].key))
            (*out)[(*n)++] = md->metadata[i];
}

grpc_slice cri_flatten(grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader r;
    if (!bb || !grpc_byte_buffer_reader_init(&r, bb))
        return grpc_empty_slice();
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    return s;
}

void cri_slice_wipe(grpc_slice s)
{
    if (GRPC_SLICE_LENGTH(s))
        OPENSSL_cleanse(GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s));
}

void cri_byte_buffer_wipe_destroy(grpc_byte_buffer *bb)
{
    if (!bb)
        return;
    if (bb->type == GRPC_BB_RAW)
        for (size_t i = 0; i < bb->data.raw.slice_buffer.count; i++)
            cri_slice_wipe(bb->data.raw.slice_buffer.slices[i]);
    grpc_byte_buffer_destroy(bb);
}

grpc_arg cri_int_arg(const char *key, int value)
{
    grpc_arg a = {.type = GRPC_ARG_INTEGER, .key = (char *)key};
    a.value.integer = value;
    return a;
}

grpc_channel *cri_runtime_channel(const char *target)
{
    /* No channelz bookkeeping, no HTTP proxy lookup for a unix socket. The
     * retry layer stays (cri/README.md "Cost": it costs 1-2 %, and it retries
     * a call lost in a GOAWAY race transparently, as the kubelet's own gRPC
     * does towards a runtime). A restarted runtime is found again within a
     * second, not after gRPC's 120 s backoff cap. */
    grpc_arg args[] = {
        cri_int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, CRI_MAX_MESSAGE_BYTES),
        cri_int_arg(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, CRI_MAX_MESSAGE_BYTES),
        cri_int_arg(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, MAX_RECONNECT_BACKOFF_MS),
        {.type = GRPC_ARG_STRING,
         .key = (char *)GRPC_ARG_PRIMARY_USER_AGENT_STRING,
         .value.string = (char *)"pullgate-cri/" PG_VERSION_STRING},
        cri_int_arg(GRPC_ARG_ENABLE_CHANNELZ, 0),
        cri_int_arg(GRPC_ARG_ENABLE_HTTP_PROXY, 0),
    };
    grpc_channel_args ca = {sizeof args / sizeof args[0], args};
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, creds, &ca);
    grpc_channel_credentials_release(creds);
    return ch;
}

void cri_relay_init(cri_relay *r, grpc_call *incoming, grpc_call_details *details,
                    grpc_metadata_array *md)
{
    r->down = incoming;
    r->details = *details;
    r->client_md = *md;
    r->status_details = grpc_empty_slice();
    grpc_metadata_array_init(&r->up_initial_md);
    grpc_metadata_array_init(&r->up_trailing_md);
    memset(details, 0, sizeof *details);
    memset(md, 0, sizeof *md);
    cri_filter_md(&r->client_md, &r->fwd_md, &r->n_fwd_md);
}

grpc_call *cri_relay_start_up(cri_relay *r, grpc_channel *channel, grpc_completion_queue *cq)
{
    const grpc_slice *host = GRPC_SLICE_LENGTH(r->details.host) ? &r->details.host : NULL;
    r->up = grpc_channel_create_call(channel, r->down, GRPC_PROPAGATE_DEFAULTS, cq,
                                     r->details.method, host, r->details.deadline, NULL);
    return r->up;
}

void cri_relay_release(cri_relay *r)
{
    free(r->fwd_md);
    free(r->fwd_initial);
    free(r->fwd_trailing);
    grpc_metadata_array_destroy(&r->client_md);
    grpc_metadata_array_destroy(&r->up_initial_md);
    grpc_metadata_array_destroy(&r->up_trailing_md);
    grpc_slice_unref(r->status_details);
    if (r->up)
        grpc_call_unref(r->up);
    if (r->down)
        grpc_call_unref(r->down);
    grpc_call_details_destroy(&r->details);
}
