/* SPDX-License-Identifier: Apache-2.0 */
#include "call.h"

#include "cri_metrics.h"
#include "grpc_unary.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ batches */

/* The event loop's side: the completion becomes a task on the worker. */
static void post_completion(void *arg, int ok)
{
    cri_call_event *ev = arg;
    ev->task.ok = ok;
    cri_worker_post(ev->worker, &ev->task);
}

/* The event loop's side of a call that lives there: the task runs at once. */
static void run_completion(void *arg, int ok)
{
    cri_call_event *ev = arg;
    ev->task.ok = ok;
    ev->task.fn(&ev->task);
}

void cri_call_set_event(cri_call *c, cri_call_event *ev, cri_task_fn fn)
{
    ev->tag.fn = c->on_loop ? run_completion : post_completion;
    ev->tag.arg = ev;
    ev->task.fn = fn;
    ev->task.owner = c->owner;
    ev->worker = c->on_loop ? NULL : c->worker;
}

bool cri_call_start_batch(cri_call *c, grpc_call *gc, const grpc_op *ops, size_t n,
                          cri_call_event *ev)
{
    grpc_call_error e = grpc_call_start_batch(gc, ops, n, &ev->tag, NULL);
    if (e != GRPC_CALL_OK) {
        cri_log(CRI_LOG_ERROR, "grpc batch refused", "method", c->name, "error",
                grpc_call_error_to_string(e), NULL);
        return false;
    }
    c->outstanding++;
    return true;
}

void cri_call_batch_done(cri_call *c) { c->outstanding--; }

/* ------------------------------------------------------------ lifetime */

void cri_call_refuse_unallocated(grpc_call *incoming, grpc_call_details *details,
                                 grpc_metadata_array *md)
{
    grpc_call_cancel_with_status(incoming, GRPC_STATUS_RESOURCE_EXHAUSTED,
                                 "pullgate: out of memory", NULL);
    grpc_call_unref(incoming);
    grpc_call_details_destroy(details);
    grpc_metadata_array_destroy(md);
}

void cri_call_init(cri_call *c, void *owner, const cri_call_kind *kind, cri_worker *worker,
                   grpc_call *incoming, grpc_call_details *details, grpc_metadata_array *md)
{
    c->owner = owner;
    c->worker = worker;
    c->on_loop = kind->on_loop;
    c->start_ms = pg_monotonic_ms();
    c->start_us = pg_metrics_now_us();
    size_t mlen = GRPC_SLICE_LENGTH(details->method);
    if (mlen >= sizeof c->method_text)
        mlen = sizeof c->method_text - 1;
    memcpy(c->method_text, GRPC_SLICE_START_PTR(details->method), mlen);
    c->method_text[mlen] = '\0';
    c->name = kind->name ? kind->name : c->method_text;
    cri_relay_init(&c->r, incoming, details, md);
    c->answer_details = grpc_empty_slice();
    cri_call_set_event(c, &c->ev_recv, kind->received);
    cri_call_set_event(c, &c->ev_closed, kind->closed);
    cri_call_set_event(c, &c->ev_up, kind->upstream);
    cri_call_set_event(c, &c->ev_final, kind->answered);
}

void cri_call_drop_request(cri_call *c)
{
    cri_byte_buffer_wipe_destroy(c->request);
    cri_byte_buffer_wipe_destroy(c->recv_bb);
    c->request = c->recv_bb = NULL;
}

void cri_call_release(cri_call *c)
{
    cri_call_drop_request(c);
    if (c->response)
        grpc_byte_buffer_destroy(c->response);
    cri_relay_release(&c->r);
    grpc_slice_unref(c->answer_details);
}

/* ------------------------------------------------------------ receiving */

bool cri_call_receive_next(cri_call *c)
{
    grpc_op o = cri_op(GRPC_OP_RECV_MESSAGE);
    o.data.recv_message.recv_message = &c->recv_bb;
    return cri_call_start_batch(c, c->r.down, &o, 1, &c->ev_recv);
}

bool cri_call_start_receiving(cri_call *c)
{
    grpc_op o = cri_op(GRPC_OP_RECV_CLOSE_ON_SERVER);
    o.data.recv_close_on_server.cancelled = &c->r.down_cancelled;
    cri_call_start_batch(c, c->r.down, &o, 1, &c->ev_closed);
    return cri_call_receive_next(c);
}

cri_call_receipt cri_call_received(cri_call *c, int ok)
{
    c->outstanding--;
    grpc_byte_buffer *bb = c->recv_bb;
    c->recv_bb = NULL;
    if (!ok || !bb) {
        cri_byte_buffer_wipe_destroy(bb);
        return c->request ? CRI_CALL_RECV_END : CRI_CALL_RECV_NONE;
    }
    if (++c->n_messages == 1) {
        c->request = bb;
        return CRI_CALL_RECV_REQUEST;
    }
    cri_byte_buffer_wipe_destroy(bb);
    return CRI_CALL_RECV_EXTRA;
}

/* ------------------------------------------------------------ the runtime */

bool cri_call_forward(cri_call *c, grpc_channel *channel, grpc_completion_queue *cq)
{
    if (!cri_relay_start_up(&c->r, channel, cq))
        return false;
    grpc_op ops[6];
    pg_grpc_unary_answer into = {&c->r.up_initial_md, &c->response, &c->r.up_trailing_md, &c->r.status,
                                 &c->r.status_details};
    pg_grpc_unary_ops(ops, c->r.fwd_md, c->r.n_fwd_md, c->request, &into);
    if (c->request)
        return cri_call_start_batch(c, c->r.up, ops, 6, &c->ev_up);
    /* No request message: everything but SEND_MESSAGE (ops[1]), which needs one. */
    memmove(&ops[1], &ops[2], 4 * sizeof ops[0]);
    return cri_call_start_batch(c, c->r.up, ops, 5, &c->ev_up);
}

void cri_call_upstream_done(cri_call *c, int ok)
{
    c->outstanding--;
    cri_filter_md(&c->r.up_initial_md, &c->r.fwd_initial, &c->r.n_fwd_initial);
    cri_filter_md(&c->r.up_trailing_md, &c->r.fwd_trailing, &c->r.n_fwd_trailing);
    if (!ok && c->r.status == GRPC_STATUS_OK)
        c->r.status = GRPC_STATUS_UNKNOWN;
}

/* ------------------------------------------------------------ answers */

static void send_final(cri_call *c, grpc_status_code code, grpc_slice *details,
                       grpc_metadata *initial, size_t n_initial, grpc_metadata *trailing,
                       size_t n_trailing, grpc_byte_buffer *message)
{
    c->answering = true;
    cri_metric_call(c->method_text, (int)code, (double)(pg_metrics_now_us() - c->start_us) / 1e6);
    grpc_op ops[3];
    size_t n =
        cri_answer_ops(ops, code, details, initial, n_initial, trailing, n_trailing, message);
    if (!cri_call_start_batch(c, c->r.down, ops, n, &c->ev_final))
        c->answered_ok = true; /* nothing more will come for it */
}

void cri_call_relay(cri_call *c) { cri_call_relay_as(c, c->r.status, c->response); }

void cri_call_relay_as(cri_call *c, grpc_status_code code, grpc_byte_buffer *message)
{
    send_final(c, code, &c->r.status_details, c->r.fwd_initial, c->r.n_fwd_initial, c->r.fwd_trailing,
               c->r.n_fwd_trailing, message);
}

void cri_call_answer_status(cri_call *c, grpc_status_code code, const char *text)
{
    grpc_slice_unref(c->answer_details);
    c->answer_details = grpc_slice_from_copied_string(text);
    send_final(c, code, &c->answer_details, NULL, 0, NULL, 0, NULL);
}

void cri_call_answered(cri_call *c)
{
    c->outstanding--;
    c->answered_ok = true;
}

bool cri_call_finished(const cri_call *c)
{
    return c->answering && c->answered_ok && c->outstanding == 0;
}
