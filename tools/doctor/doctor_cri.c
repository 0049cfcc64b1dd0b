/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The doctor's one CRI call, runtime.v1.RuntimeService/Version, made with gRPC's
 * C core (as pullgate-cri does) and decoded with protobuf-c. Through
 * pullgate-cri it proves the whole path the kubelet uses: the proxy answers and
 * the runtime behind it answers (the proxy forwards Version unchanged).
 */
#include "cri_version.pb-c.h"
#include "doctor.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <string.h>

#define VERSION_METHOD "/runtime.v1.RuntimeService/Version"
#define MAX_REPLY_BYTES (64u << 10)

static grpc_op op(grpc_op_type type)
{
    grpc_op o;
    memset(&o, 0, sizeof o);
    o.op = type;
    return o;
}

static grpc_slice flatten(grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return grpc_empty_slice();
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    return s;
}

static void describe(grpc_slice answer, char *out, size_t n)
{
    Runtime__V1__VersionResponse *v =
        GRPC_SLICE_LENGTH(answer) <= MAX_REPLY_BYTES
            ? runtime__v1__version_response__unpack(NULL, GRPC_SLICE_LENGTH(answer),
                                                    GRPC_SLICE_START_PTR(answer))
            : NULL;
    if (!v) {
        snprintf(out, n, "an answer that is not a VersionResponse");
        return;
    }
    snprintf(out, n, "%.64s %.64s, CRI %.32s", v->runtime_name, v->runtime_version,
             v->runtime_api_version);
    runtime__v1__version_response__free_unpacked(v, NULL);
}

/* One unary call on channel; the status and details into *status / why. */
static int call_version(grpc_channel *channel, int timeout_ms, grpc_slice *answer,
                        grpc_status_code *status, char *why, size_t why_n)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
    grpc_call *gc = grpc_channel_create_call(channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                             grpc_slice_from_static_string(VERSION_METHOD), NULL,
                                             deadline, NULL);
    grpc_slice payload = grpc_empty_slice(); /* VersionRequest{}: every field empty */
    grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&payload, 1), *recv = NULL;
    grpc_metadata_array initial, trailing;
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6] = {op(GRPC_OP_SEND_INITIAL_METADATA),  op(GRPC_OP_SEND_MESSAGE),
                      op(GRPC_OP_SEND_CLOSE_FROM_CLIENT), op(GRPC_OP_RECV_INITIAL_METADATA),
                      op(GRPC_OP_RECV_MESSAGE),           op(GRPC_OP_RECV_STATUS_ON_CLIENT)};
    ops[1].data.send_message.send_message = send;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
    ops[4].data.recv_message.recv_message = &recv;
    ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
    ops[5].data.recv_status_on_client.status = status;
    ops[5].data.recv_status_on_client.status_details = &details;
    int rc = -1;
    *status = GRPC_STATUS_UNKNOWN;
    if (grpc_call_start_batch(gc, ops, 6, gc, NULL) == GRPC_CALL_OK) {
        /* The call's own deadline ends it; the queue then always delivers the tag. */
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_OP_COMPLETE && ev.success && *status == GRPC_STATUS_OK && recv) {
            *answer = flatten(recv);
            rc = 0;
        } else {
            snprintf(why, why_n, "status %d: %.*s", (int)*status,
                     (int)(GRPC_SLICE_LENGTH(details) > 300 ? 300 : GRPC_SLICE_LENGTH(details)),
                     (const char *)GRPC_SLICE_START_PTR(details));
        }
    } else {
        snprintf(why, why_n, "the call could not be started");
    }
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    if (recv)
        grpc_byte_buffer_destroy(recv);
    grpc_byte_buffer_destroy(send);
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    grpc_call_unref(gc);
    grpc_completion_queue_destroy(cq);
    return rc;
}

int pgd_cri_version(const char *endpoint, int timeout_ms, char *out, size_t n, char *why,
                    size_t why_n)
{
    out[0] = why[0] = '\0';
    if (strncmp(endpoint, "unix://", 7) != 0 || endpoint[7] != '/') {
        snprintf(why, why_n, "not a unix:///absolute/path endpoint");
        return -1;
    }
    grpc_init();
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *channel = grpc_channel_create(endpoint, creds, NULL);
    grpc_channel_credentials_release(creds);
    grpc_slice answer = grpc_empty_slice();
    grpc_status_code status;
    int rc = call_version(channel, timeout_ms, &answer, &status, why, why_n);
    if (rc == 0)
        describe(answer, out, n);
    grpc_slice_unref(answer);
    grpc_channel_destroy(channel);
    grpc_shutdown();
    return rc;
}
