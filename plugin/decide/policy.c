/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Policy helpers: CRI-O style pinned-image patterns and the kubelet's
 * preloadedImagesVerificationAllowlist patterns (KEP-2535).
 *
 * Allowlist rules, as the kubelet's pullmanager applies them: no surrounding
 * whitespace; the only wildcard is a trailing full path segment slash-star
 * (a prefix match, slash included, on the image's normalised name with tag
 * and digest removed); any other pattern must be an image name without tag or
 * digest, compared for equality. pullgate differs (docs/interfaces.md §5):
 * names are compared normalised, so "ubuntu" and "docker.io/library/ubuntu"
 * are one pattern (the kubelet matches "ubuntu" only when the pod wrote
 * "ubuntu"), and wildcard prefixes that can never match a normalised name
 * (such as "library/" + star, which should be "docker.io/library/" + star)
 * are refused, since such a pattern is always a mistake.
 */
#include "cleanup.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------- pinned images */

static bool has_prefix(const char *s, const char *prefix, size_t prefix_len)
{
    return strncmp(s, prefix, prefix_len) == 0;
}

/* Is `needle` (needle_len bytes, not NUL-terminated) inside s? */
static bool contains(const char *s, const char *needle, size_t needle_len)
{
    size_t n = strlen(s);
    for (size_t i = 0; needle_len <= n && i <= n - needle_len; i++)
        if (memcmp(s + i, needle, needle_len) == 0)
            return true;
    return false;
}

/* CRI-O pinned_images: "*keyword*" substring, "prefix*" glob, otherwise exact. */
static bool pinned_pattern_matches(const char *pattern, const char *image)
{
    size_t len = strlen(pattern);
    if (len == 0)
        return false;
    bool trailing = pattern[len - 1] == '*';
    if (len >= 3 && pattern[0] == '*' && trailing)
        return contains(image, pattern + 1, len - 2);
    if (pattern[0] == '*') /* "*", "**", "*foo": not a CRI-O pattern; never pin everything */
        return false;
    if (trailing)
        return has_prefix(image, pattern, len - 1);
    return strcmp(pattern, image) == 0;
}

static bool any_pinned(const char *const *patterns, const char *image)
{
    for (const char *const *p = patterns; *p; p++)
        if (pinned_pattern_matches(*p, image))
            return true;
    return false;
}

int pg_pinned_match_ref(const char *const *patterns, const char *image, const pg_ref *ref)
{
    if (!patterns || !*patterns || !image || !*image)
        return 0;
    /* Patterns are written against how the runtime or the operator names the image
     * ("registry.k8s.io/pause:3.10") or against its normalised form
     * ("docker.io/library/busybox:1.36" for "busybox:1.36"): accept either. */
    return any_pinned(patterns, image) || (ref && any_pinned(patterns, pg_ref_string(ref)));
}

PG_API int pg_pinned_match(const char *const *patterns, const char *image)
{
    if (!patterns || !*patterns || !image || !*image)
        return 0; /* no patterns (the usual case): no parse */
    pg_autoref pg_ref *ref = pg_ref_parse(image, NULL);
    return pg_pinned_match_ref(patterns, image, ref);
}

/* ------------------------------------------------------------------ allowlist */

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/*
 * name must parse as an image name without tag or digest. A wildcard prefix
 * "domain[/path]/" (prefix_len > 0 bytes of pattern, slash included) is probed as
 * prefix + "x" and must stay the start of the normalised name, else it never matches.
 */
static int validate_name(const char *pattern, const char *name, size_t prefix_len, pg_error *err)
{
    pg_error why = {0};
    pg_autoref pg_ref *ref = pg_ref_parse(name, &why);
    if (!ref)
        return pg_fail(err, PG_ERR_INVALID, "allowlist pattern \"%.256s\": %s: %s", pattern,
                       prefix_len ? "not an image name prefix" : "failed to parse as an image name",
                       why.message);
    if (pg_ref_tag(ref) || pg_ref_digest(ref))
        return pg_fail(err, PG_ERR_INVALID,
                       "allowlist pattern \"%.256s\": neither tag nor digest is accepted", pattern);
    if (prefix_len && !has_prefix(pg_ref_name(ref), pattern, prefix_len))
        return pg_fail(err, PG_ERR_INVALID,
                       "allowlist pattern \"%.256s\": never matches a normalised image name "
                       "(normalised names look like \"%.256s\")",
                       pattern, pg_ref_name(ref));
    return PG_OK;
}

static int validate_wildcard_prefix(const char *pattern, size_t prefix_len, pg_error *err)
{
    pg_autofree char *probe = malloc(prefix_len + 2);
    if (!probe)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    memcpy(probe, pattern, prefix_len);
    memcpy(probe + prefix_len, "x", 2);
    return validate_name(pattern, probe, prefix_len, err);
}

PG_API int pg_allowlist_validate(const char *pattern, pg_error *err)
{
    if (!pattern || !*pattern)
        return pg_fail(err, PG_ERR_INVALID, "allowlist pattern is empty");
    size_t len = strlen(pattern);
    if (len > PG_MAX_IMAGE_LEN)
        return pg_fail(err, PG_ERR_INVALID, "allowlist pattern longer than %d bytes",
                       PG_MAX_IMAGE_LEN);
    if (is_space(pattern[0]) || is_space(pattern[len - 1]))
        return pg_fail(err, PG_ERR_INVALID,
                       "allowlist pattern \"%.256s\": leading/trailing spaces are not allowed",
                       pattern);
    bool wildcard = len >= 2 && strcmp(pattern + len - 2, "/*") == 0;
    size_t body_len = wildcard ? len - 1 : len; /* a wildcard keeps its "/" */
    if (memchr(pattern, '*', body_len))
        return pg_fail(err, PG_ERR_INVALID,
                       "allowlist pattern \"%.256s\": only a trailing full path segment wildcard "
                       "\"/*\" is allowed",
                       pattern);
    if (wildcard && body_len <= 1)
        return pg_fail(err, PG_ERR_INVALID,
                       "allowlist pattern \"%.256s\": at least a registry host name is required",
                       pattern);
    return wildcard ? validate_wildcard_prefix(pattern, body_len, err)
                    : validate_name(pattern, pattern, 0, err);
}

static bool allowlist_pattern_matches(const char *pattern, const char *name)
{
    size_t len = strlen(pattern);
    if (len >= 2 && strcmp(pattern + len - 2, "/*") == 0)
        return has_prefix(name, pattern, len - 1); /* prefix includes the "/" */
    if (!pg_ref_needs_normalising(pattern))
        return strcmp(pattern, name) == 0;
    /* "ubuntu", "library/ubuntu": the image they name (validated when configured). */
    pg_autoref pg_ref *ref = pg_ref_parse(pattern, NULL);
    return ref && !pg_ref_tag(ref) && !pg_ref_digest(ref) && strcmp(pg_ref_name(ref), name) == 0;
}

PG_API int pg_allowlist_match(const char *const *patterns, const char *image)
{
    if (!patterns || !image || !*patterns)
        return 0;
    /* Like the kubelet, compare the normalised name so "nginx:1" meets
     * "docker.io/library/nginx"; an unparsable image matches nothing. */
    pg_autoref pg_ref *ref = pg_ref_parse(image, NULL);
    for (const char *const *p = patterns; ref && *p; p++)
        if (allowlist_pattern_matches(*p, pg_ref_name(ref)))
            return 1;
    return 0;
}
