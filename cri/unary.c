/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A unary CRI call relayed on the event loop (unary.h):
 *
 *   RECEIVING  the close (for the cancellation) and the request message
 *   FORWARDED  one batch up: the metadata, the request (none: none is sent) and the
 *              half-close; the runtime's headers, answer, status and trailers
 *   ANSWERING  one batch down: all of it, unchanged; DONE when every batch completed
 */
#include "unary.h"

#include "call.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct unary_call {
    cri_call c;
    grpc_channel *channel;
    grpc_completion_queue *cq;
} unary_call;

static void maybe_done(unary_call *u)
{
    if (!cri_call_finished(&u->c))
        return;
    cri_call_release(&u->c);
    free(u);
}

static void on_final(cri_task *t)
{
    unary_call *u = t->owner;
    cri_call_answered(&u->c);
    cri_log_call_end(u->c.method_text, u->c.r.status, u->c.start_ms, t->ok);
    maybe_done(u);
}

static void on_up(cri_task *t)
{
    unary_call *u = t->owner;
    cri_call_upstream_done(&u->c, t->ok);
    cri_call_relay(&u->c);
    maybe_done(u);
}

/* The request (or, after a half-close without one, the metadata and the half-close) goes up at
 * once; a call that ended before its request is not forwarded. */
static void on_recv(cri_task *t)
{
    unary_call *u = t->owner;
    cri_call_received(&u->c, t->ok);
    if (!t->ok)
        cri_call_answer_status(&u->c, GRPC_STATUS_CANCELLED,
                               "pullgate: the call ended before its request");
    else if (!cri_call_forward(&u->c, u->channel, u->cq))
        cri_call_answer_status(&u->c, GRPC_STATUS_UNAVAILABLE,
                               "pullgate: the runtime call could not be started");
    maybe_done(u);
}

/* The call's end: a client that gave up cancels the runtime's call too. The close is a batch
 * of its own, pending while the runtime works, rather than part of the answer's: with nothing
 * pending on the incoming call, a client's cancellation reached neither this call nor, through
 * the parent link, the runtime's (measured: test_cri_proxy_transparency, "a cancelled call ends
 * the runtime's call", failed with the close folded into the answer). */
static void on_closed(cri_task *t)
{
    unary_call *u = t->owner;
    cri_call_batch_done(&u->c);
    if (u->c.r.down_cancelled && u->c.r.up)
        grpc_call_cancel(u->c.r.up, NULL);
    maybe_done(u);
}

static const cri_call_kind unary_kind = {
    .name = NULL, /* the method's path */
    .on_loop = true,
    .received = on_recv,
    .closed = on_closed,
    .upstream = on_up,
    .answered = on_final,
};

void cri_unary_start(grpc_channel *channel, grpc_completion_queue *cq, grpc_call *incoming,
                     grpc_call_details *details, grpc_metadata_array *md)
{
    unary_call *u = calloc(1, sizeof *u);
    if (!u) {
        cri_call_refuse_unallocated(incoming, details, md);
        return;
    }
    cri_call_init(&u->c, u, &unary_kind, NULL, incoming, details, md);
    u->channel = channel;
    u->cq = cq;
    if (!cri_call_start_receiving(&u->c))
        cri_call_answer_status(&u->c, GRPC_STATUS_INTERNAL,
                               "pullgate: the request could not be received");
    maybe_done(u);
}
