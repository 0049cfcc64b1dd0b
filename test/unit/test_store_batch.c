/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the store's staged writes (plugin/store/store_fs.c pg_st_batch) and
 * of record_pulled's crash safety: failures at each step, a batch stopped
 * after each step as a killed writer would leave it, and writers killed with
 * SIGKILL mid-write. The invariants (docs/design.md, "Durability"): every
 * file is its old or its new version; a record is never there without its
 * credential times and its name-index entry; an intent goes only once the
 * record and the image index are there; prune leaves no temporary file.
 */
#include "internal.h"
#include "store_credtimes.h"
#include "store_impl.h"
#include "testutil.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define H_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define H_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define REF1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define APP "registry.example.com/team-a/app:1.0"
#define APP_NAME "registry.example.com/team-a/app"
#define OTHER "registry.example.com/team-b/other:2.0"
#define OTHER_NAME "registry.example.com/team-b/other"

static char *root, *state;
static pg_config *cfg;

static void setup(void)
{
    root = tu_mkdtemp();
    state = tu_sprintf("%s/state", root);
    cfg = pg_config_new(NULL);
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(pg_config_set(cfg, "stateDir", state, NULL), PG_OK);
    ck_assert_int_eq(pg_config_clear_list(cfg, "readOnlyRecordDirs", NULL), PG_OK);
}

static void teardown(void)
{
    pg_config_free(cfg);
    tu_rmrf(root);
    free(root);
    free(state);
}

static pg_store *open_store(void)
{
    pg_error err = {0};
    pg_store *s = pg_store_open(cfg, NULL, &err);
    ck_assert_msg(s != NULL, "open: %s", err.message);
    return s;
}

/* --------------------------------------------------------- batch itself */

static int open_sub(const char *name)
{
    char *p = tu_sprintf("%s/%s", root, name);
    mkdir(p, 0700);
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    free(p);
    return fd;
}

/* The content of root/sub/name, or NULL when missing; caller frees. */
static char *content(const char *sub, const char *name)
{
    char *p = tu_sprintf("%s/%s/%s", root, sub, name);
    char *c = tu_read_file(p, NULL);
    free(p);
    return c;
}

static void assert_content(const char *sub, const char *name, const char *want)
{
    char *c = content(sub, name);
    if (!want)
        ck_assert_msg(c == NULL, "%s/%s should be missing, has \"%s\"", sub, name, c);
    else
        ck_assert_msg(c && strcmp(c, want) == 0, "%s/%s: \"%s\", want \"%s\"", sub, name,
                      c ? c : "(missing)", want);
    free(c);
}

/* Number of temporary files (*.tmp) under dir, recursively one level. */
static int count_temps(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        size_t len = strlen(de->d_name);
        if (len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0)
            n++;
        char *p = tu_sprintf("%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            n += count_temps(p);
        free(p);
    }
    closedir(d);
    return n;
}

static void stage(pg_st_batch *b, int fd, const char *sub, const char *name, const char *text)
{
    pg_error err = {0};
    ck_assert_msg(pg_st_batch_stage(b, fd, root, sub, name, text, strlen(text), &err) == PG_OK,
                  "stage %s/%s: %s", sub, name, err.message);
}

START_TEST(batch_commits_groups_in_order)
{
    int a = open_sub("a"), b_fd = open_sub("b");
    char *p = tu_sprintf("%s/b/sha256-two", root);
    tu_write_file(p, "old two", -1, 0600);
    free(p);
    pg_st_batch b;
    pg_st_batch_init(&b, 0);
    stage(&b, a, "a", "sha256-one", "new one");
    size_t first = b.n;
    stage(&b, b_fd, "b", "sha256-two", "new two");
    stage(&b, a, "a", "sha256-three", "new three");
    /* Staged only: every target is its old version, the new data sits in temps. */
    assert_content("a", "sha256-one", NULL);
    assert_content("b", "sha256-two", "old two");
    ck_assert_int_eq(count_temps(root), 3);
    pg_error err = {0};
    ck_assert_int_eq(pg_st_batch_commit(&b, first, &err), PG_OK);
    assert_content("a", "sha256-one", "new one");
    assert_content("b", "sha256-two", "old two");
    assert_content("a", "sha256-three", NULL);
    ck_assert_int_eq(count_temps(root), 2);
    ck_assert_int_eq(pg_st_batch_commit(&b, b.n, &err), PG_OK);
    assert_content("b", "sha256-two", "new two");
    assert_content("a", "sha256-three", "new three");
    pg_st_batch_free(&b);
    ck_assert_int_eq(count_temps(root), 0);
    close(a);
    close(b_fd);
}
END_TEST

START_TEST(batch_restage_replaces)
{
    int a = open_sub("a");
    pg_st_batch b;
    pg_st_batch_init(&b, 0);
    stage(&b, a, "a", "sha256-x", "first");
    stage(&b, a, "a", "sha256-y", "y");
    stage(&b, a, "a", "sha256-x", "second");
    ck_assert_uint_eq(b.n, 2);
    ck_assert_int_eq(count_temps(root), 2);
    pg_error err = {0};
    ck_assert_int_eq(pg_st_batch_commit(&b, b.n, &err), PG_OK);
    assert_content("a", "sha256-x", "second");
    assert_content("a", "sha256-y", "y");
    pg_st_batch_free(&b);
    ck_assert_int_eq(count_temps(root), 0);
    close(a);
}
END_TEST

/* More files than BATCH_MAX_OPEN: descriptors stay bounded, every file lands. */
START_TEST(batch_many_files)
{
    int a = open_sub("a");
    pg_st_batch b;
    pg_st_batch_init(&b, 0);
    for (int i = 0; i < 3 * BATCH_MAX_OPEN; i++) {
        char name[32], text[32];
        snprintf(name, sizeof name, "sha256-%d", i);
        snprintf(text, sizeof text, "content %d", i);
        stage(&b, a, "a", name, text);
        ck_assert_uint_le(b.n_dirs, 1);
    }
    pg_error err = {0};
    ck_assert_int_eq(pg_st_batch_commit(&b, b.n, &err), PG_OK);
    pg_st_batch_free(&b);
    for (int i = 0; i < 3 * BATCH_MAX_OPEN; i += 37) {
        char name[32], text[32];
        snprintf(name, sizeof name, "sha256-%d", i);
        snprintf(text, sizeof text, "content %d", i);
        assert_content("a", name, text);
    }
    ck_assert_int_eq(count_temps(root), 0);
    close(a);
}
END_TEST

/* A batch freed without a commit (an error before it) leaves no trace. */
START_TEST(batch_free_without_commit)
{
    int a = open_sub("a");
    pg_st_batch b;
    pg_st_batch_init(&b, 0);
    stage(&b, a, "a", "sha256-x", "data");
    pg_st_batch_free(&b);
    assert_content("a", "sha256-x", NULL);
    ck_assert_int_eq(count_temps(root), 0);
    close(a);
}
END_TEST

/* A stage that cannot create its temporary file fails alone: no temp of it. */
START_TEST(batch_stage_failure)
{
    int a = open_sub("a");
    char *p = tu_sprintf("%s/not-a-dir", root);
    tu_write_file(p, "x", -1, 0600);
    int file_fd = open(p, O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(file_fd, 0);
    free(p);
    pg_st_batch b;
    pg_st_batch_init(&b, 0);
    stage(&b, a, "a", "sha256-x", "data");
    pg_error err = {0};
    ck_assert_int_ne(pg_st_batch_stage(&b, file_fd, root, "not-a-dir", "sha256-y", "y", 1, &err),
                     PG_OK);
    ck_assert_ptr_nonnull(strstr(err.message, "not-a-dir"));
    ck_assert_uint_eq(b.n, 1);
    ck_assert_int_eq(pg_st_batch_stage(&b, a, root, "a", "sha256-too-long-" H_A H_A, "z", 1, &err),
                     PG_ERR_INVALID);
    ck_assert_uint_eq(b.n, 1);
    pg_st_batch_free(&b);
    assert_content("a", "sha256-x", NULL);
    ck_assert_int_eq(count_temps(root), 0);
    close(a);
    close(file_fd);
}
END_TEST

/* A rename that fails (a directory at the target) stops the commit there. */
START_TEST(batch_rename_failure)
{
    int a = open_sub("a");
    char *p = tu_sprintf("%s/a/sha256-dir", root);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    char *inside = tu_sprintf("%s/keep", p);
    tu_write_file(inside, "k", -1, 0600);
    pg_st_batch b;
    pg_st_batch_init(&b, 0);
    stage(&b, a, "a", "sha256-before", "before");
    stage(&b, a, "a", "sha256-dir", "never");
    stage(&b, a, "a", "sha256-after", "after");
    pg_error err = {0};
    ck_assert_int_ne(pg_st_batch_commit(&b, b.n, &err), PG_OK);
    ck_assert_ptr_nonnull(strstr(err.message, "rename"));
    pg_st_batch_free(&b);
    assert_content("a", "sha256-before", "before"); /* renamed in order, before the failure */
    assert_content("a", "sha256-after", NULL);      /* never renamed: old version (none) */
    struct stat st;
    ck_assert_int_eq(lstat(p, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    assert_content("a/sha256-dir", "keep", "k");
    ck_assert_int_eq(count_temps(root), 0);
    free(inside);
    free(p);
    close(a);
}
END_TEST

/* Stopped after k steps (a killed writer): targets old or new, temps stay. */
START_TEST(batch_stopped_keeps_temps)
{
    int a = open_sub("a");
    pg_st_batch b;
    pg_st_batch_init(&b, 2); /* step 1: data durable; step 2: the first rename */
    stage(&b, a, "a", "sha256-x", "x");
    stage(&b, a, "a", "sha256-y", "y");
    pg_error err = {0};
    ck_assert_int_ne(pg_st_batch_commit(&b, b.n, &err), PG_OK);
    ck_assert(b.abandoned);
    pg_st_batch_free(&b);
    assert_content("a", "sha256-x", "x");
    assert_content("a", "sha256-y", NULL);
    ck_assert_int_eq(count_temps(root), 1);
    close(a);
}
END_TEST

/* ----------------------------------------------------- record_pulled */

static pg_pull_credentials creds_of(pg_secret *sec, const char *ns, const char *hash)
{
    *sec = (pg_secret){ns, "regcred", "uid-1", hash};
    return (pg_pull_credentials){.secrets = sec, .n_secrets = 1};
}

static char *path_of(const char *sub, const char *key)
{
    file_name name;
    ck_assert_int_eq(pg_record_file_name(key, name, NULL), PG_OK);
    return tu_sprintf("%s/%s/%s", state, sub, name);
}

static bool exists(const char *sub, const char *key)
{
    char *p = path_of(sub, key);
    struct stat st;
    bool found = lstat(p, &st) == 0;
    free(p);
    return found;
}

/* The record of ref must have, for each of its credentials, a credential time,
 * and be listed in the name file of each name it maps. NULL: no record. */
static pg_record *check_record(const pg_store *s, const char *ref)
{
    pg_record *rec = NULL;
    pg_error err = {0};
    int rc = pg_store_get(s, ref, &rec, &err);
    if (rc == PG_ERR_NOT_FOUND)
        return NULL;
    ck_assert_msg(rc == PG_OK, "a torn or unreadable record: %s", err.message);
    file_name file;
    ck_assert_int_eq(pg_record_file_name(ref, file, NULL), PG_OK);
    int fd;
    ck_assert_int_eq(pg_st_open_subdir(&s->dirs[0], SUB_CREDTIMES, &fd, &err), PG_OK);
    json_t *times = NULL;
    rc = pg_st_credtimes_read(fd, &s->dirs[0], file, ref, &times, &err);
    close(fd);
    ck_assert_msg(rc == PG_OK, "a record without its credential times: %s", err.message);
    for (size_t m = 0; m < rec->n_maps; m++) {
        const pg_rec_mapping *map = &rec->maps[m];
        for (size_t i = 0; i < map->n_secrets; i++) {
            char *key = pg_st_credential_key(map->image_name, &map->secrets[i], NULL);
            ck_assert_msg(json_is_integer(json_object_get(times, key)),
                          "no credential time for a secret of %s", map->image_name);
            free(key);
        }
        char *names = path_of(SUB_NAMES, map->image_name);
        char *text = tu_read_file(names, NULL);
        ck_assert_msg(text && strstr(text, file), "%s not in the name index of %s", file,
                      map->image_name);
        free(text);
        free(names);
    }
    json_decref(times);
    return rec;
}

/* An intent may go only once the record and the image's index entry are there. */
static void check_intent_rule(const pg_store *s, const char *image, const char *ref)
{
    if (exists(SUB_PULLING, image))
        return;
    char *resolved = NULL;
    pg_error err = {0};
    ck_assert_msg(pg_store_resolve_image(s, image, &resolved, &err) == PG_OK,
                  "intent of %s released without its index entry: %s", image, err.message);
    ck_assert_str_eq(resolved, ref);
    free(resolved);
    pg_record *rec = check_record(s, ref);
    ck_assert_msg(rec && pg_record_find(rec, APP_NAME) != NULL,
                  "intent of %s released without its record", image);
    pg_record_free(rec);
}

static void prune_all(pg_store *s)
{
    const char *in_use[] = {REF1, NULL};
    pg_error err = {0};
    ck_assert_msg(pg_store_prune(s, in_use, 0, NULL, &err) == PG_OK, "prune: %s", err.message);
}

/*
 * For every k, a store where image OTHER was pulled, then APP's intent taken
 * and APP's record_pulled (a new name and secret merged into the record)
 * stopped after k steps of its batch. Until the batch completes the call
 * fails, the intent stays and the files are consistent; prune then leaves no
 * temporary file and the pull can be recorded.
 */
START_TEST(record_pulled_stopped_at_each_step)
{
    bool completed = false;
    for (int k = 1; k < 32 && !completed; k++) {
        tu_rmrf(state);
        pg_store *s = open_store();
        pg_secret sec;
        pg_pull_credentials c = creds_of(&sec, "ns-b", H_B);
        pg_error err = {0};
        ck_assert_int_eq(pg_store_record_pulled(s, OTHER, REF1, &c, &err), PG_OK);
        ck_assert_int_eq(pg_store_record_intent(s, APP, &err), PG_OK);
        c = creds_of(&sec, "ns-a", H_A);
        s->test_stop_after = k;
        int rc = pg_store_record_pulled(s, APP, REF1, &c, &err);
        s->test_stop_after = 0;
        completed = rc == PG_OK;
        ck_assert_msg(completed || exists(SUB_PULLING, APP),
                      "step %d: the intent went with the record unfinished", k);
        pg_record *rec = check_record(s, REF1);
        ck_assert_msg(rec != NULL, "step %d: the old record vanished", k);
        bool is_new = pg_record_find(rec, APP_NAME) != NULL;
        ck_assert_msg(pg_record_find(rec, OTHER_NAME) != NULL, "step %d: old mapping lost", k);
        ck_assert_msg(!completed || is_new, "step %d: completed without the new record", k);
        pg_record_free(rec);
        check_intent_rule(s, APP, REF1);
        prune_all(s);
        ck_assert_int_eq(count_temps(state), 0);
        pg_store_free(s);
        /* A fresh process (reopen) finishes the job. */
        s = open_store();
        ck_assert_msg(pg_store_record_pulled(s, APP, REF1, &c, &err) == PG_OK, "%s", err.message);
        check_intent_rule(s, APP, REF1);
        pg_store_free(s);
    }
    ck_assert_msg(completed, "the batch never completed");
}
END_TEST

/*
 * A secret's hash replaced by a re-pull (same namespace, name and uid): the
 * credential times become durable before the record, so at every step the
 * record on disk, old or new, still finds a time for each of its secrets.
 */
START_TEST(record_pulled_rotated_hash_at_each_step)
{
    bool completed = false;
    for (int k = 1; k < 32 && !completed; k++) {
        tu_rmrf(state);
        pg_store *s = open_store();
        pg_secret sec;
        pg_pull_credentials c = creds_of(&sec, "ns-a", H_A);
        pg_error err = {0};
        ck_assert_int_eq(pg_store_record_pulled(s, APP, REF1, &c, &err), PG_OK);
        ck_assert_int_eq(pg_store_record_intent(s, APP, &err), PG_OK);
        c = creds_of(&sec, "ns-a", H_B);
        s->test_stop_after = k;
        completed = pg_store_record_pulled(s, APP, REF1, &c, &err) == PG_OK;
        s->test_stop_after = 0;
        pg_record *rec = check_record(s, REF1);
        ck_assert_msg(rec != NULL, "step %d: the record vanished", k);
        pg_record_free(rec);
        pg_store_free(s);
        /* Once a record without the old hash is on disk, the next write drops
         * its time (the first pull here may still start from the old record). */
        s = open_store();
        for (int i = 0; i < 2; i++)
            ck_assert_msg(pg_store_record_pulled(s, APP, REF1, &c, &err) == PG_OK, "%s",
                          err.message);
        char *times = path_of(SUB_CREDTIMES, REF1);
        char *text = tu_read_file(times, NULL);
        ck_assert_msg(text && strstr(text, H_B) && !strstr(text, H_A),
                      "step %d: credential times after the next pull: %s", k, text ? text : "none");
        free(text);
        free(times);
        pg_store_free(s);
    }
    ck_assert_msg(completed, "the batch never completed");
}
END_TEST

/* A symbolic link at the record's name: refused, nothing written, no temp left. */
START_TEST(record_pulled_symlink_target)
{
    pg_store *s = open_store();
    char *rec = path_of(SUB_PULLED, REF1);
    ck_assert_int_eq(symlink("/etc/passwd", rec), 0);
    pg_secret sec;
    pg_pull_credentials c = creds_of(&sec, "ns-a", H_A);
    pg_error err = {0};
    ck_assert_int_eq(pg_store_record_intent(s, APP, &err), PG_OK);
    ck_assert_int_ne(pg_store_record_pulled(s, APP, REF1, &c, &err), PG_OK);
    ck_assert(exists(SUB_PULLING, APP));
    ck_assert(!exists(SUB_CREDTIMES, REF1));
    ck_assert(!exists(SUB_NAMES, APP_NAME));
    char buf[64];
    ck_assert_int_gt(readlink(rec, buf, sizeof buf), 0);
    ck_assert_int_eq(count_temps(state), 0);
    free(rec);
    pg_store_free(s);
}
END_TEST

/* A directory at the image index entry's name: the rename fails after the
 * evidence and the record are in place; the intent stays. */
START_TEST(record_pulled_index_blocked)
{
    pg_store *s = open_store();
    char *idx = path_of(SUB_IMAGES, APP);
    ck_assert_int_eq(mkdir(idx, 0700), 0);
    pg_secret sec;
    pg_pull_credentials c = creds_of(&sec, "ns-a", H_A);
    pg_error err = {0};
    ck_assert_int_eq(pg_store_record_intent(s, APP, &err), PG_OK);
    ck_assert_int_ne(pg_store_record_pulled(s, APP, REF1, &c, &err), PG_OK);
    ck_assert(exists(SUB_PULLING, APP));
    pg_record *rec = check_record(s, REF1);
    pg_record_free(rec);
    ck_assert_int_eq(count_temps(state), 0);
    free(idx);
    pg_store_free(s);
}
END_TEST

/* ------------------------------------------------------ kill -9 writers */

/* Pulls of image i, alternating secrets, each with its intent, until killed. */
static void writer_loop(void)
{
    pg_store *s = pg_store_open(cfg, NULL, NULL);
    if (!s)
        _exit(2);
    for (unsigned i = 0;; i++) {
        char image[128], ns[32];
        snprintf(image, sizeof image, "registry.example.com/team-a/app:%u", i % 7);
        snprintf(ns, sizeof ns, "ns-%u", i % 5);
        pg_secret sec = {ns, "regcred", "uid-1", (i & 1) ? H_A : H_B};
        pg_pull_credentials c = {.secrets = &sec, .n_secrets = 1};
        if (pg_store_record_intent(s, image, NULL) != PG_OK ||
            pg_store_record_pulled(s, image, REF1, &c, NULL) != PG_OK)
            _exit(3);
    }
}

START_TEST(record_pulled_killed_writers)
{
    srand((unsigned)time(NULL));
    for (int round = 0; round < 12; round++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
            writer_loop();
        /* Somewhere in the middle of some write: where exactly does not matter. */
        struct timespec nap = {0, (long)(2 + rand() % 25) * 1000000L};
        nanosleep(&nap, NULL);
        kill(pid, SIGKILL);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFSIGNALED(status), "the writer stopped by itself (status %d)", status);
        pg_store *s = open_store();
        pg_record_free(check_record(s, REF1));
        for (unsigned i = 0; i < 7; i++) {
            char image[128];
            snprintf(image, sizeof image, "registry.example.com/team-a/app:%u", i);
            if (!exists(SUB_PULLING, image) && exists(SUB_IMAGES, image))
                check_intent_rule(s, image, REF1);
        }
        prune_all(s);
        ck_assert_int_eq(count_temps(state), 0);
        pg_record_free(check_record(s, REF1));
        pg_store_free(s);
    }
}
END_TEST

static Suite *batch_suite(void)
{
    Suite *s = suite_create("store_batch");
    TCase *t = tcase_create("batch");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, batch_commits_groups_in_order);
    tcase_add_test(t, batch_restage_replaces);
    tcase_add_test(t, batch_many_files);
    tcase_add_test(t, batch_free_without_commit);
    tcase_add_test(t, batch_stage_failure);
    tcase_add_test(t, batch_rename_failure);
    tcase_add_test(t, batch_stopped_keeps_temps);
    suite_add_tcase(s, t);
    TCase *r = tcase_create("record_pulled");
    tcase_add_checked_fixture(r, setup, teardown);
    tcase_set_timeout(r, 120);
    tcase_add_test(r, record_pulled_stopped_at_each_step);
    tcase_add_test(r, record_pulled_rotated_hash_at_each_step);
    tcase_add_test(r, record_pulled_symlink_target);
    tcase_add_test(r, record_pulled_index_blocked);
    tcase_add_test(r, record_pulled_killed_writers);
    suite_add_tcase(s, r);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(batch_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
