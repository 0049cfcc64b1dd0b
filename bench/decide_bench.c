/* SPDX-License-Identifier: Apache-2.0 */
/*
 * decide_bench decide DIR COUNT CALLS     in-process pg_decide, allow path
 *                                         (secret match) over random records
 * decide_bench prune DIR COUNT            pg_store_prune scanning COUNT records,
 *                                         pruning none (before = epoch+1)
 * decide_bench one DIR EXTRA CALLS        pg_decide against record 0 which
 *                                         holds EXTRA+1 secrets (match is last)
 * DIR must already hold the records (gen_records). Prints key=value lines.
 */
#include "bench_common.h"
#include "pullgate/pullgate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct req_buf {
    char image[256], ref[65], ns[64], ann[1024];
} req_buf;

static pg_config *config_for(const char *dir)
{
    pg_error err = {0};
    pg_config *cfg = pg_config_new(&err);
    if (!cfg || pg_config_set(cfg, "stateDir", dir, &err) ||
        pg_config_clear_list(cfg, "readOnlyRecordDirs", &err) ||
        pg_config_set(cfg, "dbus", "none", &err)) {
        fprintf(stderr, "decide_bench: config: %s\n", err.message);
        exit(1);
    }
    return cfg;
}

static pg_store *store_for(const pg_config *cfg)
{
    pg_error err = {0};
    pg_store *s = pg_store_open(cfg, NULL, &err);
    if (!s) {
        fprintf(stderr, "decide_bench: store: %s\n", err.message);
        exit(1);
    }
    return s;
}

static void fill(req_buf *b, size_t i)
{
    bench_image(i, b->image, sizeof b->image);
    bench_image_ref(i, b->ref);
    bench_namespace(i, b->ns, sizeof b->ns);
    bench_annotation(i, b->ann, sizeof b->ann);
}

static void report(const char *what, double *us, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += us[i];
    double mean = n ? sum / (double)n : 0;
    double p50 = bench_quantile(us, n, 0.50), p99 = bench_quantile(us, n, 0.99);
    printf("%s calls=%zu p50_us=%.2f p99_us=%.2f mean_us=%.2f max_us=%.2f\n", what, n, p50, p99,
           mean, n ? us[n - 1] : 0.0);
}

/* Times CALLS decisions over requests chosen by pick(k). */
static int bench_decide(const pg_config *cfg, const pg_store *st, size_t count, size_t calls,
                        const char *what, size_t fixed)
{
    size_t n_reqs = calls < 4096 ? calls : 4096;
    req_buf *reqs = calloc(n_reqs, sizeof *reqs);
    double *us = calloc(calls, sizeof *us);
    if (!reqs || !us)
        return 1;
    srand(42);
    for (size_t k = 0; k < n_reqs; k++)
        fill(&reqs[k], fixed != (size_t)-1 ? fixed : (size_t)rand() % count);
    unsigned denied = 0;
    pg_decision d;
    for (size_t k = 0; k < calls + 100; k++) {
        req_buf *b = &reqs[k % n_reqs];
        pg_request r = {b->image, b->ref, b->ns, b->ann};
        uint64_t t0 = bench_now_ns();
        int allow = pg_decide(cfg, st, &r, &d);
        uint64_t t1 = bench_now_ns();
        if (!allow && denied++ == 0)
            fprintf(stderr, "decide_bench: unexpected deny: %s\n", d.text);
        if (k >= 100) /* warm-up */
            us[k - 100] = (double)(t1 - t0) / 1000.0;
    }
    if (denied)
        printf("%s denied=%u\n", what, denied);
    report(what, us, calls);
    free(reqs);
    free(us);
    return denied ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: decide_bench decide|prune|one DIR N [CALLS]\n");
        return 2;
    }
    const char *mode = argv[1], *dir = argv[2];
    size_t n = strtoul(argv[3], NULL, 10);
    size_t calls = argc > 4 ? strtoul(argv[4], NULL, 10) : 20000;
    pg_config *cfg = config_for(dir);
    pg_store *st = store_for(cfg);
    int rc = 0;
    if (!strcmp(mode, "decide")) {
        char what[64];
        snprintf(what, sizeof what, "decide_%zu", n);
        rc = bench_decide(cfg, st, n, calls, what, (size_t)-1);
    } else if (!strcmp(mode, "one")) {
        char what[64];
        snprintf(what, sizeof what, "one_record_%zu_secrets", n + 1);
        rc = bench_decide(cfg, st, 1, calls, what, 0);
    } else if (!strcmp(mode, "prune")) {
        pg_error err = {0};
        unsigned pruned = 0;
        uint64_t t0 = bench_now_ns();
        rc = pg_store_prune(st, NULL, 1, &pruned, &err);
        uint64_t t1 = bench_now_ns();
        if (rc)
            fprintf(stderr, "decide_bench: prune: %s\n", err.message);
        double ms = (double)(t1 - t0) / 1e6;
        printf("prune_%zu records=%zu pruned=%u total_ms=%.1f us_per_record=%.2f\n", n, n, pruned,
               ms, n ? ms * 1000.0 / (double)n : 0.0);
    } else {
        rc = 2;
    }
    pg_store_free(st);
    pg_config_free(cfg);
    return rc;
}
