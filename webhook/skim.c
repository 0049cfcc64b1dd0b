/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Text the webhook reads before it trusts it (skim.h). wh_review_uid_of_prefix
 * reads the first bytes of a review that cannot be parsed whole (over the size
 * bound or the memory budget, malformed, nested too deep): kube-apiserver writes
 * the AdmissionRequest with "uid" as its first member (Go marshals struct fields
 * in declaration order), so a review it sent can still be refused with HTTP 200
 * instead of failing the call. A skimmer, not a parser: it skips every other
 * value without building anything and gives up on anything it does not expect.
 */
#include "skim.h"

#include <string.h>

#define MAX_SKIP_DEPTH 4096

typedef struct skim {
    const char *p, *end;
} skim;

static void blanks(skim *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int eat(skim *s, char c)
{
    blanks(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 1;
    }
    return 0;
}

/* A string; raw and n give its text between the quotes, escapes as written. */
static int string_raw(skim *s, const char **raw, size_t *n)
{
    blanks(s);
    if (s->p >= s->end || *s->p != '"')
        return -1;
    const char *start = ++s->p;
    while (s->p < s->end) {
        char c = *s->p++;
        if (c == '\\') {
            if (s->p >= s->end)
                return -1;
            s->p++;
        } else if (c == '"') {
            *raw = start;
            *n = (size_t)(s->p - 1 - start);
            return 0;
        }
    }
    return -1;
}

static int skip_scalar(skim *s)
{
    const char *start = s->p;
    while (s->p < s->end && *s->p && strchr("+-.0123456789eEtrufalsn", *s->p))
        s->p++;
    return s->p > start ? 0 : -1;
}

/* Skips one value: strings honour escapes, containers are matched by depth. */
static int skip_value(skim *s)
{
    const char *raw;
    size_t n;
    blanks(s);
    if (s->p >= s->end)
        return -1;
    if (*s->p == '"')
        return string_raw(s, &raw, &n);
    if (*s->p != '{' && *s->p != '[')
        return skip_scalar(s);
    int depth = 0;
    while (s->p < s->end) {
        char c = *s->p;
        if (c == '"') {
            if (string_raw(s, &raw, &n) != 0)
                return -1;
            continue;
        }
        s->p++;
        if (c == '{' || c == '[') {
            if (++depth > MAX_SKIP_DEPTH)
                return -1;
        } else if ((c == '}' || c == ']') && --depth == 0)
            return 0;
    }
    return -1;
}

/* Inside an object (its '{' eaten): leaves s at the value of member key. */
static int find_member(skim *s, const char *key)
{
    size_t key_len = strlen(key);
    for (;;) {
        const char *k;
        size_t n;
        if (string_raw(s, &k, &n) != 0 || !eat(s, ':'))
            return -1;
        if (n == key_len && memcmp(k, key, n) == 0)
            return 0;
        if (skip_value(s) != 0 || !eat(s, ','))
            return -1; /* the end of the object, or garbage */
    }
}

int wh_review_uid_of_prefix(const char *text, size_t len, char *uid, size_t uid_size)
{
    skim s = {text, text + len};
    const char *raw;
    size_t n;
    if (!text || !eat(&s, '{') || find_member(&s, "request") != 0 || !eat(&s, '{') ||
        find_member(&s, "uid") != 0 || string_raw(&s, &raw, &n) != 0)
        return -1;
    if (n == 0 || n > WH_MAX_UID_BYTES || n >= uid_size)
        return -1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)raw[i] < 0x20 || (unsigned char)raw[i] > 0x7e || raw[i] == '\\')
            return -1;
    memcpy(uid, raw, n);
    uid[n] = '\0';
    return 0;
}

/*
 * wh_json_parse_cost: an upper bound of what jansson 2.14 allocates to parse a
 * text, from its tokens. Measured per token on this platform (glibc, 64-bit;
 * malloc_usable_size plus the chunk header) and rounded up: an object 235
 * bytes, an array 139, a member 91 plus its key, a string value 91 plus its
 * text, a number 43 (array slots included). A string's text is held at its
 * escaped length, and the lexer's buffer grows by doubling to twice the
 * longest one. docs/webhook.md ("Memory") has the table.
 */
#define COST_BASE 4096u
#define COST_OBJECT 288u
#define COST_ARRAY 176u
#define COST_MEMBER 144u
#define COST_STRING 112u
#define COST_SCALAR 64u

/* The index just past the string starting at text[i] (its opening quote). */
static size_t past_string(const char *text, size_t len, size_t i)
{
    for (i++; i < len && text[i] != '"'; i++)
        if (text[i] == '\\')
            i++;
    return i < len ? i + 1 : len;
}

static int scalar_char(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
           c == '+' || c == '.';
}

void wh_json_skim(const char *text, size_t len, wh_json_stats *st)
{
    memset(st, 0, sizeof *st);
    for (size_t i = 0; i < len;) {
        char c = text[i];
        if (c == '"') {
            size_t end = past_string(text, len, i), j = end;
            st->bytes += end - i;
            st->longest = end - i > st->longest ? end - i : st->longest;
            while (j < len &&
                   (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r'))
                j++;
            *(j < len && text[j] == ':' ? &st->members : &st->strings) += 1;
            i = end;
        } else if (scalar_char(c)) {
            st->scalars++;
            while (i < len && scalar_char(text[i]))
                i++;
        } else {
            st->objects += c == '{';
            st->arrays += c == '[';
            i++;
        }
    }
}

size_t wh_json_parse_cost(const char *text, size_t len)
{
    wh_json_stats st;
    wh_json_skim(text, len, &st);
    return COST_BASE + COST_OBJECT * st.objects + COST_ARRAY * st.arrays +
           COST_MEMBER * st.members + COST_STRING * st.strings + COST_SCALAR * st.scalars +
           st.bytes + 2 * st.longest;
}

/* ------------------------------------------------------- names and members */

int wh_is_dns_label(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return 0;
    return 1;
}

int wh_is_dns_subdomain(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 253)
        return 0;
    /* Labels separated by dots; each one a DNS-1123 label (no "..", no "/"). */
    char label[64];
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.')
            continue;
        size_t len = i - start;
        if (len == 0 || len > 63)
            return 0;
        memcpy(label, s + start, len);
        label[len] = '\0';
        if (!wh_is_dns_label(label))
            return 0;
        start = i + 1;
    }
    return 1;
}

const char *wh_text_at(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    const char *s = json_string_value(v);
    return s && strlen(s) == json_string_length(v) ? s : NULL;
}
