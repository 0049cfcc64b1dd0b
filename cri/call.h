/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gRPC side of a unary call, shared by PullImage (intercept.c), ImageStatus
 * (verify.c) and the CRI's other unary methods (unary.c): the incoming call
 * taken over from the event loop, its request message, the forward to the
 * runtime with the incoming call as parent, the final answer, and the release
 * of every gRPC object. The state machine that decides what happens stays with
 * its owner, which embeds a cri_call. Where the completions of the call's
 * batches run is the kind's: on the event loop itself (on_loop: no thread
 * hand-off, every batch started from the loop), or posted by the loop to the
 * worker thread (worker.h) as the owner's tasks.
 */
#ifndef PULLGATE_CRI_CALL_H
#define PULLGATE_CRI_CALL_H

#include "grpc_util.h"
#include "worker.h"

#include <stdbool.h>
#include <stdint.h>

/* A gRPC completion, run on the event loop or routed to the worker. */
typedef struct cri_call_event {
    cri_tag tag;   /* what the event loop sees */
    cri_task task; /* what runs: task.owner is the call's owner */
    cri_worker *worker; /* NULL: the task runs on the event loop */
} cri_call_event;

/* What an owner runs when one of the call's own batches completes. */
typedef struct cri_call_kind {
    const char *name;     /* the method in the logs; NULL: the method's path */
    bool on_loop;         /* the handlers run on the event loop, not on the worker */
    cri_task_fn received; /* RECV_MESSAGE: starts with cri_call_received() */
    cri_task_fn closed;   /* RECV_CLOSE_ON_SERVER: starts with cri_call_batch_done() */
    cri_task_fn upstream; /* the forward's batch: starts with cri_call_upstream_done() */
    cri_task_fn answered; /* the final batch: starts with cri_call_answered() */
} cri_call_kind;

typedef struct cri_call {
    void *owner;
    cri_worker *worker; /* outlives the proxy (stopped after the record writer) */
    bool on_loop;       /* the kind's: completions run on the event loop */
    const char *name;
    char method_text[256]; /* for the calls metric and the logs */
    int64_t start_ms;     /* the logs' durationMs */
    long long start_us;   /* the calls metric: microseconds, a proxied call takes < 1 ms */
    int outstanding; /* gRPC batches in flight */
    bool answering, answered_ok;
    cri_relay r; /* both ends, the metadata and the runtime's status */
    /* receiving */
    grpc_byte_buffer *recv_bb;
    grpc_byte_buffer *request; /* the one request message */
    unsigned n_messages;
    grpc_byte_buffer *response; /* the runtime's answer */
    /* our own answer's status message */
    grpc_slice answer_details;
    cri_call_event ev_recv, ev_closed, ev_up, ev_final;
} cri_call;

/*
 * When the owner cannot be allocated: the incoming call is answered
 * RESOURCE_EXHAUSTED and released with its details and metadata.
 */
void cri_call_refuse_unallocated(grpc_call *incoming, grpc_call_details *details,
                                 grpc_metadata_array *md);

/*
 * Takes over an incoming call, its details and metadata (all moved: the caller
 * keeps nothing) into c, zeroed by the owner's allocation; the completions of
 * the call's batches run kind's handlers with owner as their task's owner, on
 * the event loop when kind->on_loop (worker may then be NULL), else on worker.
 */
void cri_call_init(cri_call *c, void *owner, const cri_call_kind *kind, cri_worker *worker,
                   grpc_call *incoming, grpc_call_details *details, grpc_metadata_array *md);

/* An event of the owner's own (another call's batch), run where c's run. */
void cri_call_set_event(cri_call *c, cri_call_event *ev, cri_task_fn fn);
/* Starts a batch on gc counted in c->outstanding; false (logged) when gRPC refuses it. */
bool cri_call_start_batch(cri_call *c, grpc_call *gc, const grpc_op *ops, size_t n,
                          cri_call_event *ev);
/* A completion of the owner's own batch, or of RECV_CLOSE_ON_SERVER. */
void cri_call_batch_done(cri_call *c);

/* ------------------------------------------------------------ receiving */

/*
 * Waits for the call's end (r.down_cancelled) and receives the first message;
 * false when that receive cannot start.
 */
bool cri_call_start_receiving(cri_call *c);
/* The next message, or the half-close; false when it cannot start. */
bool cri_call_receive_next(cri_call *c);

typedef enum cri_call_receipt {
    CRI_CALL_RECV_REQUEST, /* the first message: c->request */
    CRI_CALL_RECV_END,     /* the half-close (or a failed read) after the request */
    CRI_CALL_RECV_NONE,    /* the half-close (or a failed read) with no request at all */
    CRI_CALL_RECV_EXTRA    /* a message after the request: wiped and dropped */
} cri_call_receipt;

/* The ev_recv handler's first step: what the receive brought. Receives no further. */
cri_call_receipt cri_call_received(cri_call *c, int ok);

/* Wipes and drops the request and any message being received (they may hold credentials). */
void cri_call_drop_request(cri_call *c);

/* ------------------------------------------------------------ the runtime */

/*
 * The request goes up exactly as it came, with the forwarded metadata, and the
 * half-close (no request message: the metadata and the half-close); the
 * incoming call is the parent (deadline and cancellation propagate). Sending
 * moves the request's slices out of its byte buffer. False when the call or its
 * batch cannot start (nothing was sent).
 */
bool cri_call_forward(cri_call *c, grpc_channel *channel, grpc_completion_queue *cq);
/* The ev_up handler's first step: the runtime's metadata filtered, a failed batch UNKNOWN. */
void cri_call_upstream_done(cri_call *c, int ok);

/* ------------------------------------------------------------ answers */

/* The runtime's answer, unchanged: its headers, message, status and trailers. */
void cri_call_relay(cri_call *c);
/* The runtime's headers, status message and trailers with code and message instead. */
void cri_call_relay_as(cri_call *c, grpc_status_code code, grpc_byte_buffer *message);
/* Our own status, text its message: no headers, message or trailers of the runtime. */
void cri_call_answer_status(cri_call *c, grpc_status_code code, const char *text);
/* The ev_final handler's first step. */
void cri_call_answered(cri_call *c);
/* The answer went out (or could not) and no batch is in flight: the owner may release. */
bool cri_call_finished(const cri_call *c);

/* Every gRPC object of c (the request wiped first); c itself is the owner's. */
void cri_call_release(cri_call *c);

#endif
