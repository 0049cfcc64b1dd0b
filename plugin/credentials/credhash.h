/* SPDX-License-Identifier: Apache-2.0 */
/* The kubelet credential hash over byte strings (credhash.c), for keyring.c. */
#ifndef PULLGATE_CREDHASH_H
#define PULLGATE_CREDHASH_H

#include "internal.h"

/* A credential as byte strings: may hold NUL bytes (decoded from `auth`). */
typedef struct pg_cred {
    const char *user, *pass, *email;
    size_t user_len, pass_len, email_len;
} pg_cred;

/* credentialHash: hex SHA-256 of Go's json.Marshal of {username,password,email}
 * (omitempty). PG_OK, PG_ERR_NOMEM or PG_ERR_INTERNAL. */
int pg_cred_hash(const pg_cred *c, char out[PG_HASH_HEX_LEN + 1], pg_error *err);

#endif
