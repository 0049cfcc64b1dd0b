/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Image references, parsed and normalised like Go's distribution/reference
 * ParseNormalizedNamed (what the kubelet uses to name images in pull records).
 *
 * Grammar (regexp.go), implemented by hand:
 *   reference  := name [ ":" tag ] [ "@" digest ]
 *   name       := [ domain "/" ] path-component { "/" path-component }
 *   domain     := host [ ":" port-digits ]
 *   host       := label { "." label } | "[" { hex | ":" }+ "]"
 *   label      := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
 *   component  := alnum+ { separator alnum+ }, alnum = [a-z0-9],
 *                 separator = "." | "_" | "__" | "-"+
 *   tag        := [\w][\w.-]{0,127}
 *   digest     := algorithm ":" hex{32,}, algorithm := [A-Za-z][A-Za-z0-9]*
 *                 { [-_+.] [A-Za-z][A-Za-z0-9]* }
 * then go-digest's validation: only sha256/sha384/sha512 with exactly
 * 64/96/128 lowercase hex digits are accepted.
 */
#include "cleanup.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define NAME_TOTAL_LENGTH_MAX 255 /* reference.go NameTotalLengthMax */
#define TAG_MAX 128

static const char default_domain[] = "docker.io";
static const char legacy_default_domain[] = "index.docker.io";
static const char official_repo_prefix[] = "library/";

struct pg_ref {
    char *domain; /* "" when the name has no domain (see parse_name) */
    char *path;
    char *tag;    /* NULL when absent */
    char *digest; /* NULL when absent */
    char *name;   /* domain "/" path, or path when domain is "" */
    char *full;   /* name [":" tag] ["@" digest] */
};

/* A borrowed slice of the input. */
typedef struct span {
    const char *p;
    size_t n;
} span;

/* ------------------------------------------------------- character classes */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || is_digit(c); }
static bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
static bool is_alnum(char c) { return is_lower_alnum(c) || is_upper(c); }
static bool is_hex(char c) { return pg_hex_value((unsigned char)c) >= 0; }
static bool is_word(char c) { return is_alnum(c) || c == '_'; }

static bool has_upper(span s)
{
    for (size_t i = 0; i < s.n; i++)
        if (is_upper(s.p[i]))
            return true;
    return false;
}

static bool span_has_char(span s, char c) { return s.n && memchr(s.p, c, s.n) != NULL; }

static bool span_eq(span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n == n && memcmp(s.p, lit, n) == 0;
}

/* ------------------------------------------------------------- path names */

/* Length of the separator at s (".", "_", "__", "-"+), 0 when none. */
static size_t separator_len(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (s[0] == '.')
        return 1;
    if (s[0] == '_')
        return n > 1 && s[1] == '_' ? 2 : 1;
    size_t i = 0;
    while (i < n && s[i] == '-')
        i++;
    return i;
}

/* component := alnum+ { separator alnum+ } */
static bool path_component_valid(span c)
{
    size_t i = 0;
    for (;;) {
        size_t start = i;
        while (i < c.n && is_lower_alnum(c.p[i]))
            i++;
        if (i == start)
            return false; /* empty run: leading/trailing/double separator */
        if (i == c.n)
            return true;
        size_t sep = separator_len(c.p + i, c.n - i);
        if (sep == 0)
            return false;
        i += sep;
    }
}

/* Every part of s between single separators sep is valid (an empty one is handed to valid). */
static bool parts_valid(span s, char sep, bool (*valid)(span))
{
    size_t start = 0;
    for (size_t i = 0; i <= s.n; i++) {
        if (i == s.n || s.p[i] == sep) {
            if (!valid((span){s.p + start, i - start}))
                return false;
            start = i + 1;
        }
    }
    return true;
}

/* One or more components separated by single slashes. */
static bool path_valid(span p) { return parts_valid(p, '/', path_component_valid); }

/* ---------------------------------------------------------------- domains */

static bool domain_label_valid(span l)
{
    if (l.n == 0 || !is_alnum(l.p[0]) || !is_alnum(l.p[l.n - 1]))
        return false;
    for (size_t i = 1; i + 1 < l.n; i++)
        if (!is_alnum(l.p[i]) && l.p[i] != '-')
            return false;
    return true;
}

static bool domain_name_valid(span d) { return parts_valid(d, '.', domain_label_valid); }

/* "[" (hex | ":")+ "]": no zones, no embedded IPv4 (deliberately, as in Go). */
static bool ipv6_literal_valid(span h)
{
    if (h.n < 3 || h.p[0] != '[' || h.p[h.n - 1] != ']')
        return false;
    for (size_t i = 1; i + 1 < h.n; i++)
        if (!is_hex(h.p[i]) && h.p[i] != ':')
            return false;
    return true;
}

static bool port_valid(span port)
{
    if (port.n == 0)
        return false;
    for (size_t i = 0; i < port.n; i++)
        if (!is_digit(port.p[i]))
            return false;
    return true;
}

/* domainAndPort := host [":" digits] */
static bool domain_and_port_valid(span d)
{
    if (d.n && d.p[0] == '[') {
        const char *close = memchr(d.p, ']', d.n);
        if (!close)
            return false;
        size_t host_len = (size_t)(close - d.p) + 1;
        span rest = {d.p + host_len, d.n - host_len};
        if (!ipv6_literal_valid((span){d.p, host_len}))
            return false;
        return rest.n == 0 || (rest.p[0] == ':' && port_valid((span){rest.p + 1, rest.n - 1}));
    }
    const char *colon = memchr(d.p, ':', d.n);
    if (!colon)
        return domain_name_valid(d);
    size_t host_len = (size_t)(colon - d.p);
    return domain_name_valid((span){d.p, host_len}) &&
           port_valid((span){colon + 1, d.n - host_len - 1});
}

/* ----------------------------------------------------------- tag / digest */

static bool tag_valid(span t)
{
    if (t.n == 0 || t.n > TAG_MAX || !is_word(t.p[0]))
        return false;
    for (size_t i = 1; i < t.n; i++)
        if (!is_word(t.p[i]) && t.p[i] != '.' && t.p[i] != '-')
            return false;
    return true;
}

/* algorithm := [A-Za-z][A-Za-z0-9]* { [-_+.] [A-Za-z][A-Za-z0-9]* } */
static bool digest_algorithm_valid(span a)
{
    size_t i = 0;
    for (;;) {
        if (i >= a.n || !((a.p[i] >= 'a' && a.p[i] <= 'z') || is_upper(a.p[i])))
            return false;
        i++;
        while (i < a.n && is_alnum(a.p[i]))
            i++;
        if (i == a.n)
            return true;
        if (!strchr("-_+.", a.p[i]))
            return false;
        i++;
    }
}

/* The reference grammar's digest, then go-digest's Validate. */
static int check_digest(span d, pg_error *err)
{
    const char *colon = memchr(d.p, ':', d.n);
    if (!colon)
        return pg_fail(err, PG_ERR_INVALID, "invalid reference format: bad digest");
    span alg = {d.p, (size_t)(colon - d.p)};
    span hex = {colon + 1, d.n - alg.n - 1};
    if (!digest_algorithm_valid(alg) || hex.n < 32)
        return pg_fail(err, PG_ERR_INVALID, "invalid reference format: bad digest");
    for (size_t i = 0; i < hex.n; i++)
        if (!is_hex(hex.p[i]))
            return pg_fail(err, PG_ERR_INVALID, "invalid reference format: bad digest");

    static const struct {
        const char *name;
        size_t hex_len;
    } algorithms[] = {{"sha256", 64}, {"sha384", 96}, {"sha512", 128}};
    for (size_t k = 0; k < sizeof algorithms / sizeof algorithms[0]; k++) {
        if (!span_eq(alg, algorithms[k].name))
            continue;
        if (hex.n != algorithms[k].hex_len)
            return pg_fail(err, PG_ERR_INVALID, "invalid checksum digest length");
        if (!pg_lower_hex_run(hex.p, hex.n))
            return pg_fail(err, PG_ERR_INVALID, "invalid checksum digest format");
        return PG_OK;
    }
    return pg_fail(err, PG_ERR_INVALID, "unsupported digest algorithm");
}

/* ------------------------------------------------------------ the parser */

/* Parts of a reference string, borrowed from it. */
typedef struct ref_parts {
    span domain, path, tag, digest;
    bool has_tag, has_digest;
} ref_parts;

/*
 * Splits name into domain and path. The Go regexp tries the optional domain
 * first; when the first component is not a valid domain it retries with the
 * whole name as a path, which yields an empty domain (e.g. "a_b.c/foo").
 */
static bool parse_name(span name, ref_parts *out)
{
    const char *slash = memchr(name.p, '/', name.n);
    if (slash) {
        span dom = {name.p, (size_t)(slash - name.p)};
        span path = {slash + 1, name.n - dom.n - 1};
        if (domain_and_port_valid(dom) && path_valid(path)) {
            out->domain = dom;
            out->path = path;
            return true;
        }
    }
    if (!path_valid(name))
        return false;
    out->domain = (span){name.p, 0};
    out->path = name;
    return true;
}

static int format_error(span whole, pg_error *err)
{
    if (has_upper(whole))
        return pg_fail(err, PG_ERR_INVALID, "invalid reference format: repository name must be lowercase");
    return pg_fail(err, PG_ERR_INVALID, "invalid reference format");
}

/* reference.go Parse(): name [":" tag] ["@" digest], anchored. */
static int parse_reference(span s, ref_parts *out, pg_error *err)
{
    span rest = s;
    const char *at = memchr(s.p, '@', s.n);
    if (at) {
        out->has_digest = true;
        out->digest = (span){at + 1, s.n - (size_t)(at - s.p) - 1};
        rest.n = (size_t)(at - s.p);
    }
    /* A tag separator is a colon after the last slash: path components and
     * tags never contain ':', only a domain's port does. */
    size_t last_slash = 0, last_colon = 0;
    bool slash = false, colon = false;
    for (size_t i = 0; i < rest.n; i++) {
        if (rest.p[i] == '/')
            last_slash = i, slash = true;
        else if (rest.p[i] == ':')
            last_colon = i, colon = true;
    }
    if (colon && (!slash || last_colon > last_slash)) {
        out->has_tag = true;
        out->tag = (span){rest.p + last_colon + 1, rest.n - last_colon - 1};
        rest.n = last_colon;
    }
    if (!parse_name(rest, out) || (out->has_tag && !tag_valid(out->tag)))
        return format_error(s, err);
    if (rest.n > NAME_TOTAL_LENGTH_MAX)
        return pg_fail(err, PG_ERR_INVALID, "repository name must not be more than %d characters",
                       NAME_TOTAL_LENGTH_MAX);
    if (out->has_digest)
        return check_digest(out->digest, err);
    return PG_OK;
}

static bool is_identifier(span s) { return s.n == PG_HASH_HEX_LEN && pg_lower_hex_run(s.p, s.n); }

/* normalize.go splitDockerDomain. */
typedef struct split_name {
    span domain;
    span remainder;
    bool add_library_prefix;
} split_name;

static split_name split_docker_domain(span s)
{
    split_name r = {{default_domain, strlen(default_domain)}, s, false};
    const char *slash = memchr(s.p, '/', s.n);
    if (!slash) {
        /* A single element is always a Docker Hub official image. */
        r.add_library_prefix = true;
        return r;
    }
    span first = {s.p, (size_t)(slash - s.p)};
    span after = {slash + 1, s.n - first.n - 1};
    if (span_eq(first, "localhost") || span_has_char(first, '.') || span_has_char(first, ':') ||
        has_upper(first)) {
        r.domain = first;
        r.remainder = after;
    }
    if (span_eq(first, legacy_default_domain)) {
        r.domain = (span){default_domain, strlen(default_domain)};
        r.remainder = after;
    }
    r.add_library_prefix = span_eq(r.domain, default_domain) && !span_has_char(r.remainder, '/');
    return r;
}

bool pg_ref_needs_normalising(const char *s)
{
    split_name sp = split_docker_domain((span){s, strlen(s)});
    /* The domain came from s itself and no "library/" is added: s spells its
     * name as ParseNormalizedNamed would. */
    return sp.domain.p != s || sp.add_library_prefix;
}

/* "domain/[library/]remainder": the string Go hands to Parse(). NULL when out of memory. */
static char *join_normalized(const split_name *sp)
{
    char *joined;
    if (asprintf(&joined, "%.*s/%s%.*s", (int)sp->domain.n, sp->domain.p,
                 sp->add_library_prefix ? official_repo_prefix : "", (int)sp->remainder.n,
                 sp->remainder.p) < 0)
        return NULL;
    return joined;
}

/* The spans are of a C string (no NUL inside): strndup copies them exactly. */
static char *span_dup(span s) { return strndup(s.p, s.n); }

static int build_ref(const ref_parts *parts, pg_ref *ref, pg_error *err)
{
    ref->domain = span_dup(parts->domain);
    ref->path = span_dup(parts->path);
    ref->tag = parts->has_tag ? span_dup(parts->tag) : NULL;
    ref->digest = parts->has_digest ? span_dup(parts->digest) : NULL;
    if (!ref->domain || !ref->path || (parts->has_tag && !ref->tag) ||
        (parts->has_digest && !ref->digest))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    int n = parts->domain.n ? asprintf(&ref->name, "%s/%s", ref->domain, ref->path)
                            : asprintf(&ref->name, "%s", ref->path);
    if (n < 0) {
        ref->name = NULL;
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    n = asprintf(&ref->full, "%s%s%s%s%s", ref->name, ref->tag ? ":" : "", ref->tag ? ref->tag : "",
                 ref->digest ? "@" : "", ref->digest ? ref->digest : "");
    if (n < 0) {
        ref->full = NULL;
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    return PG_OK;
}

/* Checks done by ParseNormalizedNamed before it calls Parse(). */
static int check_familiar(span s, const split_name *sp, pg_error *err)
{
    if (s.n == 0)
        return pg_fail(err, PG_ERR_INVALID, "repository name must have at least one component");
    if (is_identifier(s))
        return pg_fail(err, PG_ERR_INVALID,
                       "invalid repository name (%.64s), cannot specify 64-byte hexadecimal strings",
                       s.p);
    /* The remote name (up to the first ':') must be lowercase. */
    span remote = sp->remainder;
    const char *colon = memchr(remote.p, ':', remote.n);
    if (colon)
        remote.n = (size_t)(colon - remote.p);
    if (has_upper(remote))
        return pg_fail(err, PG_ERR_INVALID,
                       "invalid reference format: repository name (%.*s) must be lowercase",
                       (int)(remote.n > 128 ? 128 : remote.n), remote.p);
    return PG_OK;
}

int pg_ref_parse_into(const char *image, pg_ref **out, pg_error *err)
{
    *out = NULL;
    if (!image)
        return pg_fail(err, PG_ERR_INVALID, "no image reference");
    size_t len = strnlen(image, PG_MAX_IMAGE_LEN + 1);
    if (len > PG_MAX_IMAGE_LEN)
        return pg_fail(err, PG_ERR_LIMIT, "image reference longer than %d bytes",
                       PG_MAX_IMAGE_LEN);
    span s = {image, len};
    split_name sp = split_docker_domain(s);
    int rc = check_familiar(s, &sp, err);
    if (rc != PG_OK)
        return rc;
    pg_autofree char *joined = join_normalized(&sp);
    pg_autoref pg_ref *ref = calloc(1, sizeof *ref);
    if (!joined || !ref)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    ref_parts parts = {0};
    rc = parse_reference((span){joined, strlen(joined)}, &parts, err);
    if (rc == PG_OK)
        rc = build_ref(&parts, ref, err);
    if (rc == PG_OK)
        *out = pg_steal(&ref);
    return rc;
}

PG_API pg_ref *pg_ref_parse(const char *image, pg_error *err)
{
    pg_ref *ref;
    pg_ref_parse_into(image, &ref, err);
    return ref;
}

PG_API void pg_ref_free(pg_ref *ref)
{
    if (!ref)
        return;
    free(ref->domain);
    free(ref->path);
    free(ref->tag);
    free(ref->digest);
    free(ref->name);
    free(ref->full);
    free(ref);
}

PG_API const char *pg_ref_domain(const pg_ref *ref) { return ref ? ref->domain : NULL; }
PG_API const char *pg_ref_path(const pg_ref *ref) { return ref ? ref->path : NULL; }
PG_API const char *pg_ref_tag(const pg_ref *ref) { return ref ? ref->tag : NULL; }
PG_API const char *pg_ref_digest(const pg_ref *ref) { return ref ? ref->digest : NULL; }
PG_API const char *pg_ref_name(const pg_ref *ref) { return ref ? ref->name : NULL; }
PG_API const char *pg_ref_string(const pg_ref *ref) { return ref ? ref->full : NULL; }

PG_API char *pg_image_name(const char *image, pg_error *err)
{
    pg_autoref pg_ref *ref = pg_ref_parse(image, err);
    if (!ref)
        return NULL;
    char *name = pg_strdup(ref->name);
    if (!name)
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
    return name;
}
