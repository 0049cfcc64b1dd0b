/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HMAC-SHA-256 over credentials-annotation entries (annotation_mac.h,
 * docs/annotation-hmac.md). The signed text is plain lines so that a producer
 * in any language (a Go webhook, a shell script with openssl) computes the
 * same bytes without a JSON canonicaliser.
 */
#include "annotation_mac.h"
#include "cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct pg_mac_key {
    size_t len;
    unsigned char bytes[PG_MAC_KEY_MAX_BYTES];
    unsigned char seal[PG_SEAL_KEY_BYTES]; /* HKDF-derived: the MAC key is never an AES key */
    EVP_CIPHER *siv;                       /* fetched once per key; shared read-only */
    pg_mac_key *previous; /* the key retired by the last rotation (PATH.previous), or NULL */
};

/* ------------------------------------------------------------------ keys */

/* K_seal = HKDF-SHA256(IKM = the key file's bytes, no salt, info = PG_SEAL_KEY_INFO). */
static int derive_seal_key(pg_mac_key *key, pg_error *err)
{
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *ctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, key->bytes, key->len),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (char *)PG_SEAL_KEY_INFO,
                                          strlen(PG_SEAL_KEY_INFO)),
        OSSL_PARAM_construct_end()};
    int ok = ctx && EVP_KDF_derive(ctx, key->seal, sizeof key->seal, params) == 1;
    EVP_KDF_CTX_free(ctx);
    EVP_KDF_free(kdf);
    if (ok)
        ok = (key->siv = EVP_CIPHER_fetch(NULL, "AES-256-SIV", NULL)) != NULL;
    return ok ? PG_OK : pg_fail(err, PG_ERR_INTERNAL, "HKDF or AES-256-SIV unavailable (OpenSSL)");
}

int pg_mac_key_from_bytes(const void *bytes, size_t len, pg_mac_key **out, pg_error *err)
{
    *out = NULL;
    if (len < PG_MAC_KEY_MIN_BYTES || len > PG_MAC_KEY_MAX_BYTES)
        return pg_fail(err, PG_ERR_INVALID, "HMAC key: %zu bytes, must be %d to %d", len,
                       PG_MAC_KEY_MIN_BYTES, PG_MAC_KEY_MAX_BYTES);
    pg_automackey pg_mac_key *key = calloc(1, sizeof *key);
    if (!key)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    memcpy(key->bytes, bytes, len);
    key->len = len;
    int rc = derive_seal_key(key, err);
    if (rc == PG_OK)
        *out = pg_steal(&key);
    return rc;
}

void pg_mac_key_free(pg_mac_key *key)
{
    if (!key)
        return;
    EVP_CIPHER_free(key->siv);
    pg_mac_key_free(key->previous);
    OPENSSL_cleanse(key, sizeof *key); /* the key must not outlive its use in freed memory */
    free(key);
}

const unsigned char *pg_mac_key_seal_bytes(const pg_mac_key *key) { return key->seal; }
const pg_mac_key *pg_mac_key_previous(const pg_mac_key *key) { return key ? key->previous : NULL; }
EVP_CIPHER *pg_mac_key_siv(const pg_mac_key *key) { return key->siv; }

/*
 * pg_read_file_at(PG_READ_STRICT) refuses symlinks, hard links, foreign owners
 * and group/world-writable files, but a secret must not even be *readable* by
 * others: a key any local user can read lets that user sign annotations.
 * Checked on the path without following a symlink; swapping the file between
 * this check and the read needs write access to its directory (root).
 */
static int check_key_permissions(const char *path, pg_error *err)
{
    struct stat st;
    if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? pg_fail(err, PG_ERR_NOT_FOUND, "HMAC key file %s: not found", path)
                               : pg_fail_errno(err, errno, "HMAC key file %s: stat", path);
    if (S_ISREG(st.st_mode) && (st.st_mode & 077))
        return pg_fail(err, PG_ERR_UNSAFE,
                       "HMAC key file %s: mode %04o gives access to group or others (use 0600 or "
                       "0400)",
                       path, (unsigned)(st.st_mode & 07777));
    return PG_OK;
}

static int load_one(const char *path, pg_mac_key **out, pg_error *err);

/* PATH.previous, when present: read with the same checks; absent is no error. */
static int load_previous(const char *path, pg_mac_key *key, pg_error *err)
{
    char previous[PATH_MAX];
    if ((size_t)snprintf(previous, sizeof previous, "%s%s", path, PG_MAC_PREVIOUS_SUFFIX) >=
        sizeof previous)
        return pg_fail(err, PG_ERR_CONFIG, "hmacKeyFile: path too long");
    int rc = load_one(previous, &key->previous, err);
    if (rc == PG_ERR_NOT_FOUND) /* no rotation in progress */
        return PG_OK;
    if (rc != PG_OK)
        pg_error_prefix(err, "previous key");
    return rc;
}

int pg_mac_key_load(const char *path, pg_mac_key **out, pg_error *err)
{
    int rc = load_one(path, out, err);
    if (rc == PG_OK)
        rc = load_previous(path, *out, err);
    if (rc != PG_OK && *out) {
        pg_mac_key_free(*out);
        *out = NULL;
    }
    return rc;
}

static int load_one(const char *path, pg_mac_key **out, pg_error *err)
{
    *out = NULL;
    if (!path || !*path)
        return pg_fail(err, PG_ERR_CONFIG, "hmacKeyFile: not set");
    int rc = check_key_permissions(path, err);
    if (rc != PG_OK)
        return rc;
    char *buf = NULL;
    size_t len = 0;
    /* One byte over the bound tells "too long" apart from "exactly the maximum". */
    rc = pg_read_file_at(AT_FDCWD, path, PG_MAC_KEY_MAX_BYTES + 1, PG_READ_STRICT, &buf, &len,
                         err);
    if (rc != PG_OK) {
        pg_error_prefix(err, "HMAC key file");
        return rc;
    }
    rc = pg_mac_key_from_bytes(buf, len, out, err);
    OPENSSL_cleanse(buf, len);
    free(buf);
    return rc;
}

int pg_mac_key_file_check(const char *path, pg_error *err)
{
    if (!path || !*path)
        return PG_OK;
    pg_automackey pg_mac_key *key = NULL;
    return pg_mac_key_load(path, &key, err);
}

/* --------------------------------------------------------------- message */

static int cmp_str(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "");
}

static int cmp_cred(const void *pa, const void *pb)
{
    const pg_mac_cred *a = pa, *b = pb;
    int c = cmp_str(a->namespace_, b->namespace_);
    if (!c)
        c = cmp_str(a->name, b->name);
    if (!c)
        c = cmp_str(a->uid, b->uid);
    if (!c)
        c = cmp_str(a->hash, b->hash); /* only ties a list with duplicates: keeps it total */
    return c;
}

/* A tab or newline inside a field would let one credential pose as two. */
static int check_field(const char *s, const char *what, pg_error *err)
{
    if (s && strpbrk(s, "\t\n"))
        return pg_fail(err, PG_ERR_INVALID, "HMAC message: %s contains a tab or newline", what);
    return PG_OK;
}

static int check_cred(const pg_mac_cred *c, pg_error *err)
{
    const char *fields[] = {c->namespace_, c->name, c->uid, c->hash};
    static const char *const what[] = {"a namespace", "a name", "a uid", "a credentialHash"};
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < 4; i++)
        rc = check_field(fields[i], what[i], err);
    return rc;
}

static void put(pg_buf *t, const char *s) { pg_buf_puts(t, s ? s : ""); }

static int sorted_copy(const pg_mac_cred *in, size_t n, pg_mac_cred **out, pg_error *err)
{
    *out = NULL;
    if (n == 0)
        return PG_OK;
    if (!(*out = malloc(n * sizeof **out)))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    memcpy(*out, in, n * sizeof **out);
    qsort(*out, n, sizeof **out, cmp_cred);
    return PG_OK;
}

static void put_lines(pg_buf *t, const pg_mac_cred *creds, size_t n, bool secrets)
{
    for (size_t i = 0; i < n; i++) {
        put(t, secrets ? "secret\t" : "sa\t");
        put(t, creds[i].namespace_);
        put(t, "\t");
        put(t, creds[i].name);
        put(t, "\t");
        put(t, creds[i].uid);
        if (secrets) {
            put(t, "\t");
            put(t, creds[i].hash);
        }
        put(t, "\n");
    }
}

static int check_all(const char *namespace_, const char *image_name, const pg_mac_cred *secrets,
                     size_t n_secrets, const pg_mac_cred *sas, size_t n_sas, pg_error *err)
{
    int rc = check_field(namespace_, "the namespace", err);
    if (rc == PG_OK)
        rc = check_field(image_name, "the image name", err);
    for (size_t i = 0; rc == PG_OK && i < n_secrets; i++)
        rc = check_cred(&secrets[i], err);
    for (size_t i = 0; rc == PG_OK && i < n_sas; i++)
        rc = check_cred(&sas[i], err);
    return rc;
}

int pg_annotation_mac_message(int version, const char *namespace_, const char *image_name,
                                const pg_mac_cred *secrets, size_t n_secrets,
                                const pg_mac_cred *sas, size_t n_sas, char **out, size_t *len,
                                pg_error *err)
{
    if (version != 1 && version != 2)
        return pg_fail(err, PG_ERR_INTERNAL, "HMAC message: unknown version %d", version);
    *out = NULL;
    pg_autofree pg_mac_cred *s_sorted = NULL;
    pg_autofree pg_mac_cred *sa_sorted = NULL;
    int rc = check_all(namespace_, image_name, secrets, n_secrets, sas, n_sas, err);
    if (rc == PG_OK)
        rc = sorted_copy(secrets, n_secrets, &s_sorted, err);
    if (rc == PG_OK)
        rc = sorted_copy(sas, n_sas, &sa_sorted, err);
    if (rc != PG_OK)
        return rc;
    pg_buf t = {0};
    put(&t, version == 2 ? PG_MAC_MESSAGE_HEADER_V2 : PG_MAC_MESSAGE_HEADER);
    put(&t, namespace_);
    put(&t, "\n");
    put(&t, image_name);
    put(&t, "\n");
    put_lines(&t, s_sorted, n_secrets, true);
    put_lines(&t, sa_sorted, n_sas, false);
    if (t.oom) {
        free(t.p);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    *out = t.p;
    if (len)
        *len = t.len;
    return PG_OK;
}

/* ------------------------------------------------------------------- MAC */

/* Lowercase hex HMAC-SHA-256 of message under key. */
static int pg_annotation_mac_hex(const pg_mac_key *key, const char *message, size_t len,
                                 char out[PG_MAC_HEX_LEN + 1], pg_error *err)
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (!key || !message)
        return pg_fail(err, PG_ERR_INTERNAL, "HMAC: no key or message");
    if (!HMAC(EVP_sha256(), key->bytes, (int)key->len, (const unsigned char *)message, len, mac,
              &mac_len) ||
        mac_len * 2 != PG_MAC_HEX_LEN)
        return pg_fail(err, PG_ERR_INTERNAL, "HMAC-SHA-256 failed (OpenSSL)");
    pg_hex_encode(mac, mac_len, out);
    OPENSSL_cleanse(mac, sizeof mac);
    return PG_OK;
}

/* ------------------------------------------------------- annotation entries */

int pg_annotation_entry_version(const json_t *entry)
{
    size_t i;
    const json_t *item;
    json_array_foreach(json_object_get(entry, "kubernetesSecrets"), i, item)
    {
        if (json_object_get(item, PG_SEALED_FIELD))
            return 2;
    }
    return 1;
}

/* Borrowed views of a credential list; items must be objects of strings. A secret's
 * signed value is its sealedHashes text, "" when it has none (coordinates only): a clear
 * credentialHash or authHash is never signed, so a keyed reader never takes one (the
 * keyed form seals them; docs/annotation-hmac.md). */
static int creds_of(const json_t *list, bool secrets, pg_mac_cred **out, size_t *n,
                    pg_error *err)
{
    *out = NULL;
    *n = 0;
    if (!list)
        return PG_OK;
    if (!json_is_array(list))
        return pg_fail(err, PG_ERR_INVALID, "HMAC: a credential list is not an array");
    size_t count = json_array_size(list);
    if (count && !(*out = calloc(count, sizeof **out)))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < count; i++) {
        const json_t *item = json_array_get(list, i);
        pg_mac_cred *c = &(*out)[i];
        c->namespace_ = json_string_value(json_object_get(item, "namespace"));
        c->name = json_string_value(json_object_get(item, "name"));
        c->uid = json_string_value(json_object_get(item, "uid"));
        c->hash = secrets ? json_string_value(json_object_get(item, PG_SEALED_FIELD)) : NULL;
        if (secrets && !c->hash)
            c->hash = "";
        if (!c->namespace_ || !c->name || !c->uid)
            rc = pg_fail(err, PG_ERR_INVALID, "HMAC: credential %zu lacks a string field", i);
        else if (secrets && (json_object_get(item, "credentialHash") ||
                             json_object_get(item, "authHash")))
            rc = pg_fail(err, PG_ERR_INVALID,
                         "HMAC: credential %zu carries a clear hash (a keyed entry seals it)", i);
    }
    if (rc != PG_OK) {
        free(*out);
        *out = NULL;
        return rc;
    }
    *n = count;
    return PG_OK;
}

int pg_annotation_mac_of_entry(const pg_mac_key *key, const char *namespace_,
                               const char *image_name, const json_t *entry,
                               char out[PG_MAC_HEX_LEN + 1], pg_error *err)
{
    if (!json_is_object(entry))
        return pg_fail(err, PG_ERR_INVALID, "HMAC: entry is not an object");
    pg_autofree pg_mac_cred *secrets = NULL;
    pg_autofree pg_mac_cred *sas = NULL;
    size_t n_secrets = 0, n_sas = 0;
    pg_autofree char *message = NULL;
    size_t len = 0;
    int version = pg_annotation_entry_version(entry);
    int rc = creds_of(json_object_get(entry, "kubernetesSecrets"), true, &secrets, &n_secrets,
                      err);
    if (rc == PG_OK)
        rc = creds_of(json_object_get(entry, "kubernetesServiceAccounts"), false, &sas, &n_sas,
                      err);
    if (rc == PG_OK)
        rc = pg_annotation_mac_message(version, namespace_, image_name, secrets, n_secrets, sas,
                                         n_sas, &message, &len, err);
    if (rc == PG_OK)
        rc = pg_annotation_mac_hex(key, message, len, out, err);
    return rc;
}

int pg_annotation_mac_verify_entry(const pg_mac_key *key, const char *namespace_,
                                   const char *image_name, const json_t *entry, pg_error *err)
{
    const json_t *given = json_object_get(entry, PG_MAC_FIELD);
    if (!given)
        return pg_fail(err, PG_ERR_UNSAFE, "entry for %.256s has no \"hmac\"", image_name);
    const char *hex = json_string_value(given);
    if (!hex || !pg_is_lower_hex(hex, PG_MAC_HEX_LEN))
        return pg_fail(err, PG_ERR_UNSAFE,
                       "entry for %.256s: \"hmac\" is not 64 lowercase hex digits", image_name);
    char expected[PG_MAC_HEX_LEN + 1];
    int rc = pg_annotation_mac_of_entry(key, namespace_, image_name, entry, expected, err);
    if (rc == PG_ERR_INVALID) /* unsignable content (a tab in a field): cannot be genuine */
        return PG_ERR_UNSAFE;
    if (rc != PG_OK)
        return rc;
    /* Constant time: a timing oracle must not reveal how much of a forged MAC was right. */
    bool equal = CRYPTO_memcmp(expected, hex, PG_MAC_HEX_LEN) == 0;
    OPENSSL_cleanse(expected, sizeof expected);
    if (!equal)
        return pg_fail(err, PG_ERR_UNSAFE,
                       "entry for %.256s: \"hmac\" does not verify for namespace %.64s",
                       image_name, namespace_ ? namespace_ : "");
    return PG_OK;
}
