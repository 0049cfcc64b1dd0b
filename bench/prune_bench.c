/* SPDX-License-Identifier: Apache-2.0 */
/*
 * prune_bench DIR COUNT
 * How long a pull's intent waits while pg_store_prune walks COUNT records
 * (bench/README.md, "Prune"). DIR gets COUNT synthetic records (kubelet JSON,
 * no name index yet); then three prunes run, each while a second thread (its
 * own store handle, so its own flock) records an intent and releases it in a
 * loop, timing every pg_store_record_intent call:
 *   rebuild  every record in use, the name index missing (after an upgrade)
 *   steady   every record in use, nothing to change (the hourly timer)
 *   delete   one record in use: COUNT-1 records, their index entries,
 *            credential times and name lines go
 * The same intent loop with no prune running is the baseline of the run.
 * Prints, per case, the prune's duration and the intents' p50/p99/max wait.
 */
#include "bench_common.h"
#include "pullgate/pullgate.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IMAGE "registry.example.com/bench/intent:1"
#define MAX_SAMPLES 100000

typedef struct loop {
    pg_store *store;
    atomic_bool stop;
    double *ms;
    size_t n;
    int failed;
} loop;

static void *intent_loop(void *arg)
{
    loop *l = arg;
    while (!atomic_load(&l->stop) && l->n < MAX_SAMPLES) {
        pg_error err = {0};
        uint64_t t0 = bench_now_ns();
        int rc = pg_store_record_intent(l->store, IMAGE, &err);
        uint64_t t1 = bench_now_ns();
        if (rc == PG_OK)
            rc = pg_store_record_failed(l->store, IMAGE, &err);
        if (rc != PG_OK) {
            fprintf(stderr, "prune_bench: intent: %s\n", err.message);
            l->failed = 1;
            break;
        }
        l->ms[l->n++] = (double)(t1 - t0) / 1e6;
    }
    return NULL;
}

static pg_store *open_store(const char *dir)
{
    pg_error err = {0};
    pg_config *cfg = pg_config_new(&err);
    pg_store *s = NULL;
    if (cfg && pg_config_set(cfg, "stateDir", dir, &err) == PG_OK &&
        pg_config_clear_list(cfg, "readOnlyRecordDirs", &err) == PG_OK)
        s = pg_store_open(cfg, NULL, &err);
    if (!s)
        fprintf(stderr, "prune_bench: open %s: %s\n", dir, err.message);
    pg_config_free(cfg);
    return s;
}

static void report(const char *name, size_t n_records, double prune_ms, unsigned pruned, loop *l)
{
    double max = 0;
    for (size_t i = 0; i < l->n; i++)
        max = l->ms[i] > max ? l->ms[i] : max;
    double p50 = bench_quantile(l->ms, l->n, 0.5), p99 = bench_quantile(l->ms, l->n, 0.99);
    printf("prune_%s records=%zu pruned=%u prune_ms=%.0f intents=%zu intent_p50_ms=%.2f "
           "intent_p99_ms=%.2f intent_max_ms=%.2f\n",
           name, n_records, pruned, prune_ms, l->n, p50, p99, max);
}

/* The intent loop alone for about duration_ms (the baseline), or beside a prune. */
static int run_case(const char *name, pg_store *pruner, pg_store *writer, char **in_use,
                    size_t n_records)
{
    loop l = {.store = writer, .ms = malloc(MAX_SAMPLES * sizeof(double))};
    pthread_t t;
    if (!l.ms || pthread_create(&t, NULL, intent_loop, &l) != 0)
        return 1;
    pg_error err = {0};
    unsigned pruned = 0;
    uint64_t t0 = bench_now_ns();
    int rc = PG_OK;
    if (pruner)
        rc = pg_store_prune(pruner, (const char *const *)in_use, 0, &pruned, &err);
    else
        while (bench_now_ns() - t0 < 2000000000ull)
            ;
    double prune_ms = (double)(bench_now_ns() - t0) / 1e6;
    atomic_store(&l.stop, true);
    pthread_join(t, NULL);
    if (rc != PG_OK)
        fprintf(stderr, "prune_bench: prune: %s\n", err.message);
    else
        report(name, n_records, prune_ms, pruned, &l);
    free(l.ms);
    return rc != PG_OK || l.failed;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: prune_bench DIR COUNT\n");
        return 2;
    }
    const char *dir = argv[1];
    size_t n = strtoul(argv[2], NULL, 10);
    if (bench_write_records(dir, 0, n, 0) != 0) {
        perror("prune_bench: records");
        return 1;
    }
    char **refs = calloc(n + 1, sizeof *refs);
    for (size_t i = 0; refs && i < n; i++) {
        refs[i] = malloc(65);
        if (refs[i])
            bench_image_ref(i, refs[i]);
    }
    pg_store *pruner = open_store(dir), *writer = open_store(dir);
    if (!refs || !pruner || !writer)
        return 1;
    int bad = run_case("idle", NULL, writer, refs, n);
    bad |= run_case("rebuild", pruner, writer, refs, n);
    bad |= run_case("steady", pruner, writer, refs, n);
    char *one[] = {refs[0], NULL};
    bad |= run_case("delete", pruner, writer, one, n);
    pg_store_free(pruner);
    pg_store_free(writer);
    for (size_t i = 0; i < n; i++)
        free(refs[i]);
    free(refs);
    return bad;
}
