/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Image identity. One image has many spellings: its ID with and without
 * "sha256:", the reference the pod wrote, its normalised form, repo digests.
 * A lookup under one spelling that finds nothing proves nothing about the
 * others (docs/design.md "Image identity"), so every module that keys files
 * by an image's identity goes through these helpers.
 */
#include "image_identity.h"

#include <string.h>

static bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

static bool is_hex64(const char *s)
{
    for (size_t i = 0; i < PG_ID_HEX_LEN; i++)
        if (!is_lower_hex(s[i]))
            return false;
    return s[PG_ID_HEX_LEN] == '\0';
}

const char *pg_image_id_hex(const char *s)
{
    if (!s)
        return NULL;
    if (strncmp(s, PG_ID_PREFIX, strlen(PG_ID_PREFIX)) == 0)
        s += strlen(PG_ID_PREFIX);
    return is_hex64(s) ? s : NULL;
}

int pg_identity_check(const char *s, pg_ref **ref_out, pg_error *err)
{
    if (ref_out)
        *ref_out = NULL;
    if (!s || !*s)
        return pg_fail(err, PG_ERR_INVALID, "empty image identity");
    if (pg_image_id_hex(s))
        return PG_OK;
    pg_error why = {0};
    pg_ref *ref = pg_ref_parse(s, &why);
    if (!ref)
        return pg_fail(err, PG_ERR_INVALID,
                       "\"%.200s\" is neither an image ID (sha256:<64 hex>) nor an image reference: %s",
                       s, why.message);
    if (ref_out)
        *ref_out = ref;
    else
        pg_ref_free(ref);
    return PG_OK;
}
