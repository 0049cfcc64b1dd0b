/* SPDX-License-Identifier: Apache-2.0 */
#include "keyfile.h"

#include "files.h"
#include "wlog.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>

int wh_load_key(const char *path, pg_mac_key **out, char *msg, size_t msg_size)
{
    char *bytes;
    size_t len;
    *out = NULL;
    if (wh_read_file(path, PG_MAC_KEY_MAX_BYTES, 1, &bytes, &len, msg, msg_size) != 0)
        return -1;
    pg_error err = {0};
    int rc = pg_mac_key_from_bytes(bytes, len, out, &err);
    if (rc != PG_OK)
        snprintf(msg, msg_size, "%.200s: %.250s", path, err.message);
    OPENSSL_cleanse(bytes, len);
    free(bytes);
    return rc == PG_OK ? 0 : -1;
}

void wh_log_key(const char *level, const char *what, const char *detail)
{
    wh_log(level, what, detail);
}
