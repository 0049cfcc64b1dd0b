/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-cri's store writer: operations run in order, their outcomes come
 * back through callbacks, a held store lock delays them but drops none, room is
 * reserved before anything is queued, a pulled record carries the image's aliases in its own
 * batch (and survives an alias list the store refuses).
 * Also the configuration keys of pullgate-cri.
 */
#include "recorder.h"
#include "thread.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define REF "sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"

typedef struct env {
    char dir[64];
    pg_config *cfg;
    pg_store *store;
    cri_recorder *rec;
} env;

static void env_up(env *e)
{
    snprintf(e->dir, sizeof e->dir, "/tmp/pg-cri-rec.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(e->dir));
    pg_error err = {0};
    e->cfg = pg_config_new(&err);
    ck_assert_ptr_nonnull(e->cfg);
    ck_assert_int_eq(pg_config_set(e->cfg, "stateDir", e->dir, &err), PG_OK);
    ck_assert_int_eq(pg_config_clear_list(e->cfg, "readOnlyRecordDirs", &err), PG_OK);
    e->store = pg_store_open(e->cfg, NULL, &err);
    ck_assert_msg(e->store != NULL, "%s", err.message);
    e->rec = cri_recorder_new(e->store, &err);
    ck_assert_ptr_nonnull(e->rec);
}

static void env_down(env *e)
{
    ck_assert_int_eq(cri_recorder_stop(e->rec, 5000), 1);
    pg_store_free(e->store);
    pg_config_free(e->cfg);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", e->dir);
    ck_assert_int_eq(system(cmd), 0);
}

static bool intent_exists(const env *e, const char *image)
{
    char name[7 + PG_HASH_HEX_LEN + 1], path[256];
    ck_assert_int_eq(pg_record_file_name(image, name, NULL), PG_OK);
    snprintf(path, sizeof path, "%s/pulling/%s", e->dir, name);
    return access(path, F_OK) == 0;
}

static cri_pull_creds secret_creds(const char *ns, const char *hash)
{
    cri_pull_creds c;
    memset(&c, 0, sizeof c);
    c.secrets = calloc(1, sizeof *c.secrets);
    ck_assert_ptr_nonnull(c.secrets);
    c.secrets[0].namespace_ = pg_strdup(ns);
    c.secrets[0].name = pg_strdup("regcred");
    c.secrets[0].uid = pg_strdup("uid-1");
    c.secrets[0].credential_hash = pg_strdup(hash);
    c.creds.secrets = c.secrets;
    c.creds.n_secrets = 1;
    c.source = CRI_CREDS_POD_SECRET;
    return c;
}

/* ------------------------------------------------------------ blocking waiters */

/*
 * The test blocks where the daemon never does: it waits for an operation submitted with
 * wait_done / its waiter as arg until deadline_ms. 1 when it ran (rc and err set), 0 when
 * the deadline passed (the operation stays queued and the waiter stays valid: it holds
 * two references, the test's and the operation's).
 */

typedef struct cri_record_waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs; /* the caller's and the operation's */
    bool done;
    int rc;
    pg_error err;
} cri_record_waiter;

static cri_record_waiter *cri_record_waiter_new(void)
{
    cri_record_waiter *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    w->refs = 2;
    return w;
}

static void waiter_unref(cri_record_waiter *w)
{
    pthread_mutex_lock(&w->lock);
    bool last = --w->refs == 0;
    pthread_mutex_unlock(&w->lock);
    if (last) {
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
    }
}

static void cri_record_wait_done(void *waiter, int rc, const pg_error *err)
{
    cri_record_waiter *w = waiter;
    pthread_mutex_lock(&w->lock);
    w->done = true;
    w->rc = rc;
    if (err)
        w->err = *err;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    waiter_unref(w);
}

static int cri_record_waiter_wait(cri_record_waiter *w, int64_t deadline_ms, int *rc, pg_error *err)
{
    struct timespec until = cri_timespec_at(deadline_ms);
    pthread_mutex_lock(&w->lock);
    int e = 0;
    while (!w->done && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&w->cond, &w->lock, &until);
    bool done = w->done;
    if (done) {
        *rc = w->rc;
        if (err && w->rc != PG_OK)
            *err = w->err;
    }
    pthread_mutex_unlock(&w->lock);
    return done ? 1 : 0;
}

/* One reserved unit and a waiter for an operation submitted on it. */ static cri_record_waiter *
new_waiter(env *e)
{
    pg_error err = {0};
    ck_assert_int_eq(cri_recorder_reserve(e->rec, 1, &err), PG_OK);
    cri_record_waiter *w = cri_record_waiter_new();
    ck_assert_ptr_nonnull(w);
    return w;
}

/* 1 when it ran (rc set), 0 when the deadline passed first. */
static int wait_op(cri_record_waiter *w, int64_t deadline, int *rc)
{
    pg_error err = {0};
    int done = cri_record_waiter_wait(w, deadline, rc, &err);
    waiter_unref(w);
    return done;
}

static int intent_sync(env *e, const char *image)
{
    cri_record_waiter *w = new_waiter(e);
    ck_assert_int_eq(cri_record_intent(e->rec, image, cri_record_wait_done, w, NULL), PG_OK);
    int rc = -1;
    ck_assert(wait_op(w, pg_monotonic_ms() + 5000, &rc));
    return rc;
}

START_TEST(records_in_order)
{
    env e;
    env_up(&e);
    pg_error err = {0};
    ck_assert_int_eq(intent_sync(&e, "busybox:1.36"), PG_OK);
    ck_assert(intent_exists(&e, "busybox:1.36"));
    cri_pull_creds c =
        secret_creds("team-a", "84e602bef66066d26999b4f32a2afb963a80f8384d3cdf9145038d3c3da62d2b");
    cri_record_waiter *w = new_waiter(&e);
    ck_assert_int_eq(
        cri_record_pulled(e.rec, "busybox:1.36", REF, &c, NULL, cri_record_wait_done, w, &err),
        PG_OK);
    ck_assert_ptr_null(c.secrets); /* ownership moved to the job */
    int rc = -1;
    ck_assert(wait_op(w, pg_monotonic_ms() + 5000, &rc));
    ck_assert_int_eq(rc, PG_OK);
    ck_assert(!intent_exists(&e, "busybox:1.36")); /* released by the pulled record */
    pg_record *r = NULL;
    ck_assert_int_eq(pg_store_get(e.store, REF, &r, &err), PG_OK);
    char *json = pg_record_to_json(r, &err);
    ck_assert_ptr_nonnull(strstr(json, "\"namespace\":\"team-a\""));
    pg_free(json);
    pg_record_free(r);
    /* A failed pull releases its intent. */
    ck_assert_int_eq(intent_sync(&e, "nginx:1.25"), PG_OK);
    w = new_waiter(&e);
    ck_assert_int_eq(cri_record_failed(e.rec, "nginx:1.25", cri_record_wait_done, w, &err), PG_OK);
    ck_assert(wait_op(w, pg_monotonic_ms() + 5000, &rc));
    ck_assert_int_eq(rc, PG_OK);
    ck_assert(!intent_exists(&e, "nginx:1.25"));
    env_down(&e);
}
END_TEST

static char **alias_list(const char *a, const char *b)
{
    char **v = calloc(3, sizeof *v);
    v[0] = pg_strdup(a);
    v[1] = b ? pg_strdup(b) : NULL;
    return v;
}

/* Pulls `image` as REF with aliases; returns the job's outcome. */
static int pulled_with_aliases(env *e, const char *image, char **aliases)
{
    ck_assert_int_eq(intent_sync(e, image), PG_OK);
    cri_pull_creds c =
        secret_creds("team-a", "84e602bef66066d26999b4f32a2afb963a80f8384d3cdf9145038d3c3da62d2b");
    cri_record_waiter *w = new_waiter(e);
    pg_error err = {0};
    ck_assert_int_eq(cri_record_pulled(e->rec, image, REF, &c, aliases, cri_record_wait_done, w,
                                       &err),
                     PG_OK);
    int rc = -1;
    ck_assert(wait_op(w, pg_monotonic_ms() + 5000, &rc));
    return rc;
}

START_TEST(aliases_in_the_records_batch)
{
    env e;
    env_up(&e);
    /* The aliases are indexed with the record: the alias resolves to the recorded image. */
    ck_assert_int_eq(pulled_with_aliases(&e, "busybox:1.36",
                                         alias_list("registry.example.com/mirror/busybox:1.36",
                                                    NULL)),
                     PG_OK);
    char *ref = NULL;
    pg_error err = {0};
    ck_assert_int_eq(
        pg_store_resolve_image(e.store, "registry.example.com/mirror/busybox:1.36", &ref, &err),
        PG_OK);
    ck_assert_str_eq(ref, REF);
    pg_free(ref);
    /* An alias list the store refuses never costs the record (nor its intent's release). */
    ck_assert_int_eq(pulled_with_aliases(&e, "nginx:1.25",
                                         alias_list("docker.io/library/nginx:1.25",
                                                    "not a reference!")),
                     PG_OK);
    ck_assert(!intent_exists(&e, "nginx:1.25"));
    pg_record *r = NULL;
    ck_assert_int_eq(pg_store_get(e.store, REF, &r, &err), PG_OK);
    char *json = pg_record_to_json(r, &err);
    ck_assert_ptr_nonnull(strstr(json, "docker.io/library/nginx"));
    pg_free(json);
    pg_record_free(r);
    env_down(&e);
}
END_TEST

START_TEST(held_lock_delays_but_never_drops)
{
    env e;
    env_up(&e);
    char lock_path[128];
    snprintf(lock_path, sizeof lock_path, "%s/.pullgate.lock", e.dir);
    /* Another open file description: the store's flock() waits for this one. */
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(flock(fd, LOCK_EX), 0);

    pg_error err = {0};
    cri_record_waiter *w1 = new_waiter(&e);
    ck_assert_int_eq(cri_record_intent(e.rec, "held:1", cri_record_wait_done, w1, &err), PG_OK);
    int rc = -1;
    /* pending */
    ck_assert_int_eq(cri_record_waiter_wait(w1, pg_monotonic_ms() + 300, &rc, &err), 0);
    ck_assert(!intent_exists(&e, "held:1"));
    cri_pull_creds c =
        secret_creds("team-b", "eccd54b36aa3a995266c57ea482272c142abc94251c7c4300c6fe2950fc05302");
    cri_record_waiter *w2 = new_waiter(&e);
    ck_assert_int_eq(cri_record_pulled(e.rec, "held:1", REF, &c, NULL, cri_record_wait_done, w2, &err),
                     PG_OK);

    close(fd); /* the lock holder goes away: both queued operations run, in order */
    ck_assert(wait_op(w1, pg_monotonic_ms() + 10000, &rc));
    ck_assert_int_eq(rc, PG_OK);
    ck_assert(wait_op(w2, pg_monotonic_ms() + 10000, &rc));
    ck_assert_int_eq(rc, PG_OK);
    pg_record *r = NULL;
    ck_assert_int_eq(pg_store_get(e.store, REF, &r, NULL), PG_OK);
    pg_record_free(r);
    ck_assert(!intent_exists(&e, "held:1")); /* intent written, then released by the pull */
    env_down(&e);
}
END_TEST

/* Room is reserved before anything is queued: a full queue refuses the
 * reservation (a new pull), never an operation that was reserved for. */
START_TEST(reservations_bound_the_queue)
{
    env e;
    env_up(&e);
    pg_error err = {0};
    ck_assert_int_eq(cri_recorder_reserve(e.rec, CRI_RECORDER_QUEUE_MAX - 2, &err), PG_OK);
    ck_assert_int_eq(cri_recorder_reserve(e.rec, 3, &err), PG_ERR_LIMIT);
    ck_assert_int_eq(cri_recorder_reserve(e.rec, 2, &err), PG_OK);
    ck_assert_int_eq(cri_recorder_reserve(e.rec, 1, &err), PG_ERR_LIMIT);
    cri_recorder_unreserve(e.rec, 5);
    ck_assert_int_eq(cri_recorder_reserve(e.rec, 5, &err), PG_OK);
    cri_recorder_unreserve(e.rec, CRI_RECORDER_QUEUE_MAX);
    env_down(&e);
}
END_TEST

START_TEST(config_keys)
{
    pg_error err = {0};
    pg_config *cfg = pg_config_new(&err);
    ck_assert_str_eq(pg_config_cri_listen(cfg), "unix:///run/pullgate/cri.sock");
    ck_assert_str_eq(pg_config_cri_runtime_endpoint(cfg), "unix:///run/containerd/containerd.sock");
    ck_assert_int_eq(
        pg_config_set(cfg, "criRuntimeEndpoint", "unix:///var/run/crio/crio.sock", &err), PG_OK);
    ck_assert_str_eq(pg_config_cri_runtime_endpoint(cfg), "unix:///var/run/crio/crio.sock");
    const char *bad[] = {"/run/x.sock", "unix://relative", "tcp://127.0.0.1:1", "unix:///a\nb",
                         ("unix:///0123456789012345678901234567890123456789012345678901234567890123"
                          "4567890123456789012345678901234567890123456789")};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(pg_config_set(cfg, "criListen", bad[i], &err) == PG_ERR_CONFIG, "accepted %s",
                      bad[i]);
        ck_assert_ptr_nonnull(strstr(err.message, "criListen"));
    }
    const char json[] = "{\"criListen\":\"unix:///run/p/c.sock\",\"policy\":\"AlwaysVerify\"}";
    ck_assert_int_eq(pg_config_load_json(cfg, json, sizeof json - 1, &err), PG_OK);
    ck_assert_str_eq(pg_config_cri_listen(cfg), "unix:///run/p/c.sock");
    char *text = pg_config_to_json(cfg, &err);
    ck_assert_ptr_nonnull(strstr(text, "\"criListen\":\"unix:///run/p/c.sock\""));
    ck_assert_ptr_nonnull(
        strstr(text, "\"criRuntimeEndpoint\":\"unix:///var/run/crio/crio.sock\""));
    pg_free(text);
    /* criPruneInterval: a duration of at least 1m, or 0s for never. */
    ck_assert_int_eq(pg_config_cri_prune_interval(cfg), 3600);
    ck_assert_int_eq(pg_config_set(cfg, "criPruneInterval", "0s", &err), PG_OK);
    ck_assert_int_eq(pg_config_cri_prune_interval(cfg), 0);
    ck_assert_int_eq(pg_config_set(cfg, "criPruneInterval", "90m", &err), PG_OK);
    ck_assert_int_eq(pg_config_cri_prune_interval(cfg), 5400);
    ck_assert_int_eq(pg_config_set(cfg, "criPruneInterval", "30s", &err), PG_ERR_CONFIG);
    ck_assert_int_eq(pg_config_set(cfg, "criPruneInterval", "-1h", &err), PG_ERR_CONFIG);
    /* criMetricsListen: loopback by default; "none" or "" turns it off. */
    ck_assert_str_eq(pg_config_cri_metrics_listen(cfg), "127.0.0.1:9469");
    ck_assert_int_eq(pg_config_set(cfg, "criMetricsListen", "", &err), PG_OK);
    ck_assert_ptr_null(pg_config_cri_metrics_listen(cfg));
    ck_assert_int_eq(pg_config_set(cfg, "criMetricsListen", "[::1]:9100", &err), PG_OK);
    ck_assert_str_eq(pg_config_cri_metrics_listen(cfg), "[::1]:9100");
    ck_assert_int_eq(pg_config_set(cfg, "criMetricsListen", "none", &err), PG_OK);
    ck_assert_ptr_null(pg_config_cri_metrics_listen(cfg));
    ck_assert_int_eq(pg_config_set(cfg, "criMetricsListen", "host:1", &err), PG_ERR_CONFIG);
    /* nodeCredentialFiles: the kubelet's docker config search paths by default. */
    const char *const *files = pg_config_node_credential_files(cfg);
    ck_assert_str_eq(files[0], "/var/lib/kubelet/config.json");
    const char json2[] = "{\"nodeCredentialFiles\":[\"/etc/pullgate/node.json\"]}";
    ck_assert_int_eq(pg_config_load_json(cfg, json2, sizeof json2 - 1, &err), PG_OK);
    files = pg_config_node_credential_files(cfg);
    ck_assert_str_eq(files[0], "/etc/pullgate/node.json");
    ck_assert_ptr_null(files[1]);
    const char json3[] = "{\"nodeCredentialFiles\":[\"relative.json\"]}";
    ck_assert_int_eq(pg_config_load_json(cfg, json3, sizeof json3 - 1, &err), PG_ERR_CONFIG);
    text = pg_config_to_json(cfg, &err);
    ck_assert_ptr_nonnull(strstr(text, "\"criPruneInterval\":\"1h30m0s\""));
    ck_assert_ptr_nonnull(strstr(text, "\"criMetricsListen\":\"none\""));
    ck_assert_ptr_nonnull(strstr(text, "\"nodeCredentialFiles\":[\"/etc/pullgate/node.json\"]"));
    pg_free(text);
    pg_config_free(cfg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cri_recorder");
    TCase *tc = tcase_create("recorder");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, records_in_order);
    tcase_add_test(tc, held_lock_delays_but_never_drops);
    tcase_add_test(tc, reservations_bound_the_queue);
    tcase_add_test(tc, aliases_in_the_records_batch);
    tcase_add_test(tc, config_keys);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
