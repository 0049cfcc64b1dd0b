/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec_bench -n RUNS [-w WARMUP] -s STATE_FILE [-o OUT_PREFIX] [-r RAW_PREFIX] NAME -- CMD ARGS... [:: NAME -- CMD ARGS...]...
 *
 * Spawns each command RUNS times, interleaved round by round, the order
 * rotating from one round to the next (A B C, B C A, C A B, ...: no command
 * always runs after the same one), feeding STATE_FILE on stdin through a
 * pipe, and measures wall time from spawn to reaped exit (wait4). Prints per
 * command one line:
 *   NAME runs=N fail=F median_us=.. p90_us=.. mean_us=.. min_us=.. maxrss_kib=.. p25_us=..
 * With -r, RAW_PREFIX.NAME.us gets each run's time in round order, one a line:
 * line i of two commands is the same round, for paired comparisons.
 * where maxrss_kib is the largest ru_maxrss over the runs (wait4's rusage of
 * each child; getrusage(RUSAGE_CHILDREN) reports the same maximum). A run
 * whose exit status is not 0 counts as a failure (the benchmark uses the
 * allow path); the first failure's stderr is kept in OUT_PREFIX.NAME.err.
 */
#include "bench_common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct cmd {
    const char *name;
    char **argv;
    double *us;
    size_t n;
    unsigned fails;
    long maxrss;
} cmd;

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = malloc(1 << 20);
    *len = b ? fread(b, 1, 1 << 20, f) : 0;
    fclose(f);
    return b;
}

static int run_once(cmd *c, const char *state, size_t state_len, const char *err_path,
                    double *us_out)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[0], STDIN_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    /* The driver ignores SIGPIPE; the child gets the default back, as under a runtime. */
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t def;
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    uint64_t t0 = bench_now_ns();
    pid_t pid;
    int rc = posix_spawn(&pid, c->argv[0], &fa, &attr, c->argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(p[0]);
    if (rc != 0) {
        close(p[1]);
        errno = rc;
        return -1;
    }
    /* The OCI state is small (well under the pipe buffer): one write. */
    ssize_t ignored = write(p[1], state, state_len);
    (void)ignored;
    close(p[1]);
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
        ;
    uint64_t t1 = bench_now_ns();
    *us_out = (double)(t1 - t0) / 1000.0;
    if (ru.ru_maxrss > c->maxrss)
        c->maxrss = ru.ru_maxrss;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    size_t runs = 200, warmup = 10;
    /* A command that exits without reading stdin must not kill the driver. */
    signal(SIGPIPE, SIG_IGN);
    const char *state_path = NULL, *out = "/tmp/exec_bench", *raw = NULL;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            runs = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-w") && i + 1 < argc)
            warmup = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            state_path = argv[++i];
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            raw = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else
            break;
    }
    size_t state_len = 0;
    char *state = state_path ? slurp(state_path, &state_len) : NULL;
    if (!state) {
        fprintf(stderr, "exec_bench: -s STATE_FILE is required and readable\n");
        return 2;
    }
    cmd cmds[8];
    size_t n_cmds = 0;
    while (i < argc && n_cmds < 8) {
        cmd *c = &cmds[n_cmds];
        memset(c, 0, sizeof *c);
        c->name = argv[i++];
        if (i >= argc || strcmp(argv[i], "--") != 0) {
            fprintf(stderr, "exec_bench: expected NAME -- CMD...\n");
            return 2;
        }
        c->argv = &argv[++i];
        while (i < argc && strcmp(argv[i], "::") != 0)
            i++;
        if (i < argc)
            argv[i++] = NULL;
        c->us = calloc(runs ? runs : 1, sizeof *c->us);
        n_cmds++;
    }
    if (!n_cmds)
        return 2;
    char err_path[4096];
    for (size_t r = 0; r < warmup + runs; r++) {
        for (size_t j = 0; j < n_cmds; j++) {
            cmd *c = &cmds[(r + j) % n_cmds];
            double us;
            snprintf(err_path, sizeof err_path, "%s.%s.err", out, c->name);
            int rc = run_once(c, state, state_len, c->fails ? "/dev/null" : err_path, &us);
            if (rc < 0) {
                perror("exec_bench: spawn");
                return 2;
            }
            if (r < warmup)
                continue;
            c->fails += rc != 0;
            c->us[c->n++] = us;
        }
    }
    for (size_t k = 0; raw && k < n_cmds; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%s.us", raw, cmds[k].name);
        FILE *f = fopen(path, "w");
        if (!f) {
            perror("exec_bench: raw file");
            return 2;
        }
        for (size_t j = 0; j < cmds[k].n; j++)
            fprintf(f, "%.1f\n", cmds[k].us[j]);
        fclose(f);
    }
    /* RUSAGE_CHILDREN: the largest child ever waited for (a cross-check). */
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    for (size_t k = 0; k < n_cmds; k++) {
        cmd *c = &cmds[k];
        double sum = 0;
        for (size_t j = 0; j < c->n; j++)
            sum += c->us[j];
        double mean = c->n ? sum / (double)c->n : 0;
        double p90 = bench_quantile(c->us, c->n, 0.90);
        double med = bench_quantile(c->us, c->n, 0.50);
        double p25 = bench_quantile(c->us, c->n, 0.25);
        printf("%s runs=%zu fail=%u median_us=%.1f p90_us=%.1f mean_us=%.1f min_us=%.1f "
               "maxrss_kib=%ld p25_us=%.1f\n",
               c->name, c->n, c->fails, med, p90, mean, c->n ? c->us[0] : 0.0, c->maxrss, p25);
    }
    printf("all_children_maxrss_kib=%ld\n", ru.ru_maxrss);
    return 0;
}
