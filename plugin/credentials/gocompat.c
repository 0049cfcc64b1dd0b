/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Go-compatibility helpers: the exact behaviour of the Go standard library
 * functions the kubelet's credential hash and keyring are built on, so that
 * pullgate computes the same bytes and the same matches (docs/interfaces.md §3).
 * Each function names the Go function it reproduces.
 */
#include "cleanup.h"
#include "gocompat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================= UTF-8 decoding */

/*
 * Go's utf8.DecodeRune: returns the byte length of the rune at s (n > 0) and
 * stores it in *r. Any invalid, overlong, surrogate or truncated sequence
 * yields PG_GO_RUNE_ERROR with length 1, so each bad byte is replaced on its own.
 */
static size_t pg_go_utf8_decode(const unsigned char *s, size_t n, uint32_t *r)
{
    unsigned char c = s[0];
    if (c < 0x80) {
        *r = c;
        return 1;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* > U+10FFFF */
    } else {
        *r = PG_GO_RUNE_ERROR;
        return 1;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        goto bad;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            goto bad;
    uint32_t v = c & (0xFF >> (len + 1));
    for (size_t i = 1; i < len; i++)
        v = (v << 6) | (s[i] & 0x3F);
    *r = v;
    return len;
bad:
    *r = PG_GO_RUNE_ERROR;
    return 1;
}

/* ================================================== Go JSON string encoding */

/* Escape for one ASCII byte as encoding/json (escapeHTML) writes it, or NULL. */
static const char *ascii_escape(unsigned char c, char tmp[7])
{
    switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
    }
    if (c < 0x20 || c == '<' || c == '>' || c == '&') {
        memcpy(tmp, "\\u00", 4);
        pg_hex_encode(&c, 1, tmp + 4);
        return tmp;
    }
    return NULL;
}

void pg_go_json_string(pg_buf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    pg_buf_append(b, "\"", 1);
    size_t i = 0;
    while (i < n) {
        char tmp[7];
        if (u[i] < 0x80) {
            const char *esc = ascii_escape(u[i], tmp);
            esc ? pg_buf_puts(b, esc) : pg_buf_append(b, s + i, 1);
            i++;
            continue;
        }
        uint32_t r;
        size_t len = pg_go_utf8_decode(u + i, n - i, &r);
        if (r == PG_GO_RUNE_ERROR && len == 1)
            pg_buf_puts(b, "\\ufffd"); /* Go writes the escape, not the raw rune */
        else if (r == 0x2028 || r == 0x2029)
            pg_buf_puts(b, r == 0x2028 ? "\\u2028" : "\\u2029");
        else
            pg_buf_append(b, s + i, len);
        i += len;
    }
    pg_buf_append(b, "\"", 1);
}

/* ============================================================ base64 (Go) */

int pg_go_base64_value(unsigned char c, bool url)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == (url ? '-' : '+'))
        return 62;
    return c == (url ? '_' : '/') ? 63 : -1;
}

/* Go's decoders skip CR and LF anywhere in the input. */
static size_t b64_skip_newlines(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == '\r' || s[i] == '\n'))
        i++;
    return i;
}

/* Checks the padding at s[i] ('=') ends a quantum of `have` chars properly. */
static bool b64_padding_ok(const char *s, size_t n, size_t i, int have)
{
    if (have < 2)
        return false;
    i = b64_skip_newlines(s, n, i + 1);
    if (have == 2) { /* "xx==" */
        if (i >= n || s[i] != '=')
            return false;
        i = b64_skip_newlines(s, n, i + 1);
    }
    return i == n; /* nothing may follow the padding */
}

/* Non-strict, as Go's DecodeString: unused trailing bits are ignored. */
bool pg_go_base64_decode(const char *s, size_t n, bool padded, unsigned char *out, size_t *out_len)
{
    uint32_t acc = 0;
    int have = 0;
    size_t o = 0;
    bool saw_padding = false;
    for (size_t i = b64_skip_newlines(s, n, 0); i < n; i = b64_skip_newlines(s, n, i + 1)) {
        if (s[i] == '=') {
            if (!padded || !b64_padding_ok(s, n, i, have))
                return false;
            saw_padding = true;
            break;
        }
        int v = pg_go_base64_value((unsigned char)s[i], false);
        if (v < 0)
            return false;
        acc = (acc << 6) | (uint32_t)v;
        if (++have == 4) {
            out[o++] = (unsigned char)(acc >> 16);
            out[o++] = (unsigned char)(acc >> 8);
            out[o++] = (unsigned char)acc;
            acc = 0;
            have = 0;
        }
    }
    if (have == 1 || (padded && have && !saw_padding))
        return false; /* a lone char, or a padded encoding missing its padding */
    if (have >= 2)
        out[o++] = (unsigned char)(acc >> (have == 2 ? 4 : 10));
    if (have == 3)
        out[o++] = (unsigned char)(acc >> 2);
    *out_len = o;
    return true;
}

/* strings.HasSuffix(strings.TrimSpace(s), "=") */
bool pg_go_base64_is_padded(const char *s, size_t n)
{
    while (n && strchr(" \t\n\r\v\f", s[n - 1]))
        n--;
    return n && s[n - 1] == '=';
}

/* ============================================== encoding/json object keys */

bool pg_go_json_key_matches(const char *key, const char *field)
{
    const unsigned char *k = (const unsigned char *)key;
    for (; *field; field++) {
        if (k[0] == 0xC5 && k[1] == 0xBF && *field == 's') {
            k += 2;
            continue;
        }
        unsigned char c = *k;
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        if (c != (unsigned char)*field)
            return false;
        k++;
    }
    return *k == '\0';
}

/* ================================================ Go net/url, the parts used */

void pg_go_url_free(pg_go_url *u)
{
    free(u->host);
    free(u->path);
    u->host = u->path = NULL;
}

static bool is_ascii_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Characters url.Parse accepts unescaped in a host (shouldEscape, encodeHost). */
static bool host_char_ok(unsigned char c)
{
    return c >= 0x80 || is_ascii_alnum(c) || strchr("-_.~!$&'()*+,;=:[]<>\"", c) != NULL;
}

/* What is being unescaped: it changes what url.unescape accepts. */
typedef enum unescape_mode { UNESCAPE_HOST, UNESCAPE_PATH, UNESCAPE_OTHER } unescape_mode;

/*
 * url.unescape: %XX sequences must be well formed; in a host only %25 and
 * non-ASCII bytes may be escaped, and only host_char_ok bytes may appear.
 * A path decoding to a NUL byte is refused too: we keep C strings, and Go
 * could never match such a key (its re-parse fails on the control byte).
 * Returns a new string or NULL (bad input sets *bad, else out of memory).
 */
static char *url_unescape(const char *s, size_t n, unescape_mode mode, bool *bad)
{
    bool host = mode == UNESCAPE_HOST;
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            int h = i + 2 < n ? pg_hex_value((unsigned char)s[i + 1]) : -1;
            int l = i + 2 < n ? pg_hex_value((unsigned char)s[i + 2]) : -1;
            if (h < 0 || l < 0 || (host && h < 8 && !(h == 2 && l == 5)) ||
                (mode == UNESCAPE_PATH && h == 0 && l == 0))
                goto bad;
            out[o++] = (char)(h << 4 | l);
            i += 3;
            continue;
        }
        if (host && !host_char_ok(c))
            goto bad;
        out[o++] = (char)c;
        i++;
    }
    out[o] = '\0';
    return out;
bad:
    free(out);
    *bad = true;
    return NULL;
}

/* validOptionalPort: "" or ":" digits* */
static bool optional_port_ok(const char *p, size_t n)
{
    if (n == 0)
        return true;
    if (p[0] != ':')
        return false;
    for (size_t i = 1; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return true;
}

static const char *last_char(const char *s, size_t n, char c)
{
    for (size_t i = n; i > 0; i--)
        if (s[i - 1] == c)
            return s + i - 1;
    return NULL;
}

/* url.parseHost: port syntax, then unescape in host mode. */
static bool url_host_ok(const char *h, size_t n)
{
    const char *colon;
    if (n && h[0] == '[') {
        const char *close = last_char(h, n, ']');
        if (!close)
            return false;
        size_t after = (size_t)(close - h) + 1;
        return optional_port_ok(close + 1, n - after);
    }
    colon = last_char(h, n, ':');
    return !colon || optional_port_ok(colon, n - (size_t)(colon - h));
}

/* url.validUserinfo */
static bool userinfo_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!is_ascii_alnum(c) && !strchr("-._:~!$&'()*+,;=%@", c))
            return false;
    }
    return true;
}

/* Cuts the query from the part of the URL before the fragment, as url.parse does. */
static size_t url_cut_query(const char *s, size_t n)
{
    const char *q = memchr(s, '?', n);
    return q ? (size_t)(q - s) : n;
}

static bool has_ctl_byte(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return true;
    return false;
}

/* Authority: [userinfo "@"] host. Sets u->host; false when url.Parse fails. */
static bool url_parse_authority(const char *a, size_t n, pg_go_url *u, bool *nomem)
{
    const char *at = last_char(a, n, '@');
    if (at) {
        size_t ui_len = (size_t)(at - a);
        bool bad = false;
        char *ui = url_unescape(a, ui_len, UNESCAPE_OTHER, &bad);
        if (!ui) {
            *nomem = !bad;
            return false;
        }
        explicit_bzero(ui, strlen(ui)); /* a dockerconfig key's userinfo may hold a password */
        free(ui);
        if (!userinfo_ok(a, ui_len))
            return false;
        n -= ui_len + 1;
        a = at + 1;
    }
    if (!url_host_ok(a, n))
        return false;
    bool bad = false;
    u->host = url_unescape(a, n, UNESCAPE_HOST, &bad);
    *nomem = !u->host && !bad;
    return u->host != NULL;
}

int pg_go_url_parse(const char *s, size_t n, pg_go_url *u)
{
    memset(u, 0, sizeof *u);
    size_t scheme = strncmp(s, "http://", 7) == 0 ? 7 : 8;
    const char *hash = memchr(s, '#', n);
    size_t main_len = hash ? (size_t)(hash - s) : n;
    bool bad = false, nomem = false;
    if (hash) { /* the fragment must unescape */
        pg_autofree char *frag = url_unescape(hash + 1, n - main_len - 1, UNESCAPE_OTHER, &bad);
        if (!frag)
            return bad ? PG_ERR_INVALID : PG_ERR_NOMEM;
    }
    if (has_ctl_byte(s, main_len))
        return PG_ERR_INVALID;
    size_t end = url_cut_query(s, main_len);
    const char *auth = s + scheme;
    size_t rest_len = end - scheme;
    const char *slash = memchr(auth, '/', rest_len);
    size_t auth_len = slash ? (size_t)(slash - auth) : rest_len;
    if (!url_parse_authority(auth, auth_len, u, &nomem))
        return nomem ? PG_ERR_NOMEM : PG_ERR_INVALID;
    u->path = url_unescape(auth + auth_len, rest_len - auth_len, UNESCAPE_PATH, &bad);
    if (!u->path) {
        pg_go_url_free(u);
        return bad ? PG_ERR_INVALID : PG_ERR_NOMEM;
    }
    return PG_OK;
}

/* url.Parse("https://" + s) as parseSchemelessURL does. */
int pg_go_url_parse_schemeless(const char *s, pg_go_url *u)
{
    pg_autofree char *full = NULL;
    if (asprintf(&full, "https://%s", s) < 0)
        return PG_ERR_NOMEM;
    return pg_go_url_parse(full, strlen(full), u);
}

/* ========================================================= net.SplitHostPort */

/* net.SplitHostPort; on error the whole host with an empty port (splitURL). */
void pg_go_split_host_port(const char *hp, const char **host, size_t *host_len, const char **port)
{
    size_t n = strlen(hp);
    const char *colon = last_char(hp, n, ':');
    *host = hp;
    *host_len = n;
    *port = "";
    if (!colon)
        return;
    const char *h = hp, *he = colon;
    if (hp[0] == '[') {
        const char *close = memchr(hp, ']', n);
        if (!close || close + 1 != colon)
            return;
        h = hp + 1;
        he = close;
        if (memchr(hp + 1, '[', n - 1) || memchr(close + 1, ']', n - (size_t)(close + 1 - hp)))
            return;
    } else if (memchr(hp, ':', (size_t)(colon - hp)) || memchr(hp, '[', n) || memchr(hp, ']', n)) {
        return;
    }
    *host = h;
    *host_len = (size_t)(he - h);
    *port = colon + 1;
}

/* ---------------------------------------------- filepath.Match, one label */

/* Go's getEsc: one (possibly escaped) character of a class; false: malformed. */
static bool glob_class_char(const char **pp, const char *e, uint32_t *out)
{
    const char *p = *pp;
    if (p >= e || *p == '-' || *p == ']')
        return false;
    if (*p == '\\' && ++p >= e)
        return false;
    size_t l = pg_go_utf8_decode((const unsigned char *)p, (size_t)(e - p), out);
    if (*out == PG_GO_RUNE_ERROR && l == 1)
        return false;
    p += l;
    if (p >= e)
        return false; /* a class must be closed */
    *pp = p;
    return true;
}

/*
 * One character class starting after '[' at p (end e). Sets *next past ']'
 * and *hit when rune r is in it. false: malformed (ErrBadPattern).
 */
static bool glob_class(const char *p, const char *e, uint32_t r, const char **next, bool *hit)
{
    bool negated = p < e && *p == '^';
    bool match = false;
    int nrange = 0;
    if (negated)
        p++;
    for (;;) {
        if (p < e && *p == ']' && nrange > 0) {
            *next = p + 1;
            *hit = match != negated;
            return true;
        }
        uint32_t lo, hi;
        if (!glob_class_char(&p, e, &lo))
            return false;
        hi = lo;
        if (*p == '-') {
            p++;
            if (!glob_class_char(&p, e, &hi))
                return false;
        }
        if (lo <= r && r <= hi)
            match = true;
        nrange++;
    }
}

/* Whether the whole pattern is well formed (Go reports ErrBadPattern => no match). */
static bool glob_valid(const char *p, const char *e)
{
    while (p < e) {
        if (*p == '\\') {
            if (p + 1 >= e)
                return false;
            p += 2;
        } else if (*p == '[') {
            bool hit;
            if (!glob_class(p + 1, e, 0, &p, &hit))
                return false;
        } else {
            p++;
        }
    }
    return true;
}

/*
 * Matches one non-star token of the pattern at *pp against the text at *tp.
 * Advances both on success.
 */
static bool glob_token(const char **pp, const char *pe, const char **tp, const char *te)
{
    const char *p = *pp, *t = *tp;
    if (t >= te)
        return false;
    uint32_t r;
    size_t rl = pg_go_utf8_decode((const unsigned char *)t, (size_t)(te - t), &r);
    if (*p == '?') {
        *pp = p + 1;
        *tp = t + rl;
        return true;
    }
    if (*p == '[') {
        bool hit = false;
        glob_class(p + 1, pe, r, pp, &hit); /* validated before */
        *tp = t + rl;
        return hit;
    }
    if (*p == '\\')
        p++;
    if (*p != *t)
        return false;
    *pp = p + 1;
    *tp = t + 1;
    return true;
}

/*
 * filepath.Match(pattern, name) on one host label (no '/' can occur). Every
 * non-star token matches exactly one character, so the classic single
 * backtrack point (retry from the last '*') is exact and O(len^2) at worst.
 */
bool pg_go_path_match(const char *pattern, const char *name)
{
    const char *p = pattern, *pe = pattern + strlen(pattern);
    const char *t = name, *te = name + strlen(name);
    if (!glob_valid(p, pe))
        return false;
    const char *star_p = NULL, *star_t = NULL;
    while (t < te || p < pe) {
        if (p < pe && *p == '*') {
            star_p = ++p;
            star_t = t;
            continue;
        }
        if (p < pe && glob_token(&p, pe, &t, te))
            continue;
        if (!star_p || star_t >= te)
            return false;
        star_t++; /* Go retries byte by byte after a star */
        p = star_p;
        t = star_t;
    }
    return true;
}
