/* SPDX-License-Identifier: Apache-2.0 */
#include "grpc_unary.h"

#include "internal.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/support/time.h>
#include <stdbool.h>
#include <string.h>

#define DETAILS_SHOWN 300

static grpc_op op_of(grpc_op_type type)
{
    grpc_op o;
    memset(&o, 0, sizeof o);
    o.op = type;
    return o;
}

void pg_grpc_unary_ops(grpc_op ops[6], grpc_metadata *md, size_t n_md, grpc_byte_buffer *request,
                       const pg_grpc_unary_answer *into)
{
    static const grpc_op_type types[6] = {
        GRPC_OP_SEND_INITIAL_METADATA, GRPC_OP_SEND_MESSAGE, GRPC_OP_SEND_CLOSE_FROM_CLIENT,
        GRPC_OP_RECV_INITIAL_METADATA, GRPC_OP_RECV_MESSAGE, GRPC_OP_RECV_STATUS_ON_CLIENT};
    for (size_t i = 0; i < 6; i++)
        ops[i] = op_of(types[i]);
    ops[0].data.send_initial_metadata.count = n_md;
    ops[0].data.send_initial_metadata.metadata = md;
    ops[1].data.send_message.send_message = request;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = into->initial;
    ops[4].data.recv_message.recv_message = into->message;
    ops[5].data.recv_status_on_client.trailing_metadata = into->trailing;
    ops[5].data.recv_status_on_client.status = into->status;
    ops[5].data.recv_status_on_client.status_details = into->details;
}

static grpc_slice whole_payload(grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return grpc_empty_slice();
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    return s;
}

static int call_failure(bool started, grpc_status_code status, grpc_slice details, pg_error *err)
{
    if (!started)
        return pg_fail(err, PG_ERR_IO, "the call could not be started");
    size_t len = GRPC_SLICE_LENGTH(details);
    if (status == GRPC_STATUS_OK)
        return pg_fail(err, PG_ERR_IO, "status 0 without a response message");
    return pg_fail(err, status == GRPC_STATUS_DEADLINE_EXCEEDED ? PG_ERR_TIMEOUT : PG_ERR_IO,
                   "status %d: %.*s", (int)status, (int)(len > DETAILS_SHOWN ? DETAILS_SHOWN : len),
                   (const char *)GRPC_SLICE_START_PTR(details));
}

/* Shuts the queue down and takes what is left, so that it can be destroyed. */
static void drain(grpc_completion_queue *cq)
{
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
}

int pg_grpc_unary_call(grpc_channel *ch, const char *method, const void *req, size_t req_len,
                       int timeout_ms, grpc_slice *answer, grpc_status_code *status, pg_error *err)
{
    *answer = grpc_empty_slice();
    *status = GRPC_STATUS_UNKNOWN;
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    if (!cq)
        return call_failure(false, *status, grpc_empty_slice(), err);
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
    grpc_slice m = grpc_slice_from_copied_string(method);
    grpc_call *gc =
        grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL, deadline, NULL);
    grpc_slice_unref(m);
    grpc_slice payload = grpc_slice_from_copied_buffer(req, req_len);
    grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&payload, 1), *recv = NULL;
    grpc_slice_unref(payload);
    grpc_metadata_array initial, trailing;
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6];
    pg_grpc_unary_answer into = {&initial, &recv, &trailing, status, &details};
    pg_grpc_unary_ops(ops, NULL, 0, send, &into);
    int rc = PG_ERR_IO;
    bool started = gc && grpc_call_start_batch(gc, ops, 6, gc, NULL) == GRPC_CALL_OK;
    if (started) {
        /* The call's own deadline ends it; the queue then always delivers the tag. */
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_OP_COMPLETE && ev.success && *status == GRPC_STATUS_OK && recv) {
            *answer = whole_payload(recv);
            rc = PG_OK;
        }
    }
    if (rc != PG_OK)
        rc = call_failure(started, *status, details, err);
    drain(cq);
    if (recv)
        grpc_byte_buffer_destroy(recv);
    grpc_byte_buffer_destroy(send);
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    if (gc)
        grpc_call_unref(gc);
    grpc_completion_queue_destroy(cq);
    return rc;
}
