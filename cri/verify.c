/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ImageStatus, step by step (RECEIVING, FORWARDED, DECIDING, ANSWERING: cri/README.md
 * "ImageStatus", and why a wrong answer cannot let anything run: docs/interfaces.md §10).
 *
 * Every step runs on the event loop, the thread that receives the runtime's
 * answer: the decision is bounded and never waits for a writer (the store's
 * read path takes no lock, its caches take short mutexes, the decider's
 * read lock waits only for a store reopen), so the call costs no thread
 * hand-off (cri/README.md, "Cost"). Only the D-Bus signal, which may wait for
 * the bus, goes to the worker, after the answer.
 */
#include "verify.h"

#include "call.h"
#include "cleanup.h"
#include "cri_metrics.h"
#include "log.h"
#include "recorder.h"

#include <grpc/support/time.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cri_verifier {
    cri_verifier_options o;
    pthread_mutex_t memory_lock; /* the event loop asks, the worker notes pulls */
    cri_verify_memory *memory;
};

/* A PullRequired signal, sent on the worker (the bus may make it wait). */
typedef struct pull_required {
    cri_task task;
    pg_notifier *notifier;
    char *image, *namespace_, *reason;
} pull_required;

typedef struct status_call {
    cri_call c; /* the incoming call, its request, the forward and the answer */
    cri_verifier *v;
    cri_status_request req; /* decoded before the bytes go up (sending moves them out) */
    bool decoded;
    bool forwarded;
    const char *bad; /* why the request is refused (no request message) */
    grpc_byte_buffer *empty;
} status_call;

/* ------------------------------------------------------------ lifetime */

static void maybe_done(status_call *sc)
{
    if (!cri_call_finished(&sc->c))
        return;
    cri_status_request_clear(&sc->req);
    if (sc->empty)
        grpc_byte_buffer_destroy(sc->empty);
    cri_call_release(&sc->c);
    free(sc);
}

/* ------------------------------------------------------------ answers */

static void on_final(cri_task *t)
{
    status_call *sc = t->owner;
    cri_call_answered(&sc->c);
    maybe_done(sc);
}

/* "Not present": ImageStatusResponse{} (zero bytes) with the runtime's headers and trailers. */
static void answer_absent(status_call *sc)
{
    grpc_slice nothing = grpc_empty_slice();
    sc->empty = grpc_raw_byte_buffer_create(&nothing, 1);
    if (!sc->empty) {
        cri_call_relay(&sc->c);
        return;
    }
    cri_call_relay_as(&sc->c, GRPC_STATUS_OK, sc->empty);
}

static void refuse(status_call *sc, const char *why)
{
    char text[128];
    snprintf(text, sizeof text, "pullgate: ImageStatus not forwarded: %s", why);
    cri_log(CRI_LOG_WARNING, "ImageStatus refused", "detail", why, NULL);
    cri_call_answer_status(&sc->c, GRPC_STATUS_INVALID_ARGUMENT, text);
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
    pg_autofree char *ns = NULL;
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
        out->why = "the record store cannot be opened";
        out->metric = "error";
        return;
    }
    pg_decision d;
    pg_decide_identity(v->o.cfg, store, &req, (const char *const *)aliases, NULL, &d);
    cri_decider_release(v->o.decider);
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
    pthread_mutex_lock(&v->memory_lock);
    bool ask = cri_verify_memory_ask(v->memory, key, pg_monotonic_ms());
    pthread_mutex_unlock(&v->memory_lock);
    if (ask)
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
    if (sc->c.r.status != GRPC_STATUS_OK || !sc->c.response) {
        out->why = "the runtime answered an error";
        return;
    }
    grpc_slice body = cri_flatten(sc->c.response);
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
    snprintf(ms, sizeof ms, "%lld", (long long)(pg_monotonic_ms() - sc->c.start_ms));
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
                "pod pulled and is still not verified by its annotation: the runtime's answer "
                "(the hook lets the pod that pulled run it, by its pod binding; recreate the pod "
                "so the webhook lists the secret it pulls with)",
                "image", r->image, "namespace", vd->namespace_, "reason", reason, NULL);
    else if (cri_log_enabled(CRI_LOG_DEBUG))
        cri_log(CRI_LOG_DEBUG, "ImageStatus", "image", r->image, "status",
                cri_status_name(sc->c.r.status), "detail", vd->why, "reason", reason, "durationMs",
                ms, NULL);
}

static void pull_required_free(pull_required *p)
{
    if (!p)
        return;
    free(p->image);
    free(p->namespace_);
    free(p->reason);
    free(p);
}

static void send_pull_required(cri_task *t)
{
    pull_required *p = t->owner;
    pg_notify_pull_required(p->notifier, p->image, p->namespace_, p->reason);
    pull_required_free(p);
}

/* The signal, on the worker: after the answer went out, the bus never delays the kubelet. */
static void post_pull_required(cri_verifier *v, const char *image, const char *ns,
                               const char *reason)
{
    pull_required *p = calloc(1, sizeof *p);
    if (p) {
        p->image = pg_strdup(image);
        p->namespace_ = pg_strdup(ns);
        p->reason = pg_strdup(reason ? reason : "");
    }
    if (!p || !p->image || !p->namespace_ || !p->reason) {
        cri_log(CRI_LOG_WARNING, "PullRequired not signalled: out of memory", "image", image, NULL);
        pull_required_free(p);
        return;
    }
    p->notifier = v->o.notifier;
    p->task.fn = send_pull_required;
    p->task.owner = p;
    cri_worker_post(v->o.worker, &p->task);
}

static void on_up(cri_task *t)
{
    status_call *sc = t->owner;
    cri_call_upstream_done(&sc->c, t->ok);
    const cri_status_request *r = &sc->req;
    verdict vd = {0};
    judge(sc, r, sc->decoded, &vd);
    if (vd.absent)
        answer_absent(sc);
    else
        cri_call_relay(&sc->c);
    log_verdict(sc, r, &vd);
    if (vd.metric)
        cri_metric_verification(vd.metric);
    if (vd.absent && sc->v->o.notifier)
        post_pull_required(sc->v, r->image, vd.namespace_, pg_reason_name(vd.reason));
    maybe_done(sc);
}

/* The request goes up exactly as it came, with its metadata. */
static void forward(status_call *sc)
{
    cri_verifier *v = sc->v;
    sc->forwarded = true;
    pg_error e = {0};
    grpc_slice body = cri_flatten(sc->c.request);
    sc->decoded = cri_status_request_decode(GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body),
                                            pg_config_annotation(v->o.cfg), &sc->req, &e) == PG_OK;
    grpc_slice_unref(body);
    if (!cri_call_forward(&sc->c, v->o.channel, v->o.cq))
        cri_call_answer_status(&sc->c, GRPC_STATUS_UNAVAILABLE,
                               "pullgate: the runtime call could not be started");
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
    if (sc->forwarded || sc->c.answering)
        return;
    if (sc->c.request)
        forward(sc);
    else if (sc->bad)
        refuse(sc, sc->bad);
}

/* After the request: the half-close, or a message to drop. Once the request is here, a
 * receive that cannot start changes nothing (the call's end comes without it). */
static void drain(status_call *sc) { cri_call_receive_next(&sc->c); }

static void on_recv(cri_task *t)
{
    status_call *sc = t->owner;
    switch (cri_call_received(&sc->c, t->ok)) {
    case CRI_CALL_RECV_REQUEST: drain(sc); break;
    case CRI_CALL_RECV_END: break;
    case CRI_CALL_RECV_NONE: sc->bad = "no request message"; break;
    case CRI_CALL_RECV_EXTRA:
        if (!sc->c.answering) /* once answered, the call's end completes nothing more */
            drain(sc);
        break;
    }
    advance(sc);
    maybe_done(sc);
}

static void on_closed(cri_task *t)
{
    status_call *sc = t->owner;
    cri_call_batch_done(&sc->c);
    maybe_done(sc);
}

/* On the event loop, in cri_verifier_start, like every step of the call. */
static void start_receiving(status_call *sc)
{
    if (!cri_call_start_receiving(&sc->c))
        sc->bad = "cannot read the request";
    advance(sc); /* refuses when the receive could not start */
    maybe_done(sc);
}

/* ------------------------------------------------------------ public */

static const cri_call_kind status_kind = {
    .name = "ImageStatus",
    .on_loop = true,
    .received = on_recv,
    .closed = on_closed,
    .upstream = on_up,
    .answered = on_final,
};

void cri_verifier_start(cri_verifier *v, grpc_call *incoming, grpc_call_details *details,
                        grpc_metadata_array *md)
{
    status_call *sc = calloc(1, sizeof *sc);
    if (!sc) {
        cri_call_refuse_unallocated(incoming, details, md);
        return;
    }
    cri_call_init(&sc->c, sc, &status_kind, v->o.worker, incoming, details, md);
    sc->v = v;
    start_receiving(sc);
}

void cri_verifier_pulled(cri_verifier *v, const char *image, const char *annotation,
                         size_t annotation_len, const char *config_seen)
{
    if (!v || !image)
        return;
    uint8_t key[32];
    cri_verify_key(image, annotation, annotation_len, config_seen, key);
    pthread_mutex_lock(&v->memory_lock);
    cri_verify_memory_pulled(v->memory, key, pg_monotonic_ms());
    pthread_mutex_unlock(&v->memory_lock);
}

cri_verifier *cri_verifier_new(const cri_verifier_options *o, pg_error *err)
{
    pg_autofree cri_verifier *v = calloc(1, sizeof *v);
    if (!v) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    v->o = *o;
    v->memory = cri_verify_memory_new(CRI_VERIFY_MEMORY_ENTRIES, CRI_VERIFY_MEMORY_TTL_MS, err);
    if (!v->memory)
        return NULL;
    pthread_mutex_init(&v->memory_lock, NULL);
    return pg_steal(&v);
}

void cri_verifier_free(cri_verifier *v)
{
    if (!v)
        return;
    cri_verify_memory_free(v->memory);
    pthread_mutex_destroy(&v->memory_lock);
    free(v);
}
