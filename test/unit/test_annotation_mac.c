/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Namespace-bound annotations (docs/annotation-hmac.md): known-answer tests whose expected
 * MACs are computed here, independently, with OpenSSL's HMAC() over the documented texts
 * (an entry with sealed hashes, and one holding no hash as release 1.0.0 signs it);
 * tampering with each field breaks it; a wrong key breaks it; a clear hash is never
 * signed; key file rules; and through pg_decide: a keyed annotation allows in its
 * namespace, a replay into another namespace (namespace fields rewritten) is denied with
 * PG_REASON_ANNOTATION_SIGNATURE, and without hmacKeyFile the clear form is read.
 */
#include "annotation_mac.h"
#include "annotation_seal.h"
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HASH_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HASH_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
/* sealedHashes texts as the MAC sees them: any string (opening them is annotation_seal's). */
#define SEAL_A "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define SEAL_B "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
#define APP "registry.example.com/team-a/app"
#define IMAGE APP ":1.0"
#define REF "sha256:1111111111111111111111111111111111111111111111111111111111111111"

/* The key of the documented example: bytes 0x00..0x1f. */
static void example_key_bytes(unsigned char key[32])
{
    for (int i = 0; i < 32; i++)
        key[i] = (unsigned char)i;
}

static pg_mac_key *example_key(void)
{
    unsigned char bytes[32];
    example_key_bytes(bytes);
    pg_mac_key *key = NULL;
    pg_error err = {0};
    ck_assert_int_eq(pg_mac_key_from_bytes(bytes, sizeof bytes, &key, &err), PG_OK);
    return key;
}

/* Independent reference: OpenSSL HMAC over the text exactly as documented. */
static void reference_mac(const unsigned char *key, size_t key_len, const char *text,
                          char out[65])
{
    unsigned char mac[32];
    unsigned int len = 0;
    ck_assert_ptr_nonnull(HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)text,
                               strlen(text), mac, &len));
    ck_assert_uint_eq(len, 32);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

/* Two secrets and two service accounts, deliberately out of order. */
#define ENTRY_JSON                                                                             \
    "{\"kubernetesSecrets\":["                                                                 \
    "{\"namespace\":\"team-a\",\"name\":\"zeta\",\"uid\":\"u2\",\"sealedHashes\":\"" SEAL_B    \
    "\"},"                                                                                     \
    "{\"namespace\":\"team-a\",\"name\":\"regcred\",\"uid\":\"u1\",\"sealedHashes\":\"" SEAL_A \
    "\"}],"                                                                                    \
    "\"kubernetesServiceAccounts\":["                                                          \
    "{\"namespace\":\"team-a\",\"name\":\"default\",\"uid\":\"s2\"},"                          \
    "{\"namespace\":\"team-a\",\"name\":\"builder\",\"uid\":\"s1\"}]}"

#define DOCUMENTED_TEXT                                                                        \
    "pullgate-annotation-v2\n"                                                                 \
    "team-a\n" APP "\n"                                                                        \
    "secret\tteam-a\tregcred\tu1\t" SEAL_A "\n"                                                \
    "secret\tteam-a\tzeta\tu2\t" SEAL_B "\n"                                                   \
    "sa\tteam-a\tbuilder\ts1\n"                                                                \
    "sa\tteam-a\tdefault\ts2\n"

/* An entry holding no hash (the pod's service account, a secret's coordinates): the
 * header release 1.0.0's keyed producer signs it with, which a node still reads. */
#define HASHLESS_JSON                                                                          \
    "{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"regcred\",\"uid\":\"u1\"}],"   \
    "\"kubernetesServiceAccounts\":[{\"namespace\":\"team-a\",\"name\":\"default\",\"uid\":\"s2\"}]}"
#define HASHLESS_TEXT                                                                          \
    "pullgate-annotation-v1\nteam-a\n" APP "\nsecret\tteam-a\tregcred\tu1\t\n"                 \
    "sa\tteam-a\tdefault\ts2\n"

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    ck_assert_msg(j != NULL, "%s", je.text);
    return j;
}

static void mac_of(const pg_mac_key *key, const char *ns, const char *name, const json_t *entry,
                   char out[65])
{
    pg_error err = {0};
    ck_assert_msg(pg_annotation_mac_of_entry(key, ns, name, entry, out, &err) == PG_OK, "%s",
                  err.message);
}

static void expect_known_answer(const char *entry_json, const char *text)
{
    unsigned char bytes[32];
    example_key_bytes(bytes);
    char expected[65], got[65];
    reference_mac(bytes, sizeof bytes, text, expected);
    pg_mac_key *key = example_key();
    json_t *entry = parse(entry_json);
    mac_of(key, "team-a", APP, entry, got);
    ck_assert_str_eq(got, expected);
    json_decref(entry);
    pg_mac_key_free(key);
}

START_TEST(known_answer)
{
    expect_known_answer(ENTRY_JSON, DOCUMENTED_TEXT);
    expect_known_answer(HASHLESS_JSON, HASHLESS_TEXT);
    /* The message builder produces the documented text byte for byte. */
    char *msg = NULL;
    size_t len = 0;
    pg_mac_cred s[] = {{"team-a", "zeta", "u2", SEAL_B}, {"team-a", "regcred", "u1", SEAL_A}};
    pg_mac_cred sa[] = {{"team-a", "default", "s2", NULL}, {"team-a", "builder", "s1", NULL}};
    ck_assert_int_eq(pg_annotation_mac_message(2, "team-a", APP, s, 2, sa, 2, &msg, &len, NULL),
                     PG_OK);
    ck_assert_str_eq(msg, DOCUMENTED_TEXT);
    ck_assert_uint_eq(len, strlen(DOCUMENTED_TEXT));
    free(msg);
}
END_TEST

/* The keyed form seals every hash: an entry holding a clear one has no MAC and never
 * verifies, whatever "hmac" it carries (a pre-1.0.0 signed value, a forgery). */
START_TEST(clear_hashes_are_never_signed)
{
    pg_mac_key *key = example_key();
    static const char *const clear[] = {
        "{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"regcred\",\"uid\":\"u1\","
        "\"credentialHash\":\"" HASH_A "\"}]}",
        "{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"regcred\",\"uid\":\"u1\","
        "\"credentialHash\":\"" HASH_A "\",\"authHash\":\"" HASH_B "\"}]}",
        "{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"regcred\",\"uid\":\"u1\","
        "\"sealedHashes\":\"" SEAL_A "\"},{\"namespace\":\"team-a\",\"name\":\"z\",\"uid\":"
        "\"u2\",\"credentialHash\":\"" HASH_B "\"}]}",
    };
    /* The MAC a producer of the retired clear-hash form computed (v1 header, clear hash). */
    unsigned char bytes[32];
    example_key_bytes(bytes);
    char old_mac[65];
    reference_mac(bytes, sizeof bytes,
                  "pullgate-annotation-v1\nteam-a\n" APP "\nsecret\tteam-a\tregcred\tu1\t" HASH_A
                  "\n",
                  old_mac);
    for (size_t i = 0; i < sizeof clear / sizeof *clear; i++) {
        json_t *entry = parse(clear[i]);
        char mac[65];
        pg_error err = {0};
        ck_assert_int_eq(pg_annotation_mac_of_entry(key, "team-a", APP, entry, mac, &err),
                         PG_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(err.message, "clear hash"));
        json_object_set_new(entry, "hmac", json_string(old_mac));
        ck_assert_int_eq(pg_annotation_mac_verify_entry(key, "team-a", APP, entry, NULL),
                         PG_ERR_UNSAFE);
        json_decref(entry);
    }
    pg_mac_key_free(key);
}
END_TEST

/* Each mutation of the signed entry must change the MAC. */
static const char *const tampered_entries[] = {
    "{\"kubernetesSecrets\":[{\"namespace\":\"team-b\",\"name\":\"regcred\",\"uid\":\"u1\","
    "\"sealedHashes\":\"" SEAL_A "\"}]}",
    "{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"regcreD\",\"uid\":\"u1\","
    "\"sealedHashes\":\"" SEAL_A "\"}]}",
    "{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"regcred\",\"uid\":\"u9\","
    "\"sealedHashes\":\"" SEAL_A "\"}]}",
    "{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"regcred\",\"uid\":\"u1\","
    "\"sealedHashes\":\"" SEAL_B "\"}]}",
    "{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"regcred\",\"uid\":\"u1\"}]}",
    "{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"regcred\",\"uid\":\"u1\","
    "\"sealedHashes\":\"" SEAL_A "\"}],\"kubernetesServiceAccounts\":[{\"namespace\":"
    "\"team-a\",\"name\":\"default\",\"uid\":\"s1\"}]}",
    "{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"regcred\",\"uid\":\"u1\","
    "\"sealedHashes\":\"" SEAL_A "\"},{\"namespace\":\"team-a\",\"name\":\"regcred\","
    "\"uid\":\"u1\",\"sealedHashes\":\"" SEAL_A "\"}]}",
    "{}",
};
#define SIGNED_ENTRY                                                                           \
    "{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"regcred\",\"uid\":\"u1\","   \
    "\"sealedHashes\":\"" SEAL_A "\"}]}"

START_TEST(tampering_breaks_the_mac)
{
    pg_mac_key *key = example_key();
    json_t *entry = parse(SIGNED_ENTRY);
    char good[65], other[65];
    mac_of(key, "team-a", APP, entry, good);
    /* Pod namespace and image name are signed too. */
    mac_of(key, "team-b", APP, entry, other);
    ck_assert_str_ne(good, other);
    mac_of(key, "team-a", "registry.example.com/team-a/other", entry, other);
    ck_assert_str_ne(good, other);
    for (size_t i = 0; i < sizeof tampered_entries / sizeof *tampered_entries; i++) {
        json_t *t = parse(tampered_entries[i]);
        mac_of(key, "team-a", APP, t, other);
        ck_assert_msg(strcmp(good, other) != 0, "mutation %zu kept the MAC", i);
        /* and verification of the tampered entry carrying the good MAC fails */
        json_object_set_new(t, "hmac", json_string(good));
        pg_error err = {0};
        ck_assert_int_eq(pg_annotation_mac_verify_entry(key, "team-a", APP, t, &err),
                         PG_ERR_UNSAFE);
        json_decref(t);
    }
    json_object_set_new(entry, "hmac", json_string(good));
    ck_assert_int_eq(pg_annotation_mac_verify_entry(key, "team-a", APP, entry, NULL), PG_OK);
    json_decref(entry);
    pg_mac_key_free(key);
}
END_TEST

START_TEST(wrong_key_and_malformed_mac)
{
    pg_mac_key *key = example_key(), *other = NULL;
    ck_assert_int_eq(pg_mac_key_from_bytes("0123456789abcdef0123456789abcdefX", 33, &other, NULL),
                     PG_OK);
    json_t *entry = parse(SIGNED_ENTRY);
    char good[65];
    mac_of(key, "team-a", APP, entry, good);
    json_object_set_new(entry, "hmac", json_string(good));
    pg_error err = {0};
    ck_assert_int_eq(pg_annotation_mac_verify_entry(other, "team-a", APP, entry, &err),
                     PG_ERR_UNSAFE);
    ck_assert_ptr_nonnull(strstr(err.message, "does not verify for namespace team-a"));
    const char *bad[] = {"", "ABCDEF", "g", NULL};
    char upper[65];
    for (int i = 0; i < 64; i++)
        upper[i] = (char)(good[i] >= 'a' ? good[i] - 32 : good[i]);
    upper[64] = '\0';
    for (int i = 0; bad[i]; i++) {
        json_object_set_new(entry, "hmac", json_string(bad[i]));
        ck_assert_int_eq(pg_annotation_mac_verify_entry(key, "team-a", APP, entry, NULL),
                         PG_ERR_UNSAFE);
    }
    json_object_set_new(entry, "hmac", json_string(upper));
    ck_assert_int_eq(pg_annotation_mac_verify_entry(key, "team-a", APP, entry, NULL),
                     PG_ERR_UNSAFE);
    json_object_set_new(entry, "hmac", json_integer(1));
    ck_assert_int_eq(pg_annotation_mac_verify_entry(key, "team-a", APP, entry, NULL),
                     PG_ERR_UNSAFE);
    json_object_del(entry, "hmac");
    ck_assert_int_eq(pg_annotation_mac_verify_entry(key, "team-a", APP, entry, NULL),
                     PG_ERR_UNSAFE);
    json_decref(entry);
    pg_mac_key_free(key);
    pg_mac_key_free(other);
}
END_TEST

START_TEST(framing_characters_are_refused)
{
    char *msg = NULL;
    pg_mac_cred tabbed[] = {{"team-a", "reg\tcred", "u1", ""}};
    ck_assert_int_eq(
        pg_annotation_mac_message(2, "team-a", APP, tabbed, 1, NULL, 0, &msg, NULL, NULL),
        PG_ERR_INVALID);
    ck_assert_int_eq(
        pg_annotation_mac_message(1, "team-a\n", APP, NULL, 0, NULL, 0, &msg, NULL, NULL),
        PG_ERR_INVALID);
    ck_assert_ptr_null(msg);
}
END_TEST

/* ------------------------------------------------------------ key files */

static int load_status(const char *path)
{
    pg_mac_key *key = NULL;
    pg_error err = {0};
    int rc = pg_mac_key_load(path, &key, &err);
    ck_assert(rc == PG_OK ? key != NULL : key == NULL);
    pg_mac_key_free(key);
    return rc;
}

START_TEST(key_file_rules)
{
    char *dir = tu_mkdtemp();
    char *path = tu_sprintf("%s/key", dir), *link = tu_sprintf("%s/link", dir);
    char big[1100];
    memset(big, 'k', sizeof big);
    tu_write_file(path, big, 32, 0600);
    ck_assert_int_eq(load_status(path), PG_OK);
    ck_assert_int_eq(chmod(path, 0400), 0);
    ck_assert_int_eq(load_status(path), PG_OK);
    ck_assert_int_eq(chmod(path, 0640), 0); /* readable by the group: refused */
    ck_assert_int_eq(load_status(path), PG_ERR_UNSAFE);
    ck_assert_int_eq(chmod(path, 0604), 0);
    ck_assert_int_eq(load_status(path), PG_ERR_UNSAFE);
    tu_write_file(path, big, 31, 0600); /* too short */
    ck_assert_int_eq(load_status(path), PG_ERR_INVALID);
    tu_write_file(path, big, 1024, 0600);
    ck_assert_int_eq(load_status(path), PG_OK);
    tu_write_file(path, big, 1025, 0600); /* too long */
    ck_assert_int_ne(load_status(path), PG_OK);
    tu_write_file(path, big, 32, 0600);
    ck_assert_int_eq(symlink(path, link), 0);
    ck_assert_int_eq(load_status(link), PG_ERR_UNSAFE);
    char *missing = tu_sprintf("%s/missing", dir);
    ck_assert_int_eq(load_status(missing), PG_ERR_NOT_FOUND);
    tu_rmrf(dir);
    free(missing);
    free(path);
    free(link);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ decisions */

typedef struct env {
    char *root, *state, *key_path;
    pg_config *cfg;
    pg_store *store;
    pg_mac_key *key;
} env;

static void env_init(env *e, bool with_key)
{
    memset(e, 0, sizeof *e);
    e->root = tu_mkdtemp();
    e->state = tu_sprintf("%s/state", e->root);
    e->key_path = tu_sprintf("%s/annotation.key", e->root);
    unsigned char bytes[32];
    example_key_bytes(bytes);
    tu_write_file(e->key_path, (const char *)bytes, sizeof bytes, 0600);
    e->key = example_key();
    pg_error err = {0};
    e->cfg = pg_config_new(&err);
    ck_assert_ptr_nonnull(e->cfg);
    ck_assert_int_eq(pg_config_set(e->cfg, "stateDir", e->state, &err), PG_OK);
    ck_assert_int_eq(pg_config_clear_list(e->cfg, "readOnlyRecordDirs", &err), PG_OK);
    ck_assert_int_eq(pg_config_set(e->cfg, "policy", "AlwaysVerify", &err), PG_OK);
    if (with_key)
        ck_assert_int_eq(pg_config_set(e->cfg, "hmacKeyFile", e->key_path, &err), PG_OK);
    e->store = pg_store_open(e->cfg, NULL, &err);
    ck_assert_msg(e->store != NULL, "%s", err.message);
    /* team-a pulled the image with its secret */
    pg_secret s = {"team-a", "regcred", "uid-a", HASH_A};
    pg_pull_credentials creds = {.secrets = &s, .n_secrets = 1};
    ck_assert_int_eq(pg_store_record_pulled(e->store, IMAGE, REF, &creds, &err), PG_OK);
}

static void env_free(env *e)
{
    pg_store_free(e->store);
    pg_config_free(e->cfg);
    pg_mac_key_free(e->key);
    tu_rmrf(e->root);
    free(e->root);
    free(e->state);
    free(e->key_path);
}

/* The annotation value {"<key>":<entry>}: with sign_ns, the keyed form (the hash sealed for
 * cred_ns's item, the entry signed for sign_ns); without, the unkeyed form (clear hash). */
static char *annotation(const env *e, const char *key_name, const char *cred_ns,
                        const char *sign_ns)
{
    char sealed[PG_SEALED_LEN + 1];
    if (sign_ns)
        ck_assert_int_eq(
            pg_seal_hashes(e->key, cred_ns, "regcred", "uid-a", HASH_A, HASH_A, sealed, NULL),
            PG_OK);
    char *entry_text = tu_sprintf("{\"kubernetesSecrets\":[{\"namespace\":\"%s\",\"name\":"
                                  "\"regcred\",\"uid\":\"uid-a\",\"%s\":\"%s\"}]}",
                                  cred_ns, sign_ns ? "sealedHashes" : "credentialHash",
                                  sign_ns ? sealed : HASH_A);
    json_t *entry = parse(entry_text);
    free(entry_text);
    if (sign_ns) {
        char mac[65];
        char *name = pg_image_name(key_name, NULL);
        ck_assert_ptr_nonnull(name);
        mac_of(e->key, sign_ns, name, entry, mac);
        pg_free(name);
        json_object_set_new(entry, "hmac", json_string(mac));
    }
    json_t *root = json_object();
    json_object_set_new(root, key_name, entry);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

static pg_decision decide(const env *e, const char *ns, const char *credentials)
{
    pg_request req = {.image = IMAGE, .image_ref = REF, .namespace_ = ns,
                      .credentials = credentials};
    pg_decision d;
    pg_decide(e->cfg, e->store, &req, &d);
    return d;
}

START_TEST(signed_annotation_allows_in_its_namespace)
{
    env e;
    env_init(&e, true);
    char *a = annotation(&e, APP, "team-a", "team-a");
    pg_decision d = decide(&e, "team-a", a);
    ck_assert_msg(d.allow && d.reason == PG_REASON_SECRET_MATCH, "%s", d.text);
    free(a);
    env_free(&e);
}
END_TEST

START_TEST(replay_into_another_namespace_is_denied)
{
    env e;
    env_init(&e, true);
    /* Copied verbatim: its credentials name team-a, ignored in team-b anyway. */
    char *a = annotation(&e, APP, "team-a", "team-a");
    pg_decision d = decide(&e, "team-b", a);
    ck_assert_msg(!d.allow, "%s", d.text);
    free(a);
    /* Namespace fields rewritten to team-b: would match by credentialHash without the MAC. */
    a = annotation(&e, APP, "team-b", "team-a");
    d = decide(&e, "team-b", a);
    ck_assert_msg(!d.allow && d.reason == PG_REASON_ANNOTATION_SIGNATURE, "%s [%s]", d.text,
                  pg_reason_name(d.reason));
    ck_assert_ptr_nonnull(strstr(d.text, "team-b"));
    free(a);
    /* Unsigned, or signed with another key: the same denial. */
    a = annotation(&e, APP, "team-a", NULL);
    d = decide(&e, "team-a", a);
    ck_assert_msg(!d.allow && d.reason == PG_REASON_ANNOTATION_SIGNATURE, "%s", d.text);
    free(a);
    env_free(&e);
}
END_TEST

START_TEST(without_key_behaviour_is_unchanged)
{
    env e;
    env_init(&e, false);
    char *a = annotation(&e, APP, "team-a", NULL);
    pg_decision d = decide(&e, "team-a", a);
    ck_assert_msg(d.allow, "%s", d.text);
    free(a);
    /* An hmac field is accepted (and not checked) when no key is configured. */
    char *clear = annotation(&e, APP, "team-a", NULL);
    a = tu_sprintf("%.*s,\"hmac\":\"%064d\"}}", (int)strlen(clear) - 2, clear, 0);
    d = decide(&e, "team-a", a);
    ck_assert_msg(d.allow, "%s: %s", a, d.text);
    free(a);
    free(clear);
    /* The keyed form cannot be opened without the key: it presents nothing, and says why. */
    a = annotation(&e, APP, "team-a", "team-a");
    d = decide(&e, "team-a", a);
    ck_assert_msg(!d.allow && d.reason == PG_REASON_ANNOTATION_SIGNATURE, "%s", d.text);
    free(a);
    /* The replay the MAC exists for: without a key, the credentialHash matches. */
    a = annotation(&e, APP, "team-b", NULL);
    d = decide(&e, "team-b", a);
    ck_assert_msg(d.allow, "documents the attack the HMAC closes: %s", d.text);
    free(a);
    env_free(&e);
}
END_TEST

START_TEST(unusable_key_fails_closed)
{
    env e;
    env_init(&e, true);
    char *a = annotation(&e, APP, "team-a", "team-a");
    ck_assert_int_eq(chmod(e.key_path, 0644), 0);
    pg_decision d = decide(&e, "team-a", a);
    ck_assert_msg(!d.allow && d.reason == PG_REASON_CONFIG_ERROR, "%s", d.text);
    ck_assert_int_eq(unlink(e.key_path), 0);
    d = decide(&e, "team-a", a);
    ck_assert_msg(!d.allow && d.reason == PG_REASON_CONFIG_ERROR, "%s", d.text);
    free(a);
    /* Without an annotation the key is not needed: the decision is the usual one. */
    d = decide(&e, "team-a", NULL);
    ck_assert_msg(!d.allow && d.reason == PG_REASON_NO_CREDENTIALS, "%s", d.text);
    env_free(&e);
}
END_TEST

/*
 * `pullgatectl check-config` asks pg_mac_key_file_check: wherever it fails the hook denies
 * every annotated container (PG_REASON_CONFIG_ERROR), and where it passes the hook uses the key.
 */
START_TEST(key_file_check_agrees_with_the_hook)
{
    env e;
    env_init(&e, true);
    char *a = annotation(&e, APP, "team-a", "team-a");
    pg_error err = {0};
    ck_assert_int_eq(pg_mac_key_file_check("", &err), PG_OK); /* no key configured */
    ck_assert_int_eq(pg_mac_key_file_check(e.key_path, &err), PG_OK);
    pg_decision d = decide(&e, "team-a", a);
    ck_assert_msg(d.allow, "%s", d.text);

    ck_assert_int_eq(chmod(e.key_path, 0640), 0); /* group-readable */
    ck_assert_int_eq(pg_mac_key_file_check(e.key_path, &err), PG_ERR_UNSAFE);
    d = decide(&e, "team-a", a);
    ck_assert_msg(!d.allow && d.reason == PG_REASON_CONFIG_ERROR, "%s", d.text);
    ck_assert_int_eq(chmod(e.key_path, 0600), 0);

    if (geteuid() == 0) { /* not root's (nor the caller's) */
        ck_assert_int_eq(chown(e.key_path, 65534, 65534), 0);
        ck_assert_int_ne(pg_mac_key_file_check(e.key_path, &err), PG_OK);
        d = decide(&e, "team-a", a);
        ck_assert_msg(!d.allow && d.reason == PG_REASON_CONFIG_ERROR, "%s", d.text);
        ck_assert_int_eq(chown(e.key_path, 0, 0), 0);
    }

    ck_assert_int_eq(unlink(e.key_path), 0); /* missing */
    ck_assert_int_eq(pg_mac_key_file_check(e.key_path, &err), PG_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err.message, e.key_path));
    d = decide(&e, "team-a", a);
    ck_assert_msg(!d.allow && d.reason == PG_REASON_CONFIG_ERROR, "%s", d.text);
    free(a);
    env_free(&e);
}
END_TEST

static Suite *annotation_mac_suite(void)
{
    Suite *s = suite_create("annotation_mac");
    TCase *tc = tcase_create("mac");
    tcase_add_test(tc, known_answer);
    tcase_add_test(tc, clear_hashes_are_never_signed);
    tcase_add_test(tc, tampering_breaks_the_mac);
    tcase_add_test(tc, wrong_key_and_malformed_mac);
    tcase_add_test(tc, framing_characters_are_refused);
    tcase_add_test(tc, key_file_rules);
    suite_add_tcase(s, tc);
    TCase *td = tcase_create("decide");
    tcase_add_test(td, signed_annotation_allows_in_its_namespace);
    tcase_add_test(td, replay_into_another_namespace_is_denied);
    tcase_add_test(td, without_key_behaviour_is_unchanged);
    tcase_add_test(td, unusable_key_fails_closed);
    tcase_add_test(td, key_file_check_agrees_with_the_hook);
    suite_add_tcase(s, td);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(annotation_mac_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
