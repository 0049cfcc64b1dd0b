/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decision (docs/interfaces.md §5): every case of $PG_TESTDATA/decision-cases.json,
 * built into real record directories and run through pg_decide, plus cases for
 * TTL expiry, failing closed on store errors, unknown imageRefs and bad input.
 */
#include "engine_testing.h"
#include "decision_cases.h"
#include "store_lookup.h"
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REF1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define REF2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define HASH_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define APP "registry.example.com/team-a/app"
#define CREDS_A                                                                              \
    "{\"" APP "\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"regcred\","   \
    "\"uid\":\"uid-a\",\"credentialHash\":\"" HASH_A "\"}]}}"

/* ------------------------------------------------------------ fixtures */

typedef struct env {
    char *root, *state, *ro;
    pg_config *cfg;
    pg_store *store;
} env;

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
    ck_assert_int_eq(pg_config_set(e->cfg, "stateDir", e->state, &err), PG_OK);
    ck_assert_int_eq(pg_config_clear_list(e->cfg, "readOnlyRecordDirs", &err), PG_OK);
    ck_assert_int_eq(pg_config_set(e->cfg, "readOnlyRecordDirs", e->ro, &err), PG_OK);
}

static void env_set(env *e, const char *key, const char *value)
{
    dc_config_set(e->cfg, key, value);
}

/* Opened lazily, after the files are in place. */
static pg_store *env_store(env *e)
{
    if (!e->store) {
        pg_error err = {0};
        e->store = pg_store_open(e->cfg, NULL, &err);
        ck_assert_msg(e->store != NULL, "store_open: %s", err.message);
    }
    return e->store;
}

static void env_free(env *e)
{
    pg_store_free(e->store);
    pg_config_free(e->cfg);
    tu_rmrf(e->root);
    free(e->root);
    free(e->state);
    free(e->ro);
}

static char *record_json(const char *image_ref, const char *updated, const char *mapping)
{
    return tu_sprintf("{\"kind\":\"ImagePulledRecord\",\"apiVersion\":"
                      "\"kubelet.config.k8s.io/v1alpha1\",\"lastUpdatedTime\":\"%s\","
                      "\"imageRef\":\"%s\",\"credentialMapping\":{%s}}",
                      updated, image_ref, mapping);
}

static void write_record(const char *dir, const char *image_ref, time_t updated,
                         const char *mapping)
{
    char *t = dc_time_text(updated);
    char *json = record_json(image_ref, t, mapping);
    dc_write_at(dir, "pulled", image_ref, json);
    free(json);
    free(t);
}

static const char *secret_mapping(void)
{
    return "\"" APP "\":{\"kubernetesSecrets\":[{\"uid\":\"uid-a\",\"namespace\":\"team-a\","
           "\"name\":\"regcred\",\"credentialHash\":\"" HASH_A "\"}]}";
}

static pg_decision decide(env *e, const char *image, const char *ref, const char *ns,
                          const char *creds)
{
    pg_request req = {.image = image, .image_ref = ref, .namespace_ = ns, .credentials = creds};
    pg_decision d;
    int allow = pg_decide(e->cfg, env_store(e), &req, &d);
    ck_assert_int_eq(allow, d.allow);
    ck_assert_msg(d.text[0] != '\0', "empty reason text");
    ck_assert_msg(!strchr(d.text, '\n'), "multi-line reason: %s", d.text);
    ck_assert_msg(strcmp(pg_reason_name(d.reason), "unknown") != 0, "reason %d", d.reason);
    ck_assert_int_eq(d.allow, d.reason < PG_REASON_NO_IMAGE_REF);
    return d;
}

static void expect(pg_decision d, int allow, int reason)
{
    ck_assert_msg(d.allow == allow && d.reason == reason, "got %s/%s (%s), want %s/%s",
                  d.allow ? "allow" : "deny", pg_reason_name(d.reason), d.text,
                  allow ? "allow" : "deny", pg_reason_name(reason));
}

/* ------------------------------------------------------- shared cases */

/*
 * A case ported from the kubelet's tests carries the kubelet's answer; ours is
 * the same, or the case names the divergence (docs/interfaces.md) and differs.
 */
static void check_kubelet_answer(const json_t *c, const char *name, const char *want)
{
    const json_t *k = json_object_get(c, "kubelet");
    if (!k)
        return;
    const char *theirs = dc_str(k, "expect");
    const char *ours =
        json_is_true(json_object_get(c, "expectConfigError")) ? "config-error" : want;
    ck_assert_msg(theirs, "case %s: kubelet.expect missing", name);
    if (dc_str(c, "divergence"))
        ck_assert_msg(strcmp(theirs, ours) != 0,
                      "case %s: a divergence that answers as the kubelet", name);
    else
        ck_assert_msg(strcmp(theirs, ours) == 0,
                      "case %s: the kubelet answers %s, this case %s, and no divergence is named",
                      name, theirs, ours);
}

static void run_case(const json_t *c)
{
    const char *name = dc_str(c, "name"), *want = dc_str(c, "expect");
    ck_assert_msg(name && want, "case without name/expect");
    check_kubelet_answer(c, name, want);
    env e;
    env_init(&e);
    bool configured = dc_setup(e.cfg, e.state, e.ro, c);
    if (json_is_true(json_object_get(c, "expectConfigError"))) {
        ck_assert_msg(!configured, "case %s: the configuration accepted its values", name);
        env_free(&e);
        return;
    }
    dc_request q = dc_request_of(c);
    pg_decision d;
    pg_decide_pod(e.cfg, env_store(&e), &q.r, q.pod_uid, q.aliases, q.hints, &d);
    const char *want_reason = dc_str(c, "expectReason");
    ck_assert_msg(want_reason, "case %s has no expectReason", name);
    ck_assert_msg(d.allow == (strcmp(want, "allow") == 0) &&
                      strcmp(pg_reason_name(d.reason), want_reason) == 0,
                  "case %s: want %s/%s, got %s/%s (%s)", name, want, want_reason,
                  d.allow ? "allow" : "deny", pg_reason_name(d.reason), d.text);
    dc_request_free(&q);
    env_free(&e);
}

START_TEST(shared_decision_cases)
{
    json_t *cases = dc_load_cases();
    ck_assert_uint_gt(json_array_size(cases), 0);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c)
        run_case(c);
    json_decref(cases);
}
END_TEST

/* ------------------------------------------------------- extra cases */

START_TEST(secret_match_reason)
{
    env e;
    env_init(&e);
    write_record(e.state, REF1, time(NULL), secret_mapping());
    pg_decision d = decide(&e, APP ":1.0", REF1, "team-a", CREDS_A);
    expect(d, 1, PG_REASON_SECRET_MATCH);
    ck_assert_msg(strstr(d.text, "regcred") && strstr(d.text, APP), "%s", d.text);
    d = decide(&e, APP ":1.0", REF1, "team-b", CREDS_A);
    expect(d, 0, PG_REASON_NO_CREDENTIALS);
    ck_assert_msg(strstr(d.text, "namespace team-b") && strstr(d.text, "1 ignored"), "%s", d.text);
    d = decide(&e, APP ":1.0", REF1, "team-a", NULL);
    expect(d, 0, PG_REASON_NO_CREDENTIALS);
    d = decide(&e, APP ":1.0", REF1, "team-a",
               "{\"" APP "\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"x\","
               "\"uid\":\"y\"}]}}");
    expect(d, 0, PG_REASON_CREDENTIALS_MISMATCH);
    env_free(&e);
}
END_TEST

START_TEST(ttl_expiry)
{
    env e;
    env_init(&e);
    env_set(&e, "credentialTTL", "1h");
    write_record(e.state, REF1, time(NULL) - 2 * 3600, secret_mapping());
    write_record(e.state, REF2, time(NULL) - 2 * 3600,
                 "\"" APP "\":{\"kubernetesServiceAccounts\":[{\"uid\":\"u\",\"namespace\":"
                 "\"team-a\",\"name\":\"sa\"}]}");
    pg_decision d = decide(&e, APP ":1.0", REF1, "team-a", CREDS_A);
    expect(d, 0, PG_REASON_EXPIRED);
    ck_assert_msg(strstr(d.text, "credentialTTL"), "%s", d.text);
    const char *sa = "{\"" APP "\":{\"kubernetesServiceAccounts\":[{\"namespace\":\"team-a\","
                     "\"name\":\"sa\",\"uid\":\"u\"}]}}";
    expect(decide(&e, APP ":1.0", REF2, "team-a", sa), 0, PG_REASON_EXPIRED);
    env_set(&e, "credentialTTL", "3h");
    expect(decide(&e, APP ":1.0", REF1, "team-a", CREDS_A), 1, PG_REASON_SECRET_MATCH);
    expect(decide(&e, APP ":1.0", REF2, "team-a", sa), 1, PG_REASON_SERVICE_ACCOUNT_MATCH);
    env_set(&e, "credentialTTL", "0s");
    expect(decide(&e, APP ":1.0", REF1, "team-a", CREDS_A), 1, PG_REASON_SECRET_MATCH);
    env_free(&e);
}
END_TEST

START_TEST(corrupt_record_fails_closed)
{
    env e;
    env_init(&e);
    dc_write_at(e.state, "pulled", REF1, "{\"kind\":\"ImagePulledRecord\", garbage");
    pg_decision d = decide(&e, APP ":1.0", REF1, "team-a", CREDS_A);
    expect(d, 0, PG_REASON_STORE_ERROR);
    ck_assert_msg(strstr(d.text, "sha256-"), "reason should name the file: %s", d.text);
    env_set(&e, "policy", "AlwaysVerify");
    expect(decide(&e, APP ":1.0", REF1, "team-a", CREDS_A), 0, PG_REASON_STORE_ERROR);
    env_free(&e);
}
END_TEST

START_TEST(record_under_wrong_name_fails_closed)
{
    env e;
    env_init(&e);
    /* A valid record of REF2 placed under REF1's name must not vouch for REF1. */
    char *t = dc_time_text(time(NULL));
    char *json = record_json(REF2, t, secret_mapping());
    dc_write_at(e.ro, "pulled", REF1, json);
    expect(decide(&e, APP ":1.0", REF1, "team-a", CREDS_A), 0, PG_REASON_STORE_ERROR);
    free(json);
    free(t);
    env_free(&e);
}
END_TEST

START_TEST(unsafe_record_fails_closed)
{
    env e;
    env_init(&e);
    char *t = dc_time_text(time(NULL));
    char *json = record_json(REF1, t, secret_mapping());
    char *path = dc_record_path(e.state, "pulled", REF1);
    tu_write_file(path, json, -1, 0666);
    expect(decide(&e, APP ":1.0", REF1, "team-a", CREDS_A), 0, PG_REASON_STORE_ERROR);
    free(path);
    free(json);
    free(t);
    env_free(&e);
}
END_TEST

START_TEST(unknown_image_ref)
{
    env e;
    env_init(&e);
    /* Nothing anywhere says it was pulled, not even under its name: proven preloaded. */
    expect(decide(&e, APP ":1.0", NULL, "team-a", CREDS_A), 1, PG_REASON_PRELOADED);
    expect(decide(&e, APP ":1.0", "", "team-a", CREDS_A), 1, PG_REASON_PRELOADED);
    /* An intent says it was pulled: without an image ID its records cannot be checked. */
    dc_write_at(e.state, "pulling", APP ":1.0", "{}");
    expect(decide(&e, APP ":1.0", NULL, "team-a", CREDS_A), 0, PG_REASON_NO_IMAGE_REF);
    env_set(&e, "pinnedImages", "registry.k8s.io/pause*");
    expect(decide(&e, "registry.k8s.io/pause:3.10", NULL, "team-a", NULL), 1, PG_REASON_PINNED);
    env_set(&e, "policy", "NeverVerifyAllowlistedImages");
    env_set(&e, "allowlist", "registry.example.com/team-a/*");
    expect(decide(&e, APP ":1.0", NULL, "team-a", NULL), 1, PG_REASON_ALLOWLISTED);
    expect(decide(&e, "registry.example.com/team-b/x", NULL, "team-a", NULL), 0,
           PG_REASON_NO_IMAGE_REF);
    env_set(&e, "policy", "AlwaysVerify");
    expect(decide(&e, APP ":1.0", NULL, "team-a", CREDS_A), 0, PG_REASON_NO_IMAGE_REF);
    env_set(&e, "policy", "NeverVerify");
    expect(decide(&e, APP ":1.0", NULL, "team-a", NULL), 1, PG_REASON_NEVER_VERIFY);
    env_free(&e);
}
END_TEST

START_TEST(bad_annotation_and_request)
{
    env e;
    env_init(&e);
    write_record(e.state, REF1, time(NULL), secret_mapping());
    expect(decide(&e, APP ":1.0", REF1, "team-a", "{not json"), 0, PG_REASON_BAD_ANNOTATION);
    expect(decide(&e, APP ":1.0", REF1, "team-a", "{\"" APP "\":{\"bogus\":[]}}"), 0,
           PG_REASON_BAD_ANNOTATION);
    /* Even an exempt (preloaded) image is denied with a malformed annotation. */
    expect(decide(&e, "registry.example.com/other:1", REF2, "team-a", "[]"), 0,
           PG_REASON_BAD_ANNOTATION);
    expect(decide(&e, "NOT A REFERENCE", REF1, "team-a", NULL), 0, PG_REASON_BAD_REQUEST);
    expect(decide(&e, "", REF1, "team-a", NULL), 0, PG_REASON_BAD_REQUEST);
    pg_decision d;
    pg_request req = {.image = NULL};
    ck_assert_int_eq(pg_decide(e.cfg, e.store, &req, &d), 0);
    expect(d, 0, PG_REASON_BAD_REQUEST);
    ck_assert_int_eq(pg_decide(e.cfg, e.store, NULL, &d), 0);
    expect(d, 0, PG_REASON_BAD_REQUEST);
    req = (pg_request){.image = APP, .image_ref = REF1, .namespace_ = "team-a"};
    ck_assert_int_eq(pg_decide(NULL, e.store, &req, &d), 0);
    expect(d, 0, PG_REASON_CONFIG_ERROR);
    ck_assert_int_eq(pg_decide(e.cfg, NULL, &req, &d), 0);
    expect(d, 0, PG_REASON_STORE_ERROR);
    ck_assert_int_eq(pg_decide(e.cfg, e.store, &req, NULL), 0);
    env_free(&e);
}
END_TEST

START_TEST(no_mapping_and_node_accessible)
{
    env e;
    env_init(&e);
    write_record(e.state, REF1, time(NULL), secret_mapping());
    write_record(e.state, REF2, time(NULL) - 10 * 86400,
                 "\"" APP "\":{\"nodePodsAccessible\":true}");
    /* Same image ID, pulled under another name: no credentials recorded for this
     * name. Nothing says this name was pulled: preloaded under it (kubelet
     * #138175); verified, there is nothing to match. */
    expect(decide(&e, "registry.example.com/team-b/app:1.0", REF1, "team-b", NULL), 1,
           PG_REASON_PRELOADED);
    env_set(&e, "policy", "AlwaysVerify");
    expect(decide(&e, "registry.example.com/team-b/app:1.0", REF1, "team-b", NULL), 0,
           PG_REASON_NO_MAPPING);
    env_set(&e, "credentialTTL", "1h");
    expect(decide(&e, APP ":2.0", REF2, "team-z", NULL), 1, PG_REASON_NODE_ACCESSIBLE);
    env_free(&e);
}
END_TEST

START_TEST(intent_under_normalised_name)
{
    env e;
    env_init(&e);
    dc_write_at(e.ro, "pulling", "docker.io/library/nginx:1.25", "{}");
    expect(decide(&e, "nginx:1.25", REF1, "team-a", NULL), 0, PG_REASON_NO_RECORD);
    expect(decide(&e, "nginx:1.26", REF1, "team-a", NULL), 1, PG_REASON_PRELOADED);
    env_free(&e);
}
END_TEST

START_TEST(reason_names_are_stable)
{
    ck_assert_str_eq(pg_reason_name(PG_REASON_SECRET_MATCH), "secret-match");
    ck_assert_str_eq(pg_reason_name(PG_REASON_STORE_ERROR), "store-error");
    ck_assert_str_eq(pg_reason_name(PG_REASON_NO_IMAGE_REF), "no-image-ref");
    ck_assert_str_eq(pg_reason_name(PG_REASON_POD_PULLED), "pod-pulled");
    ck_assert_str_eq(pg_reason_name(0), "unknown");
    ck_assert_str_eq(pg_reason_name(-5), "unknown");
    for (int r = 1; r <= 30; r++)
        ck_assert_ptr_nonnull(pg_reason_name(r));
}
END_TEST


/* ------------------------------------------- image identity (issue 10) */

#define HEX1 "1111111111111111111111111111111111111111111111111111111111111111"
#define MANIFEST "sha256:4444444444444444444444444444444444444444444444444444444444444444"
#define CREDS_C                                                                              \
    "{\"" APP "\":{\"kubernetesSecrets\":[{\"namespace\":\"team-c\",\"name\":\"regcred\","   \
    "\"uid\":\"uid-c\",\"credentialHash\":\"cccccccccccccccccccccccccccccccccccccccccccccccccccc" \
    "cccccccccccc\"}]}}"

static const char *secret_mapping_c(void)
{
    return "\"" APP "\":{\"kubernetesSecrets\":[{\"uid\":\"uid-c\",\"namespace\":\"team-c\","
           "\"name\":\"regcred\",\"credentialHash\":\"cccccccccccccccccccccccccccccccccccccccccccc"
           "cccccccccccccccccccc\"}]}";
}

static pg_decision decide_ids(env *e, const char *image, const char *ref, const char *ns,
                              const char *creds, const char *const *aliases,
                              const char *const *hints)
{
    pg_request req = {.image = image, .image_ref = ref, .namespace_ = ns, .credentials = creds};
    pg_decision d;
    int allow = pg_decide_identity(e->cfg, env_store(e), &req, aliases, hints, &d);
    ck_assert_int_eq(allow, d.allow);
    ck_assert_msg(!strchr(d.text, '\n'), "multi-line reason: %s", d.text);
    return d;
}

/* Case 1: a mis-spelled image ID is not "another, preloaded image": it is a bad request. */
START_TEST(identity_misspelled_id_denies)
{
    env e;
    env_init(&e);
    write_record(e.state, REF1, time(NULL), secret_mapping());
    const char *bad[] = {"SHA256:" HEX1, "sha256:sha256:" HEX1, HEX1 " ", " " HEX1, HEX1 "\n",
                         "sha256:" HEX1 "0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pg_decision d = decide(&e, APP ":1.0", bad[i], "team-b", NULL);
        expect(d, 0, PG_REASON_BAD_REQUEST);
        const char *alias[] = {bad[i], NULL};
        expect(decide_ids(&e, APP ":1.0", REF1, "team-b", NULL, alias, NULL), 0,
               PG_REASON_BAD_REQUEST);
        expect(decide_ids(&e, APP ":1.0", REF1, "team-a", CREDS_A, NULL, alias), 0,
               PG_REASON_BAD_REQUEST);
    }
    /* The bare ID is the same image: found, and verified. */
    expect(decide(&e, APP ":1.0", HEX1, "team-b", NULL), 0, PG_REASON_NO_CREDENTIALS);
    expect(decide(&e, APP ":1.0", HEX1, "team-a", CREDS_A), 1, PG_REASON_SECRET_MATCH);
    env_free(&e);
}
END_TEST

/* Case 2: the kubelet keyed its record by a repo digest; CRI-O annotates the image ID. */
START_TEST(identity_repo_digest_record)
{
    env e;
    env_init(&e);
    const char *digest_ref = APP "@" MANIFEST;
    write_record(e.ro, digest_ref, time(NULL), secret_mapping());
    /* Only the image ID is known: the record maps the name, so not proven preloaded. */
    pg_decision d = decide(&e, APP ":1.0", REF1, "team-b", NULL);
    expect(d, 0, PG_REASON_NO_RECORD);
    /* CRI-O's Image (the kubelet's imageRef) as a trusted alias: verified, authorises. */
    const char *alias[] = {digest_ref, NULL};
    expect(decide_ids(&e, APP ":1.0", REF1, "team-b", NULL, alias, NULL), 0,
           PG_REASON_NO_CREDENTIALS);
    expect(decide_ids(&e, APP ":1.0", REF1, "team-a", CREDS_A, alias, NULL), 1,
           PG_REASON_SECRET_MATCH);
    /* As an untrusted hint it keeps the image verified but never authorises. */
    expect(decide_ids(&e, APP ":1.0", REF1, "team-b", NULL, NULL, alias), 0, PG_REASON_NO_RECORD);
    expect(decide_ids(&e, APP ":1.0", REF1, "team-a", CREDS_A, NULL, alias), 0,
           PG_REASON_NO_RECORD);
    env_free(&e);
}
END_TEST

/* Case 2 through the alias index that pullgate-cri writes (pg_store_record_aliases). */
START_TEST(identity_alias_index)
{
    env e;
    env_init(&e);
    const char *digest_ref = APP "@" MANIFEST;
    pg_secret sec = {"team-a", "regcred", "uid-a", HASH_A};
    pg_pull_credentials creds = {.secrets = &sec, .n_secrets = 1};
    pg_error err = {0};
    ck_assert_int_eq(pg_store_record_pulled(env_store(&e), APP ":1.0", digest_ref, &creds, &err),
                     PG_OK);
    const char *aliases[] = {HEX1, APP ":1.0", NULL};
    ck_assert_int_eq(pg_store_record_aliases(env_store(&e), digest_ref, aliases, &err), PG_OK);
    expect(decide(&e, APP ":1.0", REF1, "team-b", NULL), 0, PG_REASON_NO_CREDENTIALS);
    expect(decide(&e, APP ":1.0", HEX1, "team-a", CREDS_A), 1, PG_REASON_SECRET_MATCH);
    env_free(&e);
}
END_TEST

/* Case 3: leftover intents written as the pod (or the kubelet) spelled the image. */
START_TEST(identity_intent_spellings)
{
    env e;
    env_init(&e);
    dc_write_at(e.state, "pulling", "acme/app:1.0", "{}");
    dc_write_at(e.ro, "pulling", "nginx:1.25", "{}");
    dc_write_at(e.ro, "pulling", "redis:latest", "{}");
    expect(decide(&e, "docker.io/acme/app:1.0", REF1, "team-b", NULL), 0, PG_REASON_NO_RECORD);
    expect(decide(&e, "docker.io/library/nginx:1.25", REF1, "team-b", NULL), 0,
           PG_REASON_NO_RECORD);
    expect(decide(&e, "index.docker.io/library/nginx:1.25", REF1, "team-b", NULL), 0,
           PG_REASON_NO_RECORD);
    expect(decide(&e, "docker.io/library/redis", REF1, "team-b", NULL), 0, PG_REASON_NO_RECORD);
    expect(decide(&e, "docker.io/library/nginx:1.26", REF1, "team-b", NULL), 1,
           PG_REASON_PRELOADED);
    /* pullgate's own intents are written under both spellings and released together. */
    pg_error err = {0};
    ck_assert_int_eq(pg_store_record_intent(env_store(&e), "busybox:1.36", &err), PG_OK);
    expect(decide(&e, "docker.io/library/busybox:1.36", REF2, "team-b", NULL), 0,
           PG_REASON_NO_RECORD);
    ck_assert_int_eq(pg_store_record_failed(env_store(&e), "busybox:1.36", &err), PG_OK);
    expect(decide(&e, "docker.io/library/busybox:1.36", REF2, "team-b", NULL), 1,
           PG_REASON_PRELOADED);
    env_free(&e);
}
END_TEST

/* Case 4: records under both ID spellings and in both directories: the union decides. */
START_TEST(identity_union_of_records)
{
    env e;
    env_init(&e);
    write_record(e.state, REF1, time(NULL), secret_mapping());
    write_record(e.ro, HEX1, time(NULL), secret_mapping_c());
    expect(decide(&e, APP ":1.0", REF1, "team-c", CREDS_C), 1, PG_REASON_SECRET_MATCH);
    expect(decide(&e, APP ":1.0", HEX1, "team-a", CREDS_A), 1, PG_REASON_SECRET_MATCH);
    expect(decide(&e, APP ":1.0", HEX1, "team-b", NULL), 0, PG_REASON_NO_CREDENTIALS);
    env_free(&e);
    env_init(&e);
    write_record(e.state, REF1, time(NULL), secret_mapping());
    write_record(e.ro, REF1, time(NULL), secret_mapping_c());
    expect(decide(&e, APP ":1.0", REF1, "team-c", CREDS_C), 1, PG_REASON_SECRET_MATCH);
    expect(decide(&e, APP ":1.0", REF1, "team-a", CREDS_A), 1, PG_REASON_SECRET_MATCH);
    env_free(&e);
}
END_TEST

/* Case 5: containerd (no image ID) with only the kubelet's records. */
START_TEST(identity_containerd_name_union)
{
    env e;
    env_init(&e);
    write_record(e.ro, REF1, time(NULL), secret_mapping());
    write_record(e.ro, REF2, time(NULL), secret_mapping_c());
    expect(decide(&e, APP ":1.0", NULL, "team-a", CREDS_A), 1, PG_REASON_SECRET_MATCH);
    expect(decide(&e, APP ":2.0", NULL, "team-c", CREDS_C), 1, PG_REASON_SECRET_MATCH);
    expect(decide(&e, APP ":1.0", NULL, "team-b", NULL), 0, PG_REASON_NO_CREDENTIALS);
    /* Another image name is not touched by them. */
    expect(decide(&e, "registry.example.com/other:1", NULL, "team-b", NULL), 1,
           PG_REASON_PRELOADED);
    /* A new kubelet record (the directory changed) is seen: the cache is rebuilt. */
    write_record(e.ro, "sha256:5555555555555555555555555555555555555555555555555555555555555555",
                 time(NULL), "\"registry.example.com/other\":{\"nodePodsAccessible\":true}");
    expect(decide(&e, "registry.example.com/other:1", NULL, "team-b", NULL), 1,
           PG_REASON_NODE_ACCESSIBLE);
    env_free(&e);
}
END_TEST

#define CREDS_ACME                                                                           \
    "{\"docker.io/acme/app\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":"      \
    "\"regcred\",\"uid\":\"uid-a\",\"credentialHash\":\"" HASH_A "\"}]}}"

/* Case 5: tag+digest and digest-only spellings resolve through pullgate's index. */
START_TEST(identity_index_digest_forms)
{
    env e;
    env_init(&e);
    pg_secret sec = {"team-a", "regcred", "uid-a", HASH_A};
    pg_pull_credentials creds = {.secrets = &sec, .n_secrets = 1};
    pg_error err = {0};
    ck_assert_int_eq(pg_store_record_pulled(env_store(&e), "acme/app:1.0@" MANIFEST, REF1, &creds,
                                            &err), PG_OK);
    const char *spellings[] = {"docker.io/acme/app@" MANIFEST, "acme/app@" MANIFEST,
                               "docker.io/acme/app:1.0@" MANIFEST};
    for (size_t i = 0; i < 3; i++) {
        char *ref = NULL;
        ck_assert_msg(pg_store_resolve_image(env_store(&e), spellings[i], &ref, &err) == PG_OK,
                      "%s: %s", spellings[i], err.message);
        ck_assert_str_eq(ref, REF1);
        pg_free(ref);
        expect(decide(&e, spellings[i], NULL, "team-b", NULL), 0, PG_REASON_NO_CREDENTIALS);
        expect(decide(&e, spellings[i], NULL, "team-a", CREDS_ACME), 1, PG_REASON_SECRET_MATCH);
    }
    env_free(&e);
}
END_TEST

/* ------------------------------------------------ short names (issue 22) */

#define SHORT "secretorg/myimage"
#define SHORT_NAME "docker.io/" SHORT
#define REF5 "sha256:5555555555555555555555555555555555555555555555555555555555555555"
#define SHORT_MAPPING                                                                              \
    "\"" SHORT "\":{\"kubernetesSecrets\":[{\"uid\":\"uid-a\",\"namespace\":\"team-a\","           \
    "\"name\":\"regcred\",\"credentialHash\":\"" HASH_A "\"}]}"
#define CREDS_SHORT                                                                                \
    "{\"" SHORT_NAME "\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":"              \
    "\"regcred\",\"uid\":\"uid-a\",\"credentialHash\":\"" HASH_A "\"}]}}"

/* The name index of the writable directory, rebuilt by prune from a record the
 * kubelet keyed "secretorg/myimage": found under the image's normalised name. */
START_TEST(short_key_in_rebuilt_name_index)
{
    env e;
    env_init(&e);
    write_record(e.state, REF5, time(NULL), SHORT_MAPPING);
    const char *in_use[] = {REF5, NULL};
    unsigned pruned = 99;
    pg_error err = {0};
    ck_assert_int_eq(pg_store_prune(env_store(&e), in_use, 0, &pruned, &err), PG_OK);
    ck_assert_uint_eq(pruned, 0);
    char *marker = tu_sprintf("%s/pullgate-names/.complete-2", e.state);
    ck_assert_int_eq(access(marker, F_OK), 0); /* the index, not a scan, answers */
    free(marker);
    pg_record **recs = NULL;
    size_t n = 0;
    bool unknown = true;
    ck_assert_int_eq(pg_store_records_mapping(env_store(&e), SHORT_NAME, &recs, &n, &unknown, &err),
                     PG_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert(!unknown);
    pg_record_free(recs[0]);
    pg_free(recs);
    expect(decide(&e, SHORT ":customtag", NULL, "team-b", NULL), 0, PG_REASON_NO_CREDENTIALS);
    expect(decide(&e, SHORT_NAME ":customtag", NULL, "team-a", CREDS_SHORT), 1,
           PG_REASON_SECRET_MATCH);
    env_free(&e);
}
END_TEST

/* dir_stamp's text for one subdirectory (plugin/store/store_names.c). */
static char *sub_stamp(const char *dir, const char *sub)
{
    char *path = tu_sprintf("%s/%s", dir, sub);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    free(path);
    return tu_sprintf("%ju:%ju:%lld.%09ld", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino,
                      (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
}

/* A read-only directory's name cache of the previous format listed keys as
 * written: one with a current stamp must not hide a record keyed "secretorg/myimage". */
START_TEST(short_key_old_dircache_is_not_trusted)
{
    env e;
    env_init(&e);
    write_record(e.ro, REF5, time(NULL) - 60, SHORT_MAPPING);
    char *cache_dir = tu_sprintf("%s/pullgate-dircache", e.state);
    mkdir(cache_dir, 0700);
    char *pulled = sub_stamp(e.ro, "pulled"), *pulling = sub_stamp(e.ro, "pulling");
    char file[7 + PG_HASH_HEX_LEN + 1];
    ck_assert_int_eq(pg_record_file_name(e.ro, file, NULL), PG_OK);
    char *path = tu_sprintf("%s/%s", cache_dir, file);
    /* Format 1: the stamp, then nothing under docker.io/secretorg/myimage. */
    char *text = tu_sprintf("pullgate-dircache 1 %s %s\n", pulled, pulling);
    tu_write_file(path, text, -1, 0600);
    expect(decide(&e, SHORT ":customtag", NULL, "team-b", NULL), 0, PG_REASON_NO_CREDENTIALS);
    free(text);
    free(path);
    free(pulled);
    free(pulling);
    free(cache_dir);
    env_free(&e);
}
END_TEST

/* Case 6: a pinned pattern never overrides a record of a credentialed pull. */
START_TEST(identity_pinned_needs_no_pull)
{
    env e;
    env_init(&e);
    env_set(&e, "pinnedImages", "*pause*");
    const char *helper = "registry.example.com/team-a/pause-helper";
    char *mapping = tu_sprintf("\"%s\":{\"kubernetesSecrets\":[{\"uid\":\"uid-a\",\"namespace\":"
                               "\"team-a\",\"name\":\"regcred\",\"credentialHash\":\"" HASH_A
                               "\"}]}", helper);
    write_record(e.ro, REF1, time(NULL), mapping);
    char *image = tu_sprintf("%s:1", helper);
    expect(decide(&e, image, REF1, "team-b", NULL), 0, PG_REASON_NO_CREDENTIALS);
    /* Also under containerd, and under another image ID the name still counts. */
    expect(decide(&e, image, NULL, "team-b", NULL), 0, PG_REASON_NO_CREDENTIALS);
    expect(decide(&e, image, REF2, "team-b", NULL), 0, PG_REASON_NO_RECORD);
    /* Nothing says it was pulled: pinned. */
    expect(decide(&e, "registry.k8s.io/pause:3.10", REF2, "team-b", NULL), 1, PG_REASON_PINNED);
    free(image);
    free(mapping);
    env_free(&e);
}
END_TEST

/* Case 7: credentialTTL per credential; future timestamps never authorise. */
START_TEST(identity_ttl_per_credential)
{
    env e;
    env_init(&e);
    env_set(&e, "credentialTTL", "1h");
    write_record(e.state, REF1, time(NULL) - 2 * 3600, secret_mapping());
    pg_secret sec = {"team-c", "regcred", "uid-c",
                     "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"};
    pg_pull_credentials creds = {.secrets = &sec, .n_secrets = 1};
    pg_error err = {0};
    ck_assert_int_eq(pg_store_record_pulled(env_store(&e), APP ":1.0", REF1, &creds, &err), PG_OK);
    /* team-c's re-pull refreshed the record, not team-a's credential. */
    expect(decide(&e, APP ":1.0", REF1, "team-c", CREDS_C), 1, PG_REASON_SECRET_MATCH);
    expect(decide(&e, APP ":1.0", REF1, "team-a", CREDS_A), 0, PG_REASON_EXPIRED);
    /* A record dated 70 years ahead: not trusted, with or without a TTL. */
    write_record(e.ro, REF2, time(NULL) + 70LL * 365 * 86400, secret_mapping());
    expect(decide(&e, APP ":1.0", REF2, "team-a", CREDS_A), 0, PG_REASON_EXPIRED);
    env_set(&e, "credentialTTL", "0s");
    expect(decide(&e, APP ":1.0", REF2, "team-a", CREDS_A), 0, PG_REASON_EXPIRED);
    env_free(&e);
}
END_TEST

/* ------------------------------------------- the pod that pulled (issue 28) */

#define POD_U1 "7c1f0a52-3d1e-4c3b-9a8e-0d6f5b2c1a11"
#define POD_U2 "2b9e4d07-8f61-4a5c-b3d2-6e1f0c9a7b22"
#define AUTH_NEW "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"

/* What pullgate-cri records for a pull it cannot attribute (cri/pull.c): the
 * placeholder of the namespace and the binding of the pulling pod. */
static void record_unattributed(env *e, const char *ns, const char *pod_uid)
{
    char *binding = tu_sprintf(PG_POD_BINDING_PREFIX "%s", pod_uid);
    pg_secret sec[] = {{ns, PG_UNVERIFIED_NAME_PREFIX AUTH_NEW, "", AUTH_NEW},
                       {ns, binding, "", ""}};
    pg_pull_credentials creds = {.secrets = sec, .n_secrets = 2};
    pg_error err = {0};
    ck_assert_msg(pg_store_record_pulled(env_store(e), APP ":1.0", REF1, &creds, &err) == PG_OK,
                  "%s", err.message);
    free(binding);
}

static pg_decision decide_as_pod(env *e, const char *ns, const char *pod_uid, const char *creds)
{
    pg_request req = {.image = APP ":1.0", .image_ref = REF1, .namespace_ = ns,
                      .credentials = creds};
    pg_decision d;
    ck_assert_int_eq(pg_decide_pod(e->cfg, env_store(e), &req, pod_uid, NULL, NULL, &d), d.allow);
    return d;
}

/* Written by the store, read through the parse, the credential index and the record cache. */
START_TEST(pod_binding_lets_only_the_pod_that_pulled)
{
    for (int cached = 0; cached <= 1; cached++) {
        env e;
        env_init(&e);
        if (cached)
            ck_assert_int_eq(pg_store_enable_cache(env_store(&e), 16, 0, NULL), PG_OK);
        record_unattributed(&e, "team-a", POD_U1);
        /* Its annotation lists the secret's old hash (rotated after admission). */
        pg_decision d = decide_as_pod(&e, "team-a", POD_U1, CREDS_A);
        expect(d, 1, PG_REASON_POD_PULLED);
        ck_assert_ptr_nonnull(strstr(d.text, POD_U1));
        expect(decide_as_pod(&e, "team-a", POD_U1, NULL), 1, PG_REASON_POD_PULLED);
        expect(decide_as_pod(&e, "team-a", POD_U2, CREDS_A), 0, PG_REASON_CREDENTIALS_MISMATCH);
        expect(decide_as_pod(&e, "team-b", POD_U1, NULL), 0, PG_REASON_NO_CREDENTIALS);
        /* Unknown or malformed pod identity: as pg_decide_identity (and 1.0.0's reader). */
        expect(decide_as_pod(&e, "team-a", NULL, CREDS_A), 0, PG_REASON_CREDENTIALS_MISMATCH);
        expect(decide_as_pod(&e, "team-a", "", CREDS_A), 0, PG_REASON_CREDENTIALS_MISMATCH);
        expect(decide_as_pod(&e, "team-a", PG_POD_BINDING_PREFIX POD_U1, CREDS_A), 0,
               PG_REASON_CREDENTIALS_MISMATCH);
        expect(decide(&e, APP ":1.0", REF1, "team-a", CREDS_A), 0,
               PG_REASON_CREDENTIALS_MISMATCH);
        /* A second pod's pull binds that pod too; the first stays bound. */
        record_unattributed(&e, "team-a", POD_U2);
        expect(decide_as_pod(&e, "team-a", POD_U2, CREDS_A), 1, PG_REASON_POD_PULLED);
        expect(decide_as_pod(&e, "team-a", POD_U1, CREDS_A), 1, PG_REASON_POD_PULLED);
        env_free(&e);
    }
}
END_TEST

/* The TTL counts per binding: another pod's pull does not refresh this pod's. */
START_TEST(pod_binding_ttl_per_pod)
{
    env e;
    env_init(&e);
    env_set(&e, "credentialTTL", "1h");
    const char *mapping =
        "\"" APP "\":{\"kubernetesSecrets\":[{\"uid\":\"\",\"namespace\":\"team-a\",\"name\":"
        "\"" PG_POD_BINDING_PREFIX POD_U1 "\",\"credentialHash\":\"\"}]}";
    write_record(e.state, REF1, time(NULL) - 2 * 3600, mapping);
    expect(decide_as_pod(&e, "team-a", POD_U1, NULL), 0, PG_REASON_EXPIRED);
    record_unattributed(&e, "team-a", POD_U2);
    expect(decide_as_pod(&e, "team-a", POD_U2, NULL), 1, PG_REASON_POD_PULLED);
    expect(decide_as_pod(&e, "team-a", POD_U1, NULL), 0, PG_REASON_EXPIRED);
    record_unattributed(&e, "team-a", POD_U1);
    expect(decide_as_pod(&e, "team-a", POD_U1, NULL), 1, PG_REASON_POD_PULLED);
    env_free(&e);
}
END_TEST

/* A malformed annotation denies before any exemption (pinned, allowlisted, preloaded). */
START_TEST(identity_bad_annotation_before_exemptions)
{
    env e;
    env_init(&e);
    env_set(&e, "pinnedImages", "*pause*");
    expect(decide(&e, "registry.k8s.io/pause:3.10", REF2, "team-b", "{broken"), 0,
           PG_REASON_BAD_ANNOTATION);
    env_set(&e, "policy", "NeverVerifyAllowlistedImages");
    env_set(&e, "allowlist", "registry.example.com/*");
    expect(decide(&e, APP ":1.0", REF2, "team-b", "{broken"), 0, PG_REASON_BAD_ANNOTATION);
    env_set(&e, "policy", "NeverVerify");
    expect(decide(&e, APP ":1.0", REF2, "team-b", "{broken"), 1, PG_REASON_NEVER_VERIFY);
    env_free(&e);
}
END_TEST

/* Verification pulls (issue 20): only denials a pull with the pod's own credentials can
 * change are curable; every allow and every error or tampering is not. */
START_TEST(curable_by_pull_classification)
{
    static const int curable[] = {PG_REASON_NO_IMAGE_REF,         PG_REASON_NO_RECORD,
                                  PG_REASON_NO_MAPPING,           PG_REASON_NO_CREDENTIALS,
                                  PG_REASON_CREDENTIALS_MISMATCH, PG_REASON_EXPIRED};
    static const int not_curable[] = {0,
                                      PG_REASON_NEVER_VERIFY,
                                      PG_REASON_PINNED,
                                      PG_REASON_PRELOADED,
                                      PG_REASON_ALLOWLISTED,
                                      PG_REASON_NODE_ACCESSIBLE,
                                      PG_REASON_SECRET_MATCH,
                                      PG_REASON_SERVICE_ACCOUNT_MATCH,
                                      PG_REASON_SANDBOX,
                                      PG_REASON_BAD_ANNOTATION,
                                      PG_REASON_STORE_ERROR,
                                      PG_REASON_BAD_REQUEST,
                                      PG_REASON_CONFIG_ERROR,
                                      PG_REASON_ANNOTATION_SIGNATURE,
                                      9999,
                                      -1};
    for (size_t i = 0; i < sizeof curable / sizeof curable[0]; i++)
        ck_assert_msg(pg_reason_curable_by_pull(curable[i]), "%s", pg_reason_name(curable[i]));
    for (size_t i = 0; i < sizeof not_curable / sizeof not_curable[0]; i++)
        ck_assert_msg(!pg_reason_curable_by_pull(not_curable[i]), "%s",
                      pg_reason_name(not_curable[i]));
}
END_TEST

static Suite *decide_suite(void)
{
    Suite *s = suite_create("decide");
    TCase *tc = tcase_create("decide");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, shared_decision_cases);
    tcase_add_test(tc, secret_match_reason);
    tcase_add_test(tc, ttl_expiry);
    tcase_add_test(tc, corrupt_record_fails_closed);
    tcase_add_test(tc, record_under_wrong_name_fails_closed);
    tcase_add_test(tc, unsafe_record_fails_closed);
    tcase_add_test(tc, unknown_image_ref);
    tcase_add_test(tc, bad_annotation_and_request);
    tcase_add_test(tc, no_mapping_and_node_accessible);
    tcase_add_test(tc, intent_under_normalised_name);
    tcase_add_test(tc, reason_names_are_stable);
    tcase_add_test(tc, identity_misspelled_id_denies);
    tcase_add_test(tc, identity_repo_digest_record);
    tcase_add_test(tc, identity_alias_index);
    tcase_add_test(tc, identity_intent_spellings);
    tcase_add_test(tc, identity_union_of_records);
    tcase_add_test(tc, identity_containerd_name_union);
    tcase_add_test(tc, identity_index_digest_forms);
    tcase_add_test(tc, identity_pinned_needs_no_pull);
    tcase_add_test(tc, identity_ttl_per_credential);
    tcase_add_test(tc, identity_bad_annotation_before_exemptions);
    tcase_add_test(tc, short_key_in_rebuilt_name_index);
    tcase_add_test(tc, short_key_old_dircache_is_not_trusted);
    tcase_add_test(tc, curable_by_pull_classification);
    tcase_add_test(tc, pod_binding_lets_only_the_pod_that_pulled);
    tcase_add_test(tc, pod_binding_ttl_per_pod);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(decide_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
