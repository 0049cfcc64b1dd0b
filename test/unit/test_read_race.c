/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Regression: a reader racing an atomic record update (write temp file, rename over the
 * record) must never fail. The reader may open the old inode just before the rename; by
 * the time it fstat()s it, the rename has unlinked it (st_nlink == 0). That is a complete
 * old version, not hard-link aliasing, so PG_READ_SINGLE_LINK must accept it. Found by
 * test/integration/test_soak.sh: a hook denied an authorised container with
 * "... has 0 hard links" while pullgatectl merged a new secret into the same record.
 * The test proves its own premise: the writer must have been renaming throughout
 * (it never stopped early, and made progress in every quarter of the reads).
 */
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 20000
#define QUARTERS 4

typedef struct writer_ctx {
    const char *dir;
    atomic_int stop;
    atomic_long renames; /* completed renames over the record */
    atomic_int failed;   /* errno of the step that stopped the writer early, or 0 */
} writer_ctx;

/* Replaces dir/record by rename, as the store does, until told to stop. */
static void *rename_loop(void *arg)
{
    writer_ctx *w = arg;
    char *tmp = tu_sprintf("%s/record.tmp", w->dir), *rec = tu_sprintf("%s/record", w->dir);
    while (!atomic_load(&w->stop)) {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || write(fd, "{}", 2) != 2 || close(fd) != 0 || rename(tmp, rec) != 0) {
            atomic_store(&w->failed, errno ? errno : EIO);
            break;
        }
        atomic_fetch_add(&w->renames, 1);
    }
    free(tmp);
    free(rec);
    return NULL;
}

/*
 * At each quarter of the reads, the writer must have renamed since the last one.
 * A loaded machine may deschedule it for a while, so give it up to 10 s rather
 * than fail on scheduling; a writer that stopped never catches up.
 */
static long await_progress(writer_ctx *w, long since)
{
    for (int waited_ms = 0; waited_ms < 10000; waited_ms++) {
        long now = atomic_load(&w->renames);
        if (now > since || atomic_load(&w->failed))
            return now;
        struct timespec ms = {0, 1000 * 1000};
        nanosleep(&ms, NULL);
    }
    return atomic_load(&w->renames);
}

START_TEST(reader_never_sees_a_replaced_record_as_unsafe)
{
    char *dir = tu_mkdtemp();
    char *rec = tu_sprintf("%s/record", dir);
    tu_write_file(rec, "{}", -1, 0600);
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(dirfd, 0);
    writer_ctx w = {.dir = dir};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, rename_loop, &w), 0);
    while (atomic_load(&w.renames) == 0 && !atomic_load(&w.failed))
        sched_yield(); /* the race is on from the first read */
    int unsafe = 0;
    char first[PG_ERROR_MESSAGE_MAX] = "";
    long progress[QUARTERS + 1];
    progress[0] = atomic_load(&w.renames);
    for (int i = 0; i < ROUNDS; i++) {
        int q = i / (ROUNDS / QUARTERS);
        if (i > 0 && i % (ROUNDS / QUARTERS) == 0)
            progress[q] = await_progress(&w, progress[q - 1]);
        char *buf = NULL;
        size_t len = 0;
        pg_error err = {0};
        int rc = pg_read_file_at(dirfd, "record", 1024, PG_READ_STRICT, &buf, &len, &err);
        if (rc == PG_ERR_UNSAFE && !unsafe++)
            snprintf(first, sizeof first, "%s", err.message);
        ck_assert_msg(rc == PG_OK || rc == PG_ERR_UNSAFE, "round %d: %s", i, err.message);
        free(buf);
    }
    progress[QUARTERS] = await_progress(&w, progress[QUARTERS - 1]);
    atomic_store(&w.stop, 1);
    pthread_join(t, NULL);
    close(dirfd);
    ck_assert_msg(atomic_load(&w.failed) == 0, "the writer stopped early: %s",
                  strerror(atomic_load(&w.failed)));
    for (int q = 0; q < QUARTERS; q++)
        ck_assert_msg(progress[q + 1] > progress[q],
                      "the writer made no rename during quarter %d of the reads (%ld renames)",
                      q + 1, progress[QUARTERS]);
    ck_assert_msg(unsafe == 0, "%d of %d reads refused a record replaced by rename: %s", unsafe,
                  ROUNDS, first);
    tu_rmrf(dir);
    free(rec);
    free(dir);
}
END_TEST

static Suite *read_race_suite(void)
{
    Suite *s = suite_create("read_race");
    TCase *tc = tcase_create("rename");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, reader_never_sees_a_replaced_record_as_unsafe);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(read_race_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
