/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kubelet's credentialHash and its dockerconfigjson keyring.
 *
 * credentialHash = hex SHA-256 of Go's json.Marshal(AuthConfig{Username,
 * Password, Email}) (k8s pkg/credentialprovider). Every field is `omitempty`,
 * so the bytes are {"username":..,"password":..,"email":..} minus empty
 * fields, with encoding/json's string escaping (Go >= 1.22, which every
 * kubelet with KEP-2535 is built with).
 *
 * Matching a secret's entries to an image follows BasicDockerKeyring
 * (pkg/credentialprovider/keyring.go): keys are URL-parsed, indexed, sorted
 * in reverse byte order, and matched by host labels (filepath.Match per
 * label), equal ports and a path prefix; the "index.docker.io" key is a
 * fallback for Docker Hub images when nothing else matched.
 */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================= growable buffer */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void buf_append(buf *b, const void *data, size_t n)
{
    if (b->oom)
        return;
    if (n > SIZE_MAX / 2 - b->len) {
        b->oom = true;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_puts(buf *b, const char *s) { buf_append(b, s, strlen(s)); }

/* ======================================================= UTF-8 decoding */

#define RUNE_ERROR 0xFFFDu

/*
 * Go's utf8.DecodeRune: returns the byte length of the rune at s (n > 0) and
 * stores it in *r. Any invalid, overlong, surrogate or truncated sequence
 * yields RUNE_ERROR with length 1, so each bad byte is replaced on its own.
 */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *r)
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
        *r = RUNE_ERROR;
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
    *r = RUNE_ERROR;
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
        static const char hex[] = "0123456789abcdef";
        memcpy(tmp, "\\u00", 4);
        tmp[4] = hex[c >> 4];
        tmp[5] = hex[c & 15];
        tmp[6] = '\0';
        return tmp;
    }
    return NULL;
}

static void go_json_string(buf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    buf_append(b, "\"", 1);
    size_t i = 0;
    while (i < n) {
        char tmp[7];
        if (u[i] < 0x80) {
            const char *esc = ascii_escape(u[i], tmp);
            esc ? buf_puts(b, esc) : buf_append(b, s + i, 1);
            i++;
            continue;
        }
        uint32_t r;
        size_t len = utf8_decode(u + i, n - i, &r);
        if (r == RUNE_ERROR && len == 1)
            buf_puts(b, "\\ufffd"); /* Go writes the escape, not the raw rune */
        else if (r == 0x2028 || r == 0x2029)
            buf_puts(b, r == 0x2028 ? "\\u2028" : "\\u2029");
        else
            buf_append(b, s + i, len);
        i += len;
    }
    buf_append(b, "\"", 1);
}

/* A credential as byte strings: may hold NUL bytes (decoded from `auth`). */
typedef struct cred {
    const char *user, *pass, *email;
    size_t user_len, pass_len, email_len;
} cred;

static void go_json_field(buf *b, bool *first, const char *key, const char *v, size_t n)
{
    if (n == 0)
        return; /* omitempty */
    buf_puts(b, *first ? "\"" : ",\"");
    buf_puts(b, key);
    buf_puts(b, "\":");
    go_json_string(b, v, n);
    *first = false;
}

static int cred_hash(const cred *c, char out[PG_HASH_HEX_LEN + 1], pg_error *err)
{
    buf b = {0};
    bool first = true;
    buf_append(&b, "{", 1);
    go_json_field(&b, &first, "username", c->user, c->user_len);
    go_json_field(&b, &first, "password", c->pass, c->pass_len);
    go_json_field(&b, &first, "email", c->email, c->email_len);
    buf_append(&b, "}", 1);
    int rc = b.oom ? pg_fail(err, PG_ERR_NOMEM, "out of memory")
                   : pg_sha256_hex(b.p, b.len, out, err);
    free(b.p);
    return rc;
}

/* Length of s, refusing anything longer than a dockerconfig could carry. */
static int bounded_len(const char *s, const char *what, size_t *len, pg_error *err)
{
    *len = s ? strnlen(s, PG_MAX_DOCKERCONFIG_BYTES + 1) : 0;
    if (*len > PG_MAX_DOCKERCONFIG_BYTES)
        return pg_fail(err, PG_ERR_LIMIT, "%s longer than %u bytes", what,
                       PG_MAX_DOCKERCONFIG_BYTES);
    return PG_OK;
}

PG_API int pg_credential_hash(const char *username, const char *password, const char *email,
                              char out[PG_HASH_HEX_LEN + 1], pg_error *err)
{
    if (!out)
        return pg_fail(err, PG_ERR_INVALID, "no output buffer");
    cred c = {username ? username : "", password ? password : "", email ? email : "", 0, 0, 0};
    int rc = bounded_len(username, "username", &c.user_len, err);
    if (rc == PG_OK)
        rc = bounded_len(password, "password", &c.pass_len, err);
    if (rc == PG_OK)
        rc = bounded_len(email, "email", &c.email_len, err);
    return rc == PG_OK ? cred_hash(&c, out, err) : rc;
}

/* ============================================================ base64 (Go) */

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
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

/*
 * base64.StdEncoding (padded) or base64.RawStdEncoding (padded = false)
 * DecodeString: non-strict, so unused trailing bits are ignored. out must
 * hold n bytes. Returns false on corrupt input.
 */
static bool go_base64_decode(const char *s, size_t n, bool padded, unsigned char *out,
                             size_t *out_len)
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
        int v = b64_value((unsigned char)s[i]);
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
static bool ends_with_padding(const char *s, size_t n)
{
    while (n && strchr(" \t\n\r\v\f", s[n - 1]))
        n--;
    return n && s[n - 1] == '=';
}

/* ===================================================== dockerconfig entries */

typedef struct entry {
    char *key;      /* keyring index key, NULL when the location does not parse */
    char hash[PG_HASH_HEX_LEN + 1];
    size_t order;   /* position in the document: ties keep document order */
} entry;

typedef struct entries {
    entry *v;
    size_t n, cap;
} entries;

static void entries_free(entries *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].key);
    free(e->v);
}

/*
 * Go's encoding/json matches object keys to struct fields case-insensitively
 * (with Unicode simple folding: U+017F "ſ" folds to 's'). Returns true when
 * key folds to field (field is lowercase ASCII).
 */
static bool json_key_matches(const char *key, const char *field)
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

/* A string field: null leaves it unchanged (Go); any other type is an error. */
static int string_field(json_t *v, const char *field, const char **s, size_t *n, pg_error *err)
{
    if (json_is_null(v))
        return PG_OK;
    if (!json_is_string(v))
        return pg_fail(err, PG_ERR_INVALID, "dockerconfig: \"%s\" is not a string", field);
    *s = json_string_value(v);
    *n = json_string_length(v);
    return PG_OK;
}

/* Reads username/password/email/auth of one entry (last case variant wins, as in Go). */
static int read_entry_fields(json_t *obj, cred *c, const char **auth, size_t *auth_len,
                             pg_error *err)
{
    const char *key;
    json_t *v;
    int rc = PG_OK;
    json_object_foreach(obj, key, v)
    {
        if (json_key_matches(key, "username"))
            rc = string_field(v, "username", &c->user, &c->user_len, err);
        else if (json_key_matches(key, "password"))
            rc = string_field(v, "password", &c->pass, &c->pass_len, err);
        else if (json_key_matches(key, "email"))
            rc = string_field(v, "email", &c->email, &c->email_len, err);
        else if (json_key_matches(key, "auth"))
            rc = string_field(v, "auth", auth, auth_len, err);
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}

/* decodeDockerConfigFieldAuth: base64 "user:pass" replaces username/password. */
static int hash_with_auth(cred *c, const char *auth, size_t auth_len, char out[PG_HASH_HEX_LEN + 1],
                          pg_error *err)
{
    unsigned char *dec = malloc(auth_len + 1);
    if (!dec)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    size_t dec_len = 0;
    int rc = PG_OK;
    if (!go_base64_decode(auth, auth_len, ends_with_padding(auth, auth_len), dec, &dec_len)) {
        rc = pg_fail(err, PG_ERR_INVALID, "dockerconfig: \"auth\" is not valid base64");
    } else {
        const unsigned char *colon = memchr(dec, ':', dec_len);
        if (!colon) {
            rc = pg_fail(err, PG_ERR_INVALID, "dockerconfig: \"auth\" is not username:password");
        } else {
            c->user = (const char *)dec;
            c->user_len = (size_t)(colon - dec);
            c->pass = (const char *)colon + 1;
            c->pass_len = dec_len - c->user_len - 1;
            rc = cred_hash(c, out, err);
        }
    }
    free(dec);
    return rc;
}

static int entry_hash(json_t *obj, char out[PG_HASH_HEX_LEN + 1], pg_error *err)
{
    cred c = {"", "", "", 0, 0, 0};
    const char *auth = "";
    size_t auth_len = 0;
    if (json_is_null(obj))
        return cred_hash(&c, out, err); /* Go decodes null into a zero entry */
    if (!json_is_object(obj))
        return pg_fail(err, PG_ERR_INVALID, "dockerconfig: an entry is not an object");
    int rc = read_entry_fields(obj, &c, &auth, &auth_len, err);
    if (rc != PG_OK)
        return rc;
    if (auth_len)
        return hash_with_auth(&c, auth, auth_len, out, err);
    return cred_hash(&c, out, err);
}

/* ================================================ Go net/url, the parts used */

typedef struct url_parts {
    char *host; /* unescaped */
    char *path; /* unescaped */
} url_parts;

static void url_parts_free(url_parts *u)
{
    free(u->host);
    free(u->path);
    u->host = u->path = NULL;
}

static bool is_ascii_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int hex_val(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
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
            int h = i + 2 < n ? hex_val((unsigned char)s[i + 1]) : -1;
            int l = i + 2 < n ? hex_val((unsigned char)s[i + 2]) : -1;
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
static bool url_parse_authority(const char *a, size_t n, url_parts *u, bool *nomem)
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

/*
 * url.Parse of "http(s)://" + rest for the fields the keyring uses: Host and
 * Path (both unescaped). Returns PG_OK, PG_ERR_INVALID (url.Parse would fail)
 * or PG_ERR_NOMEM.
 */
static int url_parse(const char *s, size_t n, url_parts *u)
{
    memset(u, 0, sizeof *u);
    size_t scheme = strncmp(s, "http://", 7) == 0 ? 7 : 8;
    const char *hash = memchr(s, '#', n);
    size_t main_len = hash ? (size_t)(hash - s) : n;
    bool bad = false, nomem = false;
    if (hash) { /* the fragment must unescape */
        char *frag = url_unescape(hash + 1, n - main_len - 1, UNESCAPE_OTHER, &bad);
        if (!frag)
            return bad ? PG_ERR_INVALID : PG_ERR_NOMEM;
        free(frag);
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
        url_parts_free(u);
        return bad ? PG_ERR_INVALID : PG_ERR_NOMEM;
    }
    return PG_OK;
}

/* url.Parse("https://" + s) as parseSchemelessURL does. */
static int url_parse_schemeless(const char *s, url_parts *u)
{
    char *full = NULL;
    if (asprintf(&full, "https://%s", s) < 0)
        return PG_ERR_NOMEM;
    int rc = url_parse(full, strlen(full), u);
    free(full);
    return rc;
}

/* ================================================================ keyring */

/*
 * BasicDockerKeyring.Add: the index key of a location. "https://" is added
 * when no http(s) scheme is given; a "/v1/" or "/v2/" path prefix counts as
 * the bare host. *key is NULL (and PG_OK returned) when url.Parse fails: the
 * kubelet ignores such entries.
 */
static int location_key(const char *loc, size_t len, char **key)
{
    *key = NULL;
    char *value = NULL;
    bool has_scheme = strncmp(loc, "https://", 8) == 0 || strncmp(loc, "http://", 7) == 0;
    if (asprintf(&value, "%s%.*s", has_scheme ? "" : "https://", (int)len, loc) < 0)
        return PG_ERR_NOMEM;
    url_parts u;
    int rc = url_parse(value, strlen(value), &u);
    free(value);
    if (rc != PG_OK)
        return rc == PG_ERR_INVALID ? PG_OK : rc;
    const char *path = u.path;
    if (strncmp(path, "/v2/", 4) == 0 || strncmp(path, "/v1/", 4) == 0)
        path += 3;
    bool use_path = path[0] && strcmp(path, "/") != 0;
    rc = asprintf(key, "%s%s", u.host, use_path ? path : "") < 0 ? PG_ERR_NOMEM : PG_OK;
    if (rc != PG_OK)
        *key = NULL;
    url_parts_free(&u);
    return rc;
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
    size_t l = utf8_decode((const unsigned char *)p, (size_t)(e - p), out);
    if (*out == RUNE_ERROR && l == 1)
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
    size_t rl = utf8_decode((const unsigned char *)t, (size_t)(te - t), &r);
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
static bool glob_match(const char *pattern, const char *name)
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

/* ------------------------------------------------------- URLsMatch */

/* net.SplitHostPort; on error the whole host with an empty port (splitURL). */
static void split_host_port(const char *hp, const char **host, size_t *host_len, const char **port)
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

static size_t count_labels(const char *h, size_t n)
{
    size_t c = 1;
    for (size_t i = 0; i < n; i++)
        c += h[i] == '.';
    return c;
}

/* Next '.'-separated label of h as a new string; advances *pos. */
static char *next_label(const char *h, size_t n, size_t *pos)
{
    size_t start = *pos, i = start;
    while (i < n && h[i] != '.')
        i++;
    *pos = i + 1;
    return strndup(h + start, i - start);
}

static int labels_match(const char *gh, size_t gn, const char *th, size_t tn, bool *match)
{
    size_t gp = 0, tp = 0;
    size_t count = count_labels(gh, gn);
    *match = true;
    for (size_t k = 0; k < count && *match; k++) {
        char *g = next_label(gh, gn, &gp);
        char *t = next_label(th, tn, &tp);
        if (!g || !t) {
            free(g);
            free(t);
            return PG_ERR_NOMEM;
        }
        *match = glob_match(g, t);
        free(g);
        free(t);
    }
    return PG_OK;
}

static int urls_match(const url_parts *glob, const url_parts *target, bool *match)
{
    const char *gh, *th, *gport, *tport;
    size_t gn, tn;
    split_host_port(glob->host, &gh, &gn, &gport);
    split_host_port(target->host, &th, &tn, &tport);
    *match = false;
    if (strcmp(gport, tport) != 0 || count_labels(gh, gn) != count_labels(th, tn) ||
        strncmp(target->path, glob->path, strlen(glob->path)) != 0)
        return PG_OK;
    return labels_match(gh, gn, th, tn, match);
}

/* URLsMatchStr(key, image); a key that does not parse matches nothing. */
static int key_matches(const char *key, const url_parts *image, bool *match)
{
    url_parts g;
    *match = false;
    int rc = url_parse_schemeless(key, &g);
    if (rc != PG_OK)
        return rc == PG_ERR_INVALID ? PG_OK : rc;
    rc = urls_match(&g, image, match);
    url_parts_free(&g);
    return rc;
}

/* isDefaultRegistryMatch on the normalised image name. */
static bool is_default_registry_match(const char *image)
{
    const char *slash = strchr(image, '/');
    if (image[0] == '\0' || image[0] == '/')
        return false;
    if (!slash)
        return true;
    size_t n = (size_t)(slash - image);
    if ((n == 9 && strncmp(image, "docker.io", 9) == 0) ||
        (n == 15 && strncmp(image, "index.docker.io", 15) == 0))
        return true;
    return !memchr(image, '.', n) && !memchr(image, ':', n);
}

/* ========================================================= lookup results */

typedef struct strv {
    char **v;
    size_t n, cap;
} strv;

static int strv_push(strv *s, const char *str)
{
    if (s->n + 1 >= s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        char **nv = realloc(s->v, cap * sizeof *nv);
        if (!nv)
            return PG_ERR_NOMEM;
        s->v = nv;
        s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(str)))
        return PG_ERR_NOMEM;
    s->v[++s->n] = NULL;
    return PG_OK;
}

/* Reverse byte order of keys (sort.Reverse(sort.StringSlice)), document order within a key. */
static int entry_cmp(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    int c = strcmp(y->key, x->key);
    if (c)
        return c;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The entries of one key group [i, end). */
static size_t group_end(const entries *e, size_t i)
{
    size_t j = i + 1;
    while (j < e->n && strcmp(e->v[j].key, e->v[i].key) == 0)
        j++;
    return j;
}

static int push_group(strv *out, const entries *e, size_t i, size_t end)
{
    for (; i < end; i++)
        if (strv_push(out, e->v[i].hash) != PG_OK)
            return PG_ERR_NOMEM;
    return PG_OK;
}

/* BasicDockerKeyring.Lookup over entries sorted by entry_cmp. */
static int keyring_lookup(const entries *e, const char *image_name, strv *out)
{
    url_parts target;
    int rc = url_parse_schemeless(image_name, &target);
    if (rc != PG_OK)
        return rc == PG_ERR_INVALID ? PG_OK : rc; /* cannot match anything */
    for (size_t i = 0; i < e->n && rc == PG_OK;) {
        size_t end = group_end(e, i);
        bool match = false;
        rc = key_matches(e->v[i].key, &target, &match);
        if (rc == PG_OK && match)
            rc = push_group(out, e, i, end);
        i = end;
    }
    url_parts_free(&target);
    if (rc != PG_OK || out->n > 0 || !is_default_registry_match(image_name))
        return rc;
    for (size_t i = 0; i < e->n; i++) /* Docker Hub fallback */
        if (strcmp(e->v[i].key, "index.docker.io") == 0 && strv_push(out, e->v[i].hash) != PG_OK)
            return PG_ERR_NOMEM;
    return PG_OK;
}

/* ====================================================== document decoding */

static int add_entry(entries *e, const char *loc, json_t *val, pg_error *err)
{
    char hash[PG_HASH_HEX_LEN + 1];
    int rc = entry_hash(val, hash, err); /* a bad entry fails the whole secret, as in Go */
    if (rc != PG_OK)
        return rc;
    char *key;
    if (location_key(loc, strlen(loc), &key) != PG_OK)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (!key)
        return PG_OK; /* the kubelet logs and ignores unparsable locations */
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 8;
        entry *nv = realloc(e->v, cap * sizeof *nv);
        if (!nv) {
            free(key);
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
        }
        e->v = nv;
        e->cap = cap;
    }
    e->v[e->n].key = key;
    memcpy(e->v[e->n].hash, hash, sizeof hash);
    e->v[e->n].order = e->n;
    e->n++;
    return PG_OK;
}

/* A DockerConfig map: location -> entry. null is an empty map. */
static int add_auth_map(entries *e, json_t *map, pg_error *err)
{
    if (json_is_null(map))
        return PG_OK;
    if (!json_is_object(map))
        return pg_fail(err, PG_ERR_INVALID, "dockerconfig: \"auths\" is not an object");
    const char *loc;
    json_t *val;
    json_object_foreach(map, loc, val)
    {
        int rc = add_entry(e, loc, val, err);
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}

/* DockerConfigJSON.HTTPHeaders is a map[string]string: check its type like Go. */
static int check_http_headers(json_t *h, pg_error *err)
{
    const char *k;
    json_t *v;
    if (json_is_null(h))
        return PG_OK;
    if (!json_is_object(h))
        return pg_fail(err, PG_ERR_INVALID, "dockerconfig: \"HttpHeaders\" is not an object");
    json_object_foreach(h, k, v)
    {
        if (!json_is_string(v) && !json_is_null(v))
            return pg_fail(err, PG_ERR_INVALID, "dockerconfig: a header value is not a string");
    }
    return PG_OK;
}

static bool has_auths_key(json_t *root)
{
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
    {
        if (json_key_matches(k, "auths"))
            return true;
    }
    return false;
}

/* {"auths":{...}} (kubernetes.io/dockerconfigjson) or a bare map (.dockercfg). */
static int load_entries(json_t *root, entries *e, pg_error *err)
{
    if (json_is_null(root))
        return PG_OK; /* Go unmarshals null into an empty config */
    if (!json_is_object(root))
        return pg_fail(err, PG_ERR_INVALID, "dockerconfig: not a JSON object");
    if (!has_auths_key(root))
        return add_auth_map(e, root, err);
    const char *k;
    json_t *v;
    json_t *auths = NULL;
    json_object_foreach(root, k, v)
    {
        int rc = PG_OK;
        if (json_key_matches(k, "auths")) {
            /* Go would merge both maps into one; refuse the ambiguity instead. */
            if (auths)
                return pg_fail(err, PG_ERR_INVALID, "dockerconfig: \"auths\" given twice");
            auths = v;
        } else if (json_key_matches(k, "httpheaders"))
            rc = check_http_headers(v, err);
        if (rc != PG_OK)
            return rc;
    }
    return add_auth_map(e, auths, err);
}

static int lookup_image(entries *e, const char *image, strv *out, pg_error *err)
{
    pg_error local = {0};
    char *name = pg_image_name(image, &local);
    if (!name) {
        if (err)
            *err = local;
        return local.code;
    }
    if (e->n)
        qsort(e->v, e->n, sizeof *e->v, entry_cmp);
    int rc = keyring_lookup(e, name, out);
    free(name);
    return rc == PG_OK ? PG_OK : pg_fail(err, rc, "out of memory");
}

PG_API int pg_dockerconfig_hashes(const char *json, size_t len, const char *image,
                                  char ***hashes_out, pg_error *err)
{
    if (!hashes_out)
        return pg_fail(err, PG_ERR_INVALID, "no output pointer");
    *hashes_out = NULL;
    if (!json || !image)
        return pg_fail(err, PG_ERR_INVALID, "no dockerconfig or image");
    if (len > PG_MAX_DOCKERCONFIG_BYTES)
        return pg_fail(err, PG_ERR_LIMIT, "dockerconfig larger than %u bytes",
                       PG_MAX_DOCKERCONFIG_BYTES);
    json_t *root = pg_json_parse(json, len, "dockerconfig", err);
    if (!root)
        return PG_ERR_INVALID;
    entries e = {0};
    strv out = {0};
    int rc = load_entries(root, &e, err);
    if (rc == PG_OK)
        rc = lookup_image(&e, image, &out, err);
    if (rc == PG_OK && !out.v && !(out.v = calloc(1, sizeof *out.v)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    entries_free(&e);
    json_decref(root);
    if (rc != PG_OK) {
        pg_strv_free(out.v);
        return rc;
    }
    *hashes_out = out.v;
    return PG_OK;
}
