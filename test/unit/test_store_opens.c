/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A decision opens each file at most once (plugin/store/store_lookup.h): every
 * record, index entry, credential-times file, name-index file and
 * subdirectory, whatever spellings, directories and steps ask for it.
 *
 * This test links pullgate_traced: plugin/store/store_fs.c built with
 * PG_STORE_TRACE reports every file and directory the store opens to read
 * (each attempt, ENOENT included) to pg_st_trace below. The decisions are the
 * hook's, as CRI-O's annotations give them (the image as the pod wrote it, its
 * image ID, CRI-O's ImageRef and ImageName as trusted aliases, a repo digest
 * as a hint), over a store with a record in the writable directory and one of
 * the same image in a kubelet directory; through a fresh store (the local
 * hook) and a long-lived one (pullgate-cri), on the allow path and on the
 * preloaded proof.
 */
#include "engine_testing.h"
#include "decision_cases.h"
#include "internal.h"
#include "store_impl.h"
#include "store_trace.h"
#include "testutil.h"

#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEX "1111111111111111111111111111111111111111111111111111111111111111"
#define HEX2 "2222222222222222222222222222222222222222222222222222222222222222"
#define REF "sha256:" HEX
#define IMAGE "nginx:1.25"
#define NAME "docker.io/library/nginx"
#define NS "team-a"
#define HASH "abababababababababababababababababababababababababababababababab"
#define CREDS                                                                                      \
    "{\"" NAME "\":{\"kubernetesSecrets\":[{\"namespace\":\"" NS "\",\"name\":\"regcred\","        \
    "\"uid\":\"uid-1\",\"credentialHash\":\"" HASH "\"}]}}"

/* ------------------------------------------------------------ recorder */

static struct {
    pthread_mutex_t lock;
    bool on;
    char **paths; /* every open, as "directory path/name" */
    size_t n, cap;
} T = {.lock = PTHREAD_MUTEX_INITIALIZER};

static char *dir_of(int dirfd)
{
    char link[64], buf[PATH_MAX];
    if (dirfd == AT_FDCWD)
        return strdup("");
    snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
    ssize_t n = readlink(link, buf, sizeof buf - 1);
    buf[n < 0 ? 0 : n] = '\0';
    return strdup(buf);
}

void pg_st_trace(pg_st_trace_op op, int dirfd, const char *name, const char *name2, int fd,
                 const void *data, size_t len)
{
    (void)name2;
    (void)fd;
    (void)data;
    (void)len;
    pthread_mutex_lock(&T.lock);
    if (T.on && op == PG_TR_OPEN) {
        if (T.n == T.cap) {
            T.cap = T.cap ? 2 * T.cap : 64;
            T.paths = realloc(T.paths, T.cap * sizeof *T.paths);
        }
        char *dir = dir_of(dirfd);
        T.paths[T.n++] = tu_sprintf("%s/%s", dir, name);
        free(dir);
    }
    pthread_mutex_unlock(&T.lock);
}

static void record_on(void)
{
    pthread_mutex_lock(&T.lock);
    for (size_t i = 0; i < T.n; i++)
        free(T.paths[i]);
    T.n = 0;
    T.on = true;
    pthread_mutex_unlock(&T.lock);
}

static void record_off(void)
{
    pthread_mutex_lock(&T.lock);
    T.on = false;
    pthread_mutex_unlock(&T.lock);
}

/* The first path opened more than once (NULL: none); *opens: how many opens. */
static const char *opened_twice(size_t *opens)
{
    *opens = T.n;
    for (size_t i = 0; i < T.n; i++)
        for (size_t j = i + 1; j < T.n; j++)
            if (strcmp(T.paths[i], T.paths[j]) == 0)
                return T.paths[i];
    return NULL;
}

/* ------------------------------------------------------------ fixture */

static char *root, *state, *kubelet;
static pg_config *cfg;

static void setup(void)
{
    root = tu_mkdtemp();
    state = tu_sprintf("%s/state", root);
    kubelet = tu_sprintf("%s/kubelet", root);
    cfg = pg_config_new(NULL);
    dc_config_set(cfg, "stateDir", state);
    ck_assert_int_eq(pg_config_clear_list(cfg, "readOnlyRecordDirs", NULL), PG_OK);
    dc_config_set(cfg, "readOnlyRecordDirs", kubelet);
    pg_error err = {0};
    pg_store *s = pg_store_open(cfg, NULL, &err);
    ck_assert_msg(s != NULL, "%s", err.message);
    pg_secret sec = {NS, "regcred", "uid-1", HASH};
    pg_pull_credentials c = {&sec, 1, NULL, 0, 0};
    const char *aliases[] = {REF, NAME "@sha256:" HEX, NULL};
    ck_assert_int_eq(pg_store_record_intent(s, IMAGE, &err), PG_OK);
    ck_assert_msg(pg_store_record_pulled_aliases(s, IMAGE, REF, &c, aliases, &err) == PG_OK, "%s",
                  err.message);
    pg_store_free(s);
    /* The kubelet's own record of the same pull. */
    char *pulled = tu_sprintf("%s/pulled", kubelet);
    ck_assert_int_eq(mkdir(kubelet, 0700), 0);
    ck_assert_int_eq(mkdir(pulled, 0700), 0);
    dc_write_at(kubelet, "pulled", REF,
                "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"kubelet.config.k8s.io/v1alpha1\","
                "\"lastUpdatedTime\":\"2026-11-27T10:00:00Z\",\"imageRef\":\"" REF "\","
                "\"credentialMapping\":{\"" NAME "\":{\"kubernetesSecrets\":[{\"uid\":\"uid-1\","
                "\"namespace\":\"" NS "\",\"name\":\"regcred\",\"credentialHash\":\"" HASH
                "\"}]}}}\n");
    free(pulled);
}

static void teardown(void)
{
    pg_config_free(cfg);
    tu_rmrf(root);
    free(root);
    free(state);
    free(kubelet);
}

/* CRI-O's identity for the hook: ImageRef and ImageName trusted, a repo digest a hint
 * (nginx's; none for another image). */
static pg_decision decide(const pg_store *s, const char *image, const char *ref)
{
    pg_ref *parsed = pg_ref_parse(image, NULL);
    ck_assert_ptr_nonnull(parsed);
    bool nginx = strcmp(pg_ref_name(parsed), NAME) == 0;
    const char *aliases[] = {ref, pg_ref_string(parsed), NULL};
    const char *hints[] = {nginx ? NAME "@sha256:" HEX : NULL, NULL};
    pg_request req = {image, ref, NS, CREDS};
    pg_decision d;
    pg_decide_identity(cfg, s, &req, ref ? aliases : aliases + 1, hints, &d);
    pg_ref_free(parsed);
    return d;
}

static pg_store *open_store(bool cached)
{
    pg_error err = {0};
    pg_store *s = pg_store_open(cfg, NULL, &err);
    ck_assert_msg(s != NULL, "%s", err.message);
    if (cached)
        ck_assert_int_eq(pg_store_enable_cache_settle(s, 64, 0, 0, &err), PG_OK);
    return s;
}

/* One decision traced: each file opened at most once; returns how many opens. */
static size_t assert_each_once(const pg_store *s, const char *image, const char *ref, int reason)
{
    record_on();
    pg_decision d = decide(s, image, ref);
    record_off();
    ck_assert_msg(d.reason == reason, "%s: %s", pg_reason_name(d.reason), d.text);
    size_t opens = 0;
    const char *twice = opened_twice(&opens);
    ck_assert_msg(!twice, "%s opened more than once in one decision", twice);
    for (size_t i = 0; getenv("PG_TEST_SHOW_OPENS") && i < T.n; i++)
        printf("  opened %s\n", T.paths[i]);
    return opens;
}

START_TEST(fresh_store_opens_each_file_once)
{
    pg_store *s = open_store(false);
    size_t allow = assert_each_once(s, IMAGE, REF, PG_REASON_SECRET_MATCH);
    ck_assert_uint_gt(allow, 2); /* the trace saw the decision's reads */
    pg_store_free(s);
    s = open_store(false);
    size_t preloaded = assert_each_once(s, "busybox:1.36", "sha256:" HEX2, PG_REASON_PRELOADED);
    printf("a fresh store's decision opens %zu files and directories (allow), %zu (preloaded)\n",
           allow, preloaded);
    pg_store_free(s);
}
END_TEST

START_TEST(long_lived_store_opens_each_file_once)
{
    pg_store *s = open_store(true);
    size_t first = assert_each_once(s, IMAGE, REF, PG_REASON_SECRET_MATCH);
    size_t again = assert_each_once(s, IMAGE, REF, PG_REASON_SECRET_MATCH);
    size_t containerd = assert_each_once(s, IMAGE, NULL, PG_REASON_SECRET_MATCH);
    printf("a long-lived store's decision opens %zu files (first), %zu (again), %zu "
           "(containerd: no image ID)\n",
           first, again, containerd);
    pg_store_free(s);
}
END_TEST

/* The check can fail: two decisions traced together open their files twice. */
START_TEST(two_decisions_are_caught)
{
    pg_store *s = open_store(false);
    record_on();
    decide(s, IMAGE, REF);
    decide(s, IMAGE, REF);
    record_off();
    size_t opens = 0;
    ck_assert_ptr_nonnull(opened_twice(&opens));
    pg_store_free(s);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("store_opens");
    TCase *tc = tcase_create("opens");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, fresh_store_opens_each_file_once);
    tcase_add_test(tc, long_lived_store_opens_each_file_once);
    tcase_add_test(tc, two_decisions_are_caught);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
