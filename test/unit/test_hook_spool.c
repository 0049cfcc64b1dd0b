/* SPDX-License-Identifier: Apache-2.0 */
/* The local decisions spool (hooks/local_spool.c): what pullgate-hook-local appends is what
 * pullgate-cri takes, once, under concurrent appenders and folds; bounded; hostile files
 * refused. */
#include "hook.h"
#include "testutil.h"

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct tally {
    long lines, malformed, deny, allow, audit;
    long long last_when;
    char last_reason[64];
} tally;

static void count(void *ctx, long long when, const char *result, const char *reason)
{
    tally *t = ctx;
    t->lines++;
    if (!result) {
        t->malformed++;
        return;
    }
    t->last_when = when;
    snprintf(t->last_reason, sizeof t->last_reason, "%s", reason);
    if (strcmp(result, "deny") == 0)
        t->deny++;
    else if (strcmp(result, "allow") == 0)
        t->allow++;
    else if (strcmp(result, "audit-deny") == 0)
        t->audit++;
}

static char *spool_path(const char *dir, const char *suffix)
{
    return tu_sprintf("%s/" HOOK_SPOOL_NAME "%s", dir, suffix);
}

START_TEST(appended_decisions_are_taken_once)
{
    char *dir = tu_mkdtemp();
    chmod(dir, 0700);
    ck_assert_int_eq(hook_spool_append(dir, 1712345678, "deny", "no-record"), 0);
    ck_assert_int_eq(hook_spool_append(dir, 1712345679, "allow", "secret-match"), 0);
    ck_assert_int_eq(hook_spool_append(dir, 1712345680, "audit-deny", "no-credentials"), 0);
    char *path = spool_path(dir, "");
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);
    tally t = {0};
    ck_assert_int_eq(hook_spool_take(dir, 50, count, &t), 3);
    ck_assert_int_eq(t.deny, 1);
    ck_assert_int_eq(t.allow, 1);
    ck_assert_int_eq(t.audit, 1);
    ck_assert_int_eq(t.malformed, 0);
    ck_assert(t.last_when == 1712345680);
    ck_assert_str_eq(t.last_reason, "no-credentials");
    ck_assert_int_ne(stat(path, &st), 0); /* taken: gone */
    memset(&t, 0, sizeof t);
    ck_assert_int_eq(hook_spool_take(dir, 50, count, &t), 0); /* nothing twice */
    ck_assert_int_eq(t.lines, 0);
    free(path);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(lines_that_are_not_decisions_are_reported_as_such)
{
    static const char text[] = "1 deny no-record\n"
                               "deny no-record\n"            /* no time */
                               "2 DENY no-record\n"          /* not the vocabulary */
                               "3 deny\n"                    /* no reason */
                               "4 deny no-record extra\n"    /* too much */
                               "1234567890123456789 deny x\n" /* a time past 18 digits */
                               "5 allow not-kubernetes\n"
                               "6 deny no-rec"; /* a short write at the end */
    tally t = {0};
    ck_assert_uint_eq(hook_spool_parse(text, sizeof text - 1, count, &t), 8);
    ck_assert_int_eq(t.deny, 1);
    ck_assert_int_eq(t.allow, 1);
    ck_assert_int_eq(t.malformed, 6);
    ck_assert_str_eq(t.last_reason, "not-kubernetes");
    char line[HOOK_SPOOL_LINE_MAX];
    char long_word[HOOK_SPOOL_LINE_MAX];
    memset(long_word, 'a', sizeof long_word - 1);
    long_word[sizeof long_word - 1] = '\0';
    ck_assert_int_eq(hook_spool_format(1, "deny", long_word, line, sizeof line), -1);
}
END_TEST

START_TEST(the_spool_is_bounded)
{
    char *dir = tu_mkdtemp();
    chmod(dir, 0700);
    char *path = spool_path(dir, "");
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, HOOK_SPOOL_MAX_BYTES - 10), 0);
    close(fd);
    ck_assert_int_eq(hook_spool_append(dir, 1, "deny", "no-record"), -1); /* would pass the bound */
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, HOOK_SPOOL_MAX_BYTES - 10);
    free(path);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(hostile_spools_are_refused)
{
    char *dir = tu_mkdtemp();
    chmod(dir, 0700);
    char *path = spool_path(dir, "");
    char *target = tu_sprintf("%s/elsewhere", dir);
    tu_write_file(target, "", 0, 0600);
    ck_assert_int_eq(symlink(target, path), 0);
    ck_assert_int_eq(hook_spool_append(dir, 1, "deny", "no-record"), -1); /* a symlink */
    size_t len = 1;
    char *left = tu_read_file(target, &len);
    ck_assert_uint_eq(len, 0); /* nothing written through it */
    free(left);
    unlink(path);
    tu_write_file(path, "", 0, 0666);
    chmod(path, 0666);
    ck_assert_int_eq(hook_spool_append(dir, 1, "deny", "no-record"), -1); /* writable by all */
    tally t = {0};
    tu_write_file(path, "1 allow secret-match\n", -1, 0666);
    chmod(path, 0666);
    ck_assert_int_eq(hook_spool_take(dir, 50, count, &t), 0); /* dropped, never counted */
    ck_assert_int_eq(t.lines, 0);
    chmod(dir, 0777);
    ck_assert_int_eq(hook_spool_append(dir, 1, "deny", "no-record"), -1); /* the directory */
    ck_assert_int_eq(hook_spool_take(dir, 50, count, &t), -1);
    free(target);
    free(path);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(a_fold_waits_for_appenders_and_leaves_a_busy_file_for_later)
{
    char *dir = tu_mkdtemp();
    chmod(dir, 0700);
    ck_assert_int_eq(hook_spool_append(dir, 1, "deny", "no-record"), 0);
    char *path = spool_path(dir, "");
    int held = open(path, O_RDONLY);
    ck_assert_int_ge(held, 0);
    ck_assert_int_eq(flock(held, LOCK_SH), 0); /* an appender in the middle of its write */
    tally t = {0};
    ck_assert_int_eq(hook_spool_take(dir, 20, count, &t), -1);
    ck_assert_int_eq(t.lines, 0);
    char *folding = spool_path(dir, ".folding");
    struct stat st;
    ck_assert_int_eq(stat(folding, &st), 0); /* moved aside, kept */
    /* An append meanwhile goes to a fresh file at the path. */
    ck_assert_int_eq(hook_spool_append(dir, 2, "allow", "pinned"), 0);
    close(held);
    ck_assert_int_eq(hook_spool_take(dir, 20, count, &t), 2); /* the old file first, then new */
    ck_assert_int_eq(t.deny, 1);
    ck_assert_int_eq(t.allow, 1);
    ck_assert_int_ne(stat(folding, &st), 0);
    ck_assert_int_ne(stat(path, &st), 0);
    free(folding);
    free(path);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

#define APPENDERS 4
#define PER_APPENDER 400

/* Every line of concurrent appenders is taken exactly once by concurrent folds. */
START_TEST(concurrent_appends_and_folds_lose_nothing)
{
    char *dir = tu_mkdtemp();
    chmod(dir, 0700);
    pid_t kids[APPENDERS];
    for (int k = 0; k < APPENDERS; k++) {
        kids[k] = fork();
        ck_assert_int_ge(kids[k], 0);
        if (kids[k] == 0) {
            int failed = 0;
            for (int i = 0; i < PER_APPENDER; i++)
                failed += hook_spool_append(dir, i, "deny", "no-record") != 0;
            _exit(failed ? 1 : 0);
        }
    }
    tally t = {0};
    int running = APPENDERS;
    while (running > 0) {
        hook_spool_take(dir, 100, count, &t);
        int status;
        pid_t done;
        while ((done = waitpid(-1, &status, WNOHANG)) > 0) {
            ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            running--;
        }
    }
    ck_assert_int_ge(hook_spool_take(dir, 100, count, &t), 0);
    ck_assert_int_eq(t.malformed, 0);
    ck_assert_int_eq(t.deny, APPENDERS * PER_APPENDER);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("hook_spool");
    TCase *tc = tcase_create("spool");
    tcase_add_test(tc, appended_decisions_are_taken_once);
    tcase_add_test(tc, lines_that_are_not_decisions_are_reported_as_such);
    tcase_add_test(tc, the_spool_is_bounded);
    tcase_add_test(tc, hostile_spools_are_refused);
    tcase_add_test(tc, a_fold_waits_for_appenders_and_leaves_a_busy_file_for_later);
    tcase_add_test(tc, concurrent_appends_and_folds_lose_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
