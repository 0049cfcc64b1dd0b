/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared decision cases (test/data/decision-cases.json) as the unit tests
 * build them into real record directories, and the small file helpers they
 * need. Every failure fails the calling test (Check assertions).
 */
#ifndef PG_DECISION_CASES_H
#define PG_DECISION_CASES_H

#include "internal.h"

#include <jansson.h>
#include <stdbool.h>
#include <time.h>

/* mkdir path with pulled/ and pulling/ (0700). */
void dc_make_record_dir(const char *path);
/* pg_config_set, asserted. */
void dc_config_set(pg_config *cfg, const char *key, const char *value);
/* dir/sub/<file name of key>; caller frees. */
char *dc_record_path(const char *dir, const char *sub, const char *key);
/* Writes content to dc_record_path(dir, sub, key), mode 0600. */
void dc_write_at(const char *dir, const char *sub, const char *key, const char *content);
/* RFC 3339 text of t; caller frees. */
char *dc_time_text(time_t t);
/* s with every marker replaced by text; caller frees. */
char *dc_replace_all(const char *s, const char *marker, const char *text);
/* s with every "@now" replaced by the current time; caller frees. */
char *dc_with_now(const char *s);
/* The string member key of obj, or NULL. */
const char *dc_str(const json_t *obj, const char *key);
/* A JSON array of strings as a NULL-terminated vector of borrowed strings (free
 * the vector only); NULL when arr is not an array. */
const char **dc_str_list(const json_t *arr);
/* The imageRef of a rawPulledFiles entry ([imageRef, content] or an object). */
const json_t *dc_raw_ref(const json_t *entry);

/* Every case of decision-cases.json (a new reference). */
json_t *dc_load_cases(void);
/* Applies case c's config to cfg and writes its records, intents, index entries
 * and raw files into the writable directory state and the read-only directory
 * ro. false (nothing written) when the configuration refused a value, which
 * only a case with "expectConfigError" may do. */
bool dc_setup(pg_config *cfg, const char *state, const char *ro, const json_t *c);

/* Case c's request, with its aliases and hints, and the pod UID the runtime set
 * (request.podUid, NULL when absent); release with dc_request_free. */
typedef struct dc_request {
    pg_request r;
    const char **aliases, **hints;
    const char *pod_uid;
} dc_request;
dc_request dc_request_of(const json_t *c);
void dc_request_free(dc_request *q);

#endif
