/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SHA-256 through OpenSSL, apart from util.c so that a program linking only
 * util.c's helpers (the thin pullgate-hook) does not pull libcrypto in.
 */
#include "internal.h"

#include <openssl/evp.h>
#include <string.h>

int pg_sha256_hex(const void *data, size_t len, char out[PG_HASH_HEX_LEN + 1], pg_error *err)
{
    unsigned char md[32];
    unsigned int mdlen = 0;
    if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != sizeof md)
        return pg_fail(err, PG_ERR_INTERNAL, "SHA-256 failed");
    pg_hex_encode(md, sizeof md, out);
    return PG_OK;
}

int pg_record_file_name(const char *s, char out[7 + PG_HASH_HEX_LEN + 1], pg_error *err)
{
    memcpy(out, "sha256-", 7);
    return pg_sha256_hex(s, strlen(s), out + 7, err);
}
