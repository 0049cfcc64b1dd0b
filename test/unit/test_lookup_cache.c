/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The absence cache of long-lived stores (plugin/store/lookup_cache.c, enabled by
 * pg_store_enable_cache): a cached "nothing here" must never outlive the
 * evidence that appears. Each test warms a cached store on a preloaded image
 * (so its absences are cached, which the stats prove), changes the record
 * directories through the file system as another process would, and checks
 * that the very next decision sees the change: records, intents and index
 * entries added, renamed over, modified in place or removed, in the writable
 * and a read-only directory; a queue overflow; a subdirectory replaced under
 * the store; and the same while another thread decides.
 */
#include "engine_testing.h"
#include "decision_cases.h"
#include "internal.h"
#include "lookup_cache.h"
#include "store_credidx.h"
#include "store_impl.h"
#include "testutil.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define APP "registry.example.com/team-a/app"
#define IMAGE APP ":1.0"
#define REF1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define NS "team-a"

typedef struct env {
    char *root, *state, *ro;
    pg_config *cfg;
    pg_store *store; /* with the cache */
    char *ann;       /* presents secret NS/regcred/uid-a */
} env;

static void env_set(env *e, const char *key, const char *value)
{
    dc_config_set(e->cfg, key, value);
}

static void env_init(env *e)
{
    memset(e, 0, sizeof *e);
    e->root = tu_mkdtemp();
    e->state = tu_sprintf("%s/state", e->root);
    e->ro = tu_sprintf("%s/kubelet", e->root);
    dc_make_record_dir(e->state);
    dc_make_record_dir(e->ro);
    pg_error err = {0};
    e->cfg = pg_config_new(&err);
    ck_assert_ptr_nonnull(e->cfg);
    env_set(e, "stateDir", e->state);
    ck_assert_int_eq(pg_config_clear_list(e->cfg, "readOnlyRecordDirs", &err), PG_OK);
    env_set(e, "readOnlyRecordDirs", e->ro);
    env_set(e, "dbus", "none");
    env_set(e, "policy", "NeverVerifyPreloadedImages");
    e->store = pg_store_open(e->cfg, NULL, &err);
    ck_assert_msg(e->store != NULL, "store_open: %s", err.message);
    ck_assert_int_eq(pg_store_enable_cache_settle(e->store, 64, 0, 0, &err), PG_OK);
    ck_assert_msg(e->store->lookups != NULL, "inotify unavailable: the absence cache is off");
    char hash[65];
    ck_assert_int_eq(pg_sha256_hex("cred-a", 6, hash, NULL), PG_OK);
    e->ann = tu_sprintf("{\"" APP "\":{\"kubernetesSecrets\":[{\"namespace\":\"" NS "\",\"name\":"
                        "\"regcred\",\"uid\":\"uid-a\",\"credentialHash\":\"%s\"}]}}",
                        hash);
}

static void env_free(env *e)
{
    pg_store_free(e->store);
    pg_config_free(e->cfg);
    tu_rmrf(e->root);
    free(e->root);
    free(e->state);
    free(e->ro);
    free(e->ann);
}

static pg_decision decide(const env *e)
{
    pg_request r = {.image = IMAGE, .image_ref = REF1, .namespace_ = NS, .credentials = e->ann};
    pg_decision d;
    pg_decide(e->cfg, e->store, &r, &d);
    return d;
}

static pg_lookup_cache_stats stats(const env *e)
{
    pg_lookup_cache_stats st;
    pg_lookup_cache_get_stats(e->store->lookups, &st);
    return st;
}

static void expect(const env *e, int allow, int reason, const char *when)
{
    pg_decision d = decide(e);
    ck_assert_msg(d.allow == allow && d.reason == reason, "%s: %s/%s (%s), expected %s/%s", when,
                  d.allow ? "allow" : "deny", pg_reason_name(d.reason), d.text,
                  allow ? "allow" : "deny", pg_reason_name(reason));
}

/* Preloaded, twice: the second decision answers its absences from the cache. */
static void warm(const env *e)
{
    expect(e, 1, PG_REASON_PRELOADED, "cold");
    uint64_t hits = stats(e).hits;
    expect(e, 1, PG_REASON_PRELOADED, "warm");
    ck_assert_msg(stats(e).hits > hits, "the second decision used no cached absence");
}

/* A kubelet record of REF1 for APP holding secret NS/regcred/<uid>. */
static char *record_text(const char *uid)
{
    char hash[65], now[32];
    ck_assert_int_eq(pg_sha256_hex("cred-a", 6, hash, NULL), PG_OK);
    pg_format_rfc3339(time(NULL), now);
    return tu_sprintf(
        "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"kubelet.config.k8s.io/"
        "v1alpha1\",\"lastUpdatedTime\":\"%s\",\"imageRef\":\"" REF1
        "\",\"credentialMapping\":{\"" APP "\":{\"kubernetesSecrets\":[{\"uid\":\"%s\","
        "\"namespace\":\"" NS "\",\"name\":\"regcred\",\"credentialHash\":\"%s\"}]}}}",
        now, uid,
        strcmp(uid, "uid-a") == 0
            ? hash
            : "0000000000000000000000000000000000000000000000000000000000000000");
}

/* Written to a temporary name and renamed into place, as writers do: a
 * concurrent decision never reads half a record. */
static void write_record(const char *dir, const char *uid)
{
    char *path = dc_record_path(dir, "pulled", REF1), *text = record_text(uid);
    char *tmp = tu_sprintf("%s/pulled/record.tmp", dir);
    tu_write_file(tmp, text, -1, 0600);
    ck_assert_int_eq(rename(tmp, path), 0);
    free(tmp);
    free(text);
    free(path);
}

static void write_intent(const char *dir)
{
    char *path = dc_record_path(dir, "pulling", IMAGE);
    tu_write_file(path,
                  "{\"kind\":\"ImagePullIntent\",\"apiVersion\":\"kubelet.config.k8s.io/"
                  "v1alpha1\",\"image\":\"" IMAGE "\"}",
                  -1, 0600);
    free(path);
}

static void remove_file(const char *dir, const char *sub, const char *key)
{
    char *path = dc_record_path(dir, sub, key);
    ck_assert_int_eq(unlink(path), 0);
    free(path);
}

/* ------------------------------------------------------------------ tests */

/*
 * A working set larger than the table's first size: the table grows, every
 * absence stays cached (the second pass probes nothing new), and an intent
 * for one of the first images still ends its cached absences.
 */
START_TEST(table_grows_with_the_working_set)
{
    env e;
    env_init(&e);
    size_t first_capacity = stats(&e).capacity;
    enum { IMAGES = 300 };
    char images[IMAGES][80];
    for (int pass = 0; pass < 2; pass++) {
        pg_lookup_cache_stats before = stats(&e);
        for (int i = 0; i < IMAGES; i++) {
            snprintf(images[i], sizeof images[i], "registry.example.com/team-a/app%d:1.0", i);
            pg_request r = {.image = images[i], .namespace_ = NS, .credentials = e.ann};
            pg_decision d;
            ck_assert_msg(pg_decide(e.cfg, e.store, &r, &d) && d.reason == PG_REASON_PRELOADED,
                          "%s: %s", images[i], d.text);
        }
        pg_lookup_cache_stats after = stats(&e);
        if (pass == 1) {
            ck_assert_uint_eq(after.inserts, before.inserts);
            ck_assert_uint_ge(after.hits - before.hits, IMAGES);
        }
    }
    ck_assert_msg(stats(&e).entries > first_capacity / 2 && stats(&e).capacity > first_capacity,
                  "%zu absences in %zu slots (first %zu): the table did not grow",
                  stats(&e).entries, stats(&e).capacity, first_capacity);
    char *intent = dc_record_path(e.state, "pulling", images[0]);
    tu_write_file(intent, "{\"kind\":\"ImagePullIntent\",\"apiVersion\":\"kubelet.config.k8s.io/v1alpha1\","
                          "\"image\":\"registry.example.com/team-a/app0:1.0\"}\n",
                  -1, 0600);
    free(intent);
    pg_request r = {.image = images[0], .namespace_ = NS, .credentials = e.ann};
    pg_decision d;
    ck_assert_msg(!pg_decide(e.cfg, e.store, &r, &d) && d.reason != PG_REASON_PRELOADED,
                  "an intent after growth: %s", d.text);
    env_free(&e);
}
END_TEST

START_TEST(intent_added_in_each_directory)
{
    const char *which[] = {"writable", "read-only"};
    for (int k = 0; k < 2; k++) {
        env e;
        env_init(&e);
        warm(&e);
        write_intent(k ? e.ro : e.state);
        expect(&e, 0, PG_REASON_NO_RECORD, which[k]);
        remove_file(k ? e.ro : e.state, "pulling", IMAGE);
        expect(&e, 1, PG_REASON_PRELOADED, "intent removed");
        env_free(&e);
    }
}
END_TEST

START_TEST(record_added_modified_and_removed)
{
    for (int k = 0; k < 2; k++) {
        env e;
        env_init(&e);
        const char *dir = k ? e.ro : e.state;
        warm(&e);
        write_record(dir, "uid-a");
        expect(&e, 1, PG_REASON_SECRET_MATCH, "record added");
        /* In place: same size, same second, same inode; only the uid differs. */
        char *path = dc_record_path(dir, "pulled", REF1), *text = record_text("uid-b");
        int fd = open(path, O_WRONLY);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pwrite(fd, text, strlen(text), 0), (ssize_t)strlen(text));
        close(fd);
        expect(&e, 0, PG_REASON_CREDENTIALS_MISMATCH, "record modified in place");
        ck_assert_int_eq(unlink(path), 0);
        expect(&e, 1, PG_REASON_PRELOADED, "record removed");
        free(text);
        free(path);
        env_free(&e);
    }
}
END_TEST

START_TEST(record_renamed_over)
{
    env e;
    env_init(&e);
    warm(&e);
    char *final = dc_record_path(e.ro, "pulled", REF1), *tmp = tu_sprintf("%s/pulled/new.tmp", e.ro);
    char *text = record_text("uid-a");
    tu_write_file(tmp, text, -1, 0600);
    expect(&e, 1, PG_REASON_PRELOADED, "temporary file only");
    ck_assert_int_eq(rename(tmp, final), 0);
    expect(&e, 1, PG_REASON_SECRET_MATCH, "renamed into place");
    free(text);
    text = record_text("uid-b");
    tu_write_file(tmp, text, -1, 0600);
    ck_assert_int_eq(rename(tmp, final), 0);
    expect(&e, 0, PG_REASON_CREDENTIALS_MISMATCH, "renamed over");
    free(text);
    free(tmp);
    free(final);
    env_free(&e);
}
END_TEST

/* Another process (a store without the cache) records a pull: record, index
 * entries, name index, credential times and credential index all appear. */
START_TEST(pull_recorded_by_another_store)
{
    env e;
    env_init(&e);
    warm(&e);
    pg_error err = {0};
    pg_store *writer = pg_store_open(e.cfg, NULL, &err);
    ck_assert_ptr_nonnull(writer);
    char hash[65];
    ck_assert_int_eq(pg_sha256_hex("cred-a", 6, hash, NULL), PG_OK);
    pg_secret sec = {NS, "regcred", "uid-a", hash};
    pg_pull_credentials creds = {&sec, 1, NULL, 0, 0};
    ck_assert_msg(pg_store_record_pulled(writer, IMAGE, REF1, &creds, &err) == PG_OK, "%s",
                  err.message);
    expect(&e, 1, PG_REASON_SECRET_MATCH, "pull recorded");
    /* Only the index entry left (records deleted): still evidence of a pull. */
    remove_file(e.state, "pulled", REF1);
    expect(&e, 0, PG_REASON_NO_RECORD, "index entry without its record");
    pg_store_free(writer);
    env_free(&e);
}
END_TEST

START_TEST(queue_overflow_drops_everything)
{
    env e;
    env_init(&e);
    long max = 0;
    char *text = tu_read_file("/proc/sys/fs/inotify/max_queued_events", NULL);
    if (text)
        max = strtol(text, NULL, 10);
    free(text);
    if (max <= 0 || max > 200000) {
        printf("queue_overflow_drops_everything: max_queued_events %ld, not overflowing it\n", max);
        env_free(&e);
        return;
    }
    warm(&e);
    /* Junk names (never looked up) in a watched subdirectory: one event each. */
    for (long i = 0; i <= max + 16; i++) {
        char *p = tu_sprintf("%s/pulling/junk-%ld", e.state, i);
        int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        close(fd);
        unlink(p);
        free(p);
    }
    write_intent(e.ro);
    expect(&e, 0, PG_REASON_NO_RECORD, "after an overflow");
    ck_assert_uint_ge(stats(&e).overflows, 1);
    remove_file(e.ro, "pulling", IMAGE);
    warm(&e); /* caching again after the overflow */
    env_free(&e);
}
END_TEST

START_TEST(subdirectory_replaced_under_the_store)
{
    env e;
    env_init(&e);
    warm(&e);
    size_t watched = stats(&e).watched;
    char *pulling = tu_sprintf("%s/pulling", e.state), *old = tu_sprintf("%s/pulling.old", e.state);
    ck_assert_int_eq(rename(pulling, old), 0);
    ck_assert_int_eq(mkdir(pulling, 0700), 0);
    write_intent(e.state); /* in the new pulling/, which the store never opened */
    expect(&e, 0, PG_REASON_NO_RECORD, "intent in a replacing directory");
    ck_assert_uint_lt(stats(&e).watched, watched);
    free(pulling);
    free(old);
    env_free(&e);
}
END_TEST

/* ------------------------------------------------------- two threads */

typedef struct racer {
    env *e;
    atomic_bool stop;
    unsigned decisions, bad;
    char first_bad[sizeof((pg_decision *)0)->text];
} racer;

static void *decide_loop(void *arg)
{
    racer *r = arg;
    while (!atomic_load(&r->stop) || r->decisions < 50) {
        pg_decision d = decide(r->e);
        /* Only the states the writer moves through. */
        if (!(d.allow && d.reason == PG_REASON_PRELOADED) &&
            !(!d.allow && d.reason == PG_REASON_NO_RECORD) &&
            !(d.allow && d.reason == PG_REASON_SECRET_MATCH) && r->bad++ == 0)
            snprintf(r->first_bad, sizeof r->first_bad, "%s", d.text);
        r->decisions++;
    }
    return NULL;
}

START_TEST(changes_while_another_thread_decides)
{
    env e;
    env_init(&e);
    warm(&e);
    racer r = {.e = &e};
    atomic_init(&r.stop, false);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, decide_loop, &r), 0);
    for (int round = 0; round < 20; round++) {
        const char *dir = round % 2 ? e.ro : e.state;
        write_intent(dir);
        expect(&e, 0, PG_REASON_NO_RECORD, "intent, concurrent");
        write_record(dir, "uid-a");
        expect(&e, 1, PG_REASON_SECRET_MATCH, "record, concurrent");
        remove_file(dir, "pulled", REF1);
        remove_file(dir, "pulling", IMAGE);
        expect(&e, 1, PG_REASON_PRELOADED, "removed, concurrent");
    }
    atomic_store(&r.stop, true);
    pthread_join(t, NULL);
    ck_assert_msg(r.bad == 0, "%u unexpected concurrent decisions, first: %s", r.bad, r.first_bad);
    ck_assert_uint_ge(r.decisions, 50);
    env_free(&e);
}
END_TEST

/* A store without the cache, shared by threads: the subdirectory descriptors
 * it keeps from the first decision that opens one (store_lookup.c) are kept
 * once, whichever thread gets there first (run under -fsanitize=thread), and
 * nothing else is left open. */
static size_t open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    size_t n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

typedef struct plain_racer {
    const env *e;
    pg_store *store;
    unsigned bad;
} plain_racer;

static void *plain_loop(void *arg)
{
    plain_racer *r = arg;
    pg_request req = {
        .image = IMAGE, .image_ref = REF1, .namespace_ = NS, .credentials = r->e->ann};
    for (int i = 0; i < 200; i++) {
        pg_decision d;
        pg_decide(r->e->cfg, r->store, &req, &d);
        r->bad += !(d.allow && d.reason == PG_REASON_SECRET_MATCH);
    }
    return NULL;
}

START_TEST(plain_store_shared_by_threads)
{
    env e;
    env_init(&e);
    pg_error err = {0};
    pg_store *writer = pg_store_open(e.cfg, NULL, &err);
    ck_assert_ptr_nonnull(writer);
    char hash[65];
    ck_assert_int_eq(pg_sha256_hex("cred-a", 6, hash, NULL), PG_OK);
    pg_secret sec = {NS, "regcred", "uid-a", hash};
    pg_pull_credentials creds = {&sec, 1, NULL, 0, 0};
    ck_assert_int_eq(pg_store_record_pulled(writer, IMAGE, REF1, &creds, &err), PG_OK);
    pg_store_free(writer);
    pg_store *shared = pg_store_open(e.cfg, NULL, &err);
    ck_assert_ptr_nonnull(shared);
    size_t fds_before = open_fds();
    plain_racer r[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (plain_racer){&e, shared, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, plain_loop, &r[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        ck_assert_uint_eq(r[i].bad, 0);
    }
    /* Kept: the credential index's directory was opened by some decision. */
    ck_assert_int_ge(atomic_load(&shared->kept[PG_SUB_CREDIDX]), 0);
    size_t kept = 0;
    for (size_t k = 0; k < shared->n_dirs * PG_STORE_SUBS; k++)
        kept += atomic_load(&shared->kept[k]) >= 0;
    ck_assert_uint_eq(open_fds(), fds_before + kept);
    pg_store_free(shared);
    env_free(&e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("lookup_cache");
    TCase *tc = tcase_create("absences");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, table_grows_with_the_working_set);
    tcase_add_test(tc, intent_added_in_each_directory);
    tcase_add_test(tc, record_added_modified_and_removed);
    tcase_add_test(tc, record_renamed_over);
    tcase_add_test(tc, pull_recorded_by_another_store);
    tcase_add_test(tc, queue_overflow_drops_everything);
    tcase_add_test(tc, subdirectory_replaced_under_the_store);
    tcase_add_test(tc, changes_while_another_thread_decides);
    tcase_add_test(tc, plain_store_shared_by_threads);
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
