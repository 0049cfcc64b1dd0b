/* SPDX-License-Identifier: Apache-2.0 */
/* One string of a TOML text, [table.subtable] key (crio_toml.cc, toml++). */
#ifndef PULLGATE_COMMON_CRIO_TOML_H
#define PULLGATE_COMMON_CRIO_TOML_H

#include "pullgate/pullgate.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * *value (malloc'd, caller frees) when text sets table.subtable.key to a string, NULL when it
 * does not set it; PG_ERR_INVALID when text is not TOML, the key is not a string (or holds a
 * NUL), or a table on the way is not a table.
 */
int cri_toml_string_at(const char *text, size_t len, const char *table, const char *subtable,
                       const char *key, char **value, pg_error *err);

#ifdef __cplusplus
}
#endif

#endif
