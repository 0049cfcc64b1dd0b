/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Issue 28, the records part: a namespace's fair share of one pulled record, one
 * entry per credential and namespace, and the pod bindings of pullgate-cri
 * (docs/interfaces.md §2, §5 step 8, §10), in plugin/records/record.c and through the store.
 * The record fill of the issue (one namespace, 64 secrets with 253-character names
 * holding one credential, a new long image name per pull) is reproduced with its
 * real numbers.
 */
#include "annotation_mac.h" /* pg_presented_parse_keyed */
#include "engine_testing.h"
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REF "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define H_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define H_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define U1 "7c1f0a52-3d1e-4c3b-9a8e-0d6f5b2c1a11"
#define UUID_LEN 36
#define MAX_NAME 253 /* a Secret's name (a DNS subdomain) */
#define MAX_NS 63    /* a namespace (a DNS label) */
#define MAX_KEY 255  /* an image name (distribution's NameTotalLengthMax) */

/* ------------------------------------------------------------ helpers */

/* prefix, padded with 'x' to exactly len characters; caller frees. */
static char *padded(const char *prefix, size_t len)
{
    size_t n = strlen(prefix);
    ck_assert_uint_le(n, len);
    char *s = malloc(len + 1);
    ck_assert_ptr_nonnull(s);
    memcpy(s, prefix, n);
    memset(s + n, 'x', len - n);
    s[len] = '\0';
    return s;
}

/* A distinct credentialHash per seed. */
static void hash_of(unsigned seed, char out[PG_HASH_HEX_LEN + 1])
{
    char text[32];
    snprintf(text, sizeof text, "credential-%u", seed);
    ck_assert_int_eq(pg_sha256_hex(text, strlen(text), out, NULL), PG_OK);
}

static pg_record *new_record(void)
{
    pg_record *rec = pg_record_new(REF, NULL);
    ck_assert_ptr_nonnull(rec);
    rec->last_updated = 0;
    return rec;
}

static int merge(pg_record *rec, const char *image_name, const pg_secret *s, size_t n,
                 pg_error *err)
{
    pg_pull_credentials c = {.secrets = s, .n_secrets = n};
    return pg_record_merge_pull(rec, image_name, &c, NULL, NULL, err);
}

static void merge_ok(pg_record *rec, const char *image_name, const pg_secret *s, size_t n)
{
    pg_error err = {0};
    ck_assert_msg(merge(rec, image_name, s, n, &err) == PG_OK, "%s", err.message);
}

static size_t serialised_len(const pg_record *rec)
{
    char *text = NULL;
    ck_assert_int_eq(pg_record_serialize(rec, NULL, &text, NULL), PG_OK);
    size_t n = strlen(text) + 1; /* the store ends it with a newline */
    free(text);
    return n;
}

/* A copy through the codec: what the store reads back. */
static pg_record *copy_of(const pg_record *rec)
{
    char *text = NULL;
    ck_assert_int_eq(pg_record_serialize(rec, NULL, &text, NULL), PG_OK);
    pg_record *out = NULL;
    pg_error err = {0};
    ck_assert_msg(pg_record_parse(text, strlen(text), &out, &err) == PG_OK, "%s", err.message);
    free(text);
    return out;
}

static size_t secrets_of_ns(const pg_record *rec, const char *image_name, const char *ns)
{
    const pg_rec_mapping *m = pg_record_find(rec, image_name);
    size_t n = 0;
    for (size_t i = 0; m && i < m->n_secrets; i++)
        n += strcmp(m->secrets[i].namespace_, ns) == 0;
    return n;
}

static bool holds(const pg_record *rec, const char *image_name, const char *ns, const char *name)
{
    const pg_rec_mapping *m = pg_record_find(rec, image_name);
    for (size_t i = 0; m && i < m->n_secrets; i++)
        if (strcmp(m->secrets[i].namespace_, ns) == 0 && strcmp(m->secrets[i].name, name) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------------ pod bindings */

START_TEST(pod_binding_matches_only_its_pod)
{
    pg_pod_cred b = {"team-a", PG_POD_BINDING_PREFIX U1, "", "", NULL};
    ck_assert(pg_pod_cred_is_pod_binding(&b));
    ck_assert(pg_pod_binding_matches("team-a", U1, &b));
    ck_assert(!pg_pod_binding_matches("team-a", "2b9e4d07-8f61-4a5c-b3d2-6e1f0c9a7b22", &b));
    ck_assert(!pg_pod_binding_matches("team-b", U1, &b));
    ck_assert(!pg_pod_binding_matches("team-a", NULL, &b));
    ck_assert(!pg_pod_binding_matches(NULL, U1, &b));
    ck_assert(!pg_pod_binding_matches("team-a", "", &b));
    /* With a uid or a hash it is a secret like any other, never a binding. */
    pg_pod_cred with_uid = {"team-a", PG_POD_BINDING_PREFIX U1, U1, "", NULL};
    pg_pod_cred with_hash = {"team-a", PG_POD_BINDING_PREFIX U1, "", H_A, NULL};
    pg_pod_cred bad_uid = {"team-a", PG_POD_BINDING_PREFIX "a/b", "", "", NULL};
    ck_assert(!pg_pod_cred_is_pod_binding(&with_uid));
    ck_assert(!pg_pod_cred_is_pod_binding(&with_hash));
    ck_assert(!pg_pod_cred_is_pod_binding(&bad_uid));
    ck_assert(!pg_pod_binding_matches("team-a", U1, &with_uid));
    /* Whatever a presented item carries, it never matches a binding. */
    pg_pod_cred presented[] = {
        {"team-a", PG_POD_BINDING_PREFIX U1, U1, "", ""},
        {"team-a", PG_POD_BINDING_PREFIX U1, "x", H_A, H_A},
        {"team-a", PG_POD_BINDING_PREFIX U1, "", "", ""},
    };
    for (size_t i = 0; i < sizeof presented / sizeof presented[0]; i++)
        ck_assert(!pg_pod_cred_matches(&presented[i], &b));
}
END_TEST

START_TEST(pod_uid_syntax)
{
    ck_assert(pg_pod_uid_valid(U1));
    ck_assert(pg_pod_uid_valid("0123456789abcdef0123456789abcdef")); /* a static pod's hash */
    ck_assert(pg_pod_uid_valid("A.b_c-9"));
    char *longest = padded("u", PG_POD_UID_MAX), *too_long = padded("u", PG_POD_UID_MAX + 1);
    ck_assert(pg_pod_uid_valid(longest));
    ck_assert(!pg_pod_uid_valid(too_long));
    free(longest);
    free(too_long);
    const char *bad[] = {"", "a/b", "a:b", "a b", "a\nb", "pod\x1f", "é"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(!pg_pod_uid_valid(bad[i]), "%s", bad[i]);
    ck_assert(!pg_pod_uid_valid(NULL));
}
END_TEST

/*
 * The rollback promise: pullgate 1.0.0 reads a binding as an ordinary secret, matched by
 * the kubelet's rule only: the same non-empty hash, or the same (namespace, name, uid).
 * Its hash is empty, and no annotation item can have an empty uid (the parse refuses it),
 * so 1.0.0 grants nothing from it.
 */
START_TEST(old_reader_grants_nothing_from_a_binding)
{
    const char *item =
        "{\"r.example/app\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\""
        PG_POD_BINDING_PREFIX U1 "\",\"uid\":\"\"}]}}";
    pg_presented *p = NULL;
    pg_error err = {0};
    ck_assert_int_eq(pg_presented_parse_keyed(item, strlen(item), "team-a", NULL, &p, &err),
                     PG_ERR_INVALID);
    ck_assert_ptr_null(p);
    pg_pod_cred b = {"team-a", PG_POD_BINDING_PREFIX U1, "", "", NULL};
    pg_pod_cred empty = {"team-a", "regcred", "u", "", ""};
    ck_assert(!pg_pod_cred_same_hash(&empty, &b));
}
END_TEST

/* ------------------------------------------------------------ one entry per credential */

START_TEST(one_entry_per_credential_and_namespace)
{
    pg_record *rec = new_record();
    /* The issue's pod: 64 secrets with 253-character names, all holding one credential. */
    pg_secret s[64];
    char *names[64];
    for (int i = 0; i < 64; i++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "s%02d-", i);
        names[i] = padded(prefix, MAX_NAME);
        s[i] = (pg_secret){"team-b", names[i], U1, H_B};
    }
    merge_ok(rec, "r.example/app", s, 64);
    ck_assert_uint_eq(secrets_of_ns(rec, "r.example/app", "team-b"), 1);
    ck_assert(holds(rec, "r.example/app", "team-b", names[0])); /* the first it names */
    merge_ok(rec, "r.example/app", s + 10, 54);                  /* again: nothing new */
    ck_assert_uint_eq(secrets_of_ns(rec, "r.example/app", "team-b"), 1);
    /* Another namespace holding the same credential has an entry of its own. */
    pg_secret c = {"team-c", "regcred", "uid-c", H_B};
    merge_ok(rec, "r.example/app", &c, 1);
    ck_assert_uint_eq(secrets_of_ns(rec, "r.example/app", "team-c"), 1);
    /* A rotated secret whose new hash the namespace holds already: its old entry goes
     * (the kubelet's newest-hash rule), nothing is added. */
    pg_secret other = {"team-b", "other", "uid-o", H_A};
    merge_ok(rec, "r.example/app", &other, 1);
    ck_assert_uint_eq(secrets_of_ns(rec, "r.example/app", "team-b"), 2);
    other.credential_hash = H_B;
    merge_ok(rec, "r.example/app", &other, 1);
    ck_assert_uint_eq(secrets_of_ns(rec, "r.example/app", "team-b"), 1);
    ck_assert(!holds(rec, "r.example/app", "team-b", "other"));
    /* pullgate-cri's placeholder and binding are not secrets of the namespace: kept apart. */
    pg_secret cri[] = {{"team-b", PG_UNVERIFIED_NAME_PREFIX H_B, "", H_B},
                       {"team-b", PG_POD_BINDING_PREFIX U1, "", ""}};
    merge_ok(rec, "r.example/app", cri, 2);
    ck_assert_uint_eq(secrets_of_ns(rec, "r.example/app", "team-b"), 3);
    /* Secrets without a hash are kept by coordinates, as the kubelet keeps them. */
    pg_secret nohash[] = {{"team-d", "a", "u1", NULL}, {"team-d", "b", "u2", NULL}};
    merge_ok(rec, "r.example/app", nohash, 2);
    ck_assert_uint_eq(secrets_of_ns(rec, "r.example/app", "team-d"), 2);
    for (int i = 0; i < 64; i++)
        free(names[i]);
    pg_record_free(rec);
}
END_TEST

/* ------------------------------------------------------------ the fair share */

/* team-b at exactly PG_SHARE_MAX_ENTRIES distinct credentials under r.example/app. */
static pg_record *namespace_at_entry_bound(void)
{
    pg_record *rec = new_record();
    for (unsigned i = 0; i < PG_SHARE_MAX_ENTRIES; i++) {
        char name[32], hash[PG_HASH_HEX_LEN + 1];
        snprintf(name, sizeof name, "secret-%03u", i);
        hash_of(i, hash);
        pg_secret s = {"team-b", name, "u", hash};
        merge_ok(rec, "r.example/app", &s, 1);
    }
    ck_assert_uint_eq(pg_record_share(rec, "team-b").entries, PG_SHARE_MAX_ENTRIES);
    return rec;
}

static void expect_quota(pg_record *rec, const char *image_name, const pg_secret *s, size_t n,
                         const char *ns)
{
    pg_error err = {0};
    ck_assert_int_eq(merge(rec, image_name, s, n, &err), PG_ERR_QUOTA);
    ck_assert_int_eq(err.code, PG_ERR_QUOTA);
    ck_assert_msg(strstr(err.message, ns) && strstr(err.message, "share") &&
                      strstr(err.message, "not recorded"),
                  "%s", err.message);
}

START_TEST(share_bounds_the_entries_of_one_namespace)
{
    pg_record *full = namespace_at_entry_bound();
    char hash[PG_HASH_HEX_LEN + 1];
    hash_of(1000, hash);
    pg_secret more = {"team-b", "one-more", "u", hash};
    pg_record *rec = copy_of(full);
    expect_quota(rec, "r.example/app", &more, 1, "team-b");
    pg_record_free(rec);
    /* Under another name of the same content: the share is the whole record's. */
    rec = copy_of(full);
    expect_quota(rec, "r.example/other", &more, 1, "team-b");
    pg_record_free(rec);
    /* Nothing of it is charged to another namespace: its first pull is recorded. */
    rec = copy_of(full);
    pg_secret a = {"team-a", "regcred", "uid-a", H_A};
    merge_ok(rec, "r.example/app", &a, 1);
    ck_assert(holds(rec, "r.example/app", "team-a", "regcred"));
    /* A re-pull of what team-b holds, and a rotation of one of its secrets, do not grow it. */
    hash_of(7, hash);
    pg_secret again = {"team-b", "secret-007", "u", hash};
    merge_ok(rec, "r.example/app", &again, 1);
    again.credential_hash = H_B;
    merge_ok(rec, "r.example/app", &again, 1);
    ck_assert_uint_eq(pg_record_share(rec, "team-b").entries, PG_SHARE_MAX_ENTRIES);
    /* A service account counts like a secret. */
    pg_service_account sa = {"team-b", "puller", "sa-uid"};
    pg_pull_credentials sac = {.service_accounts = &sa, .n_service_accounts = 1};
    pg_error err = {0};
    ck_assert_int_eq(pg_record_merge_pull(rec, "r.example/app", &sac, NULL, NULL, &err),
                     PG_ERR_QUOTA);
    pg_record_free(rec);
    pg_record_free(full);
}
END_TEST

START_TEST(share_bounds_the_bytes_of_one_namespace)
{
    /* Longest names, each under a new longest image name: bytes bind before entries. */
    pg_record *rec = new_record();
    char *ns = padded("team-", MAX_NS);
    unsigned recorded = 0;
    for (unsigned i = 0; i < PG_SHARE_MAX_ENTRIES; i++) {
        char prefix[64], hash[PG_HASH_HEX_LEN + 1];
        snprintf(prefix, sizeof prefix, "b.example/%03u-", i);
        char *key = padded(prefix, MAX_KEY), *name = padded(prefix + 10, MAX_NAME);
        hash_of(i, hash);
        pg_secret s = {ns, name, U1, hash};
        pg_record *next = copy_of(rec);
        pg_error err = {0};
        int rc = merge(next, key, &s, 1, &err);
        free(key);
        free(name);
        if (rc == PG_ERR_QUOTA) {
            pg_record_free(next);
            break;
        }
        ck_assert_msg(rc == PG_OK, "%s", err.message);
        pg_record_free(rec);
        rec = next;
        recorded++;
    }
    pg_share_use use = pg_record_share(rec, ns);
    ck_assert_uint_lt(recorded, PG_SHARE_MAX_ENTRIES);
    ck_assert_uint_le(use.bytes, PG_SHARE_MAX_BYTES);
    ck_assert_uint_gt(use.bytes, PG_SHARE_MAX_BYTES - 1024); /* full, give or take one pull */
    ck_assert_uint_le(serialised_len(rec), PG_SHARE_RECORD_SKELETON + use.bytes);
    free(ns);
    pg_record_free(rec);
}
END_TEST

/* When each of team-b's bindings was recorded: the index in its name ("pod-007" -> 7). */
static time_t binding_age(const char *image_name, const pg_pod_cred *secret, void *ud)
{
    (void)image_name;
    (void)ud;
    const char *p = strrchr(secret->name, '-');
    return p ? (time_t)atol(p + 1) : 0;
}

static int merge_timed(pg_record *rec, const pg_secret *s, size_t n, pg_error *err)
{
    pg_pull_credentials c = {.secrets = s, .n_secrets = n};
    return pg_record_merge_pull(rec, "r.example/app", &c, binding_age, NULL, err);
}

START_TEST(share_takes_room_from_the_namespaces_own_oldest_bindings)
{
    pg_record *rec = new_record();
    pg_secret ph = {"team-b", PG_UNVERIFIED_NAME_PREFIX H_B, "", H_B};
    pg_secret other_ns = {"team-c", PG_POD_BINDING_PREFIX "pod-000", "", ""};
    merge_ok(rec, "r.example/app", &other_ns, 1);
    /* A credential provider's pulls: one placeholder, a binding per pod, 99 pods. */
    for (unsigned i = 0; i < PG_SHARE_MAX_ENTRIES - 1; i++) {
        char name[64];
        snprintf(name, sizeof name, PG_POD_BINDING_PREFIX "pod-%03u", 100 + i);
        pg_secret s[] = {ph, {"team-b", name, "", ""}};
        pg_error err = {0};
        ck_assert_msg(merge_timed(rec, s, 2, &err) == PG_OK, "%s", err.message);
    }
    ck_assert_uint_eq(pg_record_share(rec, "team-b").entries, PG_SHARE_MAX_ENTRIES);
    /* The 100th pod: the oldest binding (pod-100) makes room; the puller is bound. */
    pg_secret s[] = {ph, {"team-b", PG_POD_BINDING_PREFIX "pod-900", "", ""}};
    pg_error err = {0};
    ck_assert_msg(merge_timed(rec, s, 2, &err) == PG_OK, "%s", err.message);
    ck_assert(!holds(rec, "r.example/app", "team-b", PG_POD_BINDING_PREFIX "pod-100"));
    ck_assert(holds(rec, "r.example/app", "team-b", PG_POD_BINDING_PREFIX "pod-101"));
    ck_assert(holds(rec, "r.example/app", "team-b", PG_POD_BINDING_PREFIX "pod-900"));
    ck_assert_uint_eq(pg_record_share(rec, "team-b").entries, PG_SHARE_MAX_ENTRIES);
    /* A new credential and a new pod: two more entries, the two oldest bindings go. */
    char hash[PG_HASH_HEX_LEN + 1];
    hash_of(5, hash);
    pg_secret two[] = {{"team-b", "regcred", "uid-r", hash},
                       {"team-b", PG_POD_BINDING_PREFIX "pod-901", "", ""}};
    ck_assert_msg(merge_timed(rec, two, 2, &err) == PG_OK, "%s", err.message);
    ck_assert(!holds(rec, "r.example/app", "team-b", PG_POD_BINDING_PREFIX "pod-101"));
    ck_assert(!holds(rec, "r.example/app", "team-b", PG_POD_BINDING_PREFIX "pod-102"));
    ck_assert(holds(rec, "r.example/app", "team-b", PG_POD_BINDING_PREFIX "pod-103"));
    ck_assert(holds(rec, "r.example/app", "team-b", "regcred"));
    /* Never another namespace's. */
    ck_assert(holds(rec, "r.example/app", "team-c", PG_POD_BINDING_PREFIX "pod-000"));
    pg_record_free(rec);
    /* Only bindings make room: credentials are never given up. */
    rec = namespace_at_entry_bound();
    pg_secret bind = {"team-b", PG_POD_BINDING_PREFIX "pod-1", "", ""};
    expect_quota(rec, "r.example/app", &bind, 1, "team-b");
    pg_record_free(rec);
}
END_TEST

/* A record whose pool holds names without credentials (node-accessible) of
 * MAX_KEY characters, as many as fit in `bytes` of pool; built as text, in one parse. */
static pg_record *record_with_pool(size_t bytes)
{
    size_t per_key = MAX_KEY + 88, n = bytes / per_key;
    size_t cap = 256 + n * (MAX_KEY + 40);
    char *text = malloc(cap), *p = text;
    ck_assert_ptr_nonnull(text);
    p += sprintf(p, "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"" PG_API_V1ALPHA1 "\","
                    "\"lastUpdatedTime\":\"2025-01-01T00:00:00Z\",\"imageRef\":\"" REF "\","
                    "\"credentialMapping\":{");
    for (size_t i = 0; i < n; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "pub.example/%05zu-", i);
        char *key = padded(prefix, MAX_KEY);
        p += sprintf(p, "%s\"%s\":{\"nodePodsAccessible\":true}", i ? "," : "", key);
        free(key);
    }
    p += sprintf(p, "}}");
    pg_record *rec = NULL;
    pg_error err = {0};
    ck_assert_msg(pg_record_parse(text, (size_t)(p - text), &rec, &err) == PG_OK, "%s",
                  err.message);
    free(text);
    ck_assert_uint_le(pg_record_pool_bytes(rec), bytes);
    ck_assert_uint_gt(pg_record_pool_bytes(rec), bytes - per_key);
    return rec;
}

START_TEST(pool_bounds_names_pulled_without_credentials)
{
    pg_record *rec = record_with_pool(PG_SHARE_POOL_BYTES);
    size_t pool = pg_record_pool_bytes(rec);
    printf("share: the pool holds %zu names of %d characters\n", rec->n_maps, MAX_KEY);
    ck_assert_uint_gt(rec->n_maps, 2000); /* room for every legitimate name of one content */
    pg_pull_credentials node = {.node_pods_accessible = 1};
    /* A re-pull of a name it holds does not grow it. */
    char *key = padded("pub.example/00000-", MAX_KEY);
    ck_assert_int_eq(pg_record_merge_pull(rec, key, &node, NULL, NULL, NULL), PG_OK);
    free(key);
    /* A namespace's pull is not charged to it, nor refused by it. */
    pg_secret a = {"team-a", "regcred", "uid-a", H_A};
    merge_ok(rec, "r.example/app", &a, 1);
    ck_assert_uint_eq(pg_record_pool_bytes(rec), pool);
    ck_assert_uint_eq(pg_record_share(rec, "team-a").entries, 1);
    /* A new name pulled without credentials, once the pool is full: refused. */
    pg_record *copy = copy_of(rec);
    pg_error err = {0};
    key = padded("pub.example/new-", MAX_KEY);
    ck_assert_int_eq(pg_record_merge_pull(copy, key, &node, NULL, NULL, &err), PG_ERR_QUOTA);
    ck_assert_ptr_nonnull(strstr(err.message, "without namespace-bound credentials"));
    pg_record_free(copy);
    /* Also when a node-accessible pull would empty a key a namespace holds. */
    copy = copy_of(rec);
    ck_assert_int_eq(pg_record_merge_pull(copy, "r.example/app", &node, NULL, NULL, &err),
                     PG_ERR_QUOTA);
    pg_record_free(copy);
    free(key);
    pg_record_free(rec);
    /* With room left, the same pull is recorded. */
    rec = record_with_pool(PG_SHARE_POOL_BYTES - 2 * (MAX_KEY + 88));
    key = padded("pub.example/new-", MAX_KEY);
    ck_assert_int_eq(pg_record_merge_pull(rec, key, &node, NULL, NULL, &err), PG_OK);
    free(key);
    pg_record_free(rec);
}
END_TEST

/* ------------------------------------------------------------ the arithmetic */

/*
 * What the share charges bounds what the record takes: the serialised record is never
 * larger than its skeleton, the pool and every namespace's charged bytes, whatever the
 * names hold (JSON escapes included).
 */
START_TEST(charges_bound_the_serialised_record)
{
    pg_record *rec = new_record();
    char *long_ns = padded("t", MAX_NS), *long_name = padded("n", MAX_NAME);
    char *long_key = padded("q.example/", MAX_KEY);
    char hash[PG_HASH_HEX_LEN + 1];
    hash_of(1, hash);
    pg_secret s[] = {{"team-a", "regcred", "uid-a", H_A},
                     {"team-a", "with \"quotes\" \\ and \x01 \x1f\n controls", "u\t", hash},
                     {long_ns, long_name, U1, H_B},
                     {"team-b", PG_UNVERIFIED_NAME_PREFIX H_B, "", H_B},
                     {"team-b", PG_POD_BINDING_PREFIX U1, "", ""},
                     {"team-c", "nohash", "u", NULL}};
    merge_ok(rec, "r.example/app", s, 6);
    merge_ok(rec, long_key, s + 1, 3);
    pg_service_account sa = {"team-a", "sa \"x\"", "sa-uid"};
    pg_pull_credentials sac = {.service_accounts = &sa, .n_service_accounts = 1};
    pg_pull_credentials node = {.node_pods_accessible = 1};
    ck_assert_int_eq(pg_record_merge_pull(rec, "r.example/sa", &sac, NULL, NULL, NULL), PG_OK);
    ck_assert_int_eq(pg_record_merge_pull(rec, "pub.example/tool", &node, NULL, NULL, NULL),
                     PG_OK);
    ck_assert_int_eq(pg_record_merge_pull(rec, "pub.example/empty", NULL, NULL, NULL, NULL),
                     PG_OK);
    const char *namespaces[] = {"team-a", long_ns, "team-b", "team-c"};
    size_t charged = PG_SHARE_RECORD_SKELETON + pg_record_pool_bytes(rec);
    for (size_t i = 0; i < 4; i++)
        charged += pg_record_share(rec, namespaces[i]).bytes;
    size_t len = serialised_len(rec);
    ck_assert_msg(len <= charged, "record %zu bytes, charged %zu", len, charged);
    free(long_ns);
    free(long_name);
    free(long_key);
    pg_record_free(rec);
}
END_TEST

/*
 * No namespace can push another's legitimate pull out: with the pool full and 111
 * namespaces at their full share (a hostile composition: huge uids, so that few keys
 * reach the bytes), the record is still under the 8 MiB a reader accepts, and another
 * namespace's first pull, of the longest names, is recorded within it.
 */
#define FILLERS 111
#define BIG_UID 900 /* a hostile uid: few entries and one key reach a share's bytes */

/* Namespace ns's pull of n distinct credentials (seeds from seed) under one name. */
static int fill_pull(pg_record *rec, const char *ns, const char *key, const char *name,
                     const char *uid, size_t n, unsigned seed, pg_error *err)
{
    pg_secret *s = calloc(n, sizeof *s);
    char (*hash)[PG_HASH_HEX_LEN + 1] = calloc(n, sizeof *hash);
    char **names = calloc(n, sizeof *names);
    ck_assert(s && hash && names);
    for (size_t i = 0; i < n; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "n%02zu-", i);
        names[i] = padded(prefix, strlen(name)); /* distinct coordinates, same length */
        hash_of(seed + (unsigned)i, hash[i]);
        s[i] = (pg_secret){ns, names[i], uid, hash[i]};
    }
    int rc = merge(rec, key, s, n, err);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(s);
    free(hash);
    return rc;
}

START_TEST(a_full_house_still_takes_a_new_namespace)
{
    char *name = padded("n", MAX_NAME), *uid = padded("uid-", BIG_UID);
    char *ns0 = padded("ns-000-", MAX_NS), *key0 = padded("f.example/000-", MAX_KEY);
    /* How many such credentials fill one namespace's share (in one pull: a pod may list
     * up to 64 secrets). */
    size_t fit = 64;
    for (;; fit--) {
        pg_record *probe = new_record();
        int rc = fill_pull(probe, ns0, key0, name, uid, fit, 0, NULL);
        pg_record_free(probe);
        if (rc == PG_OK)
            break;
        ck_assert_int_eq(rc, PG_ERR_QUOTA);
    }
    ck_assert_uint_lt(fit, 64);
    pg_record *rec = record_with_pool(PG_SHARE_POOL_BYTES);
    for (unsigned k = 0; k < FILLERS; k++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "ns-%03u-", k);
        char *ns = padded(prefix, MAX_NS);
        snprintf(prefix, sizeof prefix, "f.example/%03u-", k);
        char *key = padded(prefix, MAX_KEY);
        pg_error err = {0};
        ck_assert_msg(fill_pull(rec, ns, key, name, uid, fit, k * 100, &err) == PG_OK, "%s",
                      err.message);
        /* Full: one more credential would not fit. */
        ck_assert_uint_gt(pg_record_share(rec, ns).bytes + 2 * BIG_UID, PG_SHARE_MAX_BYTES);
        free(ns);
        free(key);
    }
    size_t full = serialised_len(rec);
    char *victim_ns = padded("victim-", MAX_NS), *victim_key = padded("v.example/", MAX_KEY);
    pg_secret v = {victim_ns, name, U1, H_A};
    merge_ok(rec, victim_key, &v, 1);
    size_t after = serialised_len(rec);
    printf("share: pool %zu bytes + %u namespaces at their share (%zu credentials each): %zu "
           "bytes; with a new namespace's first pull: %zu of %u\n",
           pg_record_pool_bytes(rec), FILLERS, fit, full, after, PG_MAX_RECORD_BYTES);
    ck_assert_uint_lt(after, PG_MAX_RECORD_BYTES);
    free(victim_ns);
    free(victim_key);
    free(ns0);
    free(key0);
    free(uid);
    free(name);
    pg_record_free(rec);
}
END_TEST

/* ------------------------------------------------------------ through the store */

typedef struct store_env {
    char *root, *state;
    pg_config *cfg;
    pg_store *store;
} store_env;

static void store_env_init(store_env *e)
{
    e->root = tu_mkdtemp();
    e->state = tu_sprintf("%s/state", e->root);
    e->cfg = pg_config_new(NULL);
    ck_assert_ptr_nonnull(e->cfg);
    ck_assert_int_eq(pg_config_set(e->cfg, "stateDir", e->state, NULL), PG_OK);
    ck_assert_int_eq(pg_config_clear_list(e->cfg, "readOnlyRecordDirs", NULL), PG_OK);
    pg_error err = {0};
    e->store = pg_store_open(e->cfg, NULL, &err);
    ck_assert_msg(e->store != NULL, "%s", err.message);
}

static void store_env_free(store_env *e)
{
    pg_store_free(e->store);
    pg_config_free(e->cfg);
    tu_rmrf(e->root);
    free(e->root);
    free(e->state);
}

static long record_file_size(const store_env *e)
{
    char name[7 + PG_HASH_HEX_LEN + 1];
    ck_assert_int_eq(pg_record_file_name(REF, name, NULL), PG_OK);
    char *path = tu_sprintf("%s/pulled/%s", e->state, name);
    struct stat st;
    long size = stat(path, &st) == 0 ? (long)st.st_size : -1;
    free(path);
    return size;
}

static pg_decision decide_in(const store_env *e, const char *image, const char *ns,
                             const char *annotation)
{
    pg_request req = {.image = image, .image_ref = REF, .namespace_ = ns,
                      .credentials = annotation};
    pg_decision d;
    pg_decide(e->cfg, e->store, &req, &d);
    return d;
}

/*
 * The issue's fill: team-b pulls one content under a new long name each time (its own
 * registry), from pods listing 64 secrets of 253-character names that all hold its one
 * valid credential. Before issue 28, 313 such pulls took the record to 8,388,495 bytes and
 * team-a's first pull of the same content was not recorded. Now team-b is refused once
 * its share is used up, long before, and team-a's pull is recorded and its pod runs.
 */
#define ISSUE_PULLS 376

START_TEST(one_namespace_cannot_fill_a_record)
{
    store_env e;
    store_env_init(&e);
    pg_secret s[64];
    char *names[64];
    for (int i = 0; i < 64; i++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "s%02d-", i);
        names[i] = padded(prefix, MAX_NAME);
        s[i] = (pg_secret){"team-b", names[i], U1, H_B};
    }
    pg_pull_credentials creds = {.secrets = s, .n_secrets = 64};
    int pulls = 0, rc = PG_OK;
    pg_error err = {0};
    char *first_image = NULL;
    for (; pulls < ISSUE_PULLS; pulls++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "b.example/%03d-", pulls);
        char *image = padded(prefix, MAX_KEY);
        char *tagged = tu_sprintf("%s:1.0", image);
        free(image);
        rc = pg_store_record_intent(e.store, tagged, &err);
        if (rc == PG_OK)
            rc = pg_store_record_pulled(e.store, tagged, REF, &creds, &err);
        if (!first_image)
            first_image = strdup(tagged);
        free(tagged);
        if (rc != PG_OK)
            break;
        /* What team-b recorded so far is within its share. */
        ck_assert_msg(record_file_size(&e) <= (long)(PG_SHARE_MAX_BYTES + PG_SHARE_RECORD_SKELETON),
                      "after %d pulls of team-b the record is %ld bytes", pulls + 1,
                      record_file_size(&e));
    }
    ck_assert_msg(rc == PG_ERR_QUOTA, "team-b's pull %d: %d %s", pulls + 1, rc, err.message);
    ck_assert_ptr_nonnull(strstr(err.message, "team-b"));
    printf("share: team-b refused at its pull %d of %d (record %ld bytes)\n", pulls + 1,
           ISSUE_PULLS, record_file_size(&e));
    /* team-a's first pull of the same content is recorded; its pod runs. */
    pg_secret a = {"team-a", "regcred", "uid-a", H_A};
    pg_pull_credentials ac = {.secrets = &a, .n_secrets = 1};
    ck_assert_int_eq(pg_store_record_intent(e.store, "a.example/app:1.0", NULL), PG_OK);
    ck_assert_msg(pg_store_record_pulled(e.store, "a.example/app:1.0", REF, &ac, &err) == PG_OK,
                  "team-a: %s", err.message);
    const char *ann_a = "{\"a.example/app\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\","
                        "\"name\":\"regcred\",\"uid\":\"uid-a\",\"credentialHash\":\"" H_A "\"}]}}";
    pg_decision d = decide_in(&e, "a.example/app:1.0", "team-a", ann_a);
    ck_assert_msg(d.allow && d.reason == PG_REASON_SECRET_MATCH, "%s", d.text);
    /* team-b keeps what it recorded: its pods run what it pulled within its share. */
    char *name_b = strndup(first_image, strlen(first_image) - 4);
    char *ann_b = tu_sprintf("{\"%s\":{\"kubernetesSecrets\":[{\"namespace\":\"team-b\","
                             "\"name\":\"%s\",\"uid\":\"" U1 "\",\"credentialHash\":\"" H_B "\"}]}}",
                             name_b, names[63]);
    d = decide_in(&e, first_image, "team-b", ann_b);
    ck_assert_msg(d.allow, "%s", d.text);
    free(ann_b);
    free(name_b);
    free(first_image);
    for (int i = 0; i < 64; i++)
        free(names[i]);
    store_env_free(&e);
}
END_TEST

/* Written by hand: team-b's placeholder and 99 bindings (pods 0000..0098), at its share. */
static void write_full_share(const store_env *e)
{
    size_t cap = 200000;
    char *text = malloc(cap), *p = text;
    ck_assert_ptr_nonnull(text);
    p += sprintf(p, "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"" PG_API_V1ALPHA1 "\","
                    "\"lastUpdatedTime\":\"2025-01-01T00:00:00Z\",\"imageRef\":\"" REF "\","
                    "\"credentialMapping\":{\"r.example/app\":{\"kubernetesSecrets\":[");
    for (unsigned i = 0; i < PG_SHARE_MAX_ENTRIES - 1; i++)
        p += sprintf(p, "{\"uid\":\"\",\"namespace\":\"team-b\",\"name\":\"" PG_POD_BINDING_PREFIX
                        "pod-%04u\",\"credentialHash\":\"\"},", i);
    p += sprintf(p, "{\"uid\":\"\",\"namespace\":\"team-b\",\"name\":\"" PG_UNVERIFIED_NAME_PREFIX
                    H_B "\",\"credentialHash\":\"" H_B "\"}]}}}\n");
    char name[7 + PG_HASH_HEX_LEN + 1];
    ck_assert_int_eq(pg_record_file_name(REF, name, NULL), PG_OK);
    char *path = tu_sprintf("%s/pulled/%s", e->state, name);
    tu_write_file(path, text, -1, 0600);
    free(path);
    free(text);
}

/* Through the store: a namespace at its share gives up its own oldest bindings (by their
 * credential times; the record's time when it has none), and the pod that pulls runs it. */
START_TEST(store_gives_up_a_namespaces_bindings_not_its_pulls)
{
    store_env e;
    store_env_init(&e);
    write_full_share(&e);
    pg_error err = {0};
    for (unsigned i = 0; i < 3; i++) {
        char uid[48];
        snprintf(uid, sizeof uid, "new-%u", i);
        char *binding = tu_sprintf(PG_POD_BINDING_PREFIX "%s", uid);
        pg_secret s[] = {{"team-b", PG_UNVERIFIED_NAME_PREFIX H_B, "", H_B},
                         {"team-b", binding, "", ""}};
        pg_pull_credentials c = {.secrets = s, .n_secrets = 2};
        ck_assert_msg(pg_store_record_pulled(e.store, "r.example/app:1", REF, &c, &err) == PG_OK,
                      "pod %u: %s", i, err.message);
        free(binding);
        pg_request req = {.image = "r.example/app:1", .image_ref = REF, .namespace_ = "team-b"};
        pg_decision d;
        pg_decide_pod(e.cfg, e.store, &req, uid, NULL, NULL, &d);
        ck_assert_msg(d.allow && d.reason == PG_REASON_POD_PULLED, "pod %u: %s", i, d.text);
    }
    pg_record *rec = NULL;
    ck_assert_int_eq(pg_store_get(e.store, REF, &rec, NULL), PG_OK);
    ck_assert_uint_eq(pg_record_share(rec, "team-b").entries, PG_SHARE_MAX_ENTRIES);
    /* The three made room: the hand-written ones (the oldest) went first, in record order;
     * the pods that pulled since stay bound. */
    ck_assert(!holds(rec, "r.example/app", "team-b", PG_POD_BINDING_PREFIX "pod-0000"));
    ck_assert(!holds(rec, "r.example/app", "team-b", PG_POD_BINDING_PREFIX "pod-0002"));
    ck_assert(holds(rec, "r.example/app", "team-b", PG_POD_BINDING_PREFIX "pod-0003"));
    ck_assert(holds(rec, "r.example/app", "team-b", PG_POD_BINDING_PREFIX "new-0"));
    pg_record_free(rec);
    store_env_free(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("record_share");
    TCase *bind = tcase_create("pod bindings");
    tcase_add_test(bind, pod_binding_matches_only_its_pod);
    tcase_add_test(bind, pod_uid_syntax);
    tcase_add_test(bind, old_reader_grants_nothing_from_a_binding);
    suite_add_tcase(s, bind);
    TCase *share = tcase_create("fair share");
    tcase_set_timeout(share, 120);
    tcase_add_test(share, one_entry_per_credential_and_namespace);
    tcase_add_test(share, share_bounds_the_entries_of_one_namespace);
    tcase_add_test(share, share_bounds_the_bytes_of_one_namespace);
    tcase_add_test(share, share_takes_room_from_the_namespaces_own_oldest_bindings);
    tcase_add_test(share, pool_bounds_names_pulled_without_credentials);
    tcase_add_test(share, charges_bound_the_serialised_record);
    tcase_add_test(share, a_full_house_still_takes_a_new_namespace);
    suite_add_tcase(s, share);
    TCase *store = tcase_create("store");
    tcase_set_timeout(store, 300);
    tcase_add_test(store, one_namespace_cannot_fill_a_record);
    tcase_add_test(store, store_gives_up_a_namespaces_bindings_not_its_pulls);
    suite_add_tcase(s, store);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
