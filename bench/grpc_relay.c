/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc_relay LISTEN TARGET
 *   e.g. grpc_relay unix:/tmp/x/relay.sock unix:/run/containerd/containerd.sock
 *
 * The baseline pullgate-cri's forwarding is judged against (bench/README.md,
 * "The start path"): the least a unary gRPC relay on the same gRPC C core can
 * do. One thread, one completion queue, no method registered; per call three
 * batches: the request message received, one client call upstream with every
 * op in one batch (headers, message, half-close, and the answer's headers,
 * message and status), then headers, answer and status down with the close
 * received. Nothing is decoded, no metadata is forwarded (empty headers both
 * ways), no deadline of its own: the incoming call is the upstream call's
 * parent, as in pullgate-cri. Unary calls only (a streaming call gets its
 * first message relayed and the stream ends). Runs until killed.
 *
 * Same channel and server arguments as pullgate-cri (message bounds, no
 * channelz, no HTTP proxy lookup) and abseil's debug deadlock detector off
 * as pullgate-cri turns it off, so the difference between the two is what
 * pullgate-cri does beyond relaying bytes.
 */
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MESSAGE_BYTES (16 * 1024 * 1024)

enum stage { AWAIT_REQUEST, AWAIT_ANSWER, AWAIT_DONE };

typedef struct relay_call {
    enum stage stage;
    grpc_call *down, *up;
    grpc_call_details details;
    grpc_metadata_array down_md, up_initial, up_trailing;
    grpc_byte_buffer *request, *answer;
    grpc_status_code status;
    grpc_slice status_details;
    int cancelled;
} relay_call;

typedef struct relay {
    grpc_server *server;
    grpc_channel *channel;
    grpc_completion_queue *cq;
    relay_call *incoming; /* the slot grpc_server_request_call fills */
} relay;

static int new_call_tag; /* its address tags the server's new-call event */

static grpc_arg int_arg(const char *key, int value)
{
    grpc_arg a = {.type = GRPC_ARG_INTEGER, .key = (char *)key};
    a.value.integer = value;
    return a;
}

static grpc_op op_of(grpc_op_type type)
{
    grpc_op o;
    memset(&o, 0, sizeof o);
    o.op = type;
    return o;
}

/* Debian's abseil runs its debug-only deadlock detector (cri/proxy.c says why it is turned off). */
static void absl_deadlock_detection_off(void)
{
    static const char *const names[] = {
        "_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE",
        "_ZN4absl29SetMutexDeadlockDetectionModeENS_15OnDeadlockCycleE", NULL};
    for (size_t i = 0; names[i]; i++) {
        void *sym = dlsym(RTLD_DEFAULT, names[i]);
        if (!sym)
            continue;
        void (*set_mode)(int);
        memcpy(&set_mode, &sym, sizeof set_mode);
        set_mode(0); /* absl::OnDeadlockCycle::kIgnore */
        return;
    }
}

static void request_call(relay *r)
{
    relay_call *c = calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "grpc_relay: out of memory\n");
        exit(1);
    }
    grpc_call_details_init(&c->details);
    grpc_metadata_array_init(&c->down_md);
    grpc_metadata_array_init(&c->up_initial);
    grpc_metadata_array_init(&c->up_trailing);
    c->status_details = grpc_empty_slice();
    r->incoming = c;
    if (grpc_server_request_call(r->server, &c->down, &c->details, &c->down_md, r->cq, r->cq,
                                 &new_call_tag) != GRPC_CALL_OK) {
        fprintf(stderr, "grpc_relay: grpc_server_request_call failed\n");
        exit(1);
    }
}

static void start(grpc_call *gc, const grpc_op *ops, size_t n, relay_call *c)
{
    if (grpc_call_start_batch(gc, ops, n, c, NULL) != GRPC_CALL_OK) {
        fprintf(stderr, "grpc_relay: grpc_call_start_batch failed\n");
        exit(1);
    }
}

static void receive_request(relay_call *c)
{
    grpc_op o = op_of(GRPC_OP_RECV_MESSAGE);
    o.data.recv_message.recv_message = &c->request;
    c->stage = AWAIT_REQUEST;
    start(c->down, &o, 1, c);
}

/* Headers, message and half-close up, the whole answer back: one batch. */
static void forward_up(relay *r, relay_call *c)
{
    const grpc_slice *host = GRPC_SLICE_LENGTH(c->details.host) ? &c->details.host : NULL;
    c->up = grpc_channel_create_call(r->channel, c->down, GRPC_PROPAGATE_DEFAULTS, r->cq,
                                     c->details.method, host, c->details.deadline, NULL);
    grpc_op ops[6] = {op_of(GRPC_OP_SEND_INITIAL_METADATA), op_of(GRPC_OP_SEND_MESSAGE),
                      op_of(GRPC_OP_SEND_CLOSE_FROM_CLIENT), op_of(GRPC_OP_RECV_INITIAL_METADATA),
                      op_of(GRPC_OP_RECV_MESSAGE), op_of(GRPC_OP_RECV_STATUS_ON_CLIENT)};
    ops[1].data.send_message.send_message = c->request;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &c->up_initial;
    ops[4].data.recv_message.recv_message = &c->answer;
    ops[5].data.recv_status_on_client.trailing_metadata = &c->up_trailing;
    ops[5].data.recv_status_on_client.status = &c->status;
    ops[5].data.recv_status_on_client.status_details = &c->status_details;
    c->stage = AWAIT_ANSWER;
    start(c->up, ops, 6, c);
}

/* Headers, the answer (if any) and the status down; the client's close received. */
static void answer_down(relay_call *c, grpc_status_code status)
{
    grpc_op ops[4];
    size_t n = 0;
    ops[n++] = op_of(GRPC_OP_SEND_INITIAL_METADATA);
    if (c->answer && status == GRPC_STATUS_OK) {
        ops[n] = op_of(GRPC_OP_SEND_MESSAGE);
        ops[n++].data.send_message.send_message = c->answer;
    }
    ops[n] = op_of(GRPC_OP_SEND_STATUS_FROM_SERVER);
    ops[n].data.send_status_from_server.status = status;
    ops[n++].data.send_status_from_server.status_details = &c->status_details;
    ops[n] = op_of(GRPC_OP_RECV_CLOSE_ON_SERVER);
    ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
    c->stage = AWAIT_DONE;
    start(c->down, ops, n, c);
}

static void call_free(relay_call *c)
{
    if (c->request)
        grpc_byte_buffer_destroy(c->request);
    if (c->answer)
        grpc_byte_buffer_destroy(c->answer);
    grpc_slice_unref(c->status_details);
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->down_md);
    grpc_metadata_array_destroy(&c->up_initial);
    grpc_metadata_array_destroy(&c->up_trailing);
    if (c->up)
        grpc_call_unref(c->up);
    if (c->down)
        grpc_call_unref(c->down);
    free(c);
}

static void step(relay *r, relay_call *c, int success)
{
    switch (c->stage) {
    case AWAIT_REQUEST:
        if (success && c->request)
            forward_up(r, c);
        else
            answer_down(c, GRPC_STATUS_CANCELLED);
        break;
    case AWAIT_ANSWER:
        answer_down(c, success ? c->status : GRPC_STATUS_UNAVAILABLE);
        break;
    case AWAIT_DONE:
        call_free(c);
        break;
    }
}

static void setup(relay *r, const char *listen, const char *target)
{
    absl_deadlock_detection_off();
    grpc_arg sargs[] = {int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, MAX_MESSAGE_BYTES),
                        int_arg(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, MAX_MESSAGE_BYTES),
                        int_arg(GRPC_ARG_ENABLE_CHANNELZ, 0)};
    grpc_channel_args sca = {sizeof sargs / sizeof sargs[0], sargs};
    grpc_arg cargs[] = {int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, MAX_MESSAGE_BYTES),
                        int_arg(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, MAX_MESSAGE_BYTES),
                        int_arg(GRPC_ARG_ENABLE_CHANNELZ, 0),
                        int_arg(GRPC_ARG_ENABLE_HTTP_PROXY, 0)};
    grpc_channel_args cca = {sizeof cargs / sizeof cargs[0], cargs};
    r->cq = grpc_completion_queue_create_for_next(NULL);
    r->server = grpc_server_create(&sca, NULL);
    grpc_channel_credentials *cc = grpc_insecure_credentials_create();
    r->channel = grpc_channel_create(target, cc, &cca);
    grpc_channel_credentials_release(cc);
    grpc_server_register_completion_queue(r->server, r->cq, NULL);
    grpc_server_credentials *sc = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(r->server, listen, sc);
    grpc_server_credentials_release(sc);
    if (!port) {
        fprintf(stderr, "grpc_relay: cannot listen on %s\n", listen);
        exit(1);
    }
    grpc_server_start(r->server);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: grpc_relay LISTEN TARGET (e.g. unix:/path/relay.sock unix:/path/rt.sock)\n");
        return 2;
    }
    grpc_init();
    relay r = {0};
    setup(&r, argv[1], argv[2]);
    request_call(&r);
    fprintf(stderr, "grpc_relay: listening on %s, relaying to %s\n", argv[1], argv[2]);
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(r.cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            break;
        if (ev.tag == &new_call_tag) {
            relay_call *c = r.incoming;
            request_call(&r);
            if (ev.success)
                receive_request(c);
            else
                call_free(c);
            continue;
        }
        step(&r, ev.tag, ev.success);
    }
    return 0;
}
