/*
 * Regression: a reader racing an atomic record update (write temp file, rename over the
 * record) must never fail. The reader may open the old inode just before the rename; by
 * the time it fstat()s it, the rename has unlinked it (st_nlink == 0). That is a complete
 * old version, not hard-link aliasing, so PG_READ_SINGLE_LINK must accept it. Found by
 * test/integration/test_soak.sh: a hook denied an authorised container with
 * "... has 0 hard links" while pullgatectl merged a new secret into the same record.
 */
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROUNDS 20000

typedef struct writer_ctx {
    const char *dir;
    atomic_int stop;
} writer_ctx;

/* Replaces dir/record by rename, as the store does, until told to stop. */
static void *rename_loop(void *arg)
{
    writer_ctx *w = arg;
    char *tmp = tu_sprintf("%s/record.tmp", w->dir), *rec = tu_sprintf("%s/record", w->dir);
    while (!atomic_load(&w->stop)) {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || write(fd, "{}", 2) != 2 || close(fd) != 0 || rename(tmp, rec) != 0)
            break;
    }
    free(tmp);
    free(rec);
    return NULL;
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
    int unsafe = 0;
    char first[PG_ERROR_MESSAGE_MAX] = "";
    for (int i = 0; i < ROUNDS; i++) {
        char *buf = NULL;
        size_t len = 0;
        pg_error err = {0};
        int rc = pg_read_file_at(dirfd, "record", 1024, PG_READ_STRICT, &buf, &len, &err);
        if (rc == PG_ERR_UNSAFE && !unsafe++)
            snprintf(first, sizeof first, "%s", err.message);
        ck_assert_msg(rc == PG_OK || rc == PG_ERR_UNSAFE, "round %d: %s", i, err.message);
        free(buf);
    }
    atomic_store(&w.stop, 1);
    pthread_join(t, NULL);
    close(dirfd);
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
