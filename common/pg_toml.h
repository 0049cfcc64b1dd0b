/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TOML through toml++ (toml.cc, the one C++ file: Debian 12 packages no C TOML parser),
 * for pullgate-doctor (containerd's configuration as JSON), pullgate-wire (where each key
 * sits in containerd's text) and crio_auth.c (one string of CRI-O's configuration). Each
 * call parses text once; a text that is not TOML, and any failure inside toml++, is
 * PG_ERR_INVALID with the line; no exception crosses into C. Callers bound text.
 */
#ifndef PULLGATE_COMMON_PG_TOML_H
#define PULLGATE_COMMON_PG_TOML_H

#include "pullgate/pullgate.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The document as JSON text (toml++'s json_formatter; malloc'ed, caller frees), or NULL
 * with err. */
char *pg_toml_json_text(const char *text, size_t len, pg_error *err);

/*
 * Every key's place in the text, as JSON (malloc'ed, caller frees), or NULL with err:
 * [{"path":[...],"table":bool,"inline":bool,"kline","kcol","kend","line","col","eline","ecol"}]
 * (1-based lines and columns; ecol and kend exclusive). Tables are entered (their keys
 * listed); arrays, arrays of tables too, are not.
 */
char *pg_toml_key_places(const char *text, size_t len, pg_error *err);

/*
 * *value (malloc'd, caller frees) when text sets table.subtable.key to a string, NULL when it
 * does not set it; PG_ERR_INVALID when text is not TOML, the key is not a string (or holds a
 * NUL), or a table on the way is not a table.
 */
int pg_toml_string_at(const char *text, size_t len, const char *table, const char *subtable,
                      const char *key, char **value, pg_error *err);

#ifdef __cplusplus
}
#endif

#endif
