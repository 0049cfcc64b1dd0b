/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sealed credential hashes (annotation_seal.h): AES-256-SIV from OpenSSL's
 * default provider over the two raw hashes, base64url without padding.
 */
#include "annotation_seal.h"
#include "gocompat.h"

#include <openssl/crypto.h>
#include <string.h>

#define TAG_BYTES 16
#define PLAIN_BYTES (2 * 32)

/* ------------------------------------------------------------- base64url */

bool pg_sealed_text_valid(const char *s)
{
    if (!s || strnlen(s, PG_SEALED_LEN + 1) != PG_SEALED_LEN)
        return false;
    for (size_t i = 0; i < PG_SEALED_LEN; i++)
        if (pg_go_base64_value((unsigned char)s[i], true) < 0)
            return false;
    /* 107 characters carry 642 bits for 640: the last two must be zero (one spelling). */
    return (pg_go_base64_value((unsigned char)s[PG_SEALED_LEN - 1], true) & 3) == 0;
}

static void encode(const unsigned char raw[PG_SEALED_RAW_BYTES], char out[PG_SEALED_LEN + 1])
{
    char padded[4 * ((PG_SEALED_RAW_BYTES + 2) / 3) + 1];
    EVP_EncodeBlock((unsigned char *)padded, raw, PG_SEALED_RAW_BYTES);
    for (size_t i = 0; i < PG_SEALED_LEN; i++)
        out[i] = padded[i] == '+' ? '-' : padded[i] == '/' ? '_' : padded[i];
    out[PG_SEALED_LEN] = '\0';
}

static bool decode(const char *text, unsigned char raw[PG_SEALED_RAW_BYTES])
{
    if (!pg_sealed_text_valid(text))
        return false;
    unsigned char padded[PG_SEALED_LEN + 1], bytes[PG_SEALED_RAW_BYTES + 1];
    for (size_t i = 0; i < PG_SEALED_LEN; i++)
        padded[i] = text[i] == '-' ? '+' : text[i] == '_' ? '/' : (unsigned char)text[i];
    padded[PG_SEALED_LEN] = '=';
    /* EVP_DecodeBlock counts the '=' as one (zero) byte: 81 bytes, the last dropped. */
    if (EVP_DecodeBlock(bytes, padded, PG_SEALED_LEN + 1) != PG_SEALED_RAW_BYTES + 1)
        return false;
    memcpy(raw, bytes, PG_SEALED_RAW_BYTES);
    return true;
}

/* ------------------------------------------------------- associated data */

static int associated_data(const char *ns, const char *name, const char *uid, pg_buf *ad,
                           pg_error *err)
{
    const char *fields[] = {ns, name, uid};
    pg_buf_puts(ad, PG_SEAL_AD_HEADER);
    for (size_t i = 0; i < 3; i++) {
        if (!fields[i] || strchr(fields[i], '\n'))
            return pg_fail(err, PG_ERR_INVALID, "sealed hashes: a namespace, name or uid is "
                                                "missing or holds a newline");
        pg_buf_puts(ad, fields[i]);
        pg_buf_puts(ad, "\n");
    }
    return ad->oom ? pg_fail(err, PG_ERR_NOMEM, "out of memory") : PG_OK;
}

static bool hex_to_raw(const char *hex, unsigned char raw[32])
{
    if (!pg_is_hex64(hex))
        return false;
    for (size_t i = 0; i < 32; i++)
        raw[i] = (unsigned char)(pg_hex_value((unsigned char)hex[2 * i]) << 4 |
                                 pg_hex_value((unsigned char)hex[2 * i + 1]));
    return true;
}

/* ------------------------------------------------------------------ SIV */

/* One AES-256-SIV pass; encrypting fills tag, decrypting checks it. 1 on success. */
static int siv(const pg_mac_key *key, bool encrypt, const pg_buf *ad, unsigned char tag[TAG_BYTES],
               const unsigned char *in, unsigned char *out)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int len = 0, tail = 0;
    int ok = ctx != NULL;
    if (ok)
        ok = encrypt ? EVP_EncryptInit_ex2(ctx, pg_mac_key_siv(key), pg_mac_key_seal_bytes(key),
                                           NULL, NULL)
                     : EVP_DecryptInit_ex2(ctx, pg_mac_key_siv(key), pg_mac_key_seal_bytes(key),
                                           NULL, NULL);
    if (ok && !encrypt) /* SIV verifies while it decrypts: the tag comes first */
        ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, TAG_BYTES, tag);
    if (ok)
        ok = EVP_CipherUpdate(ctx, NULL, &len, (const unsigned char *)ad->p, (int)ad->len);
    if (ok)
        ok = EVP_CipherUpdate(ctx, out, &len, in, PLAIN_BYTES) && len == PLAIN_BYTES;
    if (ok)
        ok = EVP_CipherFinal_ex(ctx, out + len, &tail) && tail == 0;
    if (ok && encrypt)
        ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, TAG_BYTES, tag);
    EVP_CIPHER_CTX_free(ctx); /* cleanses the key schedule */
    return ok == 1;
}

int pg_seal_hashes(const pg_mac_key *key, const char *ns, const char *name, const char *uid,
                   const char *hash, const char *auth_hash, char out[PG_SEALED_LEN + 1],
                   pg_error *err)
{
    unsigned char plain[PLAIN_BYTES], raw[PG_SEALED_RAW_BYTES];
    if (!key)
        return pg_fail(err, PG_ERR_INTERNAL, "sealed hashes: no key");
    if (!hex_to_raw(hash, plain) || !hex_to_raw(auth_hash, plain + 32))
        return pg_fail(err, PG_ERR_INVALID, "sealed hashes: a hash is not 64 lowercase hex");
    pg_buf ad = {0};
    int rc = associated_data(ns, name, uid, &ad, err);
    if (rc == PG_OK && !siv(key, true, &ad, raw, plain, raw + TAG_BYTES))
        rc = pg_fail(err, PG_ERR_INTERNAL, "AES-256-SIV failed (OpenSSL)");
    if (rc == PG_OK)
        encode(raw, out);
    OPENSSL_cleanse(plain, sizeof plain);
    free(ad.p);
    return rc;
}

int pg_unseal_hashes(const pg_mac_key *key, const char *ns, const char *name, const char *uid,
                     const char *sealed, char hash[PG_HASH_HEX_LEN + 1],
                     char auth_hash[PG_HASH_HEX_LEN + 1], pg_error *err)
{
    unsigned char raw[PG_SEALED_RAW_BYTES], plain[PLAIN_BYTES];
    if (!key)
        return pg_fail(err, PG_ERR_INTERNAL, "sealed hashes: no key");
    if (!decode(sealed, raw))
        return pg_fail(err, PG_ERR_UNSAFE, "sealed hashes: not %d base64url characters",
                       PG_SEALED_LEN);
    pg_buf ad = {0};
    int rc = associated_data(ns, name, uid, &ad, err);
    if (rc == PG_ERR_INVALID)
        rc = PG_ERR_UNSAFE; /* a field no producer could seal for: cannot be genuine */
    if (rc == PG_OK && !siv(key, false, &ad, raw, raw + TAG_BYTES, plain))
        rc = pg_fail(err, PG_ERR_UNSAFE,
                     "sealed hashes do not open for this secret with this node's key");
    if (rc == PG_OK) {
        pg_hex_encode(plain, 32, hash);
        pg_hex_encode(plain + 32, 32, auth_hash);
    }
    OPENSSL_cleanse(plain, sizeof plain);
    free(ad.p);
    return rc;
}
