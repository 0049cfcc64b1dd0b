/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Go-compatibility helpers (gocompat.c): byte-exact reproductions of the Go
 * standard library behaviour the kubelet's credential hash and keyring use.
 * Strings are (pointer, length) where they may hold NUL bytes.
 */
#ifndef PULLGATE_GOCOMPAT_H
#define PULLGATE_GOCOMPAT_H

#include "internal.h"

#include <stdint.h>

/* utf8.RuneError: what an invalid byte decodes to. */
#define PG_GO_RUNE_ERROR 0xFFFDu

/* Appends s[:n] as encoding/json (escapeHTML) writes a string, quotes included. */
void pg_go_json_string(pg_buf *b, const char *s, size_t n);

/* encoding/json's case-insensitive match of an object key to a struct field
 * (field: lowercase ASCII; Unicode simple folding of U+017F to 's'). */
bool pg_go_json_key_matches(const char *key, const char *field);

/* The value of one base64 character: StdEncoding's alphabet, or URLEncoding's (url); -1 if none. */
int pg_go_base64_value(unsigned char c, bool url);
/* base64.StdEncoding (padded) / RawStdEncoding DecodeString of s[:n] into out
 * (room for n bytes). false on corrupt input. */
bool pg_go_base64_decode(const char *s, size_t n, bool padded, unsigned char *out, size_t *out_len);
/* strings.HasSuffix(strings.TrimSpace(s), "="): the kubelet's choice of decoder. */
bool pg_go_base64_is_padded(const char *s, size_t n);

/* The fields of net/url.URL the keyring uses, unescaped. Free with pg_go_url_free. */
typedef struct pg_go_url {
    char *host;
    char *path;
} pg_go_url;
/* url.Parse of an "http(s)://" URL s[:n]: PG_OK, PG_ERR_INVALID (Go fails) or PG_ERR_NOMEM. */
int pg_go_url_parse(const char *s, size_t n, pg_go_url *u);
/* url.Parse("https://" + s), as the keyring's parseSchemelessURL does. */
int pg_go_url_parse_schemeless(const char *s, pg_go_url *u);
void pg_go_url_free(pg_go_url *u);
/* A pg_go_url (initialised {0}) released when its block is left (cleanup.h). */
#define pg_autogourl __attribute__((cleanup(pg_go_url_free)))

/* net.SplitHostPort of hp; on error the whole of hp as host and an empty port. */
void pg_go_split_host_port(const char *hp, const char **host, size_t *host_len, const char **port);

/* path/filepath.Match(pattern, name) for names without '/' (one host label);
 * a malformed pattern matches nothing. */
bool pg_go_path_match(const char *pattern, const char *name);

#endif
