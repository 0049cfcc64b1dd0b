/* SPDX-License-Identifier: Apache-2.0 */
/* The loadable-module entry point: one static, immutable function table (ABI 2). */
#include "internal.h"

static const pg_module_v2 module_v2 = {
    .abi = PG_MODULE_ABI_V2,
    .size = sizeof(pg_module_v2),
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
    .error_clear = pg_error_clear,
    .code_name = pg_code_name,
    .mem_free = pg_free,
    .strv_free = pg_strv_free,
    .image_name = pg_image_name,
    .dockerconfig_hashes = pg_dockerconfig_hashes,
    .config_load_json = pg_config_load_json,
    .config_clear_list = pg_config_clear_list,
    .config_to_json = pg_config_to_json,
    .config_policy = pg_config_policy,
    .config_mode = pg_config_mode,
    .config_state_dir = pg_config_state_dir,
    .config_annotation = pg_config_annotation,
    .config_dbus = pg_config_dbus,
    .allowlist_validate = pg_allowlist_validate,
    .store_open_readonly = pg_store_open_readonly,
    .record_intent = pg_store_record_intent,
    .record_failed = pg_store_record_failed,
    .record_aliases = pg_store_record_aliases,
    .resolve_image = pg_store_resolve_image,
    .store_get = pg_store_get,
    .record_free = pg_record_free,
    .record_image_ref = pg_record_image_ref,
    .record_last_updated = pg_record_last_updated,
    .record_to_json = pg_record_to_json,
    .store_list = pg_store_list,
    .store_delete = pg_store_delete,
    .store_prune = pg_store_prune,
    .reason_name = pg_reason_name,
    .notifier_new = pg_notifier_new,
    .notifier_free = pg_notifier_free,
    .notifier_last_error = pg_notifier_last_error,
    .notify_container = pg_notify_container,
    .store_enable_cache = pg_store_enable_cache,
    .decide_identity = pg_decide_identity,
};

/* Hosts ask for the ABI they were built against; ABI 1 is gone (pullgate.h). */
PG_API const pg_module_v2 *pg_module_get(uint32_t abi)
{
    return abi == PG_MODULE_ABI_V2 ? &module_v2 : NULL;
}
