/* SPDX-License-Identifier: Apache-2.0 */
/*
 * decide_bench decide DIR COUNT CALLS     in-process pg_decide, allow path
 *                                         (secret match) over random records
 * decide_bench prune DIR COUNT            pg_store_prune scanning COUNT records,
 *                                         pruning none (before = epoch+1)
 * decide_bench one DIR EXTRA CALLS        pg_decide against record 0 which
 *                                         holds EXTRA+1 secrets (match is last)
 * decide_bench cached DIR COUNT CALLS     pg_decide over random records, a store
 *                                         with the record cache (long-lived host)
 *                                         interleaved with a plain one
 * decide_bench big DIR EXTRA CALLS        DIR empty: records record 0 with EXTRA+1
 *                                         secrets through pg_store_record_pulled
 *                                         (so it has its credential index), then
 *                                         pg_decide with the index and without it
 *                                         (moved aside), in alternating blocks
 * DIR must already hold the records (gen_records) except for "big".
 * Prints key=value lines.
 */
#include "bench_common.h"
#include "pullgate/pullgate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* One timed pg_decide; counts an unexpected deny. */
static double timed_decide(const pg_config *cfg, const pg_store *st, const req_buf *b,
                           unsigned *denied)
{
    pg_request r = {b->image, b->ref, b->ns, b->ann};
    pg_decision d;
    uint64_t t0 = bench_now_ns();
    int allow = pg_decide(cfg, st, &r, &d);
    uint64_t t1 = bench_now_ns();
    if (!allow && (*denied)++ == 0)
        fprintf(stderr, "decide_bench: unexpected deny: %s\n", d.text);
    return (double)(t1 - t0) / 1000.0;
}

/*
 * The same requests against a plain store and one with the record cache,
 * alternating per call. The cache is warmed by one untimed pass (the records
 * are older than its settle time).
 */
static int bench_cached(const pg_config *cfg, const pg_store *plain, size_t count, size_t calls)
{
    pg_error err = {0};
    pg_store *cached = store_for(cfg);
    if (pg_store_enable_cache(cached, 1u << 20, 0, &err) != PG_OK) {
        fprintf(stderr, "decide_bench: cache: %s\n", err.message);
        return 1;
    }
    size_t n_reqs = calls < 4096 ? calls : 4096;
    req_buf *reqs = calloc(n_reqs, sizeof *reqs);
    double *us_plain = calloc(calls, sizeof *us_plain), *us_cached = calloc(calls, sizeof *us_cached);
    if (!reqs || !us_plain || !us_cached)
        return 1;
    srand(42);
    for (size_t k = 0; k < n_reqs; k++)
        fill(&reqs[k], (size_t)rand() % count);
    unsigned denied = 0;
    for (size_t k = 0; k < n_reqs; k++)
        timed_decide(cfg, cached, &reqs[k], &denied);
    for (size_t k = 0; k < calls; k++) {
        const req_buf *b = &reqs[k % n_reqs];
        us_plain[k] = timed_decide(cfg, plain, b, &denied);
        us_cached[k] = timed_decide(cfg, cached, b, &denied);
    }
    char what[64];
    snprintf(what, sizeof what, "decide_parse_%zu", count);
    report(what, us_plain, calls);
    snprintf(what, sizeof what, "decide_cached_%zu", count);
    report(what, us_cached, calls);
    if (denied)
        printf("cached denied=%u\n", denied);
    pg_store_free(cached);
    free(reqs);
    free(us_plain);
    free(us_cached);
    return denied ? 1 : 0;
}

/* Record 0 with `extra` other secrets before its own, written by the library. */
static int record_big(pg_store *st, size_t extra)
{
    pg_secret *sec = calloc(extra + 1, sizeof *sec);
    char(*ns)[32] = calloc(extra + 1, sizeof *ns), (*uid)[32] = calloc(extra + 1, sizeof *uid);
    char(*hash)[65] = calloc(extra + 1, sizeof *hash);
    if (!sec || !ns || !uid || !hash)
        return 1;
    for (size_t k = 0; k < extra; k++) {
        char seed[64];
        snprintf(ns[k], sizeof ns[k], "other-%06zu", k);
        snprintf(uid[k], sizeof uid[k], "uid-%06zu", k);
        snprintf(seed, sizeof seed, "other-0-%zu", k);
        bench_sha256_hex(seed, hash[k]);
        sec[k] = (pg_secret){ns[k], "regcred", uid[k], hash[k]};
    }
    bench_namespace(0, ns[extra], sizeof ns[extra]);
    snprintf(uid[extra], sizeof uid[extra], "uid-0");
    bench_cred_hash(0, hash[extra]);
    sec[extra] = (pg_secret){ns[extra], "regcred", uid[extra], hash[extra]};
    req_buf b;
    fill(&b, 0);
    pg_pull_credentials creds = {sec, extra + 1, NULL, 0, 0};
    pg_error err = {0};
    int rc = pg_store_record_pulled(st, b.image, b.ref, &creds, &err);
    if (rc)
        fprintf(stderr, "decide_bench: record_pulled: %s\n", err.message);
    free(sec);
    free(ns);
    free(uid);
    free(hash);
    return rc;
}

/* Decisions on record 0 with its credential index and without (moved aside), in blocks. */
static int bench_big(const pg_config *cfg, pg_store *st, const char *dir, size_t extra,
                     size_t calls)
{
    if (record_big(st, extra) != 0)
        return 1;
    req_buf b;
    fill(&b, 0);
    char name[80], idx[4096], aside[4200];
    bench_sha256_hex(b.ref, name);
    snprintf(idx, sizeof idx, "%s/pullgate-credidx/sha256-%s", dir, name);
    snprintf(aside, sizeof aside, "%s.aside", idx);
    double *with = calloc(calls, sizeof *with), *without = calloc(calls, sizeof *without);
    if (!with || !without || access(idx, F_OK) != 0) {
        fprintf(stderr, "decide_bench: no credential index at %s\n", idx);
        return 1;
    }
    unsigned denied = 0;
    for (size_t k = 0; k < 50; k++) /* warm-up */
        timed_decide(cfg, st, &b, &denied);
    const size_t block = 100;
    for (size_t done = 0; done < calls; done += block) {
        size_t n = calls - done < block ? calls - done : block;
        for (size_t k = 0; k < n; k++)
            with[done + k] = timed_decide(cfg, st, &b, &denied);
        if (rename(idx, aside) != 0)
            return 1;
        for (size_t k = 0; k < n; k++)
            without[done + k] = timed_decide(cfg, st, &b, &denied);
        if (rename(aside, idx) != 0)
            return 1;
    }
    char what[64];
    snprintf(what, sizeof what, "big_index_%zu_secrets", extra + 1);
    report(what, with, calls);
    snprintf(what, sizeof what, "big_noindex_%zu_secrets", extra + 1);
    report(what, without, calls);
    if (denied)
        printf("big denied=%u\n", denied);
    free(with);
    free(without);
    return denied ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: decide_bench decide|prune|one|cached|big DIR N [CALLS]\n");
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
    } else if (!strcmp(mode, "cached")) {
        rc = bench_cached(cfg, st, n, calls);
    } else if (!strcmp(mode, "big")) {
        rc = bench_big(cfg, st, dir, n, calls);
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
