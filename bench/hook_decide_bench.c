/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hook_decide_bench -t TEMPLATE -d WORKDIR -n CALLS [-w WARMUP] SIDE...
 *   SIDE = NAME,SOCKET,CONFIG,RECORDS,IMAGES
 *
 * pullgate-cri's resident decision as the thin hook asks for it, without the
 * hook's exec: the request (hook_proto.h) with the OCI state and the bundle
 * directory's fd, over the hook socket, the reply read; timed per request.
 * For "decision p99 at 100k records / 5,000 images" (bench/README.md, "Scale"):
 * each side is a pullgate-cri serving CONFIG on SOCKET, whose store holds
 * RECORDS synthetic records (gen_records); its requests cycle over IMAGES
 * different images spread over the records (record i = k * RECORDS / IMAGES
 * + 7 for image k), in a random order drawn once, so a cache holds either all
 * of them or is walked. Sides are interleaved request by request (rotating).
 *
 * TEMPLATE is a bundle config.json with @IMAGE@, @REF@, @NS@ and @CREDS@ in
 * place of the values (bench/crio_config.sh @IMAGE@ @REF@ @NS@ @CREDS@ writes
 * one: CRI-O's 7 KiB annotation set); WORKDIR/NAME/<k>/config.json are made
 * from it for each side's images, each presenting its record's secret.
 *
 * One line per side:
 *   NAME calls=N allow=A other=O failed=F median_us=.. p90_us=.. p99_us=.. p999_us=.. max_us=..
 * (allow: a DECISION with status 0; other: any other reply; failed: no reply).
 */
#include "bench_common.h"
#include "hook_client.h"
#include "hook_proto.h"
#include "internal.h" /* pg_monotonic_ms(), the clock of hook_client_exchange_why's deadline */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SIDES 8
#define CONTAINER_ID "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"

typedef struct side {
    char *name, *socket, *config;
    size_t records, images;
    size_t *order; /* image indices, shuffled */
    char **state;  /* per image: the OCI state JSON */
    double *us;
    size_t n;
    unsigned allow, other, failed;
} side;

static void die(const char *what)
{
    fprintf(stderr, "hook_decide_bench: %s (%s)\n", what, strerror(errno));
    exit(1);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot read the template");
    char *b = calloc(1, 1 << 20);
    if (!b)
        die("out of memory");
    size_t n = fread(b, 1, (1 << 20) - 1, f);
    b[n] = '\0';
    fclose(f);
    return b;
}

/* Appends s to the buffer out (size cap, length *len); dies when it does not fit. */
static void put(char *out, size_t cap, size_t *len, const char *s, size_t n)
{
    if (*len + n + 1 > cap)
        die("config too large");
    memcpy(out + *len, s, n);
    *len += n;
    out[*len] = '\0';
}

/* tmpl with every @KEY@ replaced by its value (values[] in the order of keys[]). */
static char *fill(const char *tmpl, const char *const keys[], const char *const values[], size_t nk)
{
    size_t cap = strlen(tmpl) + 65536, len = 0;
    char *out = malloc(cap);
    if (!out)
        die("out of memory");
    out[0] = '\0';
    for (const char *p = tmpl; *p;) {
        size_t k;
        for (k = 0; k < nk; k++)
            if (!strncmp(p, keys[k], strlen(keys[k])))
                break;
        if (k < nk) {
            put(out, cap, &len, values[k], strlen(values[k]));
            p += strlen(keys[k]);
        } else {
            put(out, cap, &len, p, 1);
            p++;
        }
    }
    return out;
}

/* JSON string escaping of a JSON document (quotes and backslashes: the annotation has no others). */
static void json_escape(const char *in, char *out, size_t cap)
{
    size_t n = 0;
    for (; *in && n + 3 < cap; in++) {
        if (*in == '"' || *in == '\\')
            out[n++] = '\\';
        out[n++] = *in;
    }
    out[n] = '\0';
}

static void write_file(const char *path, const char *data)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t len = strlen(data);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len)
        die("cannot write a bundle");
    close(fd);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void make_bundles(side *s, const char *tmpl, const char *workdir)
{
    static const char *const keys[] = {"@IMAGE@", "@REF@", "@NS@", "@CREDS@"};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", workdir, s->name);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        die("mkdir");
    s->state = calloc(s->images, sizeof *s->state);
    s->order = calloc(s->images, sizeof *s->order);
    if (!s->state || !s->order)
        die("out of memory");
    for (size_t k = 0; k < s->images; k++) {
        size_t i = k * (s->records / s->images) + 7;
        if (i >= s->records)
            i = s->records - 1;
        char image[256], ref[65], ns[64], creds[8192], esc[16384], bundle[4200], path[4300];
        bench_image(i, image, sizeof image);
        bench_image_ref(i, ref);
        bench_namespace(i, ns, sizeof ns);
        bench_annotation(i, creds, sizeof creds);
        json_escape(creds, esc, sizeof esc);
        const char *values[] = {image, ref, ns, esc};
        char *cfg = fill(tmpl, keys, values, 4);
        snprintf(bundle, sizeof bundle, "%s/%zu", dir, k);
        if (mkdir(bundle, 0700) != 0 && errno != EEXIST)
            die("mkdir");
        snprintf(path, sizeof path, "%s/config.json", bundle);
        write_file(path, cfg);
        free(cfg);
        size_t cap = strlen(bundle) + 256;
        s->state[k] = malloc(cap);
        if (!s->state[k])
            die("out of memory");
        snprintf(s->state[k], cap,
                 "{\"ociVersion\":\"1.0.2\",\"id\":\"" CONTAINER_ID "\",\"status\":\"created\","
                 "\"pid\":4242,\"bundle\":\"%s\",\"annotations\":{\"io.container.manager\":\"cri-o\"}}",
                 bundle);
        s->order[k] = k;
    }
    for (size_t k = s->images; k > 1; k--) { /* Fisher-Yates */
        size_t j = (size_t)(next_random() % k), t = s->order[k - 1];
        s->order[k - 1] = s->order[j];
        s->order[j] = t;
    }
}

static void bundle_of(const char *state, char *out, size_t cap)
{
    const char *b = strstr(state, "\"bundle\":\"");
    size_t n = 0;
    for (b += 10; *b && *b != '"' && n + 1 < cap; b++)
        out[n++] = *b;
    out[n] = '\0';
}

static void ask(side *s, size_t call, int timed)
{
    static unsigned char msg[HOOK_PROTO_MAX_REQUEST], buf[HOOK_PROTO_MAX_REPLY + 1];
    const char *state = s->state[s->order[call % s->images]];
    char bundle[4200];
    bundle_of(state, bundle, sizeof bundle);
    hook_request req = {.stage = "createRuntime", .stage_len = 13, .config = s->config,
                        .config_len = strlen(s->config), .state = state,
                        .state_len = strlen(state), .config_explicit = 1};
    uint64_t t0 = bench_now_ns();
    int fd = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    size_t len = hook_proto_encode_request(&req, msg, sizeof msg);
    hook_reply reply;
    int rc = fd < 0 || !len
                 ? -1
                 : hook_client_exchange_why(s->socket, msg, len, fd, pg_monotonic_ms() + 5000,
                                            buf, sizeof buf, &reply, NULL);
    if (fd >= 0)
        close(fd);
    double us = (double)(bench_now_ns() - t0) / 1000.0;
    if (!timed)
        return;
    s->us[s->n++] = us;
    if (rc != 0)
        s->failed++;
    else if (reply.kind == HOOK_REPLY_DECISION && reply.status == 0)
        s->allow++;
    else {
        if (!s->other)
            fprintf(stderr, "hook_decide_bench: %s: not allowed: %.*s\n", s->name,
                    (int)reply.line_len, reply.line);
        s->other++;
    }
}

static side parse_side(char *spec, size_t calls)
{
    side s = {0};
    char *f[5];
    for (int k = 0; k < 5; k++) {
        f[k] = strsep(&spec, ",");
        if (!f[k])
            die("a side is NAME,SOCKET,CONFIG,RECORDS,IMAGES");
    }
    s.name = f[0], s.socket = f[1], s.config = f[2];
    s.records = strtoul(f[3], NULL, 10), s.images = strtoul(f[4], NULL, 10);
    if (!s.records || !s.images || s.images > s.records)
        die("RECORDS and IMAGES: 1 <= IMAGES <= RECORDS");
    s.us = calloc(calls, sizeof(double));
    if (!s.us)
        die("out of memory");
    return s;
}

int main(int argc, char **argv)
{
    const char *tmpl_path = NULL, *workdir = NULL;
    size_t calls = 20000, warmup = 0;
    int opt;
    while ((opt = getopt(argc, argv, "t:d:n:w:")) != -1) {
        switch (opt) {
        case 't': tmpl_path = optarg; break;
        case 'd': workdir = optarg; break;
        case 'n': calls = strtoul(optarg, NULL, 10); break;
        case 'w': warmup = strtoul(optarg, NULL, 10); break;
        default: return 2;
        }
    }
    size_t n_sides = (size_t)(argc - optind);
    if (!tmpl_path || !workdir || n_sides < 1 || n_sides > MAX_SIDES || !calls) {
        fprintf(stderr, "usage: hook_decide_bench -t TEMPLATE -d WORKDIR -n CALLS [-w WARMUP] "
                        "NAME,SOCKET,CONFIG,RECORDS,IMAGES...\n");
        return 2;
    }
    char *tmpl = slurp(tmpl_path);
    side sides[MAX_SIDES];
    for (size_t k = 0; k < n_sides; k++) {
        sides[k] = parse_side(argv[optind + k], calls);
        make_bundles(&sides[k], tmpl, workdir);
        /* Warm-up: every image once (a node has seen its images before), then WARMUP more. */
        for (size_t c = 0; c < sides[k].images + warmup; c++)
            ask(&sides[k], c, 0);
    }
    for (size_t c = 0; c < calls; c++)
        for (size_t k = 0; k < n_sides; k++)
            ask(&sides[(c + k) % n_sides], c, 1);
    for (size_t k = 0; k < n_sides; k++) {
        side *s = &sides[k];
        double max = 0;
        for (size_t i = 0; i < s->n; i++)
            max = s->us[i] > max ? s->us[i] : max;
        double p50 = bench_quantile(s->us, s->n, 0.5), p90 = bench_quantile(s->us, s->n, 0.9);
        double p99 = bench_quantile(s->us, s->n, 0.99), p999 = bench_quantile(s->us, s->n, 0.999);
        printf("%s calls=%zu allow=%u other=%u failed=%u median_us=%.1f p90_us=%.1f p99_us=%.1f "
               "p999_us=%.1f max_us=%.1f\n",
               s->name, s->n, s->allow, s->other, s->failed, p50, p90, p99, p999, max);
    }
    for (size_t k = 0; k < n_sides; k++) {
        for (size_t i = 0; i < sides[k].images; i++)
            free(sides[k].state[i]);
        free(sides[k].state);
        free(sides[k].order);
        free(sides[k].us);
    }
    free(tmpl);
    return 0;
}
