/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Generic gRPC proxy on gRPC's C core (cri/README.md, "A generic proxy on
 * gRPC's C core" and "Threads"): any method, one upstream call per incoming
 * call (the incoming one its parent), messages pumped as byte buffers. One
 * event-loop thread drives a single completion queue, so call state needs no
 * lock. The calls of the methods pull.c's table knows are handed over:
 * PullImage to intercept.c (on the worker), ImageStatus to verify.c and the
 * other unary methods to unary.c (both on the loop). What is left here is the
 * byte pump: streams and methods the table does not know.
 */
#include "proxy.h"

#include "cri_metrics.h"
#include "grpc_util.h"
#include "intercept.h"
#include "log.h"
#include "unary.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IMAGE_STATUS_MAX_MS 1000
#define METHOD_LOG_MAX 256
#define MAX_COMPLETIONS_PER_FLUSH 64

typedef cri_tag tag;

struct call;
typedef struct call *call_list_head;

struct cri_proxy {
    cri_proxy_options opts;
    char *listen, *runtime; /* owned copies of opts strings */
    grpc_server *server;
    grpc_channel *channel;
    grpc_completion_queue *cq;
    cri_intercept *intercept; /* PullImage */
    cri_verifier *verifier;   /* ImageStatus (verification pulls); NULL: forwarded as bytes */
    pthread_t loop;
    bool loop_started;
    /* The slot grpc_server_request_call fills; moved into a call when one arrives. */
    grpc_call *new_call;
    grpc_call_details new_details;
    grpc_metadata_array new_md;
    call_list_head dirty; /* calls to flush once the ready completions are handled (loop only) */
    tag new_call_tag;
    tag shutdown_tag;
    atomic_bool stopping;
    pthread_mutex_t lock; /* for the fields below */
    pthread_cond_t cond;
    bool server_down; /* shutdown notification arrived: no call left */
};

/* Messages received from one side, waiting for the other; sending is the one in flight. */
#define MAX_BUFFERED_MESSAGES 2
typedef struct msg_queue {
    grpc_byte_buffer *queued[MAX_BUFFERED_MESSAGES];
    size_t count;
    grpc_byte_buffer *sending;
    bool batch_inflight; /* one send batch at a time per direction keeps the order plain */
} msg_queue;

struct call;

/* One direction of a plain call: messages received from one end, sent on to the other. */
typedef struct pump {
    struct call *c;
    grpc_byte_buffer *msg; /* being received */
    msg_queue q;           /* received, waiting for (or being sent to) the other end */
    bool eos;              /* the sending end is done (or failed): nothing more to receive */
    bool recv_inflight;
    bool broken; /* sending to the other end failed (its cancellation propagates) */
    tag t_msg, t_sent;
} pump;

/*
 * A forwarded call. Sends are coalesced (flush_call()): at most
 * MAX_BUFFERED_MESSAGES per direction are held in the proxy (queued, sending
 * or being received).
 */
typedef struct call {
    cri_proxy *px;
    atomic_int refs;
    cri_relay r; /* both ends, the metadata and the runtime's status */
    bool down_md_sent, up_status_received, final_started;
    char method[METHOD_LOG_MAX];
    int64_t start_ms;   /* the debug log's durationMs */
    long long start_us; /* the calls metric (microseconds) */
    pump to_up, to_down; /* from the kubelet to the runtime, and back */
    bool up_md_sent, up_md_received, up_close_sent;
    bool dirty; /* on the event loop's list of calls to flush */
    struct call *dirty_next;
    tag t_up_recv_md, t_up_status, t_down_closed, t_down_sent_final;
} call;

/* ------------------------------------------------------------ helpers */

static void start_batch(call *c, grpc_call *gc, const grpc_op *ops, size_t n, tag *t);
static void call_unref(call *c);

#define op cri_op

/* -------------------------------------------------------- call lifetime */

static void msg_queue_clear(msg_queue *q)
{
    for (size_t i = 0; i < q->count; i++)
        grpc_byte_buffer_destroy(q->queued[i]);
    q->count = 0;
    if (q->sending)
        grpc_byte_buffer_destroy(q->sending);
    q->sending = NULL;
}

static void call_free(call *c)
{
    pump *pumps[] = {&c->to_up, &c->to_down};
    for (size_t i = 0; i < 2; i++) {
        msg_queue_clear(&pumps[i]->q);
        if (pumps[i]->msg)
            grpc_byte_buffer_destroy(pumps[i]->msg);
    }
    cri_relay_release(&c->r);
    free(c);
}

static void call_ref(call *c) { atomic_fetch_add(&c->refs, 1); }

/* On the event loop: flush_call() runs once the ready completions are handled. */
static void mark_dirty(call *c)
{
    if (c->dirty)
        return;
    c->dirty = true;
    call_ref(c);
    c->dirty_next = c->px->dirty;
    c->px->dirty = c;
}

static void call_unref(call *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1)
        call_free(c);
}

/* Takes a reference for the batch; on a refused batch the reference is dropped again. */
static void start_batch(call *c, grpc_call *gc, const grpc_op *ops, size_t n, tag *t)
{
    call_ref(c);
    grpc_call_error e = grpc_call_start_batch(gc, ops, n, t, NULL);
    if (e != GRPC_CALL_OK) {
        cri_log(CRI_LOG_ERROR, "grpc batch refused", "method", c->method, "error",
                grpc_call_error_to_string(e), NULL);
        call_unref(c);
    }
}

/* ------------------------------------------------ completions */

static void on_down_sent_final(void *arg, int ok)
{
    call *c = arg;
    cri_metric_call(c->method, (int)c->r.status, (double)(pg_metrics_now_us() - c->start_us) / 1e6);
    cri_log_call_end(c->method, c->r.status, c->start_ms, ok);
    call_unref(c);
}

static void pump_recv(pump *p);

static void on_up_recv_md(void *arg, int ok)
{
    call *c = arg;
    cri_filter_md(&c->r.up_initial_md, &c->r.fwd_initial, &c->r.n_fwd_initial);
    c->up_md_received = true;
    if (ok)
        pump_recv(&c->to_down);
    else
        c->to_down.eos = true; /* the call failed; its status follows */
    mark_dirty(c);
    call_unref(c);
}

static void on_up_status(void *arg, int ok)
{
    call *c = arg;
    (void)ok; /* RECV_STATUS_ON_CLIENT always delivers a status */
    cri_filter_md(&c->r.up_trailing_md, &c->r.fwd_trailing, &c->r.n_fwd_trailing);
    c->up_status_received = true;
    mark_dirty(c);
    call_unref(c);
}

static void on_down_closed(void *arg, int ok)
{
    call *c = arg;
    (void)ok;
    if (c->r.down_cancelled)
        grpc_call_cancel(c->r.up, NULL);
    call_unref(c);
}

/* ------------------------------------------------------- plain calls */

/*
 * Every call but the handed-over ones. A handler only records what arrived (and asks for the
 * next message at once); the event loop then flushes each touched call with as few batches as
 * it can: what arrives together leaves together (cri/README.md, "Threads").
 */

static bool queue_has_room(const msg_queue *q)
{
    return q->count + (q->sending ? 1 : 0) < MAX_BUFFERED_MESSAGES;
}

static void queue_push(msg_queue *q, grpc_byte_buffer *m) { q->queued[q->count++] = m; }

static grpc_byte_buffer *queue_pop(msg_queue *q)
{
    grpc_byte_buffer *m = q->queued[0];
    for (size_t i = 1; i < q->count; i++)
        q->queued[i - 1] = q->queued[i];
    q->count--;
    return m;
}

/* Receives the next message from p's sending end, while p has room for it. */
static void pump_recv(pump *p)
{
    if (p->recv_inflight || p->eos || p->broken || !queue_has_room(&p->q))
        return;
    p->recv_inflight = true;
    grpc_op o = op(GRPC_OP_RECV_MESSAGE);
    o.data.recv_message.recv_message = &p->msg;
    start_batch(p->c, p == &p->c->to_up ? p->c->r.down : p->c->r.up, &o, 1, &p->t_msg);
}

static void on_pump_msg(void *arg, int ok)
{
    pump *p = arg;
    p->recv_inflight = false;
    if (ok && p->msg && !p->broken) {
        queue_push(&p->q, p->msg);
    } else {
        if (p->msg)
            grpc_byte_buffer_destroy(p->msg);
        p->eos = true;
    }
    p->msg = NULL;
    pump_recv(p);
    mark_dirty(p->c);
    call_unref(p->c);
}

/* A send batch finished; a failed one means that end is gone: nothing more is received for it. */
static void on_pump_sent(void *arg, int ok)
{
    pump *p = arg;
    if (p->q.sending)
        grpc_byte_buffer_destroy(p->q.sending);
    p->q.sending = NULL;
    p->q.batch_inflight = false;
    if (!ok) {
        p->broken = true;
        msg_queue_clear(&p->q);
        p->eos = p->eos || !p->recv_inflight;
    }
    mark_dirty(p->c);
    pump_recv(p);
    call_unref(p->c);
}

/* Headers, the next message and the half-close, in one batch towards the runtime. */
static void flush_up(call *c)
{
    msg_queue *q = &c->to_up.q;
    if (q->batch_inflight || c->up_close_sent || c->to_up.broken)
        return;
    grpc_op ops[3];
    size_t n = 0;
    if (!c->up_md_sent) {
        ops[n] = op(GRPC_OP_SEND_INITIAL_METADATA);
        ops[n].data.send_initial_metadata.count = c->r.n_fwd_md;
        ops[n].data.send_initial_metadata.metadata = c->r.fwd_md;
        n++;
        c->up_md_sent = true;
    }
    if (q->count > 0) {
        q->sending = queue_pop(q);
        ops[n] = op(GRPC_OP_SEND_MESSAGE);
        ops[n].data.send_message.send_message = q->sending;
        n++;
    }
    if (c->to_up.eos && q->count == 0) {
        ops[n++] = op(GRPC_OP_SEND_CLOSE_FROM_CLIENT);
        c->up_close_sent = true;
    }
    if (n == 0)
        return;
    q->batch_inflight = true;
    start_batch(c, c->r.up, ops, n, &c->to_up.t_sent);
    pump_recv(&c->to_up);
}

/* Headers, the next message and, once the runtime is done, the status, in one batch down. */
static void flush_down(call *c)
{
    msg_queue *q = &c->to_down.q;
    if (q->batch_inflight || c->final_started)
        return;
    bool message = q->count > 0;
    bool final = c->to_down.eos && c->up_status_received && q->count <= 1;
    bool headers = c->up_md_received && c->r.n_fwd_initial > 0;
    if (!message && !final && (c->down_md_sent || !headers))
        return;
    grpc_op ops[3];
    size_t n = 0;
    if (!c->down_md_sent) {
        ops[n] = op(GRPC_OP_SEND_INITIAL_METADATA);
        ops[n].data.send_initial_metadata.count = c->r.n_fwd_initial;
        ops[n].data.send_initial_metadata.metadata = c->r.fwd_initial;
        n++;
        c->down_md_sent = true;
    }
    if (message) {
        q->sending = queue_pop(q);
        ops[n] = op(GRPC_OP_SEND_MESSAGE);
        ops[n].data.send_message.send_message = q->sending;
        n++;
    }
    if (final) {
        ops[n] = op(GRPC_OP_SEND_STATUS_FROM_SERVER);
        ops[n].data.send_status_from_server.status = c->r.status;
        ops[n].data.send_status_from_server.status_details = &c->r.status_details;
        ops[n].data.send_status_from_server.trailing_metadata_count = c->r.n_fwd_trailing;
        ops[n].data.send_status_from_server.trailing_metadata = c->r.fwd_trailing;
        n++;
        c->final_started = true;
        start_batch(c, c->r.down, ops, n, &c->t_down_sent_final);
        return;
    }
    q->batch_inflight = true;
    start_batch(c, c->r.down, ops, n, &c->to_down.t_sent);
    pump_recv(&c->to_down);
}

static void flush_call(call *c)
{
    flush_up(c);
    flush_down(c);
}

/* Runs on the event loop after the ready completions: every touched call sends what it can. */
static void flush_dirty(cri_proxy *px)
{
    while (px->dirty) {
        call *c = px->dirty;
        px->dirty = c->dirty_next;
        c->dirty_next = NULL;
        c->dirty = false;
        flush_call(c);
        call_unref(c);
    }
}

/* ------------------------------------------------------------ new calls */

static void request_call(cri_proxy *px);

/* The headers go up with the first flush, with the request when it is already there. */
static void start_plain_call(cri_proxy *px, call *c)
{
    size_t mlen = GRPC_SLICE_LENGTH(c->r.details.method);
    if (mlen >= sizeof c->method)
        mlen = sizeof c->method - 1;
    memcpy(c->method, GRPC_SLICE_START_PTR(c->r.details.method), mlen);
    c->method[mlen] = '\0';
    cri_relay_start_up(&c->r, px->channel, px->cq);

    grpc_op o = op(GRPC_OP_RECV_INITIAL_METADATA);
    o.data.recv_initial_metadata.recv_initial_metadata = &c->r.up_initial_md;
    start_batch(c, c->r.up, &o, 1, &c->t_up_recv_md);

    o = op(GRPC_OP_RECV_STATUS_ON_CLIENT);
    o.data.recv_status_on_client.trailing_metadata = &c->r.up_trailing_md;
    o.data.recv_status_on_client.status = &c->r.status;
    o.data.recv_status_on_client.status_details = &c->r.status_details;
    start_batch(c, c->r.up, &o, 1, &c->t_up_status);

    o = op(GRPC_OP_RECV_CLOSE_ON_SERVER);
    o.data.recv_close_on_server.cancelled = &c->r.down_cancelled;
    start_batch(c, c->r.down, &o, 1, &c->t_down_closed);

    pump_recv(&c->to_up);
    mark_dirty(c);
}

static call *call_new(cri_proxy *px)
{
    call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->px = px;
    atomic_init(&c->refs, 1);
    c->start_ms = pg_monotonic_ms();
    c->start_us = pg_metrics_now_us();
    c->t_up_recv_md = (tag){on_up_recv_md, c};
    c->t_up_status = (tag){on_up_status, c};
    c->t_down_closed = (tag){on_down_closed, c};
    c->t_down_sent_final = (tag){on_down_sent_final, c};
    pump *pumps[] = {&c->to_up, &c->to_down};
    for (size_t i = 0; i < 2; i++) {
        pumps[i]->c = c;
        pumps[i]->t_msg = (tag){on_pump_msg, pumps[i]};
        pumps[i]->t_sent = (tag){on_pump_sent, pumps[i]};
    }
    return c;
}

static void on_new_call(void *arg, int ok)
{
    cri_proxy *px = arg;
    grpc_call *incoming = px->new_call;
    grpc_call_details details = px->new_details;
    grpc_metadata_array md = px->new_md;
    px->new_call = NULL;
    /* Ask for the next call before serving this one. */
    if (ok && !atomic_load(&px->stopping))
        request_call(px);
    if (!ok) {
        grpc_call_details_destroy(&details);
        grpc_metadata_array_destroy(&md);
        return;
    }
    /* Recognised as a runtime built on grpc-go would route it (pull.c's table). */
    cri_method m = cri_method_parse((const char *)GRPC_SLICE_START_PTR(details.method),
                                    GRPC_SLICE_LENGTH(details.method));
    if (m.kind == CRI_METHOD_IMAGE_STATUS && px->verifier) {
        cri_verifier_start(px->verifier, incoming, &details, &md);
        return;
    }
    if (m.kind == CRI_METHOD_PULL_IMAGE) {
        cri_intercept_start(px->intercept, &m, incoming, &details, &md);
        return;
    }
    if (m.kind == CRI_METHOD_UNARY || m.kind == CRI_METHOD_IMAGE_STATUS) {
        cri_unary_start(px->channel, px->cq, incoming, &details, &md);
        return;
    }
    call *c = call_new(px);
    if (!c) {
        grpc_call_cancel_with_status(incoming, GRPC_STATUS_RESOURCE_EXHAUSTED,
                                     "pullgate-cri: out of memory", NULL);
        grpc_call_unref(incoming);
        grpc_call_details_destroy(&details);
        grpc_metadata_array_destroy(&md);
        return;
    }
    cri_relay_init(&c->r, incoming, &details, &md);
    start_plain_call(px, c);
    call_unref(c); /* the batches hold the call from here */
}

static void request_call(cri_proxy *px)
{
    grpc_call_details_init(&px->new_details);
    grpc_metadata_array_init(&px->new_md);
    grpc_call_error e = grpc_server_request_call(px->server, &px->new_call, &px->new_details,
                                                 &px->new_md, px->cq, px->cq, &px->new_call_tag);
    if (e != GRPC_CALL_OK) {
        cri_log(CRI_LOG_ERROR, "cannot accept calls", "error", grpc_call_error_to_string(e), NULL);
        grpc_call_details_destroy(&px->new_details);
        grpc_metadata_array_destroy(&px->new_md);
    }
}

static void on_server_down(void *arg, int ok)
{
    cri_proxy *px = arg;
    (void)ok;
    pthread_mutex_lock(&px->lock);
    px->server_down = true;
    pthread_cond_broadcast(&px->cond);
    pthread_mutex_unlock(&px->lock);
}

/*
 * Waits for a completion, then handles every completion that is ready without
 * waiting, then flushes the calls they touched: what arrived together leaves
 * together (see flush_call).
 */
static void *loop_main(void *arg)
{
    cri_proxy *px = arg;
    gpr_timespec wait = gpr_inf_future(GPR_CLOCK_MONOTONIC);
    int handled = 0;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(px->cq, wait, NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type == GRPC_OP_COMPLETE) {
            tag *t = ev.tag;
            t->fn(t->arg, ev.success);
            wait = gpr_inf_past(GPR_CLOCK_MONOTONIC);
        }
        /* Bounded, so that a queue that is never empty under load still sends. */
        if (ev.type != GRPC_OP_COMPLETE || ++handled >= MAX_COMPLETIONS_PER_FLUSH) {
            flush_dirty(px);
            handled = 0;
            wait = gpr_inf_future(GPR_CLOCK_MONOTONIC);
        }
    }
    while (px->dirty) { /* every call is over: nothing left to send */
        call *c = px->dirty;
        px->dirty = c->dirty_next;
        call_unref(c);
    }
    return NULL;
}

/* ------------------------------------------------------------ setup */

static grpc_server *new_server(void)
{
    grpc_arg args[] = {
        cri_int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, CRI_MAX_MESSAGE_BYTES),
        cri_int_arg(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, CRI_MAX_MESSAGE_BYTES),
        cri_int_arg(GRPC_ARG_ENABLE_CHANNELZ, 0),
    };
    grpc_channel_args ca = {sizeof args / sizeof args[0], args};
    return grpc_server_create(&ca, NULL);
}

static void proxy_free(cri_proxy *px)
{
    cri_intercept_free(px->intercept);
    cri_verifier_free(px->verifier);
    if (px->server)
        grpc_server_destroy(px->server);
    if (px->channel)
        grpc_channel_destroy(px->channel);
    if (px->cq)
        grpc_completion_queue_destroy(px->cq);
    pthread_cond_destroy(&px->cond);
    pthread_mutex_destroy(&px->lock);
    free(px->listen);
    free(px->runtime);
    free(px);
}

/*
 * Debian's abseil (20220623) is built without NDEBUG, so every absl::Mutex
 * lock inside gRPC runs abseil's debug-only deadlock detector: a process-wide
 * lock-order graph behind a global lock (about 4 % of pullgate-cri's CPU per
 * proxied call, cri/README.md "Cost"), set to abort the process on a suspected
 * cycle. A release build of abseil has it off; this turns it off the same way,
 * through abseil's public SetMutexDeadlockDetectionMode(kIgnore). The function
 * is C++, so it is looked up by its mangled name (Debian's inline namespace,
 * then upstream's); with another abseil build there is nothing to find and
 * nothing to do.
 */
static void absl_deadlock_detection_off(void)
{
    static const char *const names[] = {
        "_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE",
        "_ZN4absl29SetMutexDeadlockDetectionModeENS_15OnDeadlockCycleE", NULL};
    enum { ABSL_ON_DEADLOCK_CYCLE_IGNORE = 0 }; /* absl::OnDeadlockCycle::kIgnore */
    for (size_t i = 0; names[i]; i++) {
        void *sym = dlsym(RTLD_DEFAULT, names[i]);
        if (!sym)
            continue;
        void (*set_mode)(int);
        memcpy(&set_mode, &sym, sizeof set_mode); /* POSIX: a dlsym result may be a function */
        set_mode(ABSL_ON_DEADLOCK_CYCLE_IGNORE);
        return;
    }
}

static int bind_and_start(cri_proxy *px, pg_error *err)
{
    absl_deadlock_detection_off();
    px->cq = grpc_completion_queue_create_for_next(NULL);
    px->server = new_server();
    px->channel = cri_runtime_channel(px->runtime);
    if (!px->cq || !px->server || !px->channel)
        return pg_fail(err, PG_ERR_INTERNAL, "gRPC setup failed");
    grpc_server_register_completion_queue(px->server, px->cq, NULL);
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(px->server, px->listen, creds);
    grpc_server_credentials_release(creds);
    if (port == 0)
        return pg_fail(err, PG_ERR_IO, "cannot listen on %s", px->listen);
    if (px->opts.cfg && px->opts.decider && pg_config_cri_verify_pulls(px->opts.cfg)) {
        cri_verifier_options vo = {
            .channel = px->channel,
            .cq = px->cq,
            .worker = px->opts.worker,
            .cfg = px->opts.cfg,
            .decider = px->opts.decider,
            .notifier = px->opts.notifier,
        };
        if (!(px->verifier = cri_verifier_new(&vo, err)))
            return err ? err->code : PG_ERR_NOMEM;
    }
    cri_intercept_options io = {
        .verifier = px->verifier,
        .channel = px->channel,
        .cq = px->cq,
        .worker = px->opts.worker,
        .recorder = px->opts.recorder,
        .annotation_key = px->opts.annotation_key,
        .keys = px->opts.keys,
        .mac_required = px->opts.mac_required,
        .node = px->opts.node_creds,
        .facts = px->opts.facts,
        .max_slots = px->opts.max_pulls,
        .slot_wait_ms = px->opts.slot_wait_ms,
        .intent_budget_ms = px->opts.intent_budget_ms,
        .record_budget_ms = px->opts.record_budget_ms,
        .image_status_ms = IMAGE_STATUS_MAX_MS,
    };
    if (!(px->intercept = cri_intercept_new(&io, err)))
        return err ? err->code : PG_ERR_NOMEM;
    grpc_server_start(px->server);
    request_call(px);
    int e = pthread_create(&px->loop, NULL, loop_main, px);
    if (e != 0)
        return pg_fail_errno(err, e, "event loop thread");
    px->loop_started = true;
    return PG_OK;
}

cri_proxy *cri_proxy_start(const cri_proxy_options *opts, pg_error *err)
{
    cri_proxy *px = calloc(1, sizeof *px);
    if (!px) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    px->opts = *opts;
    pthread_mutex_init(&px->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&px->cond, &ca);
    pthread_condattr_destroy(&ca);
    px->listen = pg_strdup(opts->listen);
    px->runtime = pg_strdup(opts->runtime);
    if (!px->listen || !px->runtime) {
        proxy_free(px);
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    px->opts.listen = px->listen;
    px->opts.runtime = px->runtime;
    px->new_call_tag = (tag){on_new_call, px};
    px->shutdown_tag = (tag){on_server_down, px};
    if (bind_and_start(px, err) != PG_OK) {
        proxy_free(px);
        return NULL;
    }
    return px;
}

/* Waits until the server reported that no call is left, or timeout_ms passed. */
static bool wait_server_down(cri_proxy *px, int timeout_ms)
{
    int64_t until_ms = pg_monotonic_ms() + timeout_ms;
    struct timespec until = {(time_t)(until_ms / 1000), (long)(until_ms % 1000) * 1000000L};
    pthread_mutex_lock(&px->lock);
    int e = 0;
    while (!px->server_down && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&px->cond, &px->lock, &until);
    bool down = px->server_down;
    pthread_mutex_unlock(&px->lock);
    return down;
}

int cri_proxy_stop(cri_proxy *px, int drain_ms)
{
    if (!px)
        return 1;
    atomic_store(&px->stopping, true);
    grpc_server_shutdown_and_notify(px->server, px->cq, &px->shutdown_tag);
    if (!wait_server_down(px, drain_ms)) {
        cri_log(CRI_LOG_WARNING, "drain time over; cancelling the calls still running", NULL);
        grpc_server_cancel_all_calls(px->server);
        /* Cancelled pulls still finish their recording: at most their budgets. */
        if (!wait_server_down(px, px->opts.record_budget_ms + px->opts.intent_budget_ms +
                                      px->opts.slot_wait_ms + IMAGE_STATUS_MAX_MS + 3000))
            return 0;
    }
    grpc_completion_queue_shutdown(px->cq);
    pthread_join(px->loop, NULL);
    proxy_free(px);
    return 1;
}
