/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc_relay [-R METHOD]... [-d] [-e NAME=VALUE]... [-a KEY=INT]... [-b] LISTEN TARGET
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
 *
 * Variants, to find the cheapest relay the core allows (bench/README.md, "The floor"):
 *   -R METHOD      METHOD registered with GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER: its
 *                  calls arrive with their request (two batches per call instead of three);
 *                  repeatable, other methods stay generic
 *   -d             the upstream channel made on a unix socket connected here
 *                  (grpc_channel_create_from_fd: no client channel, resolver, load
 *                  balancing, retry layer or subchannel); TARGET is unix:PATH
 *   -e NAME=VALUE  set in the environment before grpc_init (GRPC_POLL_STRATEGY,
 *                  GRPC_EXPERIMENTS)
 *   -a KEY=INT     one more integer argument for the server and the channel
 *   -b             no gRPC at all: bytes copied between each accepted connection and a
 *                  connection of its own to TARGET, one epoll thread (the transport's floor;
 *                  LISTEN and TARGET are unix:PATH)
 */
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_MESSAGE_BYTES (16 * 1024 * 1024)
#define MAX_ARGS 16
#define MAX_REGISTERED 8

enum stage { AWAIT_REQUEST, AWAIT_ANSWER, AWAIT_DONE };

typedef struct relay relay;

/* A registered method's slot: the call grpc_server_request_registered_call fills. */
typedef struct registered {
    relay *r;
    void *handle;
    grpc_slice method;
    struct relay_call *incoming;
} registered;

typedef struct relay_call {
    enum stage stage;
    grpc_call *down, *up;
    grpc_call_details details;
    gpr_timespec deadline; /* registered calls: the details hold no deadline */
    const grpc_slice *method;
    grpc_metadata_array down_md, up_initial, up_trailing;
    grpc_byte_buffer *request, *answer;
    grpc_status_code status;
    grpc_slice status_details;
    int cancelled;
} relay_call;

struct relay {
    grpc_server *server;
    grpc_channel *channel;
    grpc_completion_queue *cq;
    relay_call *incoming; /* the slot grpc_server_request_call fills */
    registered reg[MAX_REGISTERED];
    size_t n_reg;
};

typedef struct options {
    const char *registered[MAX_REGISTERED];
    size_t n_registered;
    grpc_arg args[MAX_ARGS];
    size_t n_args;
    int direct, bytes;
} options;

static int new_call_tag; /* its address tags the server's generic new-call event */

static void die(const char *what)
{
    fprintf(stderr, "grpc_relay: %s\n", what);
    exit(1);
}

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

static relay_call *call_new(void)
{
    relay_call *c = calloc(1, sizeof *c);
    if (!c)
        die("out of memory");
    grpc_call_details_init(&c->details);
    grpc_metadata_array_init(&c->down_md);
    grpc_metadata_array_init(&c->up_initial);
    grpc_metadata_array_init(&c->up_trailing);
    c->status_details = grpc_empty_slice();
    return c;
}

static void request_call(relay *r)
{
    relay_call *c = call_new();
    r->incoming = c;
    if (grpc_server_request_call(r->server, &c->down, &c->details, &c->down_md, r->cq, r->cq,
                                 &new_call_tag) != GRPC_CALL_OK)
        die("grpc_server_request_call failed");
}

static void request_registered(registered *g)
{
    relay_call *c = call_new();
    g->incoming = c;
    c->method = &g->method;
    if (grpc_server_request_registered_call(g->r->server, g->handle, &c->down, &c->deadline,
                                            &c->down_md, &c->request, g->r->cq, g->r->cq,
                                            g) != GRPC_CALL_OK)
        die("grpc_server_request_registered_call failed");
}

static void start(grpc_call *gc, const grpc_op *ops, size_t n, relay_call *c)
{
    if (grpc_call_start_batch(gc, ops, n, c, NULL) != GRPC_CALL_OK)
        die("grpc_call_start_batch failed");
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
    const grpc_slice *method = c->method ? c->method : &c->details.method;
    gpr_timespec deadline = c->method ? c->deadline : c->details.deadline;
    c->up = grpc_channel_create_call(r->channel, c->down, GRPC_PROPAGATE_DEFAULTS, r->cq, *method,
                                     host, deadline, NULL);
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

/* A unix socket connected to TARGET (unix:PATH or unix://PATH), or -1. */
static int connect_unix(const char *target)
{
    const char *path = strncmp(target, "unix://", 7) == 0  ? target + 7
                       : strncmp(target, "unix:", 5) == 0 ? target + 5
                                                          : NULL;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!path || strlen(path) >= sizeof sa.sun_path)
        return -1;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static grpc_channel *upstream_channel(const options *o, const char *target, grpc_channel_args *ca)
{
    grpc_channel_credentials *cc = grpc_insecure_credentials_create();
    grpc_channel *ch;
    if (o->direct) {
        int fd = connect_unix(target);
        if (fd < 0)
            die("cannot connect to the target (-d needs unix:PATH)");
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        ch = grpc_channel_create_from_fd(target, fd, cc, ca);
    } else {
        ch = grpc_channel_create(target, cc, ca);
    }
    grpc_channel_credentials_release(cc);
    return ch;
}

static void setup(relay *r, const options *o, const char *listen, const char *target)
{
    absl_deadlock_detection_off();
    grpc_arg sargs[3 + MAX_ARGS] = {int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, MAX_MESSAGE_BYTES),
                                    int_arg(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, MAX_MESSAGE_BYTES),
                                    int_arg(GRPC_ARG_ENABLE_CHANNELZ, 0)};
    memcpy(sargs + 3, o->args, o->n_args * sizeof *o->args);
    grpc_channel_args sca = {3 + o->n_args, sargs};
    grpc_arg cargs[4 + MAX_ARGS] = {int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, MAX_MESSAGE_BYTES),
                                    int_arg(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, MAX_MESSAGE_BYTES),
                                    int_arg(GRPC_ARG_ENABLE_CHANNELZ, 0),
                                    int_arg(GRPC_ARG_ENABLE_HTTP_PROXY, 0)};
    memcpy(cargs + 4, o->args, o->n_args * sizeof *o->args);
    grpc_channel_args cca = {4 + o->n_args, cargs};
    r->cq = grpc_completion_queue_create_for_next(NULL);
    r->server = grpc_server_create(&sca, NULL);
    r->channel = upstream_channel(o, target, &cca);
    grpc_server_register_completion_queue(r->server, r->cq, NULL);
    for (size_t i = 0; i < o->n_registered; i++) {
        registered *g = &r->reg[r->n_reg++];
        g->r = r;
        g->method = grpc_slice_from_static_string(o->registered[i]);
        g->handle = grpc_server_register_method(r->server, o->registered[i], NULL,
                                                GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
        if (!g->handle)
            die("grpc_server_register_method failed");
    }
    grpc_server_credentials *sc = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(r->server, listen, sc);
    grpc_server_credentials_release(sc);
    if (!port)
        die("cannot listen");
    grpc_server_start(r->server);
}

static registered *registered_of(relay *r, void *tag)
{
    for (size_t i = 0; i < r->n_reg; i++)
        if (tag == &r->reg[i])
            return &r->reg[i];
    return NULL;
}

static void run_grpc(const options *o, const char *listen, const char *target)
{
    grpc_init();
    relay r = {0};
    setup(&r, o, listen, target);
    request_call(&r);
    for (size_t i = 0; i < r.n_reg; i++)
        request_registered(&r.reg[i]);
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(r.cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            break;
        registered *g = registered_of(&r, ev.tag);
        if (ev.tag == &new_call_tag || g) {
            relay_call *c = g ? g->incoming : r.incoming;
            if (g)
                request_registered(g);
            else
                request_call(&r);
            if (!ev.success)
                call_free(c);
            else if (g) /* the request came with the call */
                step(&r, c, 1);
            else
                receive_request(c);
            continue;
        }
        step(&r, ev.tag, ev.success);
    }
}

/* ------------------------------------------------------------ -b: bytes only */

#define BYTE_BUF 65536

/* One direction of a connection pair: what is read from `from` is written to `to`. */
typedef struct pipe_end {
    int from, to;
    int closed;
    struct pipe_end *other;
} pipe_end;

static int listen_unix(const char *addr)
{
    const char *path = strncmp(addr, "unix://", 7) == 0  ? addr + 7
                       : strncmp(addr, "unix:", 5) == 0 ? addr + 5
                                                          : NULL;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!path || strlen(path) >= sizeof sa.sun_path)
        die("-b needs unix:PATH");
    memcpy(sa.sun_path, path, strlen(path) + 1);
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 64) != 0)
        die("cannot listen");
    return fd;
}

/* Both ends closed now, freed after the batch of events (which may still name them). */
static void close_pair(int ep, pipe_end *p, pipe_end **dead, int *n_dead)
{
    if (p->closed)
        return;
    epoll_ctl(ep, EPOLL_CTL_DEL, p->from, NULL);
    epoll_ctl(ep, EPOLL_CTL_DEL, p->to, NULL);
    close(p->from);
    close(p->to);
    p->closed = p->other->closed = 1;
    dead[(*n_dead)++] = p;
}

static void accept_pair(int ep, int lfd, const char *target)
{
    int down = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (down < 0)
        return;
    int up = connect_unix(target);
    pipe_end *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    if (up < 0 || !a || !b)
        die("cannot connect to the target (-b needs unix:PATH)");
    *a = (pipe_end){.from = down, .to = up, .other = b};
    *b = (pipe_end){.from = up, .to = down, .other = a};
    struct epoll_event ea = {.events = EPOLLIN, .data.ptr = a}, eb = {.events = EPOLLIN, .data.ptr = b};
    epoll_ctl(ep, EPOLL_CTL_ADD, down, &ea);
    epoll_ctl(ep, EPOLL_CTL_ADD, up, &eb);
}

/* Blocking writes: a unary call's bytes fit the socket buffers; this is a floor, not a proxy. */
static int copy_once(pipe_end *p)
{
    char buf[BYTE_BUF];
    ssize_t n = read(p->from, buf, sizeof buf);
    if (n <= 0)
        return -1;
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(p->to, buf + off, (size_t)(n - off));
        if (w < 0 && errno != EINTR)
            return -1;
        off += w > 0 ? w : 0;
    }
    return 0;
}

static void run_bytes(const char *listen, const char *target)
{
    int lfd = listen_unix(listen), ep = epoll_create1(EPOLL_CLOEXEC);
    static int listener_tag;
    struct epoll_event le = {.events = EPOLLIN, .data.ptr = &listener_tag};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &le);
    for (;;) {
        struct epoll_event evs[16];
        pipe_end *dead[16];
        int n = epoll_wait(ep, evs, 16, -1), n_dead = 0;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == &listener_tag) {
                accept_pair(ep, lfd, target);
                continue;
            }
            pipe_end *p = evs[i].data.ptr;
            if (!p->closed && copy_once(p) != 0)
                close_pair(ep, p, dead, &n_dead);
        }
        for (int i = 0; i < n_dead; i++) {
            free(dead[i]->other);
            free(dead[i]);
        }
    }
}

static void parse_options(int argc, char **argv, options *o)
{
    int opt;
    while ((opt = getopt(argc, argv, "R:de:a:b")) != -1) {
        char *eq = optarg ? strchr(optarg, '=') : NULL;
        switch (opt) {
        case 'R':
            if (o->n_registered == MAX_REGISTERED)
                die("too many -R");
            o->registered[o->n_registered++] = optarg;
            break;
        case 'd': o->direct = 1; break;
        case 'b': o->bytes = 1; break;
        case 'e':
            if (!eq)
                die("-e NAME=VALUE");
            *eq = '\0';
            setenv(optarg, eq + 1, 1);
            break;
        case 'a':
            if (!eq || o->n_args == MAX_ARGS)
                die("-a KEY=INT");
            *eq = '\0';
            o->args[o->n_args++] = int_arg(optarg, atoi(eq + 1));
            break;
        default: exit(2);
        }
    }
}

int main(int argc, char **argv)
{
    options o = {0};
    parse_options(argc, argv, &o);
    if (argc - optind != 2) {
        fprintf(stderr, "usage: grpc_relay [-R METHOD]... [-d] [-e NAME=VALUE]... [-a KEY=INT]... "
                        "[-b] LISTEN TARGET (e.g. unix:/path/relay.sock unix:/path/rt.sock)\n");
        return 2;
    }
    const char *listen = argv[optind], *target = argv[optind + 1];
    fprintf(stderr, "grpc_relay: listening on %s, relaying to %s\n", listen, target);
    if (o.bytes)
        run_bytes(listen, target);
    else
        run_grpc(&o, listen, target);
    return 0;
}
