/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: image identity validation and key expansion
 * (plugin/records/image_identity.c) on arbitrary bytes. Invariants: a rejected input
 * has a one-line message; an accepted one yields keys, and every key is an
 * image ID or a reference (a key that is neither would be a spelling nobody
 * writes); anything accepted that starts like an ID is an ID.
 */
#include "image_identity.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_keys(const pg_keyset *ks)
{
    if (ks->n == 0)
        __builtin_trap();
    for (size_t i = 0; i < ks->n; i++) {
        pg_ref *ref = pg_image_id_hex(ks->v[i]) ? NULL : pg_ref_parse(ks->v[i], NULL);
        if (!ref && !pg_image_id_hex(ks->v[i]))
            __builtin_trap();
        pg_ref_free(ref);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    pg_error err = {0};
    pg_ref *ref = NULL;
    if (pg_identity_check(s, &ref, &err) != PG_OK) {
        if (ref || err.code == PG_OK || strchr(err.message, '\n'))
            __builtin_trap();
        free(s);
        return 0;
    }
    if (strncasecmp(s, "sha256:", 7) == 0 && (ref || !pg_image_id_hex(s)))
        __builtin_trap();
    pg_keyset keys = {0}, intents = {0};
    if (pg_identity_add_keys(&keys, s, ref, NULL) == PG_OK)
        check_keys(&keys);
    if (ref && pg_identity_add_intent_keys(&intents, s, ref, NULL) == PG_OK)
        check_keys(&intents);
    pg_keyset_free(&keys);
    pg_keyset_free(&intents);
    pg_ref_free(ref);
    free(s);
    return 0;
}
