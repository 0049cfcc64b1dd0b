/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PullImage, step by step: the phases below (pull_phase) are cri/README.md's
 * "PullImage", where each is explained; cri_pull_admit() (pull.c) decides every
 * admission step. Everything here runs on the worker thread; the event loop
 * only posts the completions of this call's batches (call.c's post_completion).
 */
#include "intercept.h"

#include "call.h"
#include "cleanup.h"
#include "cri_metrics.h"
#include "grpc_unary.h"
#include "log.h"
#include "verify.h"

#include <grpc/support/time.h>
#include <openssl/crypto.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum pull_phase {
    PH_RECEIVING,
    PH_ADMITTING,
    PH_FORWARDED,
    PH_RECORDING,
    PH_CHECKING,
    PH_ANSWERING,
    PH_DONE
} pull_phase;

typedef struct pull_call pull_call;

struct cri_intercept {
    cri_intercept_options o;
    char *annotation_key;
    /* Worker thread only. */
    unsigned slots_in_use;
    size_t n_waiters;
    pull_call *waiters_head, *waiters_tail;
};

struct pull_call {
    cri_call c;       /* the incoming call, its request (wiped at the end), the forward */
    cri_intercept *x; /* only while the call runs: the proxy may be gone at a late outcome */
    atomic_int refs;  /* the machine's, and one per record operation in flight */
    pull_phase phase;
    cri_method method;
    /* receiving */
    /* Our own references to the request's slices: sending moves them out of the
     * byte buffer, and they must be wiped once the send is done. */
    grpc_slice *sent;
    size_t n_sent;
    bool half_closed;
    /* admission */
    cri_decode_result decoded;
    bool decode_done;
    const char *why; /* static detail for a refusal or the log */
    cri_pull_request req;
    cri_pull_creds creds;
    cri_cred_source cred_source; /* kept for the log: creds move to the writer */
    char cred_detail[sizeof((cri_pull_creds *)0)->detail];
    bool slot_asked;
    cri_slot_state slot;
    cri_record_outcome intent;
    bool intent_released;
    unsigned reserved;
    pull_call *next_waiter;
    bool waiting;
    /* upstream */
    char *image_ref;
    /* the proxy's own ImageStatus */
    grpc_call *st_call;
    grpc_byte_buffer *st_send, *st_recv;
    grpc_metadata_array st_initial, st_trailing;
    grpc_status_code st_status;
    grpc_slice st_details;
    /* the answer */
    bool refused;
    grpc_status_code answer_code;
    const char *outcome; /* for the log: "recorded", "intent kept", ... */
    bool result_waiting;
    cri_timer timer;
    cri_call_event ev_status;
    cri_task t_start, t_intent, t_result;
};

static void advance(pull_call *pc);
static void answer(pull_call *pc);

/* ------------------------------------------------------------ lifetime */

static void pull_ref(pull_call *pc) { atomic_fetch_add(&pc->refs, 1); }

/* Only memory: the gRPC objects are released at DONE, on the worker. */
static void pull_unref(pull_call *pc)
{
    if (atomic_fetch_sub(&pc->refs, 1) != 1)
        return;
    cri_pull_request_clear(&pc->req);
    cri_pull_creds_clear(&pc->creds);
    free(pc->image_ref);
    free(pc);
}

/*
 * The request holds the pull's credentials, in slices that are the transport's
 * own read buffer: wiped as soon as nothing needs it any more (refused, or the
 * runtime answered: the send is long done), not when the call is released.
 */
static void wipe_request(pull_call *pc)
{
    cri_call_drop_request(&pc->c);
    for (size_t i = 0; i < pc->n_sent; i++) {
        cri_slice_wipe(pc->sent[i]);
        grpc_slice_unref(pc->sent[i]);
    }
    free(pc->sent);
    pc->sent = NULL;
    pc->n_sent = 0;
}

/* Keeps a reference to every slice of the request before gRPC takes them to send. */
static bool keep_sent_slices(pull_call *pc)
{
    grpc_slice_buffer *sb = &pc->c.request->data.raw.slice_buffer;
    if (pc->c.request->type != GRPC_BB_RAW ||
        !(pc->sent = calloc(sb->count ? sb->count : 1, sizeof *pc->sent)))
        return false;
    for (size_t i = 0; i < sb->count; i++)
        pc->sent[pc->n_sent++] = grpc_slice_ref(sb->slices[i]);
    return true;
}

static void release_grpc(pull_call *pc)
{
    wipe_request(pc);
    if (pc->st_send)
        grpc_byte_buffer_destroy(pc->st_send);
    if (pc->st_recv)
        grpc_byte_buffer_destroy(pc->st_recv);
    grpc_metadata_array_destroy(&pc->st_initial);
    grpc_metadata_array_destroy(&pc->st_trailing);
    grpc_slice_unref(pc->st_details);
    if (pc->st_call)
        grpc_call_unref(pc->st_call);
    cri_call_release(&pc->c);
}

/* ------------------------------------------------------------ slots */

static void waiter_remove(cri_intercept *x, pull_call *pc)
{
    pull_call **p = &x->waiters_head;
    pull_call *prev = NULL;
    while (*p && *p != pc) {
        prev = *p;
        p = &(*p)->next_waiter;
    }
    if (!*p)
        return;
    *p = pc->next_waiter;
    if (x->waiters_tail == pc)
        x->waiters_tail = prev;
    pc->next_waiter = NULL;
    pc->waiting = false;
    x->n_waiters--;
}

static void ask_slot(pull_call *pc)
{
    cri_intercept *x = pc->x;
    pc->slot_asked = true;
    if (x->slots_in_use < x->o.max_slots) {
        x->slots_in_use++;
        pc->slot = CRI_SLOT_HELD;
    } else if (x->o.slot_wait_ms > 0 && x->n_waiters < CRI_MAX_SLOT_WAITERS) {
        pc->slot = CRI_SLOT_WAITING;
        pc->waiting = true;
        if (x->waiters_tail)
            x->waiters_tail->next_waiter = pc;
        else
            x->waiters_head = pc;
        x->waiters_tail = pc;
        x->n_waiters++;
        cri_worker_arm(x->o.worker, &pc->timer, pg_monotonic_ms() + x->o.slot_wait_ms);
    } else {
        pc->slot = CRI_SLOT_NONE;
        pc->why = "no pull slot free";
    }
}

/* A slot came free: the longest waiter takes it. */
static void release_slot(cri_intercept *x)
{
    pull_call *next = x->waiters_head;
    if (!next) {
        x->slots_in_use--;
        return;
    }
    waiter_remove(x, next);
    cri_worker_disarm(x->o.worker, &next->timer);
    next->slot = CRI_SLOT_HELD;
    advance(next);
}

/* ------------------------------------------------------------ done */

/* DONE once the answer went out (or could not) and no batch is in flight. */
static void maybe_done(pull_call *pc)
{
    if (pc->phase != PH_ANSWERING || !cri_call_finished(&pc->c))
        return;
    pc->phase = PH_DONE;
    cri_intercept *x = pc->x;
    cri_worker_disarm(x->o.worker, &pc->timer);
    if (pc->waiting)
        waiter_remove(x, pc);
    if (pc->reserved)
        cri_recorder_unreserve(x->o.recorder, pc->reserved);
    pc->reserved = 0;
    release_grpc(pc);
    if (pc->slot == CRI_SLOT_HELD)
        release_slot(x);
    pull_unref(pc);
}

/* ------------------------------------------------------------ logging */

static void log_pull(pull_call *pc, cri_log_level level, const char *msg)
{
    if (!cri_log_enabled(level))
        return;
    char ms[24];
    snprintf(ms, sizeof ms, "%lld", (long long)(pg_monotonic_ms() - pc->c.start_ms));
    grpc_status_code code = pc->refused ? pc->answer_code : pc->c.r.status;
    cri_log(level, msg, "method", pc->c.method_text, "image", pc->req.image, "imageRef",
            pc->image_ref, "status", cri_status_name(code), "outcome", pc->outcome, "credentials",
            pc->decode_done && pc->decoded == CRI_DECODED ? cri_cred_source_name(pc->cred_source)
                                                          : NULL,
            "detail", pc->refused ? pc->why : pc->cred_detail, "namespace", pc->req.pod_namespace,
            "pod", pc->req.pod_name, "durationMs", ms, NULL);
}

/* ------------------------------------------------------------ answers */

static void on_final(cri_task *t)
{
    pull_call *pc = t->owner;
    cri_call_answered(&pc->c);
    maybe_done(pc);
}

/* ANSWERING: no timer is waited for any more. */
static void start_answering(pull_call *pc)
{
    pc->phase = PH_ANSWERING;
    cri_worker_disarm(pc->c.worker, &pc->timer);
}

/* The runtime's answer, unchanged: its headers, message, status and trailers. */
static void answer(pull_call *pc)
{
    log_pull(pc, CRI_LOG_INFO, "pull");
    start_answering(pc);
    cri_call_relay(&pc->c);
    maybe_done(pc);
}

static void on_record_done(void *arg, int rc, const pg_error *err);

/* Queues the release of the pull's intent; its outcome comes to t_result. False (err says
 * why) when the writer refused it: the intent stays. */
static bool release_intent(pull_call *pc, pg_error *err)
{
    pull_ref(pc);
    pc->reserved--;
    if (cri_record_failed(pc->x->o.recorder, pc->req.image, on_record_done, &pc->t_result, err) ==
        PG_OK)
        return true;
    pc->reserved++;
    pull_unref(pc);
    return false;
}

/* Our own status; the request never reached the runtime. An intent that may
 * still land is released after it (the writer runs them in order). */
static void refuse(pull_call *pc, grpc_status_code code, const char *message)
{
    pc->refused = true;
    pc->answer_code = code;
    pc->outcome = "refused";
    cri_metric_pull_refused(code,
                            cri_metric_refusal_reason(code, pc->decoded, pc->slot, pc->intent));
    if (pc->waiting)
        waiter_remove(pc->x, pc);
    if ((pc->intent == CRI_RECORD_WAITING || pc->intent == CRI_RECORD_PENDING) &&
        !pc->intent_released) {
        pg_error e = {0};
        pc->intent_released = true;
        if (!release_intent(pc, &e))
            cri_log(CRI_LOG_ERROR, "pull intent left behind (image stays verified)", "image",
                    pc->req.image, "error", e.message, NULL);
    }
    wipe_request(pc); /* refused before anything was sent */
    char text[512];
    snprintf(text, sizeof text, "%s%s%s", message, pc->why ? ": " : "", pc->why ? pc->why : "");
    log_pull(pc, CRI_LOG_WARNING, "pull refused");
    start_answering(pc);
    cri_call_answer_status(&pc->c, code, text);
    maybe_done(pc);
}

/* ------------------------------------------------------------ record outcomes */

/* On the writer thread: hand the outcome to the worker. */
static void on_record_done(void *arg, int rc, const pg_error *err)
{
    cri_task *t = arg;
    pull_call *pc = t->owner;
    t->ok = rc;
    if (err)
        t->err = *err;
    cri_worker_post(pc->c.worker, t);
}

static void on_intent_done(cri_task *t)
{
    pull_call *pc = t->owner;
    if (pc->intent == CRI_RECORD_WAITING && pc->phase == PH_ADMITTING) {
        cri_worker_disarm(pc->x->o.worker, &pc->timer);
        pc->intent = t->ok == PG_OK ? CRI_RECORD_DURABLE : CRI_RECORD_FAILED;
        if (t->ok != PG_OK) {
            pc->why = "store error";
            cri_log(CRI_LOG_ERROR, "pull intent not recorded", "image", pc->req.image, "error",
                    t->err.message, NULL);
        }
        advance(pc);
    } else if (t->ok != PG_OK) {
        cri_log(CRI_LOG_ERROR, "late pull intent not recorded", "image", pc->req.image, "error",
                t->err.message, NULL);
    }
    pull_unref(pc);
}

/* The loop bound (cri/README.md, "ImageStatus"): only while the call runs (x is valid); a
 * record that landed late or failed is not remembered, so the pod is asked to pull again. */
static void remember_pulled(pull_call *pc)
{
    cri_verifier_pulled(pc->x->o.verifier, pc->req.image, pc->req.annotation,
                        pc->req.annotation_len, pc->req.config_seen);
}

/*
 * The runtime pulled, but the record cannot take the pull (PG_ERR_QUOTA: the namespace's
 * share; PG_ERR_LIMIT: 8 MiB): the kubelet hears RESOURCE_EXHAUSTED, never OK (the hook
 * would deny the pod anyway); the intent stays (docs/interfaces.md §10).
 */
static void refuse_unrecordable(pull_call *pc, int rc, const pg_error *err)
{
    bool share = rc == PG_ERR_QUOTA;
    pc->refused = true;
    pc->answer_code = GRPC_STATUS_RESOURCE_EXHAUSTED;
    pc->outcome = "refused after the pull (not recordable; intent kept)";
    pc->why = share ? "the namespace's share of the record is used up" : "the record is full";
    cri_metric_pull_refused(GRPC_STATUS_RESOURCE_EXHAUSTED, share ? "record-share" : "record-full");
    char text[800];
    snprintf(text, sizeof text, "pullgate: the pull of %.200s cannot be recorded: %.500s",
             pc->req.image, err->message[0] ? err->message : pg_code_name(rc));
    log_pull(pc, CRI_LOG_WARNING, "pull refused");
    start_answering(pc);
    cri_call_answer_status(&pc->c, GRPC_STATUS_RESOURCE_EXHAUSTED, text);
    maybe_done(pc);
}

static void on_result_done(cri_task *t)
{
    pull_call *pc = t->owner;
    if (t->ok != PG_OK)
        cri_log(CRI_LOG_ERROR, "pull not fully recorded (the intent stays)", "image", pc->req.image,
                "error", t->err.message, NULL);
    if (pc->result_waiting) {
        pc->result_waiting = false;
        if (pc->phase == PH_RECORDING && (t->ok == PG_ERR_QUOTA || t->ok == PG_ERR_LIMIT)) {
            refuse_unrecordable(pc, t->ok, &t->err);
        } else {
            if (t->ok != PG_OK)
                pc->outcome = "intent kept (record failed)";
            else
                remember_pulled(pc);
            answer(pc);
        }
    }
    pull_unref(pc);
}

/* ------------------------------------------------------------ the proxy's ImageStatus */

static void on_status(cri_task *t);

/* ImageStatus(image) on the runtime channel, bounded; false when it cannot start. */
static bool ask_image_status(pull_call *pc, const char *image)
{
    cri_intercept *x = pc->x;
    uint8_t *req;
    size_t len;
    if (cri_image_status_request_encode(image, &req, &len, NULL) != PG_OK)
        return false;
    grpc_slice payload = grpc_slice_from_copied_buffer((const char *)req, len);
    free(req);
    pc->st_send = grpc_raw_byte_buffer_create(&payload, 1);
    grpc_slice_unref(payload);
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(x->o.image_status_ms, GPR_TIMESPAN));
    grpc_slice method = grpc_slice_from_static_string(pc->method.image_status);
    pc->st_call = grpc_channel_create_call(x->o.channel, NULL, GRPC_PROPAGATE_DEFAULTS, x->o.cq,
                                           method, NULL, deadline, NULL);
    if (!pc->st_call)
        return false;
    grpc_op ops[6];
    pg_grpc_unary_answer into = {&pc->st_initial, &pc->st_recv, &pc->st_trailing, &pc->st_status,
                                 &pc->st_details};
    pg_grpc_unary_ops(ops, NULL, 0, pc->st_send, &into);
    return cri_call_start_batch(&pc->c, pc->st_call, ops, 6, &pc->ev_status);
}

/* The answer's body, or an empty slice (caller unrefs). */
static grpc_slice status_answer(pull_call *pc, bool ok)
{
    if (!ok || pc->st_status != GRPC_STATUS_OK || !pc->st_recv)
        return grpc_empty_slice();
    return cri_flatten(pc->st_recv);
}

/* The answer waits for the queued result until the record budget (the timer) runs out. */
static void wait_for_result(pull_call *pc)
{
    if (pc->timer.armed) {
        pc->result_waiting = true;
        return;
    }
    pc->outcome = "recording pending (lands when the store is free)";
    answer(pc);
}

/* Queues the pulled record with the image's aliases (when known); the answer waits for it. */
static void record_pulled(pull_call *pc, char **aliases)
{
    cri_intercept *x = pc->x;
    pg_error e = {0};
    pull_ref(pc);
    pc->reserved--;
    pc->outcome = "recorded";
    if (cri_record_pulled(x->o.recorder, pc->req.image, pc->image_ref, &pc->creds, aliases,
                          on_record_done, &pc->t_result, &e) != PG_OK) {
        pg_strv_free(aliases);
        pc->reserved++;
        pull_unref(pc);
        pc->outcome = "intent kept (out of memory)";
        answer(pc);
        return;
    }
    wait_for_result(pc);
}

/* A failed pull: only an image the runtime reports absent releases the intent. */
static void check_absent(pull_call *pc, int present)
{
    if (present != 0) {
        pc->outcome = present > 0 ? "intent kept (the runtime has the image)"
                                  : "intent kept (ImageStatus failed)";
        answer(pc);
        return;
    }
    pg_error e = {0};
    pc->outcome = "intent released";
    if (!release_intent(pc, &e)) {
        pc->outcome = "intent kept (out of memory)";
        answer(pc);
        return;
    }
    wait_for_result(pc);
}

static void on_status(cri_task *t)
{
    pull_call *pc = t->owner;
    cri_call_batch_done(&pc->c);
    grpc_slice body = status_answer(pc, t->ok);
    if (pc->phase == PH_RECORDING) {
        char **aliases = NULL;
        pg_error e = {0};
        if (GRPC_SLICE_LENGTH(body) == 0 && pc->st_status != GRPC_STATUS_OK)
            cri_log(CRI_LOG_WARNING, "ImageStatus after the pull failed; identities not indexed",
                    "image", pc->req.image, "status", cri_status_name(pc->st_status), NULL);
        else if (cri_image_status_aliases(GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body),
                                          pc->req.image, &aliases, &e) != PG_OK)
            cri_log(CRI_LOG_WARNING, "identities not indexed", "image", pc->req.image, "error",
                    e.message, NULL);
        record_pulled(pc, aliases);
    } else if (pc->phase == PH_CHECKING) {
        int present =
            GRPC_SLICE_LENGTH(body) || pc->st_status == GRPC_STATUS_OK
                ? cri_image_status_present(GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body))
                : -1;
        check_absent(pc, present);
    }
    grpc_slice_unref(body);
    maybe_done(pc);
}

/* ------------------------------------------------------------ upstream */

static void on_up(cri_task *t)
{
    pull_call *pc = t->owner;
    cri_call_upstream_done(&pc->c, t->ok);
    wipe_request(pc);
    cri_intercept *x = pc->x;
    int64_t due = pg_monotonic_ms() + x->o.record_budget_ms;
    grpc_status_code status = pc->c.r.status;
    if (status == GRPC_STATUS_OK && pc->c.response) {
        pg_error e = {0};
        grpc_slice body = cri_flatten(pc->c.response);
        int rc = cri_pull_response_decode(GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body),
                                          &pc->image_ref, &e);
        grpc_slice_unref(body);
        if (rc != PG_OK) {
            pc->outcome = "intent kept (answer not understood)";
            cri_log(CRI_LOG_WARNING, "PullImage answer not understood; intent kept", "image",
                    pc->req.image, "error", e.message, NULL);
            answer(pc);
        } else {
            pc->phase = PH_RECORDING;
            cri_worker_arm(x->o.worker, &pc->timer, due);
            if (!ask_image_status(pc, pc->image_ref))
                record_pulled(pc, NULL);
        }
    } else if (status == GRPC_STATUS_OK || status == GRPC_STATUS_CANCELLED ||
               status == GRPC_STATUS_DEADLINE_EXCEEDED) {
        /* The runtime may still finish (or have finished) the pull: keep the intent. */
        pc->outcome = "intent kept (outcome unknown)";
        answer(pc);
    } else {
        pc->phase = PH_CHECKING;
        cri_worker_arm(x->o.worker, &pc->timer, due);
        if (!ask_image_status(pc, pc->req.image)) {
            pc->outcome = "intent kept (ImageStatus not sent)";
            answer(pc);
        }
    }
    maybe_done(pc);
}

/* The request goes up exactly as it came (the bytes decoded), with its metadata. */
static void forward(pull_call *pc)
{
    cri_intercept *x = pc->x;
    pc->phase = PH_FORWARDED;
    cri_worker_disarm(x->o.worker, &pc->timer);
    /* The slices are kept before the send takes them, to be wiped once it is done. */
    if (!keep_sent_slices(pc) || !cri_call_forward(&pc->c, x->o.channel, x->o.cq)) {
        /* Durable intent, nothing sent: release it and refuse. */
        pc->phase = PH_ADMITTING;
        pc->intent = CRI_RECORD_PENDING;
        pc->why = "the runtime call could not be started";
        refuse(pc, GRPC_STATUS_UNAVAILABLE, "pullgate: pull not forwarded");
    }
}

/* ------------------------------------------------------------ admission */

static void submit_intent(pull_call *pc)
{
    cri_intercept *x = pc->x;
    pg_error e = {0};
    if (cri_recorder_reserve(x->o.recorder, CRI_RECORD_UNITS_PER_PULL, &e) != PG_OK) {
        pc->intent = CRI_RECORD_NOT_QUEUED;
        pc->why = "the record writer's queue is full";
        return;
    }
    pc->reserved = CRI_RECORD_UNITS_PER_PULL;
    pull_ref(pc);
    pc->reserved--;
    if (cri_record_intent(x->o.recorder, pc->req.image, on_record_done, &pc->t_intent, &e) !=
        PG_OK) {
        pc->reserved++;
        pull_unref(pc);
        pc->intent = CRI_RECORD_NOT_QUEUED;
        pc->why = "out of memory";
        return;
    }
    pc->intent = CRI_RECORD_WAITING;
    cri_worker_arm(x->o.worker, &pc->timer, pg_monotonic_ms() + x->o.intent_budget_ms);
}

static void node_creds_warning(const char *path, const char *why)
{
    cri_log(CRI_LOG_WARNING, "node credential file not used", "path", path, "error", why, NULL);
}

/* Decodes the request and attributes its credentials (before anything is queued). */
static void decode(pull_call *pc)
{
    cri_intercept *x = pc->x;
    pc->decode_done = true;
    if (pc->decoded != CRI_DECODED)
        return; /* none or several messages */
    grpc_slice body = cri_flatten(pc->c.request);
    pc->decoded = cri_pull_request_decode(GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body),
                                          x->annotation_key, &pc->req, &pc->why);
    cri_slice_wipe(body);
    grpc_slice_unref(body);
    if (pc->decoded != CRI_DECODED)
        return;
    pg_error e = {0};
    /* The key as it is now: a rotated hmacKeyFile is read again (keyholder.h), so pulls after
     * a rotation open the seals the webhook now makes. Unusable: nothing opens (unverified). */
    pg_key_ref *key = x->o.keys ? pg_keyholder_get(x->o.keys, NULL) : NULL;
    cri_attribution a = {
        .mac_key = pg_key_ref_key(key), .mac_required = x->o.mac_required, .node = x->o.node};
    cri_crio_auth runtime_auth;
    if (!pc->req.has_auth && pc->req.pod_namespace) { /* may CRI-O have used its own? */
        a.runtime_namespace_auth = cri_runtime_facts_namespaced_auth(x->o.facts, &runtime_auth);
        a.runtime_auth_why = runtime_auth.why;
    }
    int rc = PG_OK;
    if (pc->req.has_auth)
        rc = cri_node_creds_refresh(x->o.node, node_creds_warning, &e);
    if (rc == PG_OK)
        rc = cri_pull_credentials(&pc->req, &a, &pc->creds, &e);
    pg_key_ref_release(key);
    if (rc != PG_OK) {
        pc->decoded = CRI_DECODE_NO_RESOURCE;
        pc->why = "out of memory";
        return;
    }
    pc->cred_source = pc->creds.source;
    memcpy(pc->cred_detail, pc->creds.detail, sizeof pc->cred_detail);
}

static void advance(pull_call *pc)
{
    if (pc->phase == PH_RECEIVING) {
        if (!pc->half_closed && pc->decoded == CRI_DECODED && !pc->c.r.down_cancelled)
            return; /* the half-close is still to come */
        pc->phase = PH_ADMITTING;
        decode(pc);
    }
    if (pc->phase != PH_ADMITTING)
        return;
    if (pc->decoded == CRI_DECODED && pc->c.r.down_cancelled) {
        /* Nobody to answer: nothing goes up (a queued intent is released). */
        pc->why = "the caller went away";
        refuse(pc, GRPC_STATUS_CANCELLED, "pullgate: pull not forwarded");
        return;
    }
    if (pc->decoded == CRI_DECODED && !pc->slot_asked)
        ask_slot(pc);
    for (;;) {
        cri_admission a = cri_pull_admit(pc->decoded, pc->slot, pc->intent);
        switch (a.step) {
        case CRI_STEP_REFUSE: refuse(pc, (grpc_status_code)a.code, a.message); return;
        case CRI_STEP_WAIT_SLOT:
        case CRI_STEP_WAIT_INTENT: return;
        case CRI_STEP_RECORD_INTENT: submit_intent(pc); continue;
        case CRI_STEP_FORWARD: forward(pc); return;
        }
    }
}

static void on_timer(cri_task *t)
{
    pull_call *pc = t->owner;
    switch (pc->phase) {
    case PH_ADMITTING:
        if (pc->slot == CRI_SLOT_WAITING) {
            waiter_remove(pc->x, pc);
            pc->slot = CRI_SLOT_NONE;
            pc->why = "no pull slot came free in time";
        } else if (pc->intent == CRI_RECORD_WAITING) {
            pc->intent = CRI_RECORD_PENDING;
            pc->why = "the store is busy (its lock held?)";
        }
        advance(pc);
        break;
    case PH_RECORDING:
    case PH_CHECKING:
        if (pc->result_waiting) {
            /* The record lands later, in order; the intent keeps the image verified until then. */
            pc->result_waiting = false;
            pc->outcome = "recording pending (lands when the store is free)";
            answer(pc);
        }
        break;
    default: break;
    }
}

/* ------------------------------------------------------------ receiving */

/* The request is complete, or refused for why (then it is not decoded). */
static void end_of_request(pull_call *pc, const char *why)
{
    pc->half_closed = true;
    if (!why)
        return;
    pc->decoded = CRI_EXTRA_MESSAGE;
    pc->why = why;
}

static void receive_next(pull_call *pc)
{
    if (!cri_call_receive_next(&pc->c))
        end_of_request(pc, "cannot read the request");
}

static void on_recv(cri_task *t)
{
    pull_call *pc = t->owner;
    switch (cri_call_received(&pc->c, t->ok)) {
    case CRI_CALL_RECV_REQUEST: receive_next(pc); break; /* the half-close, or a second message */
    case CRI_CALL_RECV_END: end_of_request(pc, NULL); break;
    case CRI_CALL_RECV_NONE: end_of_request(pc, "no request message"); break;
    case CRI_CALL_RECV_EXTRA: end_of_request(pc, "a second request message"); break;
    }
    advance(pc);
    maybe_done(pc);
}

static void on_closed(cri_task *t)
{
    pull_call *pc = t->owner;
    cri_call_batch_done(&pc->c);
    /* down_cancelled was written by gRPC; a cancelled call also fails its pending batches. */
    if (pc->phase == PH_ADMITTING && pc->c.r.down_cancelled)
        advance(pc);
    maybe_done(pc);
}

static void on_start(cri_task *t)
{
    pull_call *pc = t->owner;
    if (!cri_call_start_receiving(&pc->c))
        end_of_request(pc, "cannot read the request");
    advance(pc);
    maybe_done(pc);
}

/* ------------------------------------------------------------ public */

static const cri_call_kind pull_kind = {
    .name = NULL, /* the method's path: PullImage of runtime.v1 or v1alpha2 */
    .received = on_recv,
    .closed = on_closed,
    .upstream = on_up,
    .answered = on_final,
};

void cri_intercept_start(cri_intercept *x, const cri_method *m, grpc_call *incoming,
                         grpc_call_details *details, grpc_metadata_array *md)
{
    pull_call *pc = calloc(1, sizeof *pc);
    if (!pc) {
        cri_call_refuse_unallocated(incoming, details, md);
        return;
    }
    cri_call_init(&pc->c, pc, &pull_kind, x->o.worker, incoming, details, md);
    pc->x = x;
    atomic_init(&pc->refs, 1);
    pc->method = *m;
    pc->st_details = grpc_empty_slice();
    pc->decoded = CRI_DECODED;
    grpc_metadata_array_init(&pc->st_initial);
    grpc_metadata_array_init(&pc->st_trailing);
    cri_call_set_event(&pc->c, &pc->ev_status, on_status);
    pc->t_start = (cri_task){.fn = on_start, .owner = pc};
    pc->t_intent = (cri_task){.fn = on_intent_done, .owner = pc};
    pc->t_result = (cri_task){.fn = on_result_done, .owner = pc};
    pc->timer.task = (cri_task){.fn = on_timer, .owner = pc};
    cri_worker_post(x->o.worker, &pc->t_start);
}

cri_intercept *cri_intercept_new(const cri_intercept_options *o, pg_error *err)
{
    pg_autofree cri_intercept *x = calloc(1, sizeof *x);
    if (!x || !(x->annotation_key = pg_strdup(o->annotation_key))) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    x->o = *o;
    x->o.annotation_key = x->annotation_key;
    if (!x->o.max_slots)
        x->o.max_slots = CRI_MAX_PULL_SLOTS;
    return pg_steal(&x);
}

void cri_intercept_free(cri_intercept *x)
{
    if (!x)
        return;
    free(x->annotation_key);
    free(x);
}
