/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of plugin/store/store.c: record directories, intents, index, hostile files. */
#include "engine_testing.h"
#include "internal.h"
#include "store_lookup.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define H_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define REF1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define REF2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define REF3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"
#define APP "registry.example.com/team-a/app:1.0"
#define APP_NAME "registry.example.com/team-a/app"

typedef struct fixture {
    char *root;  /* temp dir */
    char *state; /* root/state: the writable record dir */
    char *ro;    /* root/kubelet: a read-only record dir */
    pg_config *cfg;
} fixture;

static fixture fx;

/* 1 if image has an intent in some directory; the lookup itself must succeed. */
static int intent_exists(const pg_store *s, const char *image)
{
    bool exists = true;
    pg_error err = {0};
    ck_assert_msg(pg_store_intent_exists(s, image, &exists, &err) == PG_OK, "%s", err.message);
    return exists;
}

static void setup(void)
{
    fx.root = tu_mkdtemp();
    fx.state = tu_sprintf("%s/state", fx.root);
    fx.ro = tu_sprintf("%s/kubelet", fx.root);
    fx.cfg = pg_config_new(NULL);
    ck_assert_ptr_nonnull(fx.cfg);
    ck_assert_int_eq(pg_config_set(fx.cfg, "stateDir", fx.state, NULL), PG_OK);
    ck_assert_int_eq(pg_config_set(fx.cfg, "readOnlyRecordDirs", fx.ro, NULL), PG_OK);
}

static void teardown(void)
{
    pg_config_free(fx.cfg);
    tu_rmrf(fx.root);
    free(fx.root);
    free(fx.state);
    free(fx.ro);
}

static pg_store *open_store(void)
{
    pg_error err = {0};
    pg_store *s = pg_store_open(fx.cfg, NULL, &err);
    ck_assert_msg(s != NULL, "open: %s", err.message);
    return s;
}

static char *record_path(const char *dir, const char *sub, const char *key)
{
    char name[7 + PG_HASH_HEX_LEN + 1];
    ck_assert_int_eq(pg_record_file_name(key, name, NULL), PG_OK);
    return tu_sprintf("%s/%s/%s", dir, sub, name);
}

static void pulled_with_secret(pg_store *s, const char *image, const char *ref, const char *ns)
{
    pg_secret sec = {ns, "regcred", "uid-1", H_A};
    pg_pull_credentials c = {.secrets = &sec, .n_secrets = 1};
    pg_error err = {0};
    ck_assert_msg(pg_store_record_pulled(s, image, ref, &c, &err) == PG_OK, "pulled: %s",
                  err.message);
}

static unsigned mode_of(const char *path)
{
    struct stat st;
    ck_assert_int_eq(lstat(path, &st), 0);
    return st.st_mode & 07777;
}

/* A valid kubelet record text for ref (mapping APP_NAME, node accessible). */
static char *record_text(const char *api, const char *ref)
{
    return tu_sprintf("{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"%s\","
                      "\"lastUpdatedTime\":\"2025-01-01T00:00:00Z\",\"imageRef\":\"%s\","
                      "\"credentialMapping\":{\"" APP_NAME "\":{\"nodePodsAccessible\":true}}}\n",
                      api, ref);
}

static void make_ro_dir(void)
{
    ck_assert_int_eq(mkdir(fx.ro, 0700), 0);
    char *p = tu_sprintf("%s/pulled", fx.ro);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    free(p);
    p = tu_sprintf("%s/pulling", fx.ro);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    free(p);
}

/* Places a file at DIR/pulled/<hash(ref)>. */
static char *place_record(const char *dir, const char *ref, const char *content, unsigned mode)
{
    char *path = record_path(dir, "pulled", ref);
    tu_write_file(path, content, -1, mode);
    return path;
}

static int get_code(pg_store *s, const char *ref, pg_error *err)
{
    pg_record *rec = NULL;
    int rc = pg_store_get(s, ref, &rec, err);
    ck_assert(rc == PG_OK || rec == NULL);
    pg_record_free(rec);
    return rc;
}

/* ---------------------------------------------------------------- basic */

START_TEST(open_creates_layout)
{
    pg_store *s = open_store();
    ck_assert_uint_eq(mode_of(fx.state), 0700);
    const char *subs[] = {"pulling", "pulled", "pullgate-intents", "pullgate-images"};
    for (size_t i = 0; i < 4; i++) {
        char *p = tu_sprintf("%s/%s", fx.state, subs[i]);
        ck_assert_uint_eq(mode_of(p), 0700);
        free(p);
    }
    pg_store_free(s);
    pg_store_free(NULL);
}
END_TEST

START_TEST(write_then_read)
{
    pg_store *s = open_store();
    pulled_with_secret(s, APP, REF1, "team-a");
    pg_record *rec = NULL;
    pg_error err = {0};
    ck_assert_int_eq(pg_store_get(s, REF1, &rec, &err), PG_OK);
    ck_assert_str_eq(pg_record_image_ref(rec), REF1);
    ck_assert_str_eq(pg_record_dir(rec), fx.state);
    ck_assert_str_eq(pg_record_api_version(rec), PG_API_V1ALPHA1);
    ck_assert_int_le(labs((long)(pg_record_last_updated(rec) - time(NULL))), 5);
    const pg_rec_mapping *m = pg_record_find(rec, APP_NAME);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(m->n_secrets, 1);
    ck_assert_str_eq(m->secrets[0].credential_hash, H_A);
    pg_record_free(rec);

    char *path = record_path(fx.state, "pulled", REF1);
    ck_assert_uint_eq(mode_of(path), 0600);
    size_t len;
    char *text = tu_read_file(path, &len);
    ck_assert(len > 0 && text[len - 1] == '\n');
    ck_assert(strncmp(text, "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"", 42) == 0);
    free(text);
    free(path);

    ck_assert_int_eq(get_code(s, REF2, &err), PG_ERR_NOT_FOUND);
    /* A second pull with another secret merges into the same record. */
    pulled_with_secret(s, "registry.example.com/team-a/app:2.0", REF1, "team-b");
    ck_assert_int_eq(pg_store_get(s, REF1, &rec, &err), PG_OK);
    ck_assert_uint_eq(pg_record_find(rec, APP_NAME)->n_secrets, 2);
    pg_record_free(rec);
    pg_store_free(s);
}
END_TEST

START_TEST(writes_configured_api_version)
{
    ck_assert_int_eq(pg_config_set(fx.cfg, "recordApiVersion", PG_API_V1BETA1, NULL), PG_OK);
    pg_store *s = open_store();
    pg_pull_credentials npa = {.node_pods_accessible = 1};
    ck_assert_int_eq(pg_store_record_pulled(s, APP, REF1, &npa, NULL), PG_OK);
    pg_record *rec;
    ck_assert_int_eq(pg_store_get(s, REF1, &rec, NULL), PG_OK);
    ck_assert_str_eq(pg_record_api_version(rec), PG_API_V1BETA1);
    pg_record_free(rec);
    pg_store_free(s);
}
END_TEST

START_TEST(pull_without_credentials_still_records)
{
    pg_store *s = open_store();
    ck_assert_int_eq(pg_store_record_pulled(s, APP, REF1, NULL, NULL), PG_OK);
    pg_record *rec;
    ck_assert_int_eq(pg_store_get(s, REF1, &rec, NULL), PG_OK);
    /* An empty mapping for the name: pulled under it, credentials unknown. */
    ck_assert_uint_eq(rec->n_maps, 1);
    ck_assert_str_eq(rec->maps[0].image_name, APP_NAME);
    ck_assert(!rec->maps[0].node_pods_accessible && !rec->maps[0].n_secrets && !rec->maps[0].n_sas);
    pg_record_free(rec);
    pg_error err = {0};
    ck_assert_int_eq(pg_store_record_pulled(s, "", REF1, NULL, &err), PG_ERR_INVALID);
    ck_assert_int_eq(pg_store_record_pulled(s, APP, "", NULL, &err), PG_ERR_INVALID);
    pg_store_free(s);
}
END_TEST

typedef struct list_seen {
    int good, bad;
    char refs[4][128];
} list_seen;

static int count_cb(const pg_record *rec, void *ud)
{
    list_seen *seen = ud;
    if (seen->good < 4)
        snprintf(seen->refs[seen->good], sizeof seen->refs[0], "%s", pg_record_image_ref(rec));
    seen->good++;
    return 0;
}

static void bad_cb(const char *path, const pg_error *why, void *ud)
{
    list_seen *seen = ud;
    ck_assert_ptr_nonnull(strstr(path, "/pulled/sha256-"));
    ck_assert_int_ne(why->code, PG_OK);
    seen->bad++;
}

static int stop_cb(const pg_record *rec, void *ud)
{
    (void)rec;
    (void)ud;
    return 42;
}

START_TEST(list_records_all_dirs)
{
    make_ro_dir();
    pg_store *s = open_store();
    pulled_with_secret(s, APP, REF1, "team-a");
    pulled_with_secret(s, APP, REF2, "team-a");
    char *t = record_text(PG_API_V1ALPHA1, REF3);
    free(place_record(fx.ro, REF3, t, 0600));
    free(t);
    /* A bad record is reported; temp files and foreign names are not records. */
    free(place_record(fx.state, "bogus", "{}", 0600));
    char *p = tu_sprintf("%s/pulled/sha256-abc.1234.tmp", fx.state);
    tu_write_file(p, "garbage", -1, 0600);
    free(p);
    p = tu_sprintf("%s/pulled/README", fx.state);
    tu_write_file(p, "garbage", -1, 0600);
    free(p);
    list_seen seen = {0};
    pg_error err = {0};
    ck_assert_int_eq(pg_store_list(s, count_cb, bad_cb, &seen, &err), PG_OK);
    ck_assert_int_eq(seen.good, 3);
    ck_assert_int_eq(seen.bad, 1);
    ck_assert_int_eq(pg_store_list(s, stop_cb, NULL, NULL, &err), 42);
    pg_store_free(s);
}
END_TEST

START_TEST(delete_record)
{
    pg_store *s = open_store();
    pulled_with_secret(s, APP, REF1, "team-a");
    pg_error err = {0};
    ck_assert_int_eq(pg_store_delete(s, REF1, &err), PG_OK);
    ck_assert_int_eq(get_code(s, REF1, &err), PG_ERR_NOT_FOUND);
    ck_assert_int_eq(pg_store_delete(s, REF1, &err), PG_ERR_NOT_FOUND);
    pg_store_free(s);
}
END_TEST

START_TEST(prune_records)
{
    ck_assert_int_eq(pg_config_set(fx.cfg, "pinnedImages", "registry.example.com/pinned*", NULL),
                     PG_OK);
    pg_store *s = open_store();
    pulled_with_secret(s, APP, REF1, "team-a");
    pulled_with_secret(s, "registry.example.com/pinned/x:1", REF2, "team-a");
    pulled_with_secret(s, "registry.example.com/other:1", REF3, "team-a");
    unsigned pruned = 99;
    pg_error err = {0};
    /* Everything is newer than "before" = 1000: nothing goes. */
    ck_assert_int_eq(pg_store_prune(s, NULL, 1000, &pruned, &err), PG_OK);
    ck_assert_uint_eq(pruned, 0);
    const char *in_use[] = {REF1, NULL};
    ck_assert_int_eq(pg_store_prune(s, in_use, 0, &pruned, &err), PG_OK);
    ck_assert_uint_eq(pruned, 1);
    ck_assert_int_eq(get_code(s, REF1, &err), PG_OK);
    ck_assert_int_eq(get_code(s, REF2, &err), PG_OK); /* pinned */
    ck_assert_int_eq(get_code(s, REF3, &err), PG_ERR_NOT_FOUND);
    ck_assert_int_eq(pg_store_prune(s, NULL, time(NULL) + 10, &pruned, &err), PG_OK);
    ck_assert_uint_eq(pruned, 1);
    ck_assert_int_eq(get_code(s, REF1, &err), PG_ERR_NOT_FOUND);
    ck_assert_int_eq(get_code(s, REF2, &err), PG_OK);
    pg_store_free(s);
}
END_TEST

static int decide_reason(const pg_store *s, const char *image, const char *ref)
{
    pg_request req = {image, ref, "team-a", NULL};
    pg_decision d;
    pg_decide(fx.cfg, s, &req, &d);
    return d.reason;
}

/* Index entries, credential times and name lines of pruned records go, and the
 * ones a crash or pg_store_delete left behind; what kept records use stays. */
START_TEST(prune_cleans_what_only_pruned_records_justified)
{
    pg_store *s = open_store();
    const char *web = "registry.example.com/team-b/web:2.0", *mirror = "mirror.example.com/app:1";
    pulled_with_secret(s, APP, REF1, "team-a");
    pulled_with_secret(s, web, REF2, "team-b");
    const char *aliases[] = {mirror, NULL}, *ghost[] = {"registry.example.com/ghost:1", NULL};
    pg_error err = {0};
    ck_assert_int_eq(pg_store_record_aliases(s, REF1, aliases, &err), PG_OK);
    ck_assert_int_eq(pg_store_record_aliases(s, REF3, ghost, &err), PG_OK); /* no record */
    char *times1 = record_path(fx.state, "pullgate-credtimes", REF1);
    char *times2 = record_path(fx.state, "pullgate-credtimes", REF2);
    char *orphan = record_path(fx.state, "pullgate-credtimes", REF3);
    char *text = tu_read_file(times2, NULL);
    tu_write_file(orphan, text, -1, 0600); /* as a crash between the two could leave */
    free(text);
    char *names1 = record_path(fx.state, "pullgate-names", APP_NAME);
    char *names2 = record_path(fx.state, "pullgate-names", "registry.example.com/team-b/web");
    struct stat before, after;
    ck_assert_int_eq(stat(names2, &before), 0);
    ck_assert_int_ne(decide_reason(s, APP, NULL), PG_REASON_PRELOADED);
    ck_assert_int_ne(decide_reason(s, ghost[0], NULL), PG_REASON_PRELOADED);

    const char *in_use[] = {REF2, NULL};
    unsigned pruned = 0;
    ck_assert_int_eq(pg_store_prune(s, in_use, 0, &pruned, &err), PG_OK);
    ck_assert_uint_eq(pruned, 1);
    char *ref = NULL;
    ck_assert_int_eq(pg_store_resolve_image(s, APP, &ref, &err), PG_ERR_NOT_FOUND);
    ck_assert_int_eq(pg_store_resolve_image(s, mirror, &ref, &err), PG_ERR_NOT_FOUND);
    ck_assert_int_eq(pg_store_resolve_image(s, ghost[0], &ref, &err), PG_ERR_NOT_FOUND);
    ck_assert_int_eq(pg_store_resolve_image(s, web, &ref, &err), PG_OK);
    ck_assert_str_eq(ref, REF2);
    free(ref);
    ck_assert_int_eq(access(times1, F_OK), -1);
    ck_assert_int_eq(access(orphan, F_OK), -1);
    ck_assert_int_eq(access(times2, F_OK), 0);
    ck_assert_int_eq(access(names1, F_OK), -1);
    ck_assert_int_eq(stat(names2, &after), 0); /* unchanged: not rewritten */
    ck_assert(before.st_ino == after.st_ino && before.st_mtim.tv_nsec == after.st_mtim.tv_nsec &&
              before.st_mtim.tv_sec == after.st_mtim.tv_sec);
    /* Nothing says the pruned image was pulled any more: preloaded (design.md, "Prune"). */
    ck_assert_int_eq(decide_reason(s, APP, NULL), PG_REASON_PRELOADED);
    ck_assert_int_eq(decide_reason(s, APP, REF1), PG_REASON_PRELOADED);
    ck_assert_int_eq(decide_reason(s, mirror, NULL), PG_REASON_PRELOADED);
    ck_assert_int_eq(decide_reason(s, ghost[0], NULL), PG_REASON_PRELOADED);
    ck_assert_int_ne(decide_reason(s, web, NULL), PG_REASON_PRELOADED);
    ck_assert_int_ne(decide_reason(s, web, REF2), PG_REASON_PRELOADED);
    free(times1);
    free(times2);
    free(orphan);
    free(names1);
    free(names2);
    pg_store_free(s);
}
END_TEST

START_TEST(prune_removes_stale_temps_and_keeps_bad_files)
{
    pg_store *s = open_store();
    char *tmp = tu_sprintf("%s/pulled/sha256-abc.0123456789abcdef.tmp", fx.state);
    tu_write_file(tmp, "partial", -1, 0600);
    char *bad = place_record(fx.state, "bad", "not json", 0600);
    unsigned pruned;
    ck_assert_int_eq(pg_store_prune(s, NULL, 0, &pruned, NULL), PG_OK);
    ck_assert_uint_eq(pruned, 0);
    ck_assert_int_eq(access(tmp, F_OK), -1);
    ck_assert_int_eq(access(bad, F_OK), 0);
    free(tmp);
    free(bad);
    pg_store_free(s);
}
END_TEST

START_TEST(resolve_image)
{
    pg_store *s = open_store();
    pulled_with_secret(s, "nginx:1.25", REF1, "team-a");
    char *ref = NULL;
    pg_error err = {0};
    ck_assert_int_eq(pg_store_resolve_image(s, "nginx:1.25", &ref, &err), PG_OK);
    ck_assert_str_eq(ref, REF1);
    free(ref);
    ck_assert_int_eq(pg_store_resolve_image(s, "docker.io/library/nginx:1.25", &ref, &err), PG_OK);
    ck_assert_str_eq(ref, REF1);
    free(ref);
    ck_assert_int_eq(pg_store_resolve_image(s, "nginx:1.26", &ref, &err), PG_ERR_NOT_FOUND);
    ck_assert_ptr_null(ref);
    /* The newest pull of a tag wins. */
    pulled_with_secret(s, "nginx:1.25", REF2, "team-a");
    ck_assert_int_eq(pg_store_resolve_image(s, "nginx:1.25", &ref, &err), PG_OK);
    ck_assert_str_eq(ref, REF2);
    free(ref);
    /* An index entry whose content does not match its name is refused. */
    char *a = record_path(fx.state, "pullgate-images", "docker.io/library/nginx:1.25");
    char *b = record_path(fx.state, "pullgate-images", "docker.io/library/redis:7");
    ck_assert_int_eq(rename(a, b), 0);
    ck_assert_int_eq(pg_store_resolve_image(s, "docker.io/library/redis:7", &ref, &err),
                     PG_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(err.message, "does not match its file name"));
    free(a);
    free(b);
    pg_store_free(s);
}
END_TEST

START_TEST(intent_reference_counting)
{
    pg_store *s = open_store();
    pg_error err = {0};
    char *intent = record_path(fx.state, "pulling", APP);
    char *count = record_path(fx.state, "pullgate-intents", APP);
    ck_assert_int_eq(intent_exists(s, APP), 0);
    ck_assert_int_eq(pg_store_record_intent(s, APP, &err), PG_OK);
    ck_assert_int_eq(pg_store_record_intent(s, APP, &err), PG_OK);
    ck_assert_int_eq(intent_exists(s, APP), 1);
    ck_assert_uint_eq(mode_of(intent), 0600);
    size_t len;
    char *text = tu_read_file(intent, &len);
    char *image = NULL;
    ck_assert_int_eq(pg_intent_parse(text, len, &image, &err), PG_OK);
    ck_assert_str_eq(image, APP);
    free(image);
    free(text);
    text = tu_read_file(count, NULL);
    ck_assert_str_eq(text, "2\n");
    free(text);
    /* Two pulls in flight: the first to finish keeps the intent. */
    pulled_with_secret(s, APP, REF1, "team-a");
    ck_assert_int_eq(intent_exists(s, APP), 1);
    ck_assert_int_eq(pg_store_record_failed(s, APP, &err), PG_OK);
    ck_assert_int_eq(intent_exists(s, APP), 0);
    ck_assert_int_eq(access(count, F_OK), -1);
    /* Releasing more than taken stays at 0. */
    ck_assert_int_eq(pg_store_record_failed(s, APP, &err), PG_OK);
    ck_assert_int_eq(pg_store_record_intent(s, APP, &err), PG_OK);
    ck_assert_int_eq(intent_exists(s, APP), 1);
    ck_assert_int_eq(pg_store_record_failed(s, APP, &err), PG_OK);
    ck_assert_int_eq(intent_exists(s, APP), 0);
    /* A leftover intent (crash) without a count is cleared by the next pull. */
    ck_assert_int_eq(pg_store_record_intent(s, APP, &err), PG_OK);
    ck_assert_int_eq(unlink(count), 0);
    ck_assert_int_eq(intent_exists(s, APP), 1);
    pulled_with_secret(s, APP, REF1, "team-a");
    ck_assert_int_eq(intent_exists(s, APP), 0);
    free(intent);
    free(count);
    pg_store_free(s);
}
END_TEST

START_TEST(intent_in_read_only_dir)
{
    make_ro_dir();
    char *path = record_path(fx.ro, "pulling", "nginx:1.25");
    tu_write_file(path,
                  "{\"kind\":\"ImagePullIntent\",\"apiVersion\":\"" PG_API_V1ALPHA1
                  "\",\"image\":\"nginx:1.25\"}\n",
                  -1, 0600);
    free(path);
    pg_store *s = open_store();
    ck_assert_int_eq(intent_exists(s, "nginx:1.25"), 1);
    ck_assert_int_eq(intent_exists(s, "nginx:1.26"), 0);
    pg_store_free(s);
}
END_TEST

START_TEST(read_only_dirs)
{
    make_ro_dir();
    char *t = record_text(PG_API_V1BETA1, REF1);
    free(place_record(fx.ro, REF1, t, 0600));
    free(t);
    pg_store *s = open_store();
    pg_record *rec;
    ck_assert_int_eq(pg_store_get(s, REF1, &rec, NULL), PG_OK);
    ck_assert_str_eq(pg_record_dir(rec), fx.ro);
    ck_assert_str_eq(pg_record_api_version(rec), PG_API_V1BETA1);
    pg_record_free(rec);
    /* The writable directory comes first. */
    pulled_with_secret(s, APP, REF1, "team-a");
    ck_assert_int_eq(pg_store_get(s, REF1, &rec, NULL), PG_OK);
    ck_assert_str_eq(pg_record_dir(rec), fx.state);
    pg_record_free(rec);
    pg_store_free(s);

    /* Read-only store: finds records, refuses writes. */
    pg_error err = {0};
    s = pg_store_open_readonly(fx.cfg, &err);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(pg_store_get(s, REF1, &rec, NULL), PG_OK);
    ck_assert_str_eq(pg_record_dir(rec), fx.ro);
    pg_record_free(rec);
    ck_assert_int_eq(pg_store_record_intent(s, APP, &err), PG_ERR_INVALID);
    ck_assert_int_eq(pg_store_record_pulled(s, APP, REF1, NULL, &err), PG_ERR_INVALID);
    ck_assert_int_eq(pg_store_delete(s, REF1, &err), PG_ERR_INVALID);
    ck_assert_int_eq(pg_store_prune(s, NULL, 0, NULL, &err), PG_ERR_INVALID);
    pg_store_free(s);
}
END_TEST

START_TEST(missing_read_only_dir_and_subdirs)
{
    pg_store *s = open_store(); /* fx.ro does not exist: skipped */
    pg_store_free(s);
    ck_assert_int_eq(mkdir(fx.ro, 0700), 0); /* exists, but no pulled/ or pulling/ */
    s = open_store();
    list_seen seen = {0};
    ck_assert_int_eq(pg_store_list(s, count_cb, bad_cb, &seen, NULL), PG_OK);
    ck_assert_int_eq(seen.good, 0);
    ck_assert_int_eq(get_code(s, REF1, NULL), PG_ERR_NOT_FOUND);
    ck_assert_int_eq(intent_exists(s, APP), 0);
    pg_store_free(s);
}
END_TEST

/* ------------------------------------------------------------- hostile */

/* A pulling/ that cannot be trusted is an error with a reason, never "no intent". */
START_TEST(intent_lookup_in_a_symlinked_pulling_dir_fails)
{
    pg_store *s = open_store();
    char *pulling = tu_sprintf("%s/pulling", fx.state);
    ck_assert_int_eq(rmdir(pulling), 0);
    ck_assert_int_eq(symlink(fx.root, pulling), 0);
    bool exists = true;
    pg_error err = {0};
    ck_assert_int_eq(pg_store_intent_exists(s, APP, &exists, &err), PG_ERR_UNSAFE);
    ck_assert(!exists);
    ck_assert_ptr_nonnull(strstr(err.message, "pulling"));
    free(pulling);
    pg_store_free(s);
}
END_TEST

static void expect_get(pg_store *s, const char *ref, int code, const char *in_message)
{
    pg_error err = {0};
    int rc = get_code(s, ref, &err);
    ck_assert_msg(rc == code, "expected %d, got %d: %s", code, rc, err.message);
    if (in_message)
        ck_assert_msg(strstr(err.message, in_message) != NULL, "message \"%s\" lacks \"%s\"",
                      err.message, in_message);
}

START_TEST(hostile_symlinked_record)
{
    pg_store *s = open_store();
    char *target = tu_sprintf("%s/elsewhere", fx.root);
    char *t = record_text(PG_API_V1ALPHA1, REF1);
    tu_write_file(target, t, -1, 0600);
    char *path = record_path(fx.state, "pulled", REF1);
    ck_assert_int_eq(symlink(target, path), 0);
    expect_get(s, REF1, PG_ERR_UNSAFE, "symbolic link");
    free(target);
    free(path);
    free(t);
    pg_store_free(s);
}
END_TEST

START_TEST(hostile_symlinked_pulled_dir)
{
    /* In a read-only dir: pulled/ -> a directory with a valid record. */
    ck_assert_int_eq(mkdir(fx.ro, 0700), 0);
    char *elsewhere = tu_sprintf("%s/elsewhere", fx.root);
    ck_assert_int_eq(mkdir(elsewhere, 0700), 0);
    char *t = record_text(PG_API_V1ALPHA1, REF1);
    char *name = record_path(elsewhere, ".", REF1);
    tu_write_file(name, t, -1, 0600);
    char *link = tu_sprintf("%s/pulled", fx.ro);
    ck_assert_int_eq(symlink(elsewhere, link), 0);
    pg_store *s = open_store();
    expect_get(s, REF1, PG_ERR_UNSAFE, "symbolic link");
    pg_store_free(s);
    /* In the writable dir: open fails? No, the subdir is re-checked per operation. */
    char *pulled = tu_sprintf("%s/pulled", fx.state);
    s = open_store();
    ck_assert_int_eq(rmdir(pulled), 0);
    ck_assert_int_eq(symlink(elsewhere, pulled), 0);
    pg_error err = {0};
    pg_secret sec = {"ns", "n", "u", H_A};
    pg_pull_credentials c = {.secrets = &sec, .n_secrets = 1};
    ck_assert_int_eq(pg_store_record_pulled(s, APP, REF2, &c, &err), PG_ERR_UNSAFE);
    pg_store_free(s);
    free(elsewhere);
    free(t);
    free(name);
    free(link);
    free(pulled);
}
END_TEST

START_TEST(hostile_state_dir)
{
    /* A symlinked or group-writable record directory is refused at open. */
    char *real = tu_sprintf("%s/real", fx.root);
    ck_assert_int_eq(mkdir(real, 0700), 0);
    ck_assert_int_eq(symlink(real, fx.state), 0);
    pg_error err = {0};
    ck_assert_ptr_null(pg_store_open(fx.cfg, NULL, &err));
    ck_assert_int_eq(err.code, PG_ERR_UNSAFE);
    ck_assert_int_eq(unlink(fx.state), 0);
    ck_assert_int_eq(mkdir(fx.state, 0700), 0);
    ck_assert_int_eq(chmod(fx.state, 0770), 0);
    ck_assert_ptr_null(pg_store_open(fx.cfg, NULL, &err));
    ck_assert_int_eq(err.code, PG_ERR_UNSAFE);
    ck_assert_ptr_nonnull(strstr(err.message, "writable by group"));
    ck_assert_int_eq(chmod(fx.state, 0700), 0);
    ck_assert_int_eq(mkdir(fx.ro, 0777), 0);
    ck_assert_int_eq(chmod(fx.ro, 0777), 0);
    ck_assert_ptr_null(pg_store_open(fx.cfg, NULL, &err));
    ck_assert_int_eq(err.code, PG_ERR_UNSAFE);
    free(real);
}
END_TEST

START_TEST(hostile_hard_link)
{
    pg_store *s = open_store();
    char *t = record_text(PG_API_V1ALPHA1, REF1);
    char *path = place_record(fx.state, REF1, t, 0600);
    char *alias = tu_sprintf("%s/alias", fx.root);
    ck_assert_int_eq(link(path, alias), 0);
    expect_get(s, REF1, PG_ERR_UNSAFE, "hard links");
    free(alias);
    free(path);
    free(t);
    pg_store_free(s);
}
END_TEST

START_TEST(hostile_fifo)
{
    pg_store *s = open_store();
    char *path = record_path(fx.state, "pulled", REF1);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    expect_get(s, REF1, PG_ERR_UNSAFE, "not a regular file"); /* and did not block */
    free(path);
    pg_store_free(s);
}
END_TEST

START_TEST(hostile_owner)
{
    if (geteuid() != 0)
        return; /* chown to another uid needs root */
    pg_store *s = open_store();
    char *t = record_text(PG_API_V1ALPHA1, REF1);
    char *path = place_record(fx.state, REF1, t, 0600);
    ck_assert_int_eq(chown(path, 4242, 4242), 0);
    expect_get(s, REF1, PG_ERR_UNSAFE, "owned by uid 4242");
    free(path);
    free(t);
    pg_store_free(s);
}
END_TEST

START_TEST(hostile_mode)
{
    pg_store *s = open_store();
    char *t = record_text(PG_API_V1ALPHA1, REF1);
    free(place_record(fx.state, REF1, t, 0666));
    expect_get(s, REF1, PG_ERR_UNSAFE, "writable by group or others");
    free(t);
    pg_store_free(s);
}
END_TEST

START_TEST(hostile_oversized)
{
    pg_store *s = open_store();
    char *path = record_path(fx.state, "pulled", REF1);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)PG_MAX_RECORD_BYTES + 1), 0);
    close(fd);
    expect_get(s, REF1, PG_ERR_LIMIT, "larger than");
    free(path);
    pg_store_free(s);
}
END_TEST

/*
 * A valid record text of about `size` bytes (never more) for ref: one mapping of APP_NAME whose
 * secrets are namespace-bound placeholders of another tenant (what its pulls leave behind).
 */
static char *record_of_size(const char *ref, size_t size)
{
    char *text = malloc(size + 1);
    ck_assert_ptr_nonnull(text);
    int n =
        snprintf(text, size + 1,
                 "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"%s\",\"lastUpdatedTime\":"
                 "\"2025-01-01T00:00:00Z\",\"imageRef\":\"%s\",\"credentialMapping\":{\"" APP_NAME
                 "\":{\"kubernetesSecrets\":[",
                 PG_API_V1ALPHA1, ref);
    size_t len = (size_t)n;
    const char *tail = "]}}}\n";
    for (unsigned long i = 1;; i++) {
        char item[256];
        int k = snprintf(
            item, sizeof item,
            "%s{\"uid\":\"\",\"namespace\":\"tenant-b\",\"name\":\"" PG_UNVERIFIED_NAME_PREFIX
            "%064lx\",\"credentialHash\":\"%064lx\"}",
            i > 1 ? "," : "", i, i);
        if (len + (size_t)k + strlen(tail) > size)
            break;
        memcpy(text + len, item, (size_t)k);
        len += (size_t)k;
    }
    memcpy(text + len, tail, strlen(tail) + 1);
    return text;
}

/* A pull that would grow a record past what its readers accept is refused: the record as it
 * was stays readable (else every pod that verified with it is denied, and no pull of the
 * image can be recorded any more). */
START_TEST(hostile_record_grown_past_the_bound)
{
    pg_store *s = open_store();
    char *text = record_of_size(REF1, PG_MAX_RECORD_BYTES - 64);
    char *path = place_record(fx.state, REF1, text, 0600);
    expect_get(s, REF1, PG_OK, NULL);
    pg_secret sec = {"tenant-a", "regcred", "uid-1", H_A};
    pg_pull_credentials c = {.secrets = &sec, .n_secrets = 1};
    pg_error err = {0};
    int rc = pg_store_record_pulled(s, APP, REF1, &c, &err);
    ck_assert_msg(rc == PG_ERR_LIMIT, "expected PG_ERR_LIMIT, got %d: %s", rc, err.message);
    expect_get(s, REF1, PG_OK, NULL);
    size_t len = 0;
    char *now = tu_read_file(path, &len);
    ck_assert_str_eq(now, text);
    free(now);
    free(text);
    free(path);
    pg_store_free(s);
}
END_TEST

START_TEST(hostile_content_mismatch)
{
    pg_store *s = open_store();
    /* A valid record of REF2 stored under the name of REF1. */
    char *t = record_text(PG_API_V1ALPHA1, REF2);
    free(place_record(fx.state, REF1, t, 0600));
    expect_get(s, REF1, PG_ERR_CORRUPT, "does not match its file name");
    expect_get(s, REF2, PG_ERR_NOT_FOUND, NULL);
    free(t);
    /* Garbage: corrupt, message names the file. */
    char *path = place_record(fx.state, REF3, "{\"kind\":", 0600);
    char *name = strrchr(path, '/') + 1;
    pg_error err = {0};
    ck_assert_int_eq(get_code(s, REF3, &err), PG_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(err.message, name));
    free(path);
    /* A record that cannot be read is not overwritten by a pull: the pull fails. */
    pg_secret sec = {"ns", "n", "u", H_A};
    pg_pull_credentials c = {.secrets = &sec, .n_secrets = 1};
    ck_assert_int_eq(pg_store_record_pulled(s, APP, REF3, &c, &err), PG_ERR_CORRUPT);
    pg_store_free(s);
}
END_TEST

START_TEST(temp_files_are_not_records)
{
    pg_store *s = open_store();
    char *path = record_path(fx.state, "pulled", REF1);
    char *tmp = tu_sprintf("%s.tmp", path);
    char *t = record_text(PG_API_V1ALPHA1, REF1);
    tu_write_file(tmp, t, -1, 0600);
    expect_get(s, REF1, PG_ERR_NOT_FOUND, NULL);
    list_seen seen = {0};
    ck_assert_int_eq(pg_store_list(s, count_cb, bad_cb, &seen, NULL), PG_OK);
    ck_assert_int_eq(seen.good + seen.bad, 0);
    free(t);
    free(tmp);
    free(path);
    pg_store_free(s);
}
END_TEST

/* The record and its aliases in one write; a bad alias writes nothing. */
START_TEST(record_pulled_with_aliases)
{
    pg_store *s = open_store();
    pg_error err = {0};
    ck_assert_int_eq(pg_store_record_intent(s, APP, &err), PG_OK);
    pg_secret sec = {"team-a", "regcred", "uid-1", H_A};
    pg_pull_credentials c = {.secrets = &sec, .n_secrets = 1};
    const char *bad[] = {"mirror.example.com/app:1", "SHA256:" H_A, NULL};
    ck_assert_int_eq(pg_store_record_pulled_aliases(s, APP, REF1, &c, bad, &err), PG_ERR_INVALID);
    ck_assert_int_eq(get_code(s, REF1, &err), PG_ERR_NOT_FOUND);
    ck_assert(intent_exists(s, APP)); /* the image stays verified */
    char *ref = NULL;
    ck_assert_int_eq(pg_store_resolve_image(s, "mirror.example.com/app:1", &ref, NULL),
                     PG_ERR_NOT_FOUND);
    const char *aliases[] = {"mirror.example.com/app:1",
                             "1111111111111111111111111111111111111111111111111111111111111111",
                             NULL};
    ck_assert_msg(pg_store_record_pulled_aliases(s, APP, REF1, &c, aliases, &err) == PG_OK, "%s",
                  err.message);
    ck_assert_int_eq(get_code(s, REF1, &err), PG_OK);
    ck_assert(!intent_exists(s, APP));
    const char *found[] = {APP, "mirror.example.com/app:1",
                           "1111111111111111111111111111111111111111111111111111111111111111", REF1};
    for (size_t i = 0; i < sizeof found / sizeof found[0]; i++) {
        ck_assert_msg(pg_store_resolve_image(s, found[i], &ref, &err) == PG_OK, "%s: %s", found[i],
                      err.message);
        ck_assert_str_eq(ref, REF1);
        pg_free(ref);
    }
    /* NULL aliases: pg_store_record_pulled. */
    ck_assert_int_eq(pg_store_record_pulled_aliases(s, APP, REF2, &c, NULL, &err), PG_OK);
    ck_assert_int_eq(get_code(s, REF2, &err), PG_OK);
    pg_store_free(s);
}
END_TEST

START_TEST(record_aliases)
{
    pg_store *s = open_store();
    pg_error err = {0};
    char *ref = NULL;
    const char *aliases[] = {"1111111111111111111111111111111111111111111111111111111111111111",
                             "nginx:1.25",
                             "docker.io/library/nginx@sha256:"
                             "4444444444444444444444444444444444444444444444444444444444444444",
                             NULL};
    ck_assert_msg(pg_store_record_aliases(s, REF1, aliases, &err) == PG_OK, "aliases: %s",
                  err.message);
    /* The ID under both spellings, references as written and normalised. */
    const char *found[] = {REF1, "1111111111111111111111111111111111111111111111111111111111111111",
                           "nginx:1.25", "docker.io/library/nginx:1.25",
                           "nginx@sha256:4444444444444444444444444444444444444444444444444444444444444444"};
    for (size_t i = 0; i < sizeof found / sizeof found[0]; i++) {
        ck_assert_msg(pg_store_resolve_image(s, found[i], &ref, &err) == PG_OK, "%s: %s", found[i],
                      err.message);
        ck_assert_str_eq(ref, REF1);
        pg_free(ref);
    }
    char *path = record_path(fx.state, "pullgate-images", "sha256:1111111111111111111111111111111111111111111111111111111111111111");
    ck_assert_uint_eq(mode_of(path), 0600);
    free(path);
    /* One malformed alias: an error and nothing written, not even the valid ones. */
    const char *bad[][2] = {{"redis:7", "SHA256:1111111111111111111111111111111111111111111111111111111111111111"},
                            {"redis:7", "sha256:sha256:1111111111111111111111111111111111111111111111111111111111111111"},
                            {"redis:7", "1111111111111111111111111111111111111111111111111111111111111111 "},
                            {"redis:7", ""},
                            {"redis:7", "redis:7\n"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *v[] = {bad[i][0], bad[i][1], NULL};
        ck_assert_int_eq(pg_store_record_aliases(s, REF2, v, &err), PG_ERR_INVALID);
        ck_assert_int_eq(pg_store_resolve_image(s, "redis:7", &ref, NULL), PG_ERR_NOT_FOUND);
    }
    /* An empty list is a no-op; a read-only store refuses. */
    const char *none[] = {NULL};
    ck_assert_int_eq(pg_store_record_aliases(s, REF2, none, &err), PG_OK);
    ck_assert_int_eq(pg_store_record_aliases(s, "", aliases, &err), PG_ERR_INVALID);
    pg_store_free(s);
    ck_assert_int_eq(mkdir(fx.ro, 0700), 0);
    pg_store *ro = pg_store_open_readonly(fx.cfg, &err);
    ck_assert_ptr_nonnull(ro);
    ck_assert_int_eq(pg_store_record_aliases(ro, REF1, aliases, &err), PG_ERR_INVALID);
    pg_store_free(ro);
}
END_TEST

/* Opening a store without a complete name index marks it complete only when
 * pulled/ holds no record: temporary files do not count, however many (more
 * than one getdents batch), and one record among them does. */
START_TEST(name_index_complete_only_without_records)
{
    for (int with_record = 0; with_record < 2; with_record++) {
        char *pulled = tu_sprintf("%s/pulled", fx.state),
             *names = tu_sprintf("%s/pullgate-names", fx.state);
        ck_assert_int_eq(mkdir(fx.state, 0700), 0);
        ck_assert_int_eq(mkdir(pulled, 0700), 0);
        for (int i = 0; i < 200; i++) {
            char *tmp = tu_sprintf("%s/sha256-%064d.tmp", pulled, i);
            tu_write_file(tmp, "x", -1, 0600);
            free(tmp);
        }
        if (with_record) {
            char *rec = record_path(fx.state, "pulled", REF1);
            tu_write_file(rec, "{}", -1, 0600);
            free(rec);
        }
        pg_store *s = open_store();
        char *marker = tu_sprintf("%s/.complete-2", names);
        ck_assert_int_eq(access(marker, F_OK) == 0, !with_record);
        pg_store_free(s);
        tu_rmrf(fx.state);
        free(marker);
        free(names);
        free(pulled);
    }
}
END_TEST

START_TEST(name_index)
{
    pg_store *s = open_store();
    pg_error err = {0};
    char *marker = tu_sprintf("%s/pullgate-names/.complete-2", fx.state);
    ck_assert_int_eq(access(marker, F_OK), 0); /* a new, empty state dir is complete */
    pulled_with_secret(s, APP, REF1, "team-a");
    pulled_with_secret(s, APP_NAME ":2.0", REF2, "team-a");
    char *names = record_path(fx.state, "pullgate-names", APP_NAME);
    size_t len;
    char *text = tu_read_file(names, &len);
    ck_assert_ptr_nonnull(text);
    char f1[7 + PG_HASH_HEX_LEN + 1], f2[7 + PG_HASH_HEX_LEN + 1];
    pg_record_file_name(REF1, f1, NULL);
    pg_record_file_name(REF2, f2, NULL);
    ck_assert_msg(strstr(text, f1) && strstr(text, f2), "name index: %s", text);
    free(text);
    pg_record **recs = NULL;
    size_t n = 0;
    bool unknown = true;
    ck_assert_int_eq(pg_store_records_mapping(s, APP_NAME, &recs, &n, &unknown, &err), PG_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert(!unknown);
    for (size_t i = 0; i < n; i++)
        pg_record_free(recs[i]);
    free(recs);
    ck_assert_int_eq(pg_store_records_mapping(s, "registry.example.com/other", NULL, &n, &unknown,
                                              &err), PG_OK);
    ck_assert_uint_eq(n, 0);
    /* Prune rebuilds the index from the records that remain (REF1 kept, REF2 pruned). */
    ck_assert_int_eq(unlink(names), 0);
    const char *in_use[] = {REF1, NULL};
    unsigned pruned = 0;
    ck_assert_int_eq(pg_store_prune(s, in_use, 0, &pruned, &err), PG_OK);
    ck_assert_uint_eq(pruned, 1);
    text = tu_read_file(names, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, f1) && !strstr(text, f2), "rebuilt name index: %s", text);
    ck_assert_int_eq(access(marker, F_OK), 0);
    free(text);
    free(names);
    free(marker);
    pg_store_free(s);
}
END_TEST

/* pulled/ of a read-only directory last changed two minutes ago (a cache is written). */
static void age_ro_dir(void)
{
    struct timespec old[2] = {{time(NULL) - 120, 0}, {time(NULL) - 120, 0}};
    char *sub = tu_sprintf("%s/pulled", fx.ro);
    ck_assert_int_eq(utimensat(AT_FDCWD, sub, old, 0), 0);
    free(sub);
}

static char *ro_record(size_t i, char *ref, char *name)
{
    snprintf(ref, 72, "sha256:%064zx", i + 1);
    /* every tenth key as the kubelet writes a Docker Hub image: short */
    if (i % 10 == 0)
        snprintf(name, 128, "docker.io/secretorg/img-%zu", i);
    else
        snprintf(name, 128, "registry.example.com/team-%zu/app-%zu", i % 50, i);
    const char *key = i % 10 == 0 ? name + strlen("docker.io/") : name;
    char *text = tu_sprintf("{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"%s\","
                            "\"lastUpdatedTime\":\"2025-01-01T00:00:00Z\",\"imageRef\":\"%s\","
                            "\"credentialMapping\":{\"%s\":{\"nodePodsAccessible\":true}}}\n",
                            PG_API_V1ALPHA1, ref, key);
    char *path = place_record(fx.ro, ref, text, 0600);
    free(text);
    return path;
}

static size_t count_mapping(pg_store *s, const char *name)
{
    size_t n = 99;
    bool unknown = true;
    pg_error err = {0};
    ck_assert_msg(pg_store_records_mapping(s, name, NULL, &n, &unknown, &err) == PG_OK, "%s",
                  err.message);
    ck_assert(!unknown);
    return n;
}

/* The names cache is searched, not read whole; refreshed as the directory changes;
 * a cache whose size does not match its header is never used. */
START_TEST(name_cache_searched_and_refreshed)
{
    make_ro_dir();
    char ref[72], name[128];
    for (size_t i = 0; i < 500; i++)
        free(ro_record(i, ref, name));
    age_ro_dir();
    pg_store *s = open_store();
    pg_error err = {0};
    ck_assert_int_eq(pg_store_refresh_name_caches(s, &err), PG_OK);
    char *cache = record_path(fx.state, "pullgate-dircache", fx.ro);
    size_t len = 0;
    char *text = tu_read_file(cache, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strncmp(text, "pullgate-dircache 3\n", 20) == 0, "%.40s", text);
    ck_assert_uint_eq(len, 512 + 500 * 64 + 500 * 72);
    free(text);
    for (size_t i = 0; i < 500; i += 37) {
        free(ro_record(i, ref, name)); /* the same file again: names only */
        ck_assert_uint_eq(count_mapping(s, name), 1);
    }
    ck_assert_uint_eq(count_mapping(s, "docker.io/secretorg/img-30"), 1); /* a short key */
    ck_assert_uint_eq(count_mapping(s, "registry.example.com/team-1/app-2"), 0);
    pg_record **recs = NULL;
    size_t n = 0;
    bool unknown = true;
    ck_assert_int_eq(pg_store_records_mapping(s, "registry.example.com/team-3/app-53", &recs, &n,
                                              &unknown, &err),
                     PG_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(pg_record_image_ref(recs[0]),
                     "sha256:"
                     "0000000000000000000000000000000000000000000000000000000000000036");
    pg_record_free(recs[0]);
    free(recs);
    /* The directory changes: a record added, one removed; the next lookup refreshes. */
    char *added = ro_record(500, ref, name);
    char *gone = ro_record(7, ref, name);
    ck_assert_int_eq(unlink(gone), 0);
    age_ro_dir();
    struct stat before, after;
    ck_assert_int_eq(stat(cache, &before), 0);
    ck_assert_uint_eq(count_mapping(s, "docker.io/secretorg/img-500"), 1);
    ck_assert_uint_eq(count_mapping(s, "registry.example.com/team-7/app-7"), 0);
    ck_assert_int_eq(stat(cache, &after), 0);
    ck_assert(before.st_ino != after.st_ino); /* rewritten */
    /* A cache cut short (its header promises more) is not used: rebuilt. */
    ck_assert_int_eq(truncate(cache, 512 + 64), 0);
    ck_assert_uint_eq(count_mapping(s, "registry.example.com/team-3/app-53"), 1);
    ck_assert_int_eq(stat(cache, &after), 0);
    ck_assert_uint_eq((size_t)after.st_size, 512 + 500 * 64 + 500 * 72);
    free(added);
    free(gone);
    free(cache);
    pg_store_free(s);
}
END_TEST

/* The caches are refreshed by pg_store_refresh_name_caches (pullgatectl prune
 * calls it), not by pg_store_prune: pullgate-cri prunes on its writer thread,
 * where a refresh of a large kubelet directory would hold up pulls. */
START_TEST(prune_refreshes_name_caches)
{
    make_ro_dir();
    char ref[72], name[128];
    for (size_t i = 0; i < 20; i++)
        free(ro_record(i, ref, name));
    age_ro_dir();
    pg_store *s = open_store();
    pg_error err = {0};
    char *cache = record_path(fx.state, "pullgate-dircache", fx.ro);
    unsigned pruned = 99;
    ck_assert_int_eq(pg_store_prune(s, NULL, 0, &pruned, &err), PG_OK);
    ck_assert_uint_eq(pruned, 0);
    ck_assert_int_ne(access(cache, F_OK), 0); /* prune itself leaves the caches alone */
    ck_assert_int_eq(pg_store_refresh_name_caches(s, &err), PG_OK);
    struct stat st;
    ck_assert_int_eq(stat(cache, &st), 0);
    ck_assert_uint_eq((size_t)st.st_size, 512 + 20 * 64 + 20 * 72);
    /* The kubelet adds a record: the next refresh rewrites the cache. */
    free(ro_record(20, ref, name));
    age_ro_dir();
    ck_assert_int_eq(pg_store_refresh_name_caches(s, &err), PG_OK);
    struct stat after;
    ck_assert_int_eq(stat(cache, &after), 0);
    ck_assert(after.st_ino != st.st_ino);
    ck_assert_uint_eq((size_t)after.st_size, 512 + 21 * 64 + 21 * 72);
    ck_assert_uint_eq(count_mapping(s, name), 1);
    ck_assert_int_eq(stat(cache, &st), 0);
    ck_assert(after.st_ino == st.st_ino); /* the lookup used it as it was */
    /* Nothing changed: a refresh leaves the file as it is. */
    ck_assert_int_eq(pg_store_refresh_name_caches(s, &err), PG_OK);
    ck_assert_int_eq(stat(cache, &st), 0);
    ck_assert(after.st_ino == st.st_ino);
    free(cache);
    pg_store_free(s);
}
END_TEST

/* A kubelet record replaced by rename with one more mapping (a second image name
 * of the same content): the refreshed cache lists the new name (never "preloaded"). */
START_TEST(name_cache_sees_a_record_replaced)
{
    make_ro_dir();
    char ref[72], name[128];
    for (size_t i = 0; i < 50; i++)
        free(ro_record(i, ref, name));
    age_ro_dir();
    pg_store *s = open_store();
    pg_error err = {0};
    ck_assert_int_eq(pg_store_refresh_name_caches(s, &err), PG_OK);
    const char *other = "registry.example.com/elsewhere/copy";
    ck_assert_uint_eq(count_mapping(s, other), 0);
    char *path = ro_record(21, ref, name);
    char *tmp = tu_sprintf("%s.tmp", path);
    char *text = tu_sprintf("{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"%s\","
                            "\"lastUpdatedTime\":\"2025-01-01T00:00:00Z\",\"imageRef\":\"%s\","
                            "\"credentialMapping\":{\"%s\":{\"nodePodsAccessible\":true},"
                            "\"%s\":{\"nodePodsAccessible\":true}}}\n",
                            PG_API_V1ALPHA1, ref, other, name);
    tu_write_file(tmp, text, -1, 0600);
    ck_assert_int_eq(rename(tmp, path), 0);
    age_ro_dir(); /* even with pulled/'s mtime set back, its ctime moved */
    ck_assert_uint_eq(count_mapping(s, other), 1);
    ck_assert_uint_eq(count_mapping(s, name), 1);
    free(text);
    free(tmp);
    free(path);
    pg_store_free(s);
}
END_TEST

/* A names cache that is not safely ours (group-writable, or another file linked
 * to it) is never believed, even when it is current and says "no record". */
START_TEST(name_cache_not_ours_is_ignored)
{
    make_ro_dir();
    char ref[72], name[128];
    free(ro_record(0, ref, name));
    age_ro_dir();
    pg_store *s = open_store();
    pg_error err = {0};
    ck_assert_int_eq(pg_store_refresh_name_caches(s, &err), PG_OK);
    char *cache = record_path(fx.state, "pullgate-dircache", fx.ro);
    size_t len = 0;
    char *text = tu_read_file(cache, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(len, 512 + 64 + 72);
    /* The same header with no entries: a current, well-formed cache claiming nothing. */
    char *names = strstr(text, "names 1\n");
    ck_assert_ptr_nonnull(names);
    memcpy(names, "names 0\nrecords 0\nunknown 0\n", strlen("names 0\nrecords 0\nunknown 0\n"));
    char *forged_dir = tu_sprintf("%s/forged", fx.root);
    ck_assert_int_eq(mkdir(forged_dir, 0700), 0);
    char *forged = tu_sprintf("%s/cache", forged_dir);
    tu_write_file(forged, text, 512, 0620);
    ck_assert_int_eq(chmod(forged, 0620), 0);
    ck_assert_int_eq(rename(forged, cache), 0);
    ck_assert_uint_eq(count_mapping(s, name), 1); /* group-writable: rebuilt */
    tu_write_file(forged, text, 512, 0600);
    ck_assert_int_eq(unlink(cache), 0);
    ck_assert_int_eq(link(forged, cache), 0);
    ck_assert_uint_eq(count_mapping(s, name), 1); /* two links: rebuilt */
    /* Proof that the forgery is current: made ours, it is believed (same trust as a record). */
    ck_assert_int_eq(rename(forged, cache), 0);
    ck_assert_uint_eq(count_mapping(s, name), 0);
    free(forged);
    free(forged_dir);
    free(text);
    free(cache);
    pg_store_free(s);
}
END_TEST

START_TEST(name_cache_of_read_only_dir)
{
    /* A kubelet directory: its names come from a scan, cached, rescanned when it changes. */
    make_ro_dir();
    char *rec = record_text(PG_API_V1ALPHA1, REF1);
    char *path = place_record(fx.ro, REF1, rec, 0600);
    /* A directory quiet for a while (one changed within the last seconds is never cached). */
    struct timespec old[2] = {{time(NULL) - 120, 0}, {time(NULL) - 120, 0}};
    char *sub = tu_sprintf("%s/pulled", fx.ro);
    ck_assert_int_eq(utimensat(AT_FDCWD, sub, old, 0), 0);
    free(sub);
    sub = tu_sprintf("%s/pulling", fx.ro);
    ck_assert_int_eq(utimensat(AT_FDCWD, sub, old, 0), 0);
    free(sub);
    pg_store *s = open_store();
    pg_error err = {0};
    size_t n = 0;
    bool unknown = false;
    ck_assert_int_eq(pg_store_records_mapping(s, APP_NAME, NULL, &n, &unknown, &err), PG_OK);
    ck_assert_uint_eq(n, 1);
    char *cache = record_path(fx.state, "pullgate-dircache", fx.ro);
    ck_assert_int_eq(access(cache, F_OK), 0);
    ck_assert_int_eq(unlink(path), 0); /* the directory changed: the cache is stale */
    ck_assert_int_eq(pg_store_records_mapping(s, APP_NAME, NULL, &n, &unknown, &err), PG_OK);
    ck_assert_uint_eq(n, 0);
    /* An unreadable record may map any name. */
    tu_write_file(path, "garbage", -1, 0600);
    ck_assert_int_eq(pg_store_records_mapping(s, "registry.example.com/x", NULL, &n, &unknown,
                                              &err), PG_OK);
    ck_assert(unknown);
    free(cache);
    free(rec);
    free(path);
    pg_store_free(s);
}
END_TEST

START_TEST(credential_times)
{
    pg_store *s = open_store();
    pg_error err = {0};
    pulled_with_secret(s, APP, REF1, "team-a");
    pg_record *rec = NULL;
    ck_assert_int_eq(pg_store_get(s, REF1, &rec, &err), PG_OK);
    const pg_rec_mapping *m = pg_record_find(rec, APP_NAME);
    ck_assert_ptr_nonnull(m);
    time_t t = 0;
    ck_assert_int_eq(pg_store_credential_time(s, rec, APP_NAME, &m->secrets[0], NULL, &t, &err),
                     PG_OK);
    ck_assert_msg(t >= time(NULL) - 5 && t <= time(NULL), "time %lld", (long long)t);
    char *side = record_path(fx.state, "pullgate-credtimes", REF1);
    ck_assert_int_eq(access(side, F_OK), 0);
    /* A side file that is not ours fails closed. */
    tu_write_file(side, "{\"imageRef\":\"sha256:other\",\"times\":{}}", -1, 0600);
    ck_assert_int_ne(pg_store_credential_time(s, rec, APP_NAME, &m->secrets[0], NULL, &t, &err),
                     PG_OK);
    free(side);
    pg_record_free(rec);
    pg_store_free(s);
}
END_TEST

START_TEST(intents_under_both_spellings)
{
    pg_store *s = open_store();
    pg_error err = {0};
    ck_assert_int_eq(pg_store_record_intent(s, "nginx:1.25", &err), PG_OK);
    char *short_path = record_path(fx.state, "pulling", "nginx:1.25");
    char *long_path = record_path(fx.state, "pulling", "docker.io/library/nginx:1.25");
    ck_assert_int_eq(access(short_path, F_OK), 0);
    ck_assert_int_eq(access(long_path, F_OK), 0);
    pulled_with_secret(s, "nginx:1.25", REF1, "team-a");
    ck_assert_int_ne(access(short_path, F_OK), 0);
    ck_assert_int_ne(access(long_path, F_OK), 0);
    free(short_path);
    free(long_path);
    pg_store_free(s);
}
END_TEST

static Suite *store_suite(void)
{
    Suite *s = suite_create("store");
    TCase *basic = tcase_create("basic");
    tcase_add_checked_fixture(basic, setup, teardown);
    tcase_add_test(basic, open_creates_layout);
    tcase_add_test(basic, intent_lookup_in_a_symlinked_pulling_dir_fails);
    tcase_add_test(basic, write_then_read);
    tcase_add_test(basic, writes_configured_api_version);
    tcase_add_test(basic, pull_without_credentials_still_records);
    tcase_add_test(basic, list_records_all_dirs);
    tcase_add_test(basic, delete_record);
    tcase_add_test(basic, prune_records);
    tcase_add_test(basic, prune_cleans_what_only_pruned_records_justified);
    tcase_add_test(basic, prune_removes_stale_temps_and_keeps_bad_files);
    tcase_add_test(basic, resolve_image);
    tcase_add_test(basic, record_aliases);
    tcase_add_test(basic, record_pulled_with_aliases);
    tcase_add_test(basic, name_index);
    tcase_add_test(basic, name_cache_of_read_only_dir);
    tcase_add_test(basic, name_cache_searched_and_refreshed);
    tcase_add_test(basic, name_cache_sees_a_record_replaced);
    tcase_add_test(basic, prune_refreshes_name_caches);
    tcase_add_test(basic, name_cache_not_ours_is_ignored);
    tcase_add_test(basic, credential_times);
    tcase_add_test(basic, intents_under_both_spellings);
    tcase_add_test(basic, intent_reference_counting);
    tcase_add_test(basic, intent_in_read_only_dir);
    tcase_add_test(basic, read_only_dirs);
    tcase_add_test(basic, missing_read_only_dir_and_subdirs);
    suite_add_tcase(s, basic);
    TCase *hostile = tcase_create("hostile");
    tcase_add_checked_fixture(hostile, setup, teardown);
    tcase_add_test(hostile, hostile_symlinked_record);
    tcase_add_test(hostile, hostile_symlinked_pulled_dir);
    tcase_add_test(hostile, hostile_state_dir);
    tcase_add_test(hostile, hostile_hard_link);
    tcase_add_test(hostile, hostile_fifo);
    tcase_add_test(hostile, hostile_owner);
    tcase_add_test(hostile, hostile_mode);
    tcase_add_test(hostile, hostile_oversized);
    tcase_add_test(hostile, hostile_record_grown_past_the_bound);
    tcase_add_test(hostile, hostile_content_mismatch);
    tcase_add_test(hostile, temp_files_are_not_records);
    tcase_add_test(hostile, name_index_complete_only_without_records);
    suite_add_tcase(s, hostile);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(store_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
