/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Focused record lookups (plugin/store/store_credidx.c): the store's record cache
 * and the per-record credential index must never change a decision. Every
 * case of $PG_TESTDATA/decision-cases.json decides identically with neither,
 * with the cache (first and second lookup, then again after unrelated files
 * appeared in the watched subdirectories, which drops the cached absences)
 * and with an index for every record; a 1,000-secret record decides identically with and without its
 * index; a stale, truncated or malformed index is never used; a record
 * replaced on disk is seen at the next decision with the cache enabled.
 */
#include "engine_testing.h"
#include "decision_cases.h"
#include "internal.h"
#include "store_credidx.h"
#include "store_impl.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define APP "registry.example.com/team-a/app"
#define REF1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"

/* ------------------------------------------------------------ fixtures */

typedef struct env {
    char *root, *state, *ro;
    pg_config *cfg;
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
}

static void env_free(env *e)
{
    pg_config_free(e->cfg);
    tu_rmrf(e->root);
    free(e->root);
    free(e->state);
    free(e->ro);
}

static pg_store *open_store(const env *e)
{
    pg_error err = {0};
    pg_store *s = pg_store_open(e->cfg, NULL, &err);
    ck_assert_msg(s != NULL, "store_open: %s", err.message);
    return s;
}

/* ------------------------------------------------- shared decision cases */

/* An index for every record of the writable directory (unusable ones get none). */
static unsigned index_all(pg_store *s, const json_t *c)
{
    unsigned built = 0;
    size_t i;
    json_t *rec;
    json_array_foreach(json_object_get(c, "pulled"), i, rec)
        built += pg_store_credidx_build(s, dc_str(rec, "imageRef"), NULL) == PG_OK;
    json_array_foreach(json_object_get(c, "rawPulledFiles"), i, rec)
        built += pg_store_credidx_build(s, json_string_value(dc_raw_ref(rec)), NULL) == PG_OK;
    return built;
}

static pg_decision decide_case(const env *e, pg_store *s, const dc_request *q)
{
    pg_decision d;
    pg_decide_pod(e->cfg, s, &q->r, q->pod_uid, q->aliases, q->hints, &d);
    return d;
}

static void expect_same(const char *name, const char *how, pg_decision want, pg_decision got)
{
    ck_assert_msg(want.allow == got.allow && want.reason == got.reason &&
                      strcmp(want.text, got.text) == 0,
                  "case %s, %s: %s/%s (%s) instead of %s/%s (%s)", name, how,
                  got.allow ? "allow" : "deny", pg_reason_name(got.reason), got.text,
                  want.allow ? "allow" : "deny", pg_reason_name(want.reason), want.text);
}

static unsigned run_case(const json_t *c)
{
    const char *name = dc_str(c, "name");
    env e;
    env_init(&e);
    if (!dc_setup(e.cfg, e.state, e.ro, c)) { /* a configuration refused: nothing to decide */
        env_free(&e);
        return 0;
    }
    dc_request q = dc_request_of(c);
    pg_store *plain = open_store(&e), *cached = open_store(&e);
    pg_error err = {0};
    ck_assert_int_eq(pg_store_enable_cache_settle(cached, 64, 0, 0, &err), PG_OK);
    pg_decision want = decide_case(&e, plain, &q);
    expect_same(name, "record cache, first lookup", want, decide_case(&e, cached, &q));
    expect_same(name, "record cache, second lookup", want, decide_case(&e, cached, &q));
    /* An unrelated file appearing in every watched subdirectory drops the cached
     * absences (lookup_cache.h); the decision is the same, re-probed. */
    static const char *const subs[] = {"pulled", "pulling"};
    for (size_t k = 0; k < 2; k++) {
        char *junk = tu_sprintf("%s/%s/unrelated", k ? e.ro : e.state, subs[k]);
        tu_write_file(junk, "x", -1, 0600);
        ck_assert_int_eq(unlink(junk), 0);
        free(junk);
    }
    expect_same(name, "record cache, after unrelated changes", want, decide_case(&e, cached, &q));
    expect_same(name, "record cache, third lookup", want, decide_case(&e, cached, &q));
    unsigned built = index_all(plain, c);
    expect_same(name, "credential index", want, decide_case(&e, plain, &q));
    pg_store_free(plain);
    pg_store_free(cached);
    dc_request_free(&q);
    env_free(&e);
    return built;
}

START_TEST(decision_cases_equal_with_cache_and_index)
{
    json_t *cases = dc_load_cases();
    unsigned built = 0;
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c)
        built += run_case(c);
    /* Not vacuous: most cases' records got an index that was consulted. */
    ck_assert_uint_gt(built, 10);
    json_decref(cases);
}
END_TEST

/* ------------------------------------------------- many-secret records */

#define N_SECRETS 1000

static void record_many(pg_store *s, const char *image, const char *ref)
{
    pg_secret *sec = calloc(N_SECRETS, sizeof *sec);
    char (*ns)[32] = calloc(N_SECRETS, sizeof *ns), (*uid)[32] = calloc(N_SECRETS, sizeof *uid);
    char (*hash)[65] = calloc(N_SECRETS, sizeof *hash);
    ck_assert(sec && ns && uid && hash);
    for (size_t i = 0; i < N_SECRETS; i++) {
        /* Seven namespaces, then seven more: at most 99 entries each, within a namespace's
         * share of one record (PG_SHARE_MAX_ENTRIES), with team-1's service account. */
        snprintf(ns[i], sizeof ns[i], i < 693 ? "team-%zu" : "team-%zu-b", i % 7);
        snprintf(uid[i], sizeof uid[i], "uid-%zu", i);
        char seed[32];
        snprintf(seed, sizeof seed, "cred-%zu", i);
        ck_assert_int_eq(pg_sha256_hex(seed, strlen(seed), hash[i], NULL), PG_OK);
        sec[i] = (pg_secret){ns[i], "regcred", uid[i], i % 10 == 3 ? NULL : hash[i]};
    }
    pg_service_account sa = {"team-1", "puller", "sa-uid-1"};
    pg_pull_credentials creds = {sec, N_SECRETS, NULL, 0, 0};
    pg_pull_credentials sa_creds = {NULL, 0, &sa, 1, 0};
    pg_error err = {0};
    ck_assert_msg(pg_store_record_pulled(s, image, ref, &creds, &err) == PG_OK, "%s", err.message);
    ck_assert_msg(pg_store_record_pulled(s, image, ref, &sa_creds, &err) == PG_OK, "%s",
                  err.message);
    free(sec);
    free(ns);
    free(uid);
    free(hash);
}

static char *annotation(const char *ns, const char *uid, const char *hash_seed, bool sa)
{
    char hash[65] = "";
    if (hash_seed)
        ck_assert_int_eq(pg_sha256_hex(hash_seed, strlen(hash_seed), hash, NULL), PG_OK);
    if (sa)
        return tu_sprintf("{\"" APP "\":{\"kubernetesServiceAccounts\":[{\"namespace\":\"%s\","
                          "\"name\":\"puller\",\"uid\":\"%s\"}]}}", ns, uid);
    return tu_sprintf("{\"" APP "\":{\"kubernetesSecrets\":[{\"namespace\":\"%s\",\"name\":"
                      "\"regcred\",\"uid\":\"%s\"%s%s%s}]}}", ns, uid,
                      hash_seed ? ",\"credentialHash\":\"" : "", hash, hash_seed ? "\"" : "");
}

static pg_decision decide_ns(const env *e, pg_store *s, const char *ns, const char *ann)
{
    pg_request r = {.image = APP ":1.0", .image_ref = REF1, .namespace_ = ns, .credentials = ann};
    pg_decision d;
    pg_decide(e->cfg, s, &r, &d);
    return d;
}

/* Requests over the big record: by hash, by coordinates, hash-less, mismatch, SA, none. */
typedef struct probe {
    const char *ns, *uid, *seed;
    bool sa;
    int allow;
} probe;

static const probe probes[] = {
    {"team-5-b", "uid-999", "cred-999", false, 1},  /* last secret, by hash */
    {"team-0", "uid-0", "cred-0", false, 1},      /* first secret */
    {"team-3", "uid-other", "cred-500", false, 1}, /* hash of another secret: by hash */
    {"team-3", "uid-3", NULL, false, 1},          /* hash-less recorded secret, coordinates */
    {"team-3", "uid-3", "cred-nothing", false, 1}, /* coordinates match, hash differs */
    {"team-2", "uid-nobody", "cred-nothing", false, 0},
    {"team-1", "sa-uid-1", NULL, true, 1},
    {"team-1", "sa-uid-2", NULL, true, 0},
    {"team-1", NULL, NULL, false, 0}, /* nothing presented */
};

static void decide_probes(const env *e, pg_store *s, pg_decision *out)
{
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        const probe *p = &probes[i];
        char *ann = p->uid ? annotation(p->ns, p->uid, p->seed, p->sa) : NULL;
        out[i] = decide_ns(e, s, p->ns, ann);
        ck_assert_msg(out[i].allow == p->allow, "probe %zu: %s", i, out[i].text);
        free(ann);
    }
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

START_TEST(thousand_secrets_same_with_and_without_index)
{
    env e;
    env_init(&e);
    pg_store *s = open_store(&e);
    record_many(s, APP ":1.0", REF1);
    char *idx = dc_record_path(e.state, "pullgate-credidx", REF1);
    ck_assert_msg(exists(idx), "record_pulled wrote no index");
    enum { N = sizeof probes / sizeof probes[0] };
    pg_decision with[N], without[N], cached[N];
    decide_probes(&e, s, with);
    ck_assert_int_eq(unlink(idx), 0);
    decide_probes(&e, s, without);
    pg_store *c = open_store(&e);
    ck_assert_int_eq(pg_store_enable_cache_settle(c, 8, 0, 0, NULL), PG_OK);
    decide_probes(&e, c, cached);
    for (size_t i = 0; i < N; i++) {
        expect_same("1,000 secrets", "index", without[i], with[i]);
        expect_same("1,000 secrets", "record cache", without[i], cached[i]);
    }
    free(idx);
    pg_store_free(c);
    pg_store_free(s);
    env_free(&e);
}
END_TEST

/* ------------------------------------------------------- hostile index */

static char *read_text(const char *path)
{
    size_t len;
    char *t = tu_read_file(path, &len);
    ck_assert_ptr_nonnull(t);
    return t;
}

/*
 * The index is what the decision reads: dropping the matching secret from it
 * (record untouched, so its stamp still matches) turns an allow into a deny.
 * This proves the fast path is taken; the cases below prove when it is not.
 */
START_TEST(current_index_is_used)
{
    env e;
    env_init(&e);
    pg_store *s = open_store(&e);
    record_many(s, APP ":1.0", REF1);
    char *ann = annotation("team-5-b", "uid-999", NULL, false); /* by coordinates only */
    ck_assert_int_eq(decide_ns(&e, s, "team-5-b", ann).allow, 1);
    char *idx = dc_record_path(e.state, "pullgate-credidx", REF1);
    char *text = read_text(idx);
    char *line = strstr(text, "\x1fuid-999\n");
    ck_assert_ptr_nonnull(line);
    memcpy(line + 1, "uid-998", 7); /* now names a secret the record does not hold */
    tu_write_file(idx, text, -1, 0600);
    pg_decision d = decide_ns(&e, s, "team-5-b", ann);
    ck_assert_msg(!d.allow, "index not consulted: %s", d.text);
    free(text);
    free(idx);
    free(ann);
    pg_store_free(s);
    env_free(&e);
}
END_TEST

/* A record rewritten behind the store's back: its old index must not authorise. */
START_TEST(stale_index_never_authorises)
{
    env e;
    env_init(&e);
    pg_store *s = open_store(&e);
    record_many(s, APP ":1.0", REF1);
    char *ann = annotation("team-5-b", "uid-999", "cred-999", false);
    ck_assert_int_eq(decide_ns(&e, s, "team-5-b", ann).allow, 1);
    char *idx = dc_record_path(e.state, "pullgate-credidx", REF1);
    char *before = read_text(idx);
    char *t = dc_time_text(time(NULL));
    char *json = tu_sprintf("{\"kind\":\"ImagePulledRecord\",\"apiVersion\":"
                            "\"kubelet.config.k8s.io/v1alpha1\",\"lastUpdatedTime\":\"%s\","
                            "\"imageRef\":\"%s\",\"credentialMapping\":{\"" APP "\":{"
                            "\"kubernetesSecrets\":[{\"uid\":\"u\",\"namespace\":\"team-9\","
                            "\"name\":\"other\",\"credentialHash\":\"\"}]}}}\n", t, REF1);
    dc_write_at(e.state, "pulled", REF1, json);
    char *after = read_text(idx);
    ck_assert_str_eq(before, after); /* the old index is still there ... */
    pg_decision d = decide_ns(&e, s, "team-5-b", ann);
    ck_assert_msg(!d.allow && d.reason == PG_REASON_CREDENTIALS_MISMATCH, "%s", d.text); /* ... unused */
    /* The credential-times file changing alone makes the index stale too. */
    record_many(s, APP ":1.0", REF1);
    char *times = dc_record_path(e.state, "pullgate-credtimes", REF1);
    ck_assert_int_eq(truncate(times, 0), 0);
    d = decide_ns(&e, s, "team-5-b", ann);
    ck_assert_msg(!d.allow && d.reason == PG_REASON_STORE_ERROR, "%s", d.text);
    free(times);
    free(after);
    free(before);
    free(json);
    free(t);
    free(idx);
    free(ann);
    pg_store_free(s);
    env_free(&e);
}
END_TEST

/* Malformed indexes of every kind: the decision is the parse path's. */
START_TEST(malformed_index_falls_back_to_the_record)
{
    env e;
    env_init(&e);
    pg_store *s = open_store(&e);
    record_many(s, APP ":1.0", REF1);
    char *ann = annotation("team-5-b", "uid-999", NULL, false); /* by coordinates only */
    char *idx = dc_record_path(e.state, "pullgate-credidx", REF1);
    char *good = read_text(idx);
    size_t len = strlen(good);
    char *dropped = strdup(good);
    char *gone = strstr(dropped, "\x1fuid-999\n");
    ck_assert_ptr_nonnull(gone);
    memcpy(gone + 1, "uid-998", 7);
    /* Each variant also drops the match: a deny would mean the index was trusted. */
    char *variants[] = {
        tu_sprintf("%.*s", (int)(len / 2), dropped),      /* truncated, no E line */
        tu_sprintf("%.*s", (int)(len - 1), dropped),      /* no final newline */
        tu_sprintf("%sM\x1f" "0\x1fzzz\n", dropped),      /* a line after E */
        tu_sprintf("pullgate-credidx\x1f" "2\n%s", strchr(dropped, '\n') + 1), /* version */
        tu_sprintf("%s", dropped),
        tu_sprintf("%s", dropped),
        tu_sprintf("%.*s\n%s", (int)(strstr(dropped, "\nE\x1f") - dropped + 1), dropped,
                   strstr(dropped, "\nE\x1f") + 1), /* an empty line */
        tu_sprintf("%s", dropped),
    };
    char *p = strstr(variants[4], "\nE\x1f");
    ck_assert_ptr_nonnull(p);
    p[3] = p[3] == '9' ? '8' : '9'; /* wrong line count */
    p = strstr(variants[5], "\nP\x1f");
    ck_assert_ptr_nonnull(p);
    p[3] = p[3] == '9' ? '8' : '9'; /* wrong record stamp */
    p = strstr(variants[7], "\ns\x1f");
    ck_assert_ptr_nonnull(p);
    p[2] = '\x1e'; /* a secret line without its tag's separator */
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        tu_write_file(idx, variants[i], -1, 0600);
        pg_decision d = decide_ns(&e, s, "team-5-b", ann);
        ck_assert_msg(d.allow, "variant %zu was trusted: %s", i, d.text);
        free(variants[i]);
    }
    /* An index that is not a safe file (group-writable) is not read. */
    tu_write_file(idx, dropped, -1, 0660);
    ck_assert_msg(decide_ns(&e, s, "team-5-b", ann).allow, "unsafe index was trusted");
    free(dropped);
    free(good);
    free(idx);
    free(ann);
    pg_store_free(s);
    env_free(&e);
}
END_TEST

/* With the cache on, a record replaced on disk decides anew at once. */
START_TEST(cache_sees_replaced_record)
{
    env e;
    env_init(&e);
    pg_store *s = open_store(&e);
    pg_error err = {0};
    ck_assert_int_eq(pg_store_enable_cache_settle(s, 8, 0, 0, &err), PG_OK);
    ck_assert_int_eq(pg_store_enable_cache(s, 8, 0, &err), PG_ERR_INVALID); /* once */
    record_many(s, APP ":1.0", REF1);
    char *ann = annotation("team-5-b", "uid-999", "cred-999", false);
    ck_assert_int_eq(decide_ns(&e, s, "team-5-b", ann).allow, 1);
    ck_assert_int_eq(decide_ns(&e, s, "team-5-b", ann).allow, 1);
    char *t = dc_time_text(time(NULL));
    char *json = tu_sprintf("{\"kind\":\"ImagePulledRecord\",\"apiVersion\":"
                            "\"kubelet.config.k8s.io/v1alpha1\",\"lastUpdatedTime\":\"%s\","
                            "\"imageRef\":\"%s\",\"credentialMapping\":{}}\n", t, REF1);
    dc_write_at(e.state, "pulled", REF1, json);
    pg_decision d = decide_ns(&e, s, "team-5-b", ann);
    ck_assert_msg(!d.allow && d.reason == PG_REASON_NO_MAPPING, "%s", d.text);
    free(json);
    free(t);
    free(ann);
    pg_store_free(s);
    env_free(&e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("credidx");
    TCase *tc = tcase_create("focused");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, decision_cases_equal_with_cache_and_index);
    tcase_add_test(tc, thousand_secrets_same_with_and_without_index);
    tcase_add_test(tc, current_index_is_used);
    tcase_add_test(tc, stale_index_never_authorises);
    tcase_add_test(tc, malformed_index_falls_back_to_the_record);
    tcase_add_test(tc, cache_sees_replaced_record);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
