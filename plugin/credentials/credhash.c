/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kubelet's credentialHash (the dockerconfigjson keyring that picks which
 * secret entries apply to an image is keyring.c; the Go behaviour both rely
 * on is gocompat.c).
 *
 * credentialHash = hex SHA-256 of Go's json.Marshal(AuthConfig{Username,
 * Password, Email}) (k8s pkg/credentialprovider). Every field is `omitempty`,
 * so the bytes are {"username":..,"password":..,"email":..} minus empty
 * fields, with encoding/json's string escaping (Go >= 1.22, which every
 * kubelet with KEP-2535 is built with).
 */
#include "credhash.h"
#include "gocompat.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void go_json_field(pg_buf *b, bool *first, const char *key, const char *v, size_t n)
{
    if (n == 0)
        return; /* omitempty */
    pg_buf_puts(b, *first ? "\"" : ",\"");
    pg_buf_puts(b, key);
    pg_buf_puts(b, "\":");
    pg_go_json_string(b, v, n);
    *first = false;
}

int pg_cred_hash(const pg_cred *c, char out[PG_HASH_HEX_LEN + 1], pg_error *err)
{
    pg_buf b = {.wipe = true}; /* the marshalled JSON holds the password */
    bool first = true;
    pg_buf_append(&b, "{", 1);
    go_json_field(&b, &first, "username", c->user, c->user_len);
    go_json_field(&b, &first, "password", c->pass, c->pass_len);
    go_json_field(&b, &first, "email", c->email, c->email_len);
    pg_buf_append(&b, "}", 1);
    int rc =
        b.oom ? pg_fail(err, PG_ERR_NOMEM, "out of memory") : pg_sha256_hex(b.p, b.len, out, err);
    pg_buf_wipe_free(&b);
    return rc;
}

/* Length of s, refusing anything longer than a dockerconfig could carry. */
static int bounded_len(const char *s, const char *what, size_t *len, pg_error *err)
{
    *len = s ? strnlen(s, PG_MAX_DOCKERCONFIG_BYTES + 1) : 0;
    if (*len > PG_MAX_DOCKERCONFIG_BYTES)
        return pg_fail(err, PG_ERR_LIMIT, "%s longer than %u bytes", what,
                       PG_MAX_DOCKERCONFIG_BYTES);
    return PG_OK;
}

PG_API int pg_credential_hash(const char *username, const char *password, const char *email,
                              char out[PG_HASH_HEX_LEN + 1], pg_error *err)
{
    if (!out)
        return pg_fail(err, PG_ERR_INVALID, "no output buffer");
    pg_cred c = {username ? username : "", password ? password : "", email ? email : "", 0, 0, 0};
    int rc = bounded_len(username, "username", &c.user_len, err);
    if (rc == PG_OK)
        rc = bounded_len(password, "password", &c.pass_len, err);
    if (rc == PG_OK)
        rc = bounded_len(email, "email", &c.email_len, err);
    return rc == PG_OK ? pg_cred_hash(&c, out, err) : rc;
}
