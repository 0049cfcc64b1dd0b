/* SPDX-License-Identifier: Apache-2.0 */
/*
 * write_bench DIR COUNT
 * Durable record writes: pg_store_record_pulled (lib: a new image and record
 * per call, one secret; lib_repull: the same image pulled again with the same
 * secret, so the record is rewritten and the image index is unchanged)
 * against raw C loops writing the same number of bytes durably:
 *   raw1  temp file + write + fsync + rename + fsync(dir)   (one file)
 *   raw2  the same for two files in two directories (record + an index entry:
 *         the minimum for what record_pulled keeps durable), one after the other
 *   raw1r raw1 replacing one existing file every time (the baseline of a re-pull,
 *         whose rename also replaces the old record and frees its inode)
 *   raw2b the two files batched: write both, fsync both, rename both, fsync both
 *         directories (on ext4/xfs the second fsync of each pair finds its
 *         changes already committed by the first journal commit)
 *   raw4s the library's own protocol for a new image by hand (docs/design.md,
 *         "Durability"): four files in four directories, fsyncs issued together
 *         (one thread each) in three rounds: the four files' data; two renames
 *         + their two directories; two renames + their two directories. The
 *         floor of what record_pulled keeps durable; lib / raw4s is the
 *         library's own overhead
 * Interleaved in rounds of 10 so that disk noise hits each side alike.
 * Prints calls/s for each.
 */
#include "bench_common.h"
#include "pullgate/pullgate.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int raw_write(int dfd, const char *name, const char *data, size_t len)
{
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s.0123456789abcdef.tmp", name);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int bad = write(fd, data, len) != (ssize_t)len || fsync(fd) != 0;
    bad |= close(fd) != 0;
    if (bad || renameat(dfd, tmp, dfd, name) != 0)
        return -1;
    return fsync(dfd);
}

static int open_tmp(int dfd, const char *name, char *tmp, size_t n)
{
    snprintf(tmp, n, "%s.0123456789abcdef.tmp", name);
    return openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* raw2b: both files durable with two journal commits instead of four. */
static int raw_write_pair(int da, int db, const char *name, const char *a, size_t alen,
                          const char *b, size_t blen)
{
    char ta[256], tb[256];
    int fa = open_tmp(da, name, ta, sizeof ta), fb = open_tmp(db, name, tb, sizeof tb);
    if (fa < 0 || fb < 0)
        return -1;
    int bad = write(fa, a, alen) != (ssize_t)alen || write(fb, b, blen) != (ssize_t)blen;
    bad |= fsync(fa) != 0 || fsync(fb) != 0;
    bad |= close(fa) != 0;
    bad |= close(fb) != 0;
    if (bad || renameat(da, ta, da, name) != 0 || renameat(db, tb, db, name) != 0)
        return -1;
    return fsync(da) || fsync(db) ? -1 : 0;
}

static void *fsync_thread(void *fd) { return fsync((int)(intptr_t)fd) ? fd : NULL; }

/* fsync of every fd, issued together: one thread per fd beyond the first. */
static int fsync_all(const int *fds, int n)
{
    pthread_t t[8];
    int bad = 0;
    for (int i = 1; i < n; i++)
        if (pthread_create(&t[i], NULL, fsync_thread, (void *)(intptr_t)fds[i]) != 0)
            return -1;
    bad |= fsync(fds[0]) != 0;
    for (int i = 1; i < n; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= r != NULL;
    }
    return bad ? -1 : 0;
}

/* raw4s: four files, three rounds of concurrent fsyncs (data; 2 renames; 2 renames). */
static int raw_write_staged4(const int *dirs, const char *name, const char *data, size_t len)
{
    char tmp[4][256];
    int fds[4];
    for (int i = 0; i < 4; i++) {
        fds[i] = open_tmp(dirs[i], name, tmp[i], sizeof tmp[i]);
        if (fds[i] < 0 || write(fds[i], data, len) != (ssize_t)len)
            return -1;
    }
    int bad = fsync_all(fds, 4);
    for (int i = 0; i < 4; i++)
        bad |= close(fds[i]);
    for (int g = 0; !bad && g < 4; g += 2) {
        for (int i = g; i < g + 2; i++)
            bad |= renameat(dirs[i], tmp[i], dirs[i], name);
        bad |= fsync_all(dirs + g, 2);
    }
    return bad ? -1 : 0;
}

static int mkdir_fd(const char *base, const char *sub)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", base, sub);
    mkdir(p, 0700);
    return open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: write_bench DIR COUNT\n");
        return 2;
    }
    const char *dir = argv[1];
    size_t n = strtoul(argv[2], NULL, 10);
    char lib_dir[4096];
    mkdir(dir, 0700);
    snprintf(lib_dir, sizeof lib_dir, "%s/lib", dir);
    pg_error err = {0};
    pg_config *cfg = pg_config_new(&err);
    if (!cfg || pg_config_set(cfg, "stateDir", lib_dir, &err) ||
        pg_config_clear_list(cfg, "readOnlyRecordDirs", &err) ||
        pg_config_set(cfg, "dbus", "none", &err)) {
        fprintf(stderr, "write_bench: config: %s\n", err.message);
        return 1;
    }
    pg_store *st = pg_store_open(cfg, NULL, &err);
    if (!st) {
        fprintf(stderr, "write_bench: store: %s\n", err.message);
        return 1;
    }
    int raw1 = mkdir_fd(dir, "raw1");
    int raw2a = mkdir_fd(dir, "raw2a");
    int raw2b = mkdir_fd(dir, "raw2b");
    int raw1r = mkdir_fd(dir, "raw1r");
    int raw3a = mkdir_fd(dir, "raw3a");
    int raw3b = mkdir_fd(dir, "raw3b");
    int raw4[4] = {mkdir_fd(dir, "raw4a"), mkdir_fd(dir, "raw4b"), mkdir_fd(dir, "raw4c"),
                   mkdir_fd(dir, "raw4d")};
    size_t len = bench_record_size(0);
    char *data = malloc(len);
    memset(data, 'x', len);
    const char *index_entry = "{\"image\":\"registry.example.com/team-0/app-0:v1\",\"imageRef\":"
                              "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}";
    uint64_t t_lib = 0, t_raw1 = 0, t_raw2 = 0, t_raw2b = 0, t_repull = 0, t_raw1r = 0, t_raw4s = 0;
    for (size_t base = 0; base < n; base += 10) {
        size_t end = base + 10 < n ? base + 10 : n;
        uint64_t t0 = bench_now_ns();
        for (size_t i = base; i < end; i++) {
            char image[256], ref[65], ns[64], hash[65], uid[32];
            bench_image(i, image, sizeof image);
            bench_image_ref(i, ref);
            bench_namespace(i, ns, sizeof ns);
            bench_cred_hash(i, hash);
            snprintf(uid, sizeof uid, "uid-%zu", i);
            pg_secret sec = {ns, "regcred", uid, hash};
            pg_pull_credentials creds = {&sec, 1, NULL, 0, 0};
            if (pg_store_record_pulled(st, image, ref, &creds, &err) != PG_OK) {
                fprintf(stderr, "write_bench: record_pulled: %s\n", err.message);
                return 1;
            }
        }
        uint64_t t1 = bench_now_ns();
        for (size_t i = base; i < end; i++) {
            char name[64];
            snprintf(name, sizeof name, "sha256-%zu", i);
            if (raw_write(raw1, name, data, len) != 0) {
                perror("write_bench: raw1");
                return 1;
            }
        }
        uint64_t t2 = bench_now_ns();
        for (size_t i = base; i < end; i++) {
            char name[64];
            snprintf(name, sizeof name, "sha256-%zu", i);
            if (raw_write(raw2a, name, data, len) != 0 ||
                raw_write(raw2b, name, index_entry, strlen(index_entry)) != 0) {
                perror("write_bench: raw2");
                return 1;
            }
        }
        uint64_t t3 = bench_now_ns();
        for (size_t i = base; i < end; i++) {
            char name[64];
            snprintf(name, sizeof name, "sha256-%zu", i);
            if (raw_write_pair(raw3a, raw3b, name, data, len, index_entry, strlen(index_entry))) {
                perror("write_bench: raw2b");
                return 1;
            }
        }
        uint64_t t4 = bench_now_ns();
        for (size_t i = base; i < end; i++) {
            char image[256], ref[65], ns[64], hash[65];
            bench_image(0, image, sizeof image);
            bench_image_ref(0, ref);
            bench_namespace(0, ns, sizeof ns);
            bench_cred_hash(0, hash);
            pg_secret sec = {ns, "regcred", "uid-0", hash};
            pg_pull_credentials creds = {&sec, 1, NULL, 0, 0};
            if (pg_store_record_pulled(st, image, ref, &creds, &err) != PG_OK) {
                fprintf(stderr, "write_bench: record_pulled (re-pull): %s\n", err.message);
                return 1;
            }
        }
        uint64_t t5 = bench_now_ns();
        for (size_t i = base; i < end; i++)
            if (raw_write(raw1r, "sha256-same", data, len) != 0) {
                perror("write_bench: raw1r");
                return 1;
            }
        uint64_t t6 = bench_now_ns();
        for (size_t i = base; i < end; i++) {
            char name[64];
            snprintf(name, sizeof name, "sha256-%zu", i);
            if (raw_write_staged4(raw4, name, data, len) != 0) {
                perror("write_bench: raw4s");
                return 1;
            }
        }
        t_raw4s += bench_now_ns() - t6;
        t_raw1r += t6 - t5;
        t_repull += t5 - t4;
        t_raw2b += t4 - t3;
        t_lib += t1 - t0;
        t_raw1 += t2 - t1;
        t_raw2 += t3 - t2;
    }
    printf("record_bytes=%zu\n", len);
    printf("lib calls=%zu per_s=%.1f mean_us=%.1f\n", n, (double)n * 1e9 / (double)t_lib,
           (double)t_lib / 1e3 / (double)n);
    printf("raw1 calls=%zu per_s=%.1f mean_us=%.1f\n", n, (double)n * 1e9 / (double)t_raw1,
           (double)t_raw1 / 1e3 / (double)n);
    printf("raw2 calls=%zu per_s=%.1f mean_us=%.1f\n", n, (double)n * 1e9 / (double)t_raw2,
           (double)t_raw2 / 1e3 / (double)n);
    printf("lib_repull calls=%zu per_s=%.1f mean_us=%.1f\n", n, (double)n * 1e9 / (double)t_repull,
           (double)t_repull / 1e3 / (double)n);
    printf("raw1r calls=%zu per_s=%.1f mean_us=%.1f\n", n, (double)n * 1e9 / (double)t_raw1r,
           (double)t_raw1r / 1e3 / (double)n);
    printf("raw2b calls=%zu per_s=%.1f mean_us=%.1f\n", n, (double)n * 1e9 / (double)t_raw2b,
           (double)t_raw2b / 1e3 / (double)n);
    printf("raw4s calls=%zu per_s=%.1f mean_us=%.1f\n", n, (double)n * 1e9 / (double)t_raw4s,
           (double)t_raw4s / 1e3 / (double)n);
    pg_store_free(st);
    pg_config_free(cfg);
    return 0;
}
