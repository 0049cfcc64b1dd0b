/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc_unary_bench -n ROUNDS [-w WARMUP] [-t TIMEOUT_MS] -m METHOD [-r REQUESTS] NAME=TARGET...
 *   e.g. grpc_unary_bench -n 2000 -m /runtime.v1.RuntimeService/ListContainers \
 *            direct=unix:/run/cd.sock relay=unix:/tmp/r.sock pullgate=unix:/tmp/p.sock
 *
 * A CRI client on gRPC's C core for the unary ratios of bench/README.md: the
 * same call to every target in turn, ROUNDS rounds, the order rotating each
 * round (A B C, B C A, C A B, ...), one channel per target, one completion
 * queue, every call one batch (as grpc-go's unary invoke). A client in C so
 * that its own cost does not dilute the ratio: the Python client adds ~0.3 ms
 * to every call of every side, as much as the proxy it is meant to measure.
 *
 * REQUESTS holds the request messages, each a 4-byte big-endian length and
 * the serialized message (bench/cri_requests.py writes them); round i sends
 * message i modulo their number (the same to every side). Without -r the
 * request is empty (ListContainers, Version, ListImages).
 *
 * One line per target:
 *   NAME calls=N fail=F empty=E median_us=.. p90_us=.. p99_us=.. mean_us=.. min_us=..
 * fail counts statuses other than OK, empty counts OK answers of zero bytes
 * (an ImageStatus answering "not present", for instance). Warm-up rounds
 * (default 200) are not counted.
 */
#include "bench_common.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIDES 8
#define MAX_REQUEST_FILE (256u * 1024 * 1024)

typedef struct side {
    const char *name;
    grpc_channel *ch;
    double *us;
    size_t n;
    unsigned fail, empty;
} side;

typedef struct requests {
    grpc_slice *msg;
    size_t count;
} requests;

static grpc_op op_of(grpc_op_type type)
{
    grpc_op o;
    memset(&o, 0, sizeof o);
    o.op = type;
    return o;
}

static void die(const char *what)
{
    fprintf(stderr, "grpc_unary_bench: %s\n", what);
    exit(1);
}

static requests load_requests(const char *path)
{
    requests r = {0};
    if (!path) {
        r.msg = malloc(sizeof *r.msg);
        if (!r.msg)
            die("out of memory");
        r.msg[0] = grpc_empty_slice();
        r.count = 1;
        return r;
    }
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open the requests file");
    size_t cap = 0;
    unsigned char len4[4];
    while (fread(len4, 1, 4, f) == 4) {
        size_t len = (size_t)len4[0] << 24 | (size_t)len4[1] << 16 | (size_t)len4[2] << 8 | len4[3];
        if (len > MAX_REQUEST_FILE)
            die("request too long");
        if (r.count == cap) {
            cap = cap ? cap * 2 : 64;
            r.msg = realloc(r.msg, cap * sizeof *r.msg);
            if (!r.msg)
                die("out of memory");
        }
        grpc_slice s = grpc_slice_malloc(len);
        if (fread(GRPC_SLICE_START_PTR(s), 1, len, f) != len)
            die("truncated requests file");
        r.msg[r.count++] = s;
    }
    fclose(f);
    if (!r.count)
        die("no request in the requests file");
    return r;
}

static grpc_channel *channel_to(const char *target)
{
    grpc_arg a[2] = {{.type = GRPC_ARG_INTEGER, .key = (char *)GRPC_ARG_ENABLE_HTTP_PROXY},
                     {.type = GRPC_ARG_INTEGER,
                      .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH}};
    a[0].value.integer = 0;
    a[1].value.integer = 16 * 1024 * 1024;
    grpc_channel_args ca = {2, a};
    grpc_channel_credentials *cc = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, cc, &ca);
    grpc_channel_credentials_release(cc);
    return ch;
}

/* One unary call; its latency in µs into *us. Returns 0 OK with bytes, 1 OK empty, -1 failed. */
static int call_once(grpc_completion_queue *cq, grpc_channel *ch, grpc_slice method,
                     grpc_slice request, int timeout_ms, double *us)
{
    grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&request, 1), *recv = NULL;
    grpc_metadata_array initial, trailing;
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6] = {op_of(GRPC_OP_SEND_INITIAL_METADATA), op_of(GRPC_OP_SEND_MESSAGE),
                      op_of(GRPC_OP_SEND_CLOSE_FROM_CLIENT), op_of(GRPC_OP_RECV_INITIAL_METADATA),
                      op_of(GRPC_OP_RECV_MESSAGE), op_of(GRPC_OP_RECV_STATUS_ON_CLIENT)};
    ops[1].data.send_message.send_message = send;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
    ops[4].data.recv_message.recv_message = &recv;
    ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
    ops[5].data.recv_status_on_client.status = &status;
    ops[5].data.recv_status_on_client.status_details = &details;
    uint64_t t0 = bench_now_ns();
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
    grpc_call *gc =
        grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL, deadline, NULL);
    int ok = 0;
    if (grpc_call_start_batch(gc, ops, 6, gc, NULL) == GRPC_CALL_OK) {
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        ok = ev.type == GRPC_OP_COMPLETE && ev.success;
    }
    *us = (double)(bench_now_ns() - t0) / 1000.0;
    int rc = -1;
    if (ok && status == GRPC_STATUS_OK)
        rc = recv && grpc_byte_buffer_length(recv) > 0 ? 0 : 1;
    if (recv)
        grpc_byte_buffer_destroy(recv);
    grpc_byte_buffer_destroy(send);
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    grpc_call_unref(gc);
    return rc;
}

static void report(side *s)
{
    double sum = 0, min = s->n ? s->us[0] : 0;
    for (size_t i = 0; i < s->n; i++) {
        sum += s->us[i];
        if (s->us[i] < min)
            min = s->us[i];
    }
    double mean = s->n ? sum / (double)s->n : 0;
    double p50 = bench_quantile(s->us, s->n, 0.5), p90 = bench_quantile(s->us, s->n, 0.9);
    double p99 = bench_quantile(s->us, s->n, 0.99);
    printf("%s calls=%zu fail=%u empty=%u median_us=%.1f p90_us=%.1f p99_us=%.1f mean_us=%.1f "
           "min_us=%.1f\n",
           s->name, s->n, s->fail, s->empty, p50, p90, p99, mean, min);
}

int main(int argc, char **argv)
{
    size_t rounds = 2000, warmup = 200;
    int timeout_ms = 5000, opt;
    const char *method = NULL, *req_path = NULL;
    while ((opt = getopt(argc, argv, "n:w:t:m:r:")) != -1) {
        switch (opt) {
        case 'n': rounds = strtoul(optarg, NULL, 10); break;
        case 'w': warmup = strtoul(optarg, NULL, 10); break;
        case 't': timeout_ms = atoi(optarg); break;
        case 'm': method = optarg; break;
        case 'r': req_path = optarg; break;
        default: return 2;
        }
    }
    size_t n_sides = (size_t)(argc - optind);
    if (!method || n_sides < 1 || n_sides > MAX_SIDES || !rounds) {
        fprintf(stderr, "usage: grpc_unary_bench -n ROUNDS [-w WARMUP] [-t MS] -m METHOD "
                        "[-r REQUESTS] NAME=TARGET...\n");
        return 2;
    }
    grpc_init();
    side sides[MAX_SIDES];
    for (size_t k = 0; k < n_sides; k++) {
        char *eq = strchr(argv[optind + k], '=');
        if (!eq)
            die("a side is NAME=TARGET");
        *eq = '\0';
        sides[k] = (side){.name = argv[optind + k], .ch = channel_to(eq + 1)};
        sides[k].us = calloc(rounds, sizeof(double));
        if (!sides[k].us)
            die("out of memory");
    }
    requests rq = load_requests(req_path);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_slice m = grpc_slice_from_copied_string(method);
    for (size_t i = 0; i < warmup + rounds; i++) {
        grpc_slice req = rq.msg[i % rq.count];
        for (size_t k = 0; k < n_sides; k++) {
            side *s = &sides[(i + k) % n_sides];
            double us;
            int rc = call_once(cq, s->ch, m, req, timeout_ms, &us);
            if (i < warmup)
                continue;
            s->us[s->n++] = us;
            s->fail += rc < 0;
            s->empty += rc == 1;
        }
    }
    for (size_t k = 0; k < n_sides; k++)
        report(&sides[k]);
    grpc_slice_unref(m);
    for (size_t i = 0; i < rq.count; i++)
        grpc_slice_unref(rq.msg[i]);
    free(rq.msg);
    for (size_t k = 0; k < n_sides; k++) {
        grpc_channel_destroy(sides[k].ch);
        free(sides[k].us);
    }
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    grpc_shutdown();
    return 0;
}
