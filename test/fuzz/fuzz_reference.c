/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: pg_ref_parse on arbitrary bytes (never crashes, results consistent). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0'; /* the API takes C strings: an embedded NUL just ends the input */
    pg_error err = {0};
    pg_ref *ref = pg_ref_parse(s, &err);
    if (ref) {
        /* A normalised reference with a domain must parse back to itself. */
        if (pg_ref_domain(ref)[0]) {
            pg_ref *again = pg_ref_parse(pg_ref_string(ref), NULL);
            if (!again || strcmp(pg_ref_string(again), pg_ref_string(ref)) != 0)
                __builtin_trap();
            pg_ref_free(again);
        }
        if (strlen(pg_ref_name(ref)) > 255)
            __builtin_trap();
        pg_ref_free(ref);
    } else if (err.code == PG_OK || strchr(err.message, '\n')) {
        __builtin_trap();
    }
    free(pg_image_name(s, NULL));
    free(s);
    return 0;
}
