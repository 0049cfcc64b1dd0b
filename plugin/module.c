/* SPDX-License-Identifier: Apache-2.0 */
/* The loadable-module entry point: one static, immutable function table. */
#include "internal.h"

static const pg_module_v1 module_v1 = {
    .abi = PG_MODULE_ABI_V1,
    .size = sizeof(pg_module_v1),
    .version = pg_version,
    .config_new = pg_config_new,
    .config_load_file = pg_config_load_file,
    .config_set = pg_config_set,
    .config_free = pg_config_free,
    .store_open = pg_store_open,
    .store_free = pg_store_free,
    .decide = pg_decide,
    .record_pulled = pg_store_record_pulled,
    .credential_hash = pg_credential_hash,
};

/* Hosts ask for the ABI they were built against; later ABIs get new tables. */
PG_API const pg_module_v1 *pg_module_get(uint32_t abi)
{
    return abi == PG_MODULE_ABI_V1 ? &module_v1 : NULL;
}
