/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: strict decoding of pulled records and pull intents. */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A decoded record must serialise, and the result must decode to the same text. */
static void check_round_trip(const pg_record *rec)
{
    char *text;
    if (pg_record_serialize(rec, NULL, &text, NULL) != PG_OK)
        return; /* e.g. strings jansson accepted but cannot re-emit: not a crash */
    pg_record *again = NULL;
    if (pg_record_parse(text, strlen(text), &again, NULL) != PG_OK)
        __builtin_trap();
    char *text2 = NULL;
    if (pg_record_serialize(again, NULL, &text2, NULL) != PG_OK || strcmp(text, text2) != 0)
        __builtin_trap();
    free(text2);
    pg_record_free(again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pg_error err;
    pg_record *rec = NULL;
    if (pg_record_parse((const char *)data, size, &rec, &err) == PG_OK) {
        check_round_trip(rec);
        pg_secret s = {"ns", "name", "uid", ""};
        pg_pull_credentials c = {.secrets = &s, .n_secrets = 1};
        if (rec->n_maps)
            pg_record_merge(rec, rec->maps[0].image_name, &c, NULL);
        pg_record_free(rec);
    }
    char *image = NULL;
    if (pg_intent_parse((const char *)data, size, &image, &err) == PG_OK)
        free(image);
    return 0;
}
