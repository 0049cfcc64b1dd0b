/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Text the webhook reads before it trusts it (skim.c), the floor under the
 * review and the API client: linear skims of JSON text that build nothing (so
 * they run on any bytes, of any size, before jansson does), a JSON object's
 * string members as jansson holds them, and Kubernetes object names.
 */
#ifndef PULLGATE_WEBHOOK_SKIM_H
#define PULLGATE_WEBHOOK_SKIM_H

#include <jansson.h>
#include <stddef.h>

#define WH_MAX_UID_BYTES 128

/*
 * request.uid of an AdmissionReview from the first len bytes of its text (the
 * rest may be missing, cut or malformed): kube-apiserver writes "uid" first in
 * "request". 0 and uid set (NUL-terminated) when found as a plain JSON string
 * of 1..WH_MAX_UID_BYTES printable ASCII characters; -1 otherwise.
 */
int wh_review_uid_of_prefix(const char *text, size_t len, char *uid, size_t uid_size);

/* What a JSON text holds, counted without parsing it: any bytes, any size. */
typedef struct wh_json_stats {
    size_t objects, arrays, members, strings, scalars;
    size_t bytes;   /* of all strings, keys included, as written (escapes, quotes) */
    size_t longest; /* the longest string as written */
} wh_json_stats;

void wh_json_skim(const char *text, size_t len, wh_json_stats *st);
/* An upper bound of the bytes jansson allocates to parse text. */
size_t wh_json_parse_cost(const char *text, size_t len);

/* The string value of obj[key], or NULL when absent, not a string or holding a NUL
 * (with JSON_ALLOW_NUL, json_string_value would silently cut it there). */
const char *wh_text_at(const json_t *obj, const char *key);

/* DNS-1123 label (namespaces) and subdomain (object names), as the API validates them. */
int wh_is_dns_label(const char *s);
int wh_is_dns_subdomain(const char *s);

#endif
