/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pull_rounds_bench DIR COUNT
 * What recording one PullImage costs pullgate-cri (bench/README.md, "Aliases
 * in the record's batch"), a new image each time, interleaved in rounds of
 * 10 so that disk noise hits both sides alike:
 *   separate  pg_store_record_intent, pg_store_record_aliases (image ID and a
 *             repo digest), pg_store_record_pulled: 2 + 2 + 3 rounds of fsyncs
 *   combined  pg_store_record_intent, pg_store_record_pulled_aliases with the
 *             same aliases: 2 + 3 rounds
 * Prints calls/s and the mean for each, and combined / separate.
 */
#include "bench_common.h"
#include "pullgate/pullgate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static pg_store *open_store(const char *dir, pg_config **cfg)
{
    pg_error err = {0};
    pg_store *s = NULL;
    *cfg = pg_config_new(&err);
    if (*cfg && pg_config_set(*cfg, "stateDir", dir, &err) == PG_OK &&
        pg_config_clear_list(*cfg, "readOnlyRecordDirs", &err) == PG_OK)
        s = pg_store_open(*cfg, NULL, &err);
    if (!s)
        fprintf(stderr, "pull_rounds_bench: open %s: %s\n", dir, err.message);
    return s;
}

/* One pull of image i (new each time), recorded the way `combined` says. */
static int record_pull(pg_store *s, size_t i, int combined)
{
    char image[256], ref[65], ns[64], hash[65], uid[32], id[80], digest[400];
    bench_image(i, image, sizeof image);
    bench_image_ref(i, ref);
    bench_namespace(i, ns, sizeof ns);
    bench_cred_hash(i, hash);
    snprintf(uid, sizeof uid, "uid-%zu", i);
    snprintf(id, sizeof id, "sha256:%s", ref);
    char name[256];
    bench_image_name(i, name, sizeof name);
    snprintf(digest, sizeof digest, "%s@sha256:%s", name, hash);
    const char *aliases[] = {id, digest, NULL};
    pg_secret sec = {ns, "regcred", uid, hash};
    pg_pull_credentials creds = {&sec, 1, NULL, 0, 0};
    pg_error err = {0};
    int rc = pg_store_record_intent(s, image, &err);
    if (rc == PG_OK && combined)
        rc = pg_store_record_pulled_aliases(s, image, ref, &creds, aliases, &err);
    if (rc == PG_OK && !combined)
        rc = pg_store_record_aliases(s, ref, aliases, &err);
    if (rc == PG_OK && !combined)
        rc = pg_store_record_pulled(s, image, ref, &creds, &err);
    if (rc != PG_OK)
        fprintf(stderr, "pull_rounds_bench: %s\n", err.message);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: pull_rounds_bench DIR COUNT\n");
        return 2;
    }
    size_t n = strtoul(argv[2], NULL, 10);
    char dirs[2][4096];
    mkdir(argv[1], 0700);
    pg_config *cfg[2];
    pg_store *s[2];
    for (int k = 0; k < 2; k++) {
        snprintf(dirs[k], sizeof dirs[k], "%s/%s", argv[1], k ? "combined" : "separate");
        if (!(s[k] = open_store(dirs[k], &cfg[k])))
            return 1;
    }
    uint64_t total[2] = {0, 0};
    for (size_t base = 0; base < n; base += 10)
        for (int k = 0; k < 2; k++) {
            uint64_t t0 = bench_now_ns();
            for (size_t i = base; i < base + 10 && i < n; i++)
                if (record_pull(s[k], i, k) != PG_OK)
                    return 1;
            total[k] += bench_now_ns() - t0;
        }
    for (int k = 0; k < 2; k++) {
        printf("pull_%s calls=%zu per_s=%.1f mean_us=%.1f\n", k ? "combined" : "separate", n,
               (double)n * 1e9 / (double)total[k], (double)total[k] / 1e3 / (double)n);
        pg_store_free(s[k]);
        pg_config_free(cfg[k]);
    }
    printf("pull_combined_vs_separate ratio=%.2f\n", (double)total[1] / (double)total[0]);
    return 0;
}
