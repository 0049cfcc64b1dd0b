/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Generic gRPC proxy on gRPC's C core, after the pattern of gRPC's own C-core
 * test proxy fixture: grpc_server_request_call() for any method (no method is
 * registered), one upstream call per incoming call with the same method, host
 * and deadline (the incoming call is the parent: its deadline and cancellation
 * propagate), initial metadata forwarded, messages pumped as byte buffers both
 * ways one at a time, trailing metadata, status code and details forwarded.
 *
 * Threads: one event-loop thread drives a single completion queue; every
 * completion is a small handler of a per-call state machine, so call state
 * needs no lock. The only blocking work, recording a pull, runs on a thread
 * of its own per PullImage (pull_main), which hands the call back to the
 * event loop through grpc_call_start_batch (thread-safe) and a condition
 * variable. See cri/README.md for why.
 */
#include "proxy.h"

#include "log.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
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

#define MAX_PULL_THREADS 64
#define IMAGE_STATUS_MAX_MS 1000
#define MAX_RECONNECT_BACKOFF_MS 1000
#define METHOD_LOG_MAX 256
#define MAX_COMPLETIONS_PER_FLUSH 64

typedef void (*handler_fn)(void *arg, int ok);

struct call;
typedef struct call *call_list_head;

/* A completion-queue tag: what to run when an operation completes. */
typedef struct tag {
    handler_fn fn;
    void *arg;
} tag;

struct cri_proxy {
    cri_proxy_options opts;
    char *listen, *runtime, *annotation_key; /* owned copies of opts strings */
    grpc_server *server;
    grpc_channel *channel;
    grpc_completion_queue *cq;
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
    atomic_int pull_threads;
};

typedef struct pull_state pull_state;

/* Messages received from one side, waiting for the other; sending is the one in flight. */
#define MAX_BUFFERED_MESSAGES 2
typedef struct msg_queue {
    grpc_byte_buffer *queued[MAX_BUFFERED_MESSAGES];
    size_t count;
    grpc_byte_buffer *sending;
    bool batch_inflight; /* one send batch at a time per direction keeps the order plain */
} msg_queue;

typedef struct call {
    cri_proxy *px;
    atomic_int refs;
    grpc_call *down; /* kubelet -> proxy */
    grpc_call *up;   /* proxy -> runtime */
    grpc_call_details details;
    grpc_metadata_array client_md;
    grpc_metadata *fwd_md;
    size_t n_fwd_md;
    grpc_metadata_array up_initial_md;
    grpc_metadata *fwd_initial;
    size_t n_fwd_initial;
    grpc_metadata_array up_trailing_md;
    grpc_metadata *fwd_trailing;
    size_t n_fwd_trailing;
    grpc_status_code status;
    grpc_slice status_details;
    int down_cancelled;
    grpc_byte_buffer *down_msg; /* from the kubelet, on its way up */
    grpc_byte_buffer *up_msg;   /* from the runtime, on its way down */
    bool down_md_sent, up_status_received, up_pump_done, down_send_inflight, final_started;
    char method[METHOD_LOG_MAX];
    int64_t start_ms;
    pull_state *pull; /* PullImage only */
    /* Every other call ("plain"): coalesced sends, see flush_call(). A queue of
     * messages per direction; at most MAX_BUFFERED_MESSAGES per direction are
     * held in the proxy (queued, sending or being received). */
    msg_queue to_up, to_down;
    bool plain, up_md_sent, up_md_received, up_close_sent, down_eos, up_eos, up_broken, down_broken;
    bool down_recv_inflight, up_recv_inflight;
    bool dirty; /* on the event loop's list of calls to flush */
    struct call *dirty_next;
    tag t_up_recv_md, t_up_status, t_down_closed, t_down_msg, t_up_sent_msg, t_up_msg,
        t_down_sent_msg, t_down_sent_md, t_up_sent_close, t_down_sent_final, t_plain_down_msg,
        t_plain_up_msg, t_plain_up_sent, t_plain_down_sent;
} call;

struct pull_state {
    const char *image_status_method; /* same CRI version as the pull */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool upstream_finished; /* status and every message of the runtime are in */
    bool thread_started;
    grpc_byte_buffer *response; /* the runtime's PullImageResponse, held back */
};

/* ------------------------------------------------------------ helpers */

static void start_batch(call *c, grpc_call *gc, const grpc_op *ops, size_t n, tag *t);
static void call_unref(call *c);

static const char *status_name(grpc_status_code s)
{
    static const char *const names[] = {"OK",
                                        "CANCELLED",
                                        "UNKNOWN",
                                        "INVALID_ARGUMENT",
                                        "DEADLINE_EXCEEDED",
                                        "NOT_FOUND",
                                        "ALREADY_EXISTS",
                                        "PERMISSION_DENIED",
                                        "RESOURCE_EXHAUSTED",
                                        "FAILED_PRECONDITION",
                                        "ABORTED",
                                        "OUT_OF_RANGE",
                                        "UNIMPLEMENTED",
                                        "INTERNAL",
                                        "UNAVAILABLE",
                                        "DATA_LOSS",
                                        "UNAUTHENTICATED"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
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

/* A filtered view of md (the entries share md's slices); *out is NULL when empty. */
static void filter_md(const grpc_metadata_array *md, grpc_metadata **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (md->count == 0 || !(*out = calloc(md->count, sizeof **out)))
        return; /* out of memory: forward no metadata rather than fail the call */
    for (size_t i = 0; i < md->count; i++)
        if (forwardable(md->metadata[i].key))
            (*out)[(*n)++] = md->metadata[i];
}

static grpc_op op(grpc_op_type type)
{
    grpc_op o;
    memset(&o, 0, sizeof o);
    o.op = type;
    return o;
}

/* The whole payload of a byte buffer as one slice (caller unrefs). */
static grpc_slice flatten(grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return grpc_empty_slice();
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    return s;
}

static void set_tag(tag *t, handler_fn fn, call *c)
{
    t->fn = fn;
    t->arg = c;
}

/* -------------------------------------------------------- call lifetime */

static void pull_state_free(pull_state *ps)
{
    if (!ps)
        return;
    if (ps->response)
        grpc_byte_buffer_destroy(ps->response);
    pthread_cond_destroy(&ps->cond);
    pthread_mutex_destroy(&ps->lock);
    free(ps);
}

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
    msg_queue_clear(&c->to_up);
    msg_queue_clear(&c->to_down);
    if (c->down_msg)
        grpc_byte_buffer_destroy(c->down_msg);
    if (c->up_msg)
        grpc_byte_buffer_destroy(c->up_msg);
    free(c->fwd_md);
    free(c->fwd_initial);
    free(c->fwd_trailing);
    grpc_metadata_array_destroy(&c->client_md);
    grpc_metadata_array_destroy(&c->up_initial_md);
    grpc_metadata_array_destroy(&c->up_trailing_md);
    grpc_slice_unref(c->status_details);
    if (c->up)
        grpc_call_unref(c->up);
    if (c->down)
        grpc_call_unref(c->down);
    grpc_call_details_destroy(&c->details);
    pull_state_free(c->pull);
    free(c);
}

static void call_ref(call *c) { atomic_fetch_add(&c->refs, 1); }

/* Plain calls only, on the event loop: flush_call() runs once the ready completions are handled. */
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

/* ------------------------------------------------ runtime -> kubelet */

static void on_down_sent_final(void *arg, int ok)
{
    call *c = arg;
    cri_log_level level = c->pull ? CRI_LOG_INFO : CRI_LOG_DEBUG;
    if (!cri_log_enabled(level)) { /* every plain call ends here: no formatting for nothing */
        call_unref(c);
        return;
    }
    char status[16], ms[24];
    snprintf(status, sizeof status, "%d", (int)c->status);
    snprintf(ms, sizeof ms, "%lld", (long long)(cri_now_ms() - c->start_ms));
    cri_log(level, "call", "method", c->method, "code", status,
            "status", status_name(c->status), "delivered", ok ? "yes" : "no", "durationMs", ms,
            NULL);
    call_unref(c);
}

/*
 * The last batch towards the kubelet: initial metadata if not sent yet, the
 * held-back PullImage response if any, and the status, in one batch (as
 * gRPC's own servers do; a status without initial metadata in its batch is
 * not flushed by this gRPC version until the client gives up).
 */
static void send_final(call *c, grpc_byte_buffer *message)
{
    grpc_op ops[3];
    size_t n = 0;
    if (!c->down_md_sent) {
        ops[n] = op(GRPC_OP_SEND_INITIAL_METADATA);
        ops[n].data.send_initial_metadata.count = c->n_fwd_initial;
        ops[n].data.send_initial_metadata.metadata = c->fwd_initial;
        n++;
        c->down_md_sent = true;
    }
    if (message) {
        ops[n] = op(GRPC_OP_SEND_MESSAGE);
        ops[n].data.send_message.send_message = message;
        n++;
    }
    ops[n] = op(GRPC_OP_SEND_STATUS_FROM_SERVER);
    ops[n].data.send_status_from_server.status = c->status;
    ops[n].data.send_status_from_server.status_details = &c->status_details;
    ops[n].data.send_status_from_server.trailing_metadata_count = c->n_fwd_trailing;
    ops[n].data.send_status_from_server.trailing_metadata = c->fwd_trailing;
    n++;
    start_batch(c, c->down, ops, n, &c->t_down_sent_final);
}

/* Forwards the status once the runtime's messages are all through. */
static void maybe_finish(call *c)
{
    if (!c->up_status_received || !c->up_pump_done || c->down_send_inflight || c->final_started)
        return;
    c->final_started = true;
    if (c->pull && c->pull->thread_started) {
        /* The pull thread records the result first, then sends the answer. */
        pthread_mutex_lock(&c->pull->lock);
        c->pull->upstream_finished = true;
        pthread_cond_signal(&c->pull->cond);
        pthread_mutex_unlock(&c->pull->lock);
        return;
    }
    send_final(c, c->pull ? c->pull->response : NULL);
}

static void recv_up_msg(call *c)
{
    grpc_op o = op(GRPC_OP_RECV_MESSAGE);
    o.data.recv_message.recv_message = &c->up_msg;
    start_batch(c, c->up, &o, 1, &c->t_up_msg);
}

static void on_down_sent_msg(void *arg, int ok)
{
    call *c = arg;
    grpc_byte_buffer_destroy(c->up_msg);
    c->up_msg = NULL;
    c->down_send_inflight = false;
    if (ok)
        recv_up_msg(c);
    else
        c->up_pump_done = true; /* the kubelet is gone; its cancellation reaches the runtime */
    maybe_finish(c);
    call_unref(c);
}

static void on_up_msg(void *arg, int ok)
{
    call *c = arg;
    if (!ok || !c->up_msg) {
        c->up_pump_done = true;
        maybe_finish(c);
    } else if (c->pull) {
        /* Held back until the pull is recorded. A unary answer has one message. */
        if (!c->pull->response)
            c->pull->response = c->up_msg;
        else
            grpc_byte_buffer_destroy(c->up_msg);
        c->up_msg = NULL;
        recv_up_msg(c);
    } else {
        grpc_op ops[2];
        size_t n = 0;
        if (!c->down_md_sent) {
            ops[n] = op(GRPC_OP_SEND_INITIAL_METADATA);
            ops[n].data.send_initial_metadata.count = c->n_fwd_initial;
            ops[n].data.send_initial_metadata.metadata = c->fwd_initial;
            n++;
            c->down_md_sent = true;
        }
        ops[n] = op(GRPC_OP_SEND_MESSAGE);
        ops[n].data.send_message.send_message = c->up_msg;
        n++;
        c->down_send_inflight = true;
        start_batch(c, c->down, ops, n, &c->t_down_sent_msg);
    }
    call_unref(c);
}

static void on_down_sent_md(void *arg, int ok)
{
    (void)ok;
    call_unref(arg);
}

static void plain_on_up_recv_md(call *c, int ok);

static void on_up_recv_md(void *arg, int ok)
{
    call *c = arg;
    filter_md(&c->up_initial_md, &c->fwd_initial, &c->n_fwd_initial);
    if (c->plain) {
        plain_on_up_recv_md(c, ok);
        call_unref(c);
        return;
    }
    /* Headers with content go down at once (a streaming client may wait for
     * them); empty ones wait for the first message or the status. */
    if (ok && c->n_fwd_initial > 0 && !c->pull) {
        grpc_op o = op(GRPC_OP_SEND_INITIAL_METADATA);
        o.data.send_initial_metadata.count = c->n_fwd_initial;
        o.data.send_initial_metadata.metadata = c->fwd_initial;
        c->down_md_sent = true;
        start_batch(c, c->down, &o, 1, &c->t_down_sent_md);
    }
    if (ok) {
        recv_up_msg(c);
    } else {
        c->up_pump_done = true;
        maybe_finish(c);
    }
    call_unref(c);
}

static void on_up_status(void *arg, int ok)
{
    call *c = arg;
    (void)ok; /* RECV_STATUS_ON_CLIENT always delivers a status */
    filter_md(&c->up_trailing_md, &c->fwd_trailing, &c->n_fwd_trailing);
    c->up_status_received = true;
    if (c->plain)
        mark_dirty(c);
    else
        maybe_finish(c);
    call_unref(c);
}

/* ------------------------------------------------ kubelet -> runtime */

static void recv_down_msg(call *c)
{
    grpc_op o = op(GRPC_OP_RECV_MESSAGE);
    o.data.recv_message.recv_message = &c->down_msg;
    start_batch(c, c->down, &o, 1, &c->t_down_msg);
}

static void on_up_sent_msg(void *arg, int ok)
{
    call *c = arg;
    grpc_byte_buffer_destroy(c->down_msg);
    c->down_msg = NULL;
    if (ok)
        recv_down_msg(c);
    call_unref(c);
}

static void send_up_msg(call *c)
{
    grpc_op o = op(GRPC_OP_SEND_MESSAGE);
    o.data.send_message.send_message = c->down_msg;
    start_batch(c, c->up, &o, 1, &c->t_up_sent_msg);
}

static bool start_pull_thread(call *c);

static void on_down_msg(void *arg, int ok)
{
    call *c = arg;
    if (ok && c->down_msg) {
        /* The first PullImage message goes up only after its intent is on disk. */
        if (!(c->pull && !c->pull->thread_started && start_pull_thread(c)))
            send_up_msg(c);
    } else {
        grpc_op o = op(GRPC_OP_SEND_CLOSE_FROM_CLIENT);
        start_batch(c, c->up, &o, 1, &c->t_up_sent_close);
    }
    call_unref(c);
}

static void on_down_closed(void *arg, int ok)
{
    call *c = arg;
    (void)ok;
    if (c->down_cancelled)
        grpc_call_cancel(c->up, NULL);
    call_unref(c);
}

static void on_simple_done(void *arg, int ok)
{
    (void)ok;
    call_unref(arg);
}

/* ------------------------------------------------------------ PullImage */

static const char *pull_package(const char *method)
{
    if (strcmp(method, "/runtime.v1.ImageService/PullImage") == 0)
        return "/runtime.v1.ImageService/ImageStatus";
    if (strcmp(method, "/runtime.v1alpha2.ImageService/PullImage") == 0)
        return "/runtime.v1alpha2.ImageService/ImageStatus";
    return NULL;
}

static pull_state *pull_state_new(const char *image_status_method)
{
    pull_state *ps = calloc(1, sizeof *ps);
    if (!ps)
        return NULL;
    ps->image_status_method = image_status_method;
    pthread_mutex_init(&ps->lock, NULL);
    pthread_cond_init(&ps->cond, NULL);
    return ps;
}

/* A unary ImageStatus call of our own on the runtime channel, bounded by timeout_ms. */
static int image_status(call *c, const char *image_ref, int timeout_ms, grpc_slice *answer,
                        grpc_status_code *status)
{
    *answer = grpc_empty_slice();
    *status = GRPC_STATUS_UNKNOWN;
    uint8_t *req;
    size_t len;
    if (cri_image_status_request_encode(image_ref, &req, &len, NULL) != PG_OK)
        return -1;
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
    grpc_slice method = grpc_slice_from_static_string(c->pull->image_status_method);
    grpc_call *gc = grpc_channel_create_call(c->px->channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                             method, NULL, deadline, NULL);
    grpc_slice payload = grpc_slice_from_copied_buffer((const char *)req, len);
    free(req);
    grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&payload, 1), *recv = NULL;
    grpc_slice_unref(payload);
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
    if (grpc_call_start_batch(gc, ops, 6, gc, NULL) == GRPC_CALL_OK) {
        /* The call's own deadline ends it; the queue then always delivers the tag. */
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_OP_COMPLETE && ev.success && *status == GRPC_STATUS_OK && recv) {
            *answer = flatten(recv);
            rc = 0;
        }
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

static int64_t remaining(int64_t deadline)
{
    int64_t left = deadline - cri_now_ms();
    return left > 0 ? left : 0;
}

static void log_record_failure(const char *what, const char *image, const pg_error *e)
{
    cri_log(CRI_LOG_ERROR, "pull not fully recorded", "step", what, "image", image, "error",
            e->message, NULL);
}

/* Learns every identity the runtime shows for the image and indexes it. */
static void index_aliases(call *c, const cri_pull_request *req, const char *image_ref,
                          int64_t deadline)
{
    int64_t budget = remaining(deadline);
    if (budget > IMAGE_STATUS_MAX_MS)
        budget = IMAGE_STATUS_MAX_MS;
    grpc_slice answer;
    grpc_status_code st;
    pg_error e = {0};
    if (budget == 0 || image_status(c, image_ref, (int)budget, &answer, &st) != 0) {
        pg_fail(&e, PG_ERR_IO, "ImageStatus of %.200s: %s", image_ref,
                budget ? status_name(st) : "no time left");
        log_record_failure("aliases", req->image, &e);
        return;
    }
    char **aliases = NULL;
    int rc = cri_image_status_aliases(GRPC_SLICE_START_PTR(answer), GRPC_SLICE_LENGTH(answer),
                                      req->image, &aliases, &e);
    grpc_slice_unref(answer);
    if (rc == PG_OK)
        rc = cri_record_aliases(c->px->opts.recorder, image_ref, aliases, deadline, &e);
    if (rc != PG_OK)
        log_record_failure("aliases", req->image, &e);
}

static void record_success(call *c, const cri_pull_request *req, int64_t deadline)
{
    cri_proxy_options *o = &c->px->opts;
    pg_error e = {0};
    char *image_ref = NULL;
    grpc_slice body = flatten(c->pull->response);
    int rc = cri_pull_response_decode(GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body),
                                      &image_ref, &e);
    grpc_slice_unref(body);
    cri_pull_creds creds;
    if (rc == PG_OK)
        rc = cri_pull_credentials(req, o->mac_key, o->mac_required, &creds, &e);
    if (rc != PG_OK) {
        /* The intent stays: the image is verified, never exempt as preloaded. */
        log_record_failure("pulled", req->image, &e);
        free(image_ref);
        return;
    }
    const char *source = cri_cred_source_name(creds.source);
    char detail[sizeof creds.detail];
    memcpy(detail, creds.detail, sizeof detail);
    /*
     * The identities first: record_pulled releases the intent, and until the
     * aliases are durable an image the container names only by ID would have
     * nothing but the intent to say it was pulled. Aliases without a record
     * yet are only evidence (stricter), never authority.
     */
    index_aliases(c, req, image_ref, deadline);
    rc = cri_record_pulled(o->recorder, req->image, image_ref, &creds, deadline, &e);
    if (rc != PG_OK)
        log_record_failure("pulled", req->image, &e);
    else
        cri_log(CRI_LOG_INFO, "pull recorded", "image", req->image, "imageRef", image_ref,
                "credentials", source, "detail", detail, "namespace", req->pod_namespace, "pod",
                req->pod_name, NULL);
    free(image_ref);
}

static void record_result(call *c, const cri_pull_request *req)
{
    int64_t deadline = cri_now_ms() + c->px->opts.record_budget_ms;
    if (c->status == GRPC_STATUS_OK && c->pull->response) {
        record_success(c, req, deadline);
    } else if (c->status == GRPC_STATUS_CANCELLED || c->status == GRPC_STATUS_DEADLINE_EXCEEDED ||
               c->status == GRPC_STATUS_OK) {
        /* Outcome unknown (the runtime may have finished the pull): keep the intent. */
        cri_log(CRI_LOG_WARNING, "pull outcome unknown; intent kept", "image", req->image, "status",
                status_name(c->status), NULL);
    } else {
        pg_error e = {0};
        if (cri_record_failed(c->px->opts.recorder, req->image, deadline, &e) != PG_OK)
            log_record_failure("failed", req->image, &e);
    }
}

/* Decodes the request and writes the intent; false when the pull cannot be recorded. */
static bool record_intent(call *c, cri_pull_request *req)
{
    cri_proxy_options *o = &c->px->opts;
    pg_error e = {0};
    grpc_slice body = flatten(c->down_msg);
    int rc = cri_pull_request_decode(GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body),
                                     o->annotation_key, req, &e);
    grpc_slice_unref(body);
    if (rc != PG_OK) {
        /* Nothing to record without an image; the runtime will refuse it too. */
        cri_log(CRI_LOG_WARNING, "PullImage request not understood; forwarded unrecorded", "method",
                c->method, "error", e.message, NULL);
        return false;
    }
    rc = cri_record_intent(o->recorder, req->image, cri_now_ms() + o->intent_budget_ms, &e);
    if (rc != PG_OK)
        log_record_failure("intent", req->image, &e);
    return true;
}

static void *pull_main(void *arg)
{
    call *c = arg;
    cri_pull_request req;
    int64_t t0 = cri_now_ms();
    bool recording = record_intent(c, &req);
    int64_t intent_ms = cri_now_ms() - t0;
    send_up_msg(c); /* whatever happened: the pull itself is never held up */
    pthread_mutex_lock(&c->pull->lock);
    while (!c->pull->upstream_finished)
        pthread_cond_wait(&c->pull->cond, &c->pull->lock);
    pthread_mutex_unlock(&c->pull->lock);
    if (recording) {
        int64_t t1 = cri_now_ms();
        record_result(c, &req);
        char a[24], b[24];
        snprintf(a, sizeof a, "%lld", (long long)intent_ms);
        snprintf(b, sizeof b, "%lld", (long long)(cri_now_ms() - t1));
        cri_log(CRI_LOG_DEBUG, "pull recording time", "image", req.image, "intentMs", a, "resultMs",
                b, NULL);
        cri_pull_request_clear(&req);
    }
    send_final(c, c->pull->response);
    atomic_fetch_sub(&c->px->pull_threads, 1);
    call_unref(c);
    return NULL;
}

static bool start_pull_thread(call *c)
{
    cri_proxy *px = c->px;
    if (!px->opts.recorder)
        return false;
    if (atomic_fetch_add(&px->pull_threads, 1) >= MAX_PULL_THREADS) {
        atomic_fetch_sub(&px->pull_threads, 1);
        cri_log(CRI_LOG_ERROR, "too many concurrent pulls; forwarded unrecorded", "method",
                c->method, NULL);
        return false;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    call_ref(c);
    c->pull->thread_started = true;
    int e = pthread_create(&t, &attr, pull_main, c);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        c->pull->thread_started = false;
        atomic_fetch_sub(&px->pull_threads, 1);
        call_unref(c);
        cri_log(CRI_LOG_ERROR, "cannot start a pull thread; forwarded unrecorded", "error",
                strerror(e), NULL);
        return false;
    }
    return true;
}

/* ------------------------------------------------------- plain calls */

/*
 * Every call but PullImage. Sends are coalesced: a handler only records what
 * arrived (and asks for the next message at once), and the event loop, once
 * it has handled every completion that is ready, flushes each touched call
 * with as few batches as it can. A unary call, whose request, half-close and
 * answer arrive together, then costs one write each way: headers, message and
 * half-close go up in one batch, and headers, message and status come down in
 * one, as a direct peer would send them. Nothing waits for more input than is
 * already there, so a stream's message is never held back for the next one.
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

static void plain_recv_down(call *c)
{
    if (c->down_recv_inflight || c->down_eos || c->up_broken || !queue_has_room(&c->to_up))
        return;
    c->down_recv_inflight = true;
    grpc_op o = op(GRPC_OP_RECV_MESSAGE);
    o.data.recv_message.recv_message = &c->down_msg;
    start_batch(c, c->down, &o, 1, &c->t_plain_down_msg);
}

static void plain_recv_up(call *c)
{
    if (c->up_recv_inflight || c->up_eos || c->down_broken || !queue_has_room(&c->to_down))
        return;
    c->up_recv_inflight = true;
    grpc_op o = op(GRPC_OP_RECV_MESSAGE);
    o.data.recv_message.recv_message = &c->up_msg;
    start_batch(c, c->up, &o, 1, &c->t_plain_up_msg);
}

static void on_plain_down_msg(void *arg, int ok)
{
    call *c = arg;
    c->down_recv_inflight = false;
    if (ok && c->down_msg && !c->up_broken) {
        queue_push(&c->to_up, c->down_msg);
    } else {
        if (c->down_msg)
            grpc_byte_buffer_destroy(c->down_msg);
        c->down_eos = true;
    }
    c->down_msg = NULL;
    plain_recv_down(c);
    mark_dirty(c);
    call_unref(c);
}

static void on_plain_up_msg(void *arg, int ok)
{
    call *c = arg;
    c->up_recv_inflight = false;
    if (ok && c->up_msg && !c->down_broken) {
        queue_push(&c->to_down, c->up_msg);
    } else {
        if (c->up_msg)
            grpc_byte_buffer_destroy(c->up_msg);
        c->up_eos = true;
    }
    c->up_msg = NULL;
    plain_recv_up(c);
    mark_dirty(c);
    call_unref(c);
}

static void plain_on_up_recv_md(call *c, int ok)
{
    c->up_md_received = true;
    if (ok)
        plain_recv_up(c);
    else
        c->up_eos = true; /* the call failed; its status follows */
    mark_dirty(c);
}

/* A send batch finished; a failed one means that side is gone (its cancellation propagates). */
static void on_plain_sent(call *c, msg_queue *q, int ok, bool *broken)
{
    if (q->sending)
        grpc_byte_buffer_destroy(q->sending);
    q->sending = NULL;
    q->batch_inflight = false;
    if (!ok) {
        *broken = true;
        msg_queue_clear(q);
    }
    mark_dirty(c);
}

static void on_plain_up_sent(void *arg, int ok)
{
    call *c = arg;
    on_plain_sent(c, &c->to_up, ok, &c->up_broken);
    if (c->up_broken)
        c->down_eos = c->down_eos || !c->down_recv_inflight;
    plain_recv_down(c);
    call_unref(c);
}

static void on_plain_down_sent(void *arg, int ok)
{
    call *c = arg;
    on_plain_sent(c, &c->to_down, ok, &c->down_broken);
    if (c->down_broken)
        c->up_eos = c->up_eos || !c->up_recv_inflight;
    plain_recv_up(c);
    call_unref(c);
}

/* Headers, the next message and the half-close, in one batch towards the runtime. */
static void flush_up(call *c)
{
    msg_queue *q = &c->to_up;
    if (q->batch_inflight || c->up_close_sent || c->up_broken)
        return;
    grpc_op ops[3];
    size_t n = 0;
    if (!c->up_md_sent) {
        ops[n] = op(GRPC_OP_SEND_INITIAL_METADATA);
        ops[n].data.send_initial_metadata.count = c->n_fwd_md;
        ops[n].data.send_initial_metadata.metadata = c->fwd_md;
        n++;
        c->up_md_sent = true;
    }
    if (q->count > 0) {
        q->sending = queue_pop(q);
        ops[n] = op(GRPC_OP_SEND_MESSAGE);
        ops[n].data.send_message.send_message = q->sending;
        n++;
    }
    if (c->down_eos && q->count == 0) {
        ops[n++] = op(GRPC_OP_SEND_CLOSE_FROM_CLIENT);
        c->up_close_sent = true;
    }
    if (n == 0)
        return;
    q->batch_inflight = true;
    start_batch(c, c->up, ops, n, &c->t_plain_up_sent);
    plain_recv_down(c);
}

/* Headers, the next message and, once the runtime is done, the status, in one batch down. */
static void flush_down(call *c)
{
    msg_queue *q = &c->to_down;
    if (q->batch_inflight || c->final_started)
        return;
    bool message = q->count > 0;
    bool final = c->up_eos && c->up_status_received && q->count <= 1;
    bool headers = c->up_md_received && c->n_fwd_initial > 0;
    if (!message && !final && (c->down_md_sent || !headers))
        return;
    grpc_op ops[3];
    size_t n = 0;
    if (!c->down_md_sent) {
        ops[n] = op(GRPC_OP_SEND_INITIAL_METADATA);
        ops[n].data.send_initial_metadata.count = c->n_fwd_initial;
        ops[n].data.send_initial_metadata.metadata = c->fwd_initial;
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
        ops[n].data.send_status_from_server.status = c->status;
        ops[n].data.send_status_from_server.status_details = &c->status_details;
        ops[n].data.send_status_from_server.trailing_metadata_count = c->n_fwd_trailing;
        ops[n].data.send_status_from_server.trailing_metadata = c->fwd_trailing;
        n++;
        c->final_started = true;
        start_batch(c, c->down, ops, n, &c->t_down_sent_final);
        return;
    }
    q->batch_inflight = true;
    start_batch(c, c->down, ops, n, &c->t_plain_down_sent);
    plain_recv_up(c);
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
static void start_plain_call(call *c)
{
    c->plain = true;
    grpc_op o = op(GRPC_OP_RECV_INITIAL_METADATA);
    o.data.recv_initial_metadata.recv_initial_metadata = &c->up_initial_md;
    start_batch(c, c->up, &o, 1, &c->t_up_recv_md);

    o = op(GRPC_OP_RECV_STATUS_ON_CLIENT);
    o.data.recv_status_on_client.trailing_metadata = &c->up_trailing_md;
    o.data.recv_status_on_client.status = &c->status;
    o.data.recv_status_on_client.status_details = &c->status_details;
    start_batch(c, c->up, &o, 1, &c->t_up_status);

    o = op(GRPC_OP_RECV_CLOSE_ON_SERVER);
    o.data.recv_close_on_server.cancelled = &c->down_cancelled;
    start_batch(c, c->down, &o, 1, &c->t_down_closed);

    plain_recv_down(c);
    mark_dirty(c);
}

static void start_call(cri_proxy *px, call *c)
{
    size_t mlen = GRPC_SLICE_LENGTH(c->details.method);
    if (mlen >= sizeof c->method)
        mlen = sizeof c->method - 1;
    memcpy(c->method, GRPC_SLICE_START_PTR(c->details.method), mlen);
    c->method[mlen] = '\0';
    const char *status_method = pull_package(c->method);
    if (status_method && !(c->pull = pull_state_new(status_method)))
        cri_log(CRI_LOG_ERROR, "out of memory; pull forwarded unrecorded", NULL);
    const grpc_slice *host = GRPC_SLICE_LENGTH(c->details.host) ? &c->details.host : NULL;
    /* The incoming call is the parent: its deadline and cancellation propagate. */
    c->up = grpc_channel_create_call(px->channel, c->down, GRPC_PROPAGATE_DEFAULTS, px->cq,
                                     c->details.method, host, c->details.deadline, NULL);
    filter_md(&c->client_md, &c->fwd_md, &c->n_fwd_md);
    if (!c->pull) {
        start_plain_call(c);
        return;
    }

    /* One batch: the headers go up, and it completes when the runtime's come back. */
    grpc_op md_ops[2] = {op(GRPC_OP_SEND_INITIAL_METADATA), op(GRPC_OP_RECV_INITIAL_METADATA)};
    md_ops[0].data.send_initial_metadata.count = c->n_fwd_md;
    md_ops[0].data.send_initial_metadata.metadata = c->fwd_md;
    md_ops[1].data.recv_initial_metadata.recv_initial_metadata = &c->up_initial_md;
    start_batch(c, c->up, md_ops, 2, &c->t_up_recv_md);

    grpc_op o = op(GRPC_OP_RECV_STATUS_ON_CLIENT);
    o.data.recv_status_on_client.trailing_metadata = &c->up_trailing_md;
    o.data.recv_status_on_client.status = &c->status;
    o.data.recv_status_on_client.status_details = &c->status_details;
    start_batch(c, c->up, &o, 1, &c->t_up_status);

    o = op(GRPC_OP_RECV_CLOSE_ON_SERVER);
    o.data.recv_close_on_server.cancelled = &c->down_cancelled;
    start_batch(c, c->down, &o, 1, &c->t_down_closed);

    recv_down_msg(c);
}

static call *call_new(cri_proxy *px)
{
    call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->px = px;
    atomic_init(&c->refs, 1);
    c->start_ms = cri_now_ms();
    c->status_details = grpc_empty_slice();
    grpc_metadata_array_init(&c->up_initial_md);
    grpc_metadata_array_init(&c->up_trailing_md);
    set_tag(&c->t_up_recv_md, on_up_recv_md, c);
    set_tag(&c->t_up_status, on_up_status, c);
    set_tag(&c->t_down_closed, on_down_closed, c);
    set_tag(&c->t_down_msg, on_down_msg, c);
    set_tag(&c->t_up_sent_msg, on_up_sent_msg, c);
    set_tag(&c->t_up_msg, on_up_msg, c);
    set_tag(&c->t_down_sent_msg, on_down_sent_msg, c);
    set_tag(&c->t_down_sent_md, on_down_sent_md, c);
    set_tag(&c->t_up_sent_close, on_simple_done, c);
    set_tag(&c->t_down_sent_final, on_down_sent_final, c);
    set_tag(&c->t_plain_down_msg, on_plain_down_msg, c);
    set_tag(&c->t_plain_up_msg, on_plain_up_msg, c);
    set_tag(&c->t_plain_up_sent, on_plain_up_sent, c);
    set_tag(&c->t_plain_down_sent, on_plain_down_sent, c);
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
    call *c = call_new(px);
    if (!c) {
        grpc_call_cancel_with_status(incoming, GRPC_STATUS_RESOURCE_EXHAUSTED,
                                     "pullgate-cri: out of memory", NULL);
        grpc_call_unref(incoming);
        grpc_call_details_destroy(&details);
        grpc_metadata_array_destroy(&md);
        return;
    }
    c->down = incoming;
    c->details = details;
    c->client_md = md;
    start_call(px, c);
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

static grpc_arg int_arg(const char *key, int value)
{
    grpc_arg a = {.type = GRPC_ARG_INTEGER, .key = (char *)key};
    a.value.integer = value;
    return a;
}

static grpc_channel *runtime_channel(const char *target)
{
    /* No channelz bookkeeping, no HTTP proxy lookup for a unix socket. The
     * retry layer stays (cri/README.md "Cost": it costs 1-2 %, and it retries
     * a call lost in a GOAWAY race transparently, as the kubelet's own gRPC
     * does towards a runtime). A restarted runtime is found again within a
     * second, not after gRPC's 120 s backoff cap. */
    grpc_arg args[] = {
        int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, CRI_MAX_MESSAGE_BYTES),
        int_arg(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, CRI_MAX_MESSAGE_BYTES),
        int_arg(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, MAX_RECONNECT_BACKOFF_MS),
        {.type = GRPC_ARG_STRING,
         .key = (char *)GRPC_ARG_PRIMARY_USER_AGENT_STRING,
         .value.string = (char *)"pullgate-cri/" PG_VERSION_STRING},
        int_arg(GRPC_ARG_ENABLE_CHANNELZ, 0),
        int_arg(GRPC_ARG_ENABLE_HTTP_PROXY, 0),
    };
    grpc_channel_args ca = {sizeof args / sizeof args[0], args};
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, creds, &ca);
    grpc_channel_credentials_release(creds);
    return ch;
}

static grpc_server *new_server(void)
{
    grpc_arg args[] = {
        int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, CRI_MAX_MESSAGE_BYTES),
        int_arg(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, CRI_MAX_MESSAGE_BYTES),
        int_arg(GRPC_ARG_ENABLE_CHANNELZ, 0),
    };
    grpc_channel_args ca = {sizeof args / sizeof args[0], args};
    return grpc_server_create(&ca, NULL);
}

static void proxy_free(cri_proxy *px)
{
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
    free(px->annotation_key);
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
    px->channel = runtime_channel(px->runtime);
    if (!px->cq || !px->server || !px->channel)
        return pg_fail(err, PG_ERR_INTERNAL, "gRPC setup failed");
    grpc_server_register_completion_queue(px->server, px->cq, NULL);
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(px->server, px->listen, creds);
    grpc_server_credentials_release(creds);
    if (port == 0)
        return pg_fail(err, PG_ERR_IO, "cannot listen on %s", px->listen);
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
    px->annotation_key = pg_strdup(opts->annotation_key);
    if (!px->listen || !px->runtime || !px->annotation_key) {
        proxy_free(px);
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    px->opts.listen = px->listen;
    px->opts.runtime = px->runtime;
    px->opts.annotation_key = px->annotation_key;
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
    int64_t until_ms = cri_now_ms() + timeout_ms;
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
        /* Cancelled pulls still record their outcome: at most the record budget. */
        if (!wait_server_down(px, px->opts.record_budget_ms + px->opts.intent_budget_ms + 3000))
            return 0;
    }
    grpc_completion_queue_shutdown(px->cq);
    pthread_join(px->loop, NULL);
    proxy_free(px);
    return 1;
}
