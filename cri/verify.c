/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ImageStatus, step by step (verify.h):
 *
 *   RECEIVING  the request message (none: INVALID_ARGUMENT); it goes up at
 *              once, anything after it is drained and dropped
 *   FORWARDED  the very bytes received go up (the incoming call is the
 *              parent: deadline and cancellation propagate)
 *   DECIDING   the runtime answered: without pod annotations, on any error,
 *              for an absent image, or for anything but a denial a pull can
 *              cure, its answer goes back unchanged; a curable denial is
 *              answered ImageStatusResponse{} with the runtime's headers,
 *              status and trailers (unless the pod already pulled for it:
 *              the loop bound)
 *   ANSWERING  one batch down; DONE when every batch completed
 *
 * Why a wrong answer cannot let anything run: "present" is only a hint to
 * the kubelet (skip the pull); the hook still decides every container, with
 * the namespace the runtime gives. A wrong "present" costs a denial; a wrong
 * "not present" costs a pull that the registry decides with the pod's own
 * credentials, recorded under the pod's real namespace.
 */
#include "verify.h"

#include "cri_metrics.h"
#include "log.h"
#include "recorder.h"

#include <grpc/support/time.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct status_event {
    cri_tag tag;
    cri_task task;
} status_event;

struct cri_verifier {
    cri_verifier_options o;
    cri_verify_memory *memory; /* worker thread only */
};

typedef struct status_call {
    cri_verifier *v;
    int outstanding; /* gRPC batches in flight */
    bool answering, answered_ok;
    int64_t start_ms;
    char method_text[256]; /* for the calls metric */
    grpc_call *down, *up;
    grpc_call_details details;
    grpc_metadata_array client_md;
    grpc_metadata *fwd_md;
    size_t n_fwd_md;
    grpc_byte_buffer *recv_bb, *request;
    cri_status_request req; /* decoded before the bytes go up (sending moves them out) */
    bool decoded;
    unsigned n_messages;
    bool forwarded;
    const char *bad; /* why the request is refused (no request message) */
    int down_cancelled;
    grpc_metadata_array up_initial_md, up_trailing_md;
    grpc_metadata *fwd_initial, *fwd_trailing;
    size_t n_fwd_initial, n_fwd_trailing;
    grpc_status_code status;
    grpc_slice status_details;
    grpc_byte_buffer *response, *empty;
    grpc_slice answer_details;
    status_event ev_recv, ev_closed, ev_up, ev_final;
} status_call;

/* ------------------------------------------------------------ lifetime */

static void release(status_call *sc)
{
    cri_status_request_clear(&sc->req);
    if (sc->request)
        grpc_byte_buffer_destroy(sc->request);
    if (sc->recv_bb)
        grpc_byte_buffer_destroy(sc->recv_bb);
    if (sc->response)
        grpc_byte_buffer_destroy(sc->response);
    if (sc->empty)
        grpc_byte_buffer_destroy(sc->empty);
    free(sc->fwd_md);
    free(sc->fwd_initial);
    free(sc->fwd_trailing);
    grpc_metadata_array_destroy(&sc->client_md);
    grpc_metadata_array_destroy(&sc->up_initial_md);
    grpc_metadata_array_destroy(&sc->up_trailing_md);
    grpc_slice_unref(sc->status_details);
    grpc_slice_unref(sc->answer_details);
    if (sc->up)
        grpc_call_unref(sc->up);
    if (sc->down)
        grpc_call_unref(sc->down);
    grpc_call_details_destroy(&sc->details);
    free(sc);
}

static void maybe_done(status_call *sc)
{
    if (sc->answering && sc->answered_ok && sc->outstanding == 0)
        release(sc);
}

/* ------------------------------------------------------------ batches */

static void post_completion(void *arg, int ok)
{
    status_event *ev = arg;
    status_call *sc = ev->task.owner;
    ev->task.ok = ok;
    cri_worker_post(sc->v->o.worker, &ev->task);
}

static void set_event(status_event *ev, status_call *sc, cri_task_fn fn)
{
    ev->tag.fn = post_completion;
    ev->tag.arg = ev;
    ev->task.fn = fn;
    ev->task.owner = sc;
}

static bool start_batch(status_call *sc, grpc_call *gc, const grpc_op *ops, size_t n,
                        status_event *ev)
{
    grpc_call_error e = grpc_call_start_batch(gc, ops, n, &ev->tag, NULL);
    if (e != GRPC_CALL_OK) {
        cri_log(CRI_LOG_ERROR, "grpc batch refused", "method", "ImageStatus", "error",
                grpc_call_error_to_string(e), NULL);
        return false;
    }
    sc->outstanding++;
    return true;
}

static void on_final(cri_task *t)
{
    status_call *sc = t->owner;
    sc->outstanding--;
    sc->answered_ok = true;
    maybe_done(sc);
}

static void send_final(status_call *sc, grpc_status_code code, grpc_slice *details,
                       grpc_metadata *initial, size_t n_initial, grpc_metadata *trailing,
                       size_t n_trailing, grpc_byte_buffer *message)
{
    sc->answering = true;
    cri_metric_call(sc->method_text, (int)code, (double)(cri_now_ms() - sc->start_ms) / 1e3);
    grpc_op ops[3];
    size_t n =
        cri_answer_ops(ops, code, details, initial, n_initial, trailing, n_trailing, message);
    if (!start_batch(sc, sc->down, ops, n, &sc->ev_final))
        sc->answered_ok = true; /* nothing more will come for it */
}

/* The runtime's answer, unchanged: its headers, message, status and trailers. */
static void answer_truth(status_call *sc)
{
    send_final(sc, sc->status, &sc->status_details, sc->fwd_initial, sc->n_fwd_initial,
               sc->fwd_trailing, sc->n_fwd_trailing, sc->response);
}

/* "Not present": ImageStatusResponse{} (zero bytes) with the runtime's headers and trailers. */
static void answer_absent(status_call *sc)
{
    grpc_slice nothing = grpc_empty_slice();
    sc->empty = grpc_raw_byte_buffer_create(&nothing, 1);
    if (!sc->empty) {
        answer_truth(sc);
        return;
    }
    send_final(sc, GRPC_STATUS_OK, &sc->status_details, sc->fwd_initial, sc->n_fwd_initial,
               sc->fwd_trailing, sc->n_fwd_trailing, sc->empty);
}

static void refuse(status_call *sc, const char *why)
{
    char text[128];
    snprintf(text, sizeof text, "pullgate: ImageStatus not forwarded: %s", why);
    grpc_slice_unref(sc->answer_details);
    sc->answer_details = grpc_slice_from_copied_string(text);
    cri_log(CRI_LOG_WARNING, "ImageStatus refused", "detail", why, NULL);
    send_final(sc, GRPC_STATUS_INVALID_ARGUMENT, &sc->answer_details, NULL, 0, NULL, 0, NULL);
}

/* ------------------------------------------------------------ deciding */

/* What to answer, and why (for the log). */
typedef struct verdict {
    bool absent;     /* answer "not present" */
    bool loop_bound; /* curable, but the pod already pulled for it: the truth */
    const char *why; /* static text for a truthful answer taken without deciding */
    int reason;      /* the decision's reason when one was made */
    /* pullgate_cri_image_verifications_total's result when a verification was attempted:
     * verified, policy-allowed, must-pull, error (not verifiable: a bad or foreign
     * annotation, a store error, a pod that pulled and still does not match). */
    const char *metric;
    char namespace_[256];
} verdict;

/* The decision for the pod's namespace candidate, with the runtime's identities. */
static void decide(cri_verifier *v, const cri_status_request *r, char **aliases, verdict *out)
{
    char *ns = NULL;
    pg_error e = {0};
    if (r->annotation &&
        pg_presented_namespace(r->annotation, r->annotation_len, &ns, &e) != PG_OK) {
        /* Malformed, or naming several namespaces: no producer writes that; the hook
         * denies it (bad annotation) and no pull can change that. */
        out->why = "the credentials annotation names no single namespace";
        out->metric = "error";
        return;
    }
    snprintf(out->namespace_, sizeof out->namespace_, "%s", ns ? ns : "");
    pg_request req = {
        .image = r->image,
        .namespace_ = ns ? ns : "",
        .credentials = r->annotation,
    };
    pg_store *store = cri_decider_acquire(v->o.decider);
    if (!store) {
        free(ns);
        out->why = "the record store cannot be opened";
        out->metric = "error";
        return;
    }
    pg_decision d;
    pg_decide_identity(v->o.cfg, store, &req, (const char *const *)aliases, NULL, &d);
    cri_decider_release(v->o.decider);
    free(ns);
    out->reason = d.reason;
    if (d.allow || !pg_reason_curable_by_pull(d.reason)) {
        out->metric =
            !d.allow ? "error"
            : d.reason == PG_REASON_SECRET_MATCH || d.reason == PG_REASON_SERVICE_ACCOUNT_MATCH
                ? "verified"
                : "policy-allowed";
        return;
    }
    uint8_t key[32];
    cri_verify_key(r->image, r->annotation, r->annotation_len, r->config_seen, key);
    if (cri_verify_memory_ask(v->memory, key, cri_now_ms()))
        out->absent = true;
    else
        out->loop_bound = true;
    out->metric = out->absent ? "must-pull" : "error";
}

/* Everything that decides nothing answers the truth; out->why says which. */
static void judge(status_call *sc, const cri_status_request *r, bool decoded, verdict *out)
{
    if (!decoded) {
        out->why = "request not understood";
        return;
    }
    if (!r->has_pod_annotations) {
        out->why = "no pod annotations";
        return;
    }
    if (sc->status != GRPC_STATUS_OK || !sc->response) {
        out->why = "the runtime answered an error";
        return;
    }
    grpc_slice body = cri_flatten(sc->response);
    char **aliases = NULL;
    pg_error e = {0};
    int rc = cri_image_status_aliases(GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body), NULL,
                                      &aliases, &e);
    grpc_slice_unref(body);
    if (rc == PG_ERR_NOT_FOUND)
        out->why = "the runtime has no such image";
    else if (rc != PG_OK)
        out->why = "the runtime's answer not understood";
    else
        decide(sc->v, r, aliases, out);
    pg_strv_free(aliases);
}

static void log_verdict(const status_call *sc, const cri_status_request *r, const verdict *vd)
{
    char ms[24];
    snprintf(ms, sizeof ms, "%lld", (long long)(cri_now_ms() - sc->start_ms));
    const char *reason = vd->reason ? pg_reason_name(vd->reason) : NULL;
    if (vd->absent)
        /* Never a hash: image, namespace and the decision's reason only. */
        cri_log(CRI_LOG_INFO,
                "image not present for this pod: verification pull (a pod with "
                "imagePullPolicy Never reports ErrImageNeverPull)",
                "image", r->image, "namespace", vd->namespace_, "reason", reason, "durationMs", ms,
                NULL);
    else if (vd->loop_bound)
        cri_log(CRI_LOG_WARNING,
                "pod pulled and is still not verified: the runtime's answer (recreate the pod "
                "so the webhook lists the secret it pulls with)",
                "image", r->image, "namespace", vd->namespace_, "reason", reason, NULL);
    else if (cri_log_enabled(CRI_LOG_DEBUG))
        cri_log(CRI_LOG_DEBUG, "ImageStatus", "image", r->image, "status",
                cri_status_name(sc->status), "detail", vd->why, "reason", reason, "durationMs", ms,
                NULL);
}

static void on_up(cri_task *t)
{
    status_call *sc = t->owner;
    sc->outstanding--;
    cri_filter_md(&sc->up_initial_md, &sc->fwd_initial, &sc->n_fwd_initial);
    cri_filter_md(&sc->up_trailing_md, &sc->fwd_trailing, &sc->n_fwd_trailing);
    if (!t->ok && sc->status == GRPC_STATUS_OK)
        sc->status = GRPC_STATUS_UNKNOWN;
    const cri_status_request *r = &sc->req;
    verdict vd = {0};
    judge(sc, r, sc->decoded, &vd);
    if (vd.absent)
        answer_absent(sc);
    else
        answer_truth(sc);
    log_verdict(sc, r, &vd);
    if (vd.metric)
        cri_metric_verification(vd.metric);
    /* After the answer went out: the bus never delays the kubelet. */
    if (vd.absent && sc->v->o.notifier)
        pg_notify_pull_required(sc->v->o.notifier, r->image, vd.namespace_,
                                pg_reason_name(vd.reason));
    maybe_done(sc);
}

/* The request goes up exactly as it came, with its metadata. */
static void forward(status_call *sc)
{
    cri_verifier *v = sc->v;
    sc->forwarded = true;
    pg_error e = {0};
    grpc_slice body = cri_flatten(sc->request);
    sc->decoded = cri_status_request_decode(GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body),
                                            pg_config_annotation(v->o.cfg), &sc->req, &e) == PG_OK;
    grpc_slice_unref(body);
    const grpc_slice *host = GRPC_SLICE_LENGTH(sc->details.host) ? &sc->details.host : NULL;
    sc->up = grpc_channel_create_call(v->o.channel, sc->down, GRPC_PROPAGATE_DEFAULTS, v->o.cq,
                                      sc->details.method, host, sc->details.deadline, NULL);
    grpc_op ops[6] = {
        cri_op(GRPC_OP_SEND_INITIAL_METADATA),  cri_op(GRPC_OP_SEND_MESSAGE),
        cri_op(GRPC_OP_SEND_CLOSE_FROM_CLIENT), cri_op(GRPC_OP_RECV_INITIAL_METADATA),
        cri_op(GRPC_OP_RECV_MESSAGE),           cri_op(GRPC_OP_RECV_STATUS_ON_CLIENT)};
    ops[0].data.send_initial_metadata.count = sc->n_fwd_md;
    ops[0].data.send_initial_metadata.metadata = sc->fwd_md;
    ops[1].data.send_message.send_message = sc->request;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &sc->up_initial_md;
    ops[4].data.recv_message.recv_message = &sc->response;
    ops[5].data.recv_status_on_client.trailing_metadata = &sc->up_trailing_md;
    ops[5].data.recv_status_on_client.status = &sc->status;
    ops[5].data.recv_status_on_client.status_details = &sc->status_details;
    if (!sc->up || !start_batch(sc, sc->up, ops, 6, &sc->ev_up)) {
        grpc_slice_unref(sc->answer_details);
        sc->answer_details =
            grpc_slice_from_static_string("pullgate: the runtime call could not be started");
        send_final(sc, GRPC_STATUS_UNAVAILABLE, &sc->answer_details, NULL, 0, NULL, 0, NULL);
    }
}

/* ------------------------------------------------------------ receiving */

/*
 * A unary call: the request goes up as soon as its message is here (waiting for the
 * half-close would cost the worker one more wake-up per call). Anything the client sends
 * after it is drained and dropped: the runtime sees exactly the first message, as a
 * grpc-go server reads exactly one for a unary method.
 */
static void advance(status_call *sc)
{
    if (sc->forwarded || sc->answering)
        return;
    if (sc->request)
        forward(sc);
    else if (sc->bad)
        refuse(sc, sc->bad);
}

static void receive_next(status_call *sc)
{
    grpc_op o = cri_op(GRPC_OP_RECV_MESSAGE);
    o.data.recv_message.recv_message = &sc->recv_bb;
    if (!start_batch(sc, sc->down, &o, 1, &sc->ev_recv) && !sc->request)
        sc->bad = "cannot read the request";
}

static void on_recv(cri_task *t)
{
    status_call *sc = t->owner;
    sc->outstanding--;
    if (!t->ok || !sc->recv_bb) {
        if (sc->recv_bb)
            grpc_byte_buffer_destroy(sc->recv_bb);
        sc->recv_bb = NULL;
        if (!sc->request)
            sc->bad = "no request message";
    } else if (++sc->n_messages == 1) {
        sc->request = sc->recv_bb;
        sc->recv_bb = NULL;
        receive_next(sc); /* the half-close, or a message to drop */
    } else {
        grpc_byte_buffer_destroy(sc->recv_bb);
        sc->recv_bb = NULL;
        if (!sc->answering) /* once answered, the call's end completes nothing more */
            receive_next(sc);
    }
    advance(sc);
    maybe_done(sc);
}

static void on_closed(cri_task *t)
{
    status_call *sc = t->owner;
    sc->outstanding--;
    maybe_done(sc);
}

/*
 * Runs on the event loop, in cri_verifier_start: the call's first batches start there,
 * which saves the worker a wake-up per call. Safe: no completion of this call can run
 * before the event loop returns from here (it is the only thread reading the queue), and
 * the worker sees the call only through its queue's lock, after these writes.
 */
static void start_receiving(status_call *sc)
{
    cri_filter_md(&sc->client_md, &sc->fwd_md, &sc->n_fwd_md);
    grpc_op o = cri_op(GRPC_OP_RECV_CLOSE_ON_SERVER);
    o.data.recv_close_on_server.cancelled = &sc->down_cancelled;
    start_batch(sc, sc->down, &o, 1, &sc->ev_closed);
    receive_next(sc);
    advance(sc); /* refuses when the receive could not start */
    maybe_done(sc);
}

/* ------------------------------------------------------------ public */

void cri_verifier_start(cri_verifier *v, grpc_call *incoming, grpc_call_details *details,
                        grpc_metadata_array *md)
{
    status_call *sc = calloc(1, sizeof *sc);
    if (!sc) {
        grpc_call_cancel_with_status(incoming, GRPC_STATUS_RESOURCE_EXHAUSTED,
                                     "pullgate: out of memory", NULL);
        grpc_call_unref(incoming);
        grpc_call_details_destroy(details);
        grpc_metadata_array_destroy(md);
        return;
    }
    sc->v = v;
    sc->start_ms = cri_now_ms();
    size_t mlen = GRPC_SLICE_LENGTH(details->method);
    if (mlen >= sizeof sc->method_text)
        mlen = sizeof sc->method_text - 1;
    memcpy(sc->method_text, GRPC_SLICE_START_PTR(details->method), mlen);
    sc->down = incoming;
    sc->details = *details;
    sc->client_md = *md;
    sc->status_details = grpc_empty_slice();
    sc->answer_details = grpc_empty_slice();
    grpc_metadata_array_init(&sc->up_initial_md);
    grpc_metadata_array_init(&sc->up_trailing_md);
    set_event(&sc->ev_recv, sc, on_recv);
    set_event(&sc->ev_closed, sc, on_closed);
    set_event(&sc->ev_up, sc, on_up);
    set_event(&sc->ev_final, sc, on_final);
    memset(details, 0, sizeof *details);
    memset(md, 0, sizeof *md);
    start_receiving(sc);
}

void cri_verifier_pulled(cri_verifier *v, const char *image, const char *annotation,
                         size_t annotation_len, const char *config_seen)
{
    if (!v || !image)
        return;
    uint8_t key[32];
    cri_verify_key(image, annotation, annotation_len, config_seen, key);
    cri_verify_memory_pulled(v->memory, key, cri_now_ms());
}

cri_verifier *cri_verifier_new(const cri_verifier_options *o, pg_error *err)
{
    cri_verifier *v = calloc(1, sizeof *v);
    if (!v) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    v->o = *o;
    if (!(v->memory =
              cri_verify_memory_new(CRI_VERIFY_MEMORY_ENTRIES, CRI_VERIFY_MEMORY_TTL_MS, err))) {
        free(v);
        return NULL;
    }
    return v;
}

void cri_verifier_free(cri_verifier *v)
{
    if (!v)
        return;
    cri_verify_memory_free(v->memory);
    free(v);
}
