/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: pg_config_load_json on arbitrary bytes, then canonical output. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pg_error err = {0};
    pg_config *cfg = pg_config_new(&err);
    if (!cfg)
        return 0;
    if (pg_config_load_json(cfg, (const char *)data, size, &err) == PG_OK) {
        /* A loaded configuration must always serialise and load back. */
        char *json = pg_config_to_json(cfg, &err);
        if (!json)
            abort();
        pg_config *again = pg_config_new(&err);
        if (!again || pg_config_load_json(again, json, strlen(json), &err) != PG_OK)
            abort();
        pg_config_free(again);
        free(json);
    }
    pg_config_free(cfg);
    return 0;
}
