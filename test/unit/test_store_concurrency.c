/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cross-process tests of plugin/store/store.c:
 *  (a) concurrent writers of one record lose no update (flock + re-read);
 *  (b) a writer killed at a random moment never leaves an unreadable record,
 *      and every pull it acknowledged survives (rename atomicity, fsync order).
 */
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define H_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define IMAGE "registry.example.com/team-a/app:1.0"
#define IMAGE_NAME "registry.example.com/team-a/app"
#define WRITERS 8
/* Every pull merges into one record that grows to WRITERS x PULLS_PER_WRITER secrets, so the
 * work is quadratic; under AddressSanitizer (about 3x slower here) 60 per writer keeps the same
 * contention (8 processes on one lock) at a sixth of the cost. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PG_TEST_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(PG_TEST_UNDER_ASAN)
#define PULLS_PER_WRITER 60
#else
#define PULLS_PER_WRITER 150
#endif
#define CRASH_ROUNDS 200

static char *root;
static pg_config *cfg;

static void setup(void)
{
    root = tu_mkdtemp();
    char *state = tu_sprintf("%s/state", root);
    cfg = pg_config_new(NULL);
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(pg_config_set(cfg, "stateDir", state, NULL), PG_OK);
    free(state);
}

static void teardown(void)
{
    pg_config_free(cfg);
    tu_rmrf(root);
    free(root);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int pull_with_secret(pg_store *s, const char *ref, const char *name, pg_error *err)
{
    /* A namespace per pull: one namespace's share of a record holds 100 entries (one per
     * credential), and these are 1,200 distinct pulls. */
    pg_secret sec = {name, name, "uid", H_A};
    pg_pull_credentials c = {.secrets = &sec, .n_secrets = 1};
    return pg_store_record_pulled(s, IMAGE, ref, &c, err);
}

/* Child of (a): its own store (own fds), PULLS_PER_WRITER pulls with distinct secrets. */
static void writer_main(int id, const char *ref)
{
    pg_error err = {0};
    pg_store *s = pg_store_open(cfg, NULL, &err);
    if (!s)
        _exit(2);
    for (int i = 0; i < PULLS_PER_WRITER; i++) {
        char name[32];
        snprintf(name, sizeof name, "w%d-s%03d", id, i);
        if (pull_with_secret(s, ref, name, &err) != PG_OK) {
            fprintf(stderr, "writer %d: %s\n", id, err.message);
            _exit(3);
        }
    }
    pg_store_free(s);
    _exit(0);
}

static size_t secrets_in_record(const char *ref)
{
    pg_error err = {0};
    pg_store *s = pg_store_open(cfg, NULL, &err);
    ck_assert_msg(s != NULL, "%s", err.message);
    pg_record *rec = NULL;
    ck_assert_msg(pg_store_get(s, ref, &rec, &err) == PG_OK, "%s", err.message);
    const pg_rec_mapping *m = pg_record_find(rec, IMAGE_NAME);
    ck_assert_ptr_nonnull(m);
    size_t n = m->n_secrets;
    for (size_t i = 1; i < n; i++) /* kept sorted and unique */
        ck_assert_int_lt(strcmp(m->secrets[i - 1].name, m->secrets[i].name), 0);
    pg_record_free(rec);
    pg_store_free(s);
    return n;
}

START_TEST(concurrent_writers_lose_nothing)
{
    const char *ref = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    double start = now_seconds();
    pid_t pids[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0)
            writer_main(i, ref);
    }
    for (int i = 0; i < WRITERS; i++) {
        int status;
        ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed", i);
    }
    double elapsed = now_seconds() - start;
    size_t n = secrets_in_record(ref);
    printf("concurrency: %d writers x %d pulls -> %zu secrets in %.2f s\n", WRITERS,
           PULLS_PER_WRITER, n, elapsed);
    ck_assert_uint_eq(n, (size_t)WRITERS * PULLS_PER_WRITER);
}
END_TEST

/* Child of (b): pulls until killed, acknowledging each on the pipe. */
static void crash_writer_main(int ack_fd, const char *ref)
{
    pg_error err = {0};
    pg_store *s = pg_store_open(cfg, NULL, &err);
    if (!s)
        _exit(2);
    for (int i = 0;; i++) {
        char name[32];
        snprintf(name, sizeof name, "s%05d", i);
        if (pull_with_secret(s, ref, name, &err) != PG_OK)
            _exit(3);
        char line[40];
        int len = snprintf(line, sizeof line, "%s\n", name);
        if (write(ack_fd, line, (size_t)len) != len)
            _exit(4);
    }
}

/* Reads every acknowledged secret name from the pipe (the writer is dead). */
static size_t read_acks(int fd, char ***names_out)
{
    char *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(pg_read_fd(fd, 1u << 20, &buf, &len, NULL), PG_OK);
    size_t n = 0, cap = 16;
    char **names = malloc(cap * sizeof *names);
    for (char *save = NULL, *tok = strtok_r(buf, "\n", &save); tok;
         tok = strtok_r(NULL, "\n", &save)) {
        if (n == cap)
            names = realloc(names, (cap *= 2) * sizeof *names);
        names[n++] = strdup(tok);
    }
    free(buf);
    *names_out = names;
    return n;
}

static void check_after_crash(const char *ref, char **acked, size_t n_acked)
{
    pg_error err = {0};
    pg_store *s = pg_store_open(cfg, NULL, &err);
    ck_assert_msg(s != NULL, "%s", err.message);
    pg_record *rec = NULL;
    int rc = pg_store_get(s, ref, &rec, &err);
    /* Never a partial or unreadable record: either none yet, or a valid one. */
    ck_assert_msg(rc == PG_OK || (rc == PG_ERR_NOT_FOUND && n_acked == 0),
                  "after kill: rc %d (%s), %zu acknowledged", rc, err.message, n_acked);
    const pg_rec_mapping *m = rec ? pg_record_find(rec, IMAGE_NAME) : NULL;
    for (size_t i = 0; i < n_acked; i++) {
        pg_pod_cred key = {acked[i], acked[i], "uid", NULL, NULL};
        bool found = false;
        for (size_t j = 0; m && !found && j < m->n_secrets; j++)
            found = strcmp(m->secrets[j].name, key.name) == 0;
        ck_assert_msg(found, "acknowledged secret %s lost", acked[i]);
    }
    pg_record_free(rec);
    pg_store_free(s);
}

START_TEST(killed_writer_leaves_valid_records)
{
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    printf("crash: seed %u\n", seed);
    double start = now_seconds();
    size_t total_acked = 0, rounds_with_record = 0;
    for (int round = 0; round < CRASH_ROUNDS; round++) {
        /* A fresh imageRef per round keeps records small and the test fast. */
        char *ref = tu_sprintf("sha256:%064d", round);
        int pipefd[2];
        ck_assert_int_eq(pipe(pipefd), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(pipefd[0]);
            crash_writer_main(pipefd[1], ref);
        }
        close(pipefd[1]);
        usleep((useconds_t)(rand_r(&seed) % 30000));
        kill(pid, SIGKILL);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFSIGNALED(status), "writer exited on its own (status %d)", status);
        char **acked;
        size_t n = read_acks(pipefd[0], &acked);
        close(pipefd[0]);
        check_after_crash(ref, acked, n);
        total_acked += n;
        rounds_with_record += n > 0;
        for (size_t i = 0; i < n; i++)
            free(acked[i]);
        free(acked);
        free(ref);
    }
    /* Stale temp files of killed writers are cleaned by prune. */
    pg_store *s = pg_store_open(cfg, NULL, NULL);
    const char *none[] = {NULL};
    unsigned pruned;
    ck_assert_int_eq(pg_store_prune(s, none, 1, &pruned, NULL), PG_OK);
    pg_store_free(s);
    printf("crash: %d rounds, %zu acknowledged pulls verified, %zu rounds with a record, "
           "%.2f s\n",
           CRASH_ROUNDS, total_acked, rounds_with_record, now_seconds() - start);
}
END_TEST

static Suite *concurrency_suite(void)
{
    Suite *s = suite_create("store_concurrency");
    TCase *tc = tcase_create("processes");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, concurrent_writers_lose_nothing);
    tcase_add_test(tc, killed_writer_leaves_valid_records);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(concurrency_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
