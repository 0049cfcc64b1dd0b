/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hook's JSON reader (hook.h, "oci_scan.c"): one bounded pass over the OCI
 * state or the bundle's config.json that accepts exactly the documents
 * pg_json_parse accepts (jansson 2.14 with JSON_REJECT_DUPLICATES) and keeps only
 * what the decision reads: the root object's members, and every member of one
 * of them (config.json's "annotations"). Everything else is validated and
 * dropped, so a 7 KiB config.json costs one pass and no allocation once the
 * buffers are warm, instead of a tree of a few hundred jansson values.
 *
 * What "exactly" means, rule by rule, as jansson's lexer and parser have it:
 * the root is an object or an array; whitespace is space, tab, CR, LF; strings
 * hold no byte below 0x20, only the escapes \" \\ \/ \b \f \n \r \t \uXXXX, a
 * high surrogate escape only followed by a low one, no lone low surrogate, no
 * \u0000, and only well-formed UTF-8 (no overlong form, no surrogate, nothing
 * above U+10FFFF); numbers have JSON's grammar, an integer must fit in a signed
 * 64-bit value and a real must not overflow a double; a value at a nesting
 * depth above 2048 (the root is at depth 1) is refused; no object holds the
 * same decoded key twice; nothing but whitespace follows the root; and one
 * quirk of its lexer, a single NUL byte right after a number or a literal is
 * skipped (scan_value_start). The fuzz targets fuzz_oci_config and
 * fuzz_oci_state check every input they find against jansson itself.
 *
 * Duplicate keys are found by sorting each object's keys when it closes (no
 * hash: a document cannot make it quadratic), which also leaves the root's and
 * the map's members sorted for lookups by binary search.
 */
#include "hook.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 2048              /* jansson's JSON_PARSER_MAX_DEPTH */
#define MAX_SCAN_BYTES (256u << 20) /* offsets are 32-bit; far above any bound of the hook */
/* Buffers beyond these are given back after the document (hook_doc_trim). */
#define KEEP_BYTES (256u << 10)
#define KEEP_KEYS 4096u
#define KEEP_FRAMES 256u

/* One object member: its decoded key, and for the root's and the map's, its value. */
typedef struct scan_key {
    uint32_t key, key_len; /* in text */
    uint32_t value;        /* in text when kind is HOOK_JSON_STRING */
    uint32_t kind;         /* hook_json_kind */
} scan_key;

/* An open container: its kind and, for an object, where its keys start on the key stack. */
typedef struct scan_frame {
    uint32_t keys_base;
    uint8_t is_object;
    uint8_t role; /* ROLE_* below */
} scan_frame;

enum { ROLE_NONE = 0, ROLE_ROOT = 1, ROLE_MAP = 2 };

struct hook_doc {
    char *in; /* hook_doc_read_at's buffer */
    size_t in_cap;
    char *text; /* decoded keys and kept values, each NUL-terminated */
    size_t text_len, text_cap;
    scan_key *keys; /* the open objects' keys, innermost last */
    size_t n_keys, keys_cap;
    scan_key *root, *map; /* the root's and the map's members, sorted by key */
    size_t n_root, n_map, root_cap, map_cap;
    scan_frame *stack; /* the open containers, grown as deep as a document goes */
    size_t stack_cap;
    /* The last scan's results. */
    bool scanned, root_is_object, map_seen;
    const char *map_key;
    size_t map_key_len;
};

typedef struct scanner {
    hook_doc *d;
    const unsigned char *p, *end, *start;
    const char *why; /* set with the first error */
    size_t depth;    /* open containers */
} scanner;

/* ------------------------------------------------------------ buffers */

hook_doc *hook_doc_new(void) { return calloc(1, sizeof(hook_doc)); }

void hook_doc_free(hook_doc *d)
{
    if (!d)
        return;
    free(d->in);
    free(d->text);
    free(d->keys);
    free(d->root);
    free(d->map);
    free(d->stack);
    free(d);
}

static void give_back(void **p, size_t *cap, size_t keep)
{
    if (*cap > keep) {
        free(*p);
        *p = NULL;
        *cap = 0;
    }
}

void hook_doc_trim(hook_doc *d)
{
    if (!d)
        return;
    d->scanned = false; /* the results may point into what is given back */
    give_back((void **)&d->in, &d->in_cap, KEEP_BYTES);
    give_back((void **)&d->text, &d->text_cap, KEEP_BYTES);
    give_back((void **)&d->keys, &d->keys_cap, KEEP_KEYS);
    give_back((void **)&d->root, &d->root_cap, KEEP_KEYS);
    give_back((void **)&d->map, &d->map_cap, KEEP_KEYS);
    give_back((void **)&d->stack, &d->stack_cap, KEEP_FRAMES);
}

/* *p holds at least n elements of size each (grown by doubling, never shrunk here). */
static bool reserve(void **p, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap)
        return true;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < n)
        ncap *= 2;
    void *np = realloc(*p, ncap * size);
    if (!np)
        return false;
    *p = np;
    *cap = ncap;
    return true;
}

/* ------------------------------------------------------------ lexing */

static bool fail(scanner *s, const char *why)
{
    if (!s->why)
        s->why = why;
    return false;
}

static void skip_ws(scanner *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
        s->p++;
}

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Four hex digits at p (bounds checked by the caller), or -1. */
static int32_t hex4(const unsigned char *p)
{
    int32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_value(p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

static size_t put_utf8(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* One \u escape (p at the backslash) and, for a high surrogate, its low half: the code point. */
static bool unicode_escape(scanner *s, uint32_t *cp)
{
    if (s->end - s->p < 6 || hex4(s->p + 2) < 0)
        return fail(s, "invalid escape");
    uint32_t v = (uint32_t)hex4(s->p + 2);
    s->p += 6;
    if (v >= 0xDC00 && v <= 0xDFFF)
        return fail(s, "invalid Unicode (a lone low surrogate)");
    if (v >= 0xD800 && v <= 0xDBFF) {
        if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u')
            return fail(s, "invalid Unicode (a high surrogate alone)");
        int32_t lo = hex4(s->p + 2);
        if (lo < 0)
            return fail(s, "invalid escape");
        if (lo < 0xDC00 || lo > 0xDFFF)
            return fail(s, "invalid Unicode (a high surrogate without its low half)");
        s->p += 6;
        v = 0x10000 + ((v - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
    }
    if (v == 0)
        return fail(s, "\\u0000 is not allowed");
    *cp = v;
    return true;
}

/* One multi-byte UTF-8 sequence at p (p[0] >= 0x80), as jansson's utf8_check_full. */
static bool utf8_sequence(scanner *s, size_t *n)
{
    unsigned char c = s->p[0];
    size_t len;
    uint32_t v;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        v = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        v = c & 0x07;
    } else {
        return fail(s, "invalid UTF-8");
    }
    if ((size_t)(s->end - s->p) < len)
        return fail(s, "invalid UTF-8");
    for (size_t i = 1; i < len; i++) {
        if ((s->p[i] & 0xC0) != 0x80)
            return fail(s, "invalid UTF-8");
        v = (v << 6) | (s->p[i] & 0x3F);
    }
    if ((len == 3 && (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF))) ||
        (len == 4 && (v < 0x10000 || v > 0x10FFFF)))
        return fail(s, "invalid UTF-8");
    *n = len;
    return true;
}

/*
 * A string (p at its opening quote). out NULL: validated only; otherwise
 * decoded at out (room for the raw length is there) and *len set.
 */
/* 1 for a byte that stands for itself in a string: printable ASCII but the quote and backslash. */
static const unsigned char plain_byte[256] = {
    [0x20] = 1,
    [0x21] = 1,
    [0x23 ... 0x5B] = 1,
    [0x5D ... 0x7F] = 1,
};

static bool scan_string(scanner *s, char *out, size_t *len)
{
    size_t n = 0;
    s->p++;
    for (;;) {
        const unsigned char *run = s->p;
        while (s->p < s->end && plain_byte[*s->p])
            s->p++;
        if (out && s->p > run) {
            memcpy(out + n, run, (size_t)(s->p - run));
            n += (size_t)(s->p - run);
        }
        if (s->p == s->end)
            return fail(s, "premature end of input in a string");
        unsigned char c = *s->p;
        if (c == '"') {
            s->p++;
            break;
        }
        if (c < 0x20)
            return fail(s, "control character in a string");
        if (c >= 0x80) {
            size_t k;
            if (!utf8_sequence(s, &k))
                return false;
            if (out)
                memcpy(out + n, s->p, k);
            n += k;
            s->p += k;
            continue;
        }
        /* A backslash. */
        if (s->end - s->p < 2)
            return fail(s, "premature end of input in a string");
        static const char plain[] = "\"\\/bfnrt", decoded[] = "\"\\/\b\f\n\r\t";
        const char *e = s->p[1] ? strchr(plain, s->p[1]) : NULL;
        if (e) {
            if (out)
                out[n] = decoded[e - plain];
            n++;
            s->p += 2;
        } else if (s->p[1] == 'u') {
            uint32_t cp;
            if (!unicode_escape(s, &cp))
                return false;
            char tmp[4];
            size_t k = put_utf8(cp, tmp);
            if (out)
                memcpy(out + n, tmp, k);
            n += k;
        } else {
            return fail(s, "invalid escape");
        }
    }
    if (out)
        out[n] = '\0';
    if (len)
        *len = n;
    return true;
}

/* A string kept in text: its offset and length. */
static bool keep_string(scanner *s, uint32_t *off, uint32_t *len)
{
    hook_doc *d = s->d;
    size_t n;
    if (!scan_string(s, d->text + d->text_len, &n))
        return false;
    *off = (uint32_t)d->text_len;
    *len = (uint32_t)n;
    d->text_len += n + 1;
    return true;
}

static bool is_digit(const unsigned char *p, const unsigned char *end)
{
    return p < end && *p >= '0' && *p <= '9';
}

/* Whether the integer digits (no sign, no leading zero) exceed jansson's json_int_t. */
static bool integer_overflows(const unsigned char *digits, size_t n, bool negative)
{
    static const char max_pos[] = "9223372036854775807", max_neg[] = "9223372036854775808";
    if (n != sizeof max_pos - 1)
        return n > sizeof max_pos - 1;
    return memcmp(digits, negative ? max_neg : max_pos, n) > 0;
}

/* A real that strtod turns into an infinity (jansson: "real number overflow"). */
static bool real_overflows(scanner *s, const unsigned char *from, size_t n)
{
    /* The number's own bytes were never decoded into text, so they fit behind it. */
    char *copy = s->d->text + s->d->text_len;
    memcpy(copy, from, n);
    copy[n] = '\0';
    errno = 0;
    double v = strtod(copy, NULL);
    return (v == HUGE_VAL || v == -HUGE_VAL) && errno == ERANGE;
}

static bool scan_number(scanner *s)
{
    const unsigned char *from = s->p;
    bool negative = *s->p == '-';
    if (negative)
        s->p++;
    const unsigned char *digits = s->p;
    if (!is_digit(s->p, s->end))
        return fail(s, "invalid number");
    if (*s->p == '0') {
        s->p++;
        if (is_digit(s->p, s->end))
            return fail(s, "invalid number (a leading zero)");
    } else {
        while (is_digit(s->p, s->end))
            s->p++;
    }
    size_t n_digits = (size_t)(s->p - digits);
    bool real = false;
    if (s->p < s->end && *s->p == '.') {
        real = true;
        s->p++;
        if (!is_digit(s->p, s->end))
            return fail(s, "invalid number");
        while (is_digit(s->p, s->end))
            s->p++;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        real = true;
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
            s->p++;
        if (!is_digit(s->p, s->end))
            return fail(s, "invalid number");
        while (is_digit(s->p, s->end))
            s->p++;
    }
    if (!real && integer_overflows(digits, n_digits, negative))
        return fail(s, "too big integer");
    if (real && real_overflows(s, from, (size_t)(s->p - from)))
        return fail(s, "real number overflow");
    return true;
}

static bool scan_literal(scanner *s)
{
    static const char *const words[] = {"true", "false", "null"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(s->end - s->p) >= n && memcmp(s->p, words[i], n) == 0) {
            s->p += n;
            return true;
        }
    }
    return fail(s, "invalid token");
}

/* ------------------------------------------------------------ objects */

static int compare_keys(const char *text, const scan_key *a, const scan_key *b)
{
    size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int c = memcmp(text + a->key, text + b->key, n);
    if (c)
        return c;
    return a->key_len < b->key_len ? -1 : a->key_len > b->key_len;
}

static void sift_down(const char *text, scan_key *k, size_t root, size_t n)
{
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && compare_keys(text, &k[child], &k[child + 1]) < 0)
            child++;
        if (compare_keys(text, &k[root], &k[child]) >= 0)
            return;
        scan_key t = k[root];
        k[root] = k[child];
        k[child] = t;
        root = child;
    }
}

/* Sorts an object's keys (insertion sort when small, heapsort: never quadratic). */
static void sort_keys(const char *text, scan_key *k, size_t n)
{
    if (n <= 16) {
        for (size_t i = 1; i < n; i++) {
            scan_key t = k[i];
            size_t j = i;
            while (j > 0 && compare_keys(text, &k[j - 1], &t) > 0) {
                k[j] = k[j - 1];
                j--;
            }
            k[j] = t;
        }
        return;
    }
    for (size_t i = n / 2; i-- > 0;)
        sift_down(text, k, i, n);
    for (size_t end = n - 1; end > 0; end--) {
        scan_key t = k[0];
        k[0] = k[end];
        k[end] = t;
        sift_down(text, k, 0, end);
    }
}

/* Closes the innermost object: its keys sorted, checked for a duplicate, kept when needed. */
static bool close_object(scanner *s, const scan_frame *f)
{
    hook_doc *d = s->d;
    size_t n = d->n_keys - f->keys_base;
    if (n == 0) { /* an empty object (d->keys may still be NULL: no offset from it) */
        if (f->role == ROLE_ROOT)
            d->n_root = 0;
        else if (f->role == ROLE_MAP)
            d->n_map = 0;
        return true;
    }
    scan_key *k = d->keys + f->keys_base;
    sort_keys(d->text, k, n);
    for (size_t i = 1; i < n; i++)
        if (compare_keys(d->text, &k[i - 1], &k[i]) == 0)
            return fail(s, "duplicate object key");
    if (f->role == ROLE_ROOT || f->role == ROLE_MAP) {
        scan_key **to = f->role == ROLE_ROOT ? &d->root : &d->map;
        size_t *cap = f->role == ROLE_ROOT ? &d->root_cap : &d->map_cap;
        if (!reserve((void **)to, cap, n, sizeof **to))
            return fail(s, "out of memory");
        memcpy(*to, k, n * sizeof *k);
        *(f->role == ROLE_ROOT ? &d->n_root : &d->n_map) = n;
    }
    d->n_keys = f->keys_base;
    return true;
}

/* The member key just read (p after it): which role an object value of it would have. */
static uint8_t child_role(const scanner *s, const scan_frame *f)
{
    const hook_doc *d = s->d;
    if (f->role != ROLE_ROOT || !d->map_key)
        return ROLE_NONE;
    const scan_key *k = &d->keys[d->n_keys - 1];
    return k->key_len == d->map_key_len && memcmp(d->text + k->key, d->map_key, k->key_len) == 0
               ? ROLE_MAP
               : ROLE_NONE;
}

/* A member's key and colon (p at the key's quote); its record on the key stack. */
static bool scan_member_key(scanner *s)
{
    hook_doc *d = s->d;
    if (s->p == s->end || *s->p != '"')
        return fail(s, "string or '}' expected");
    if (!reserve((void **)&d->keys, &d->keys_cap, d->n_keys + 1, sizeof *d->keys))
        return fail(s, "out of memory");
    scan_key *k = &d->keys[d->n_keys];
    /* No NUL can be decoded (raw control bytes and \u0000 are refused), so a key is a C string. */
    if (!keep_string(s, &k->key, &k->key_len))
        return false;
    k->kind = HOOK_JSON_OTHER;
    k->value = 0;
    d->n_keys++;
    skip_ws(s);
    if (s->p == s->end || *s->p != ':')
        return fail(s, "':' expected");
    s->p++;
    return true;
}

/* ------------------------------------------------------------ the document */

/* The innermost open object's current member, when its value is to be recorded. */
static scan_key *recorded_member(scanner *s)
{
    if (s->depth == 0)
        return NULL;
    const scan_frame *f = &s->d->stack[s->depth - 1];
    if (!f->is_object || f->role == ROLE_NONE)
        return NULL;
    return &s->d->keys[s->d->n_keys - 1];
}

/* Opens a container (p at its bracket); the root's role is ROOT, a map member's MAP. */
static bool open_container(scanner *s, bool is_object, uint8_t role)
{
    hook_doc *d = s->d;
    if (!reserve((void **)&d->stack, &d->stack_cap, s->depth + 1, sizeof *d->stack))
        return fail(s, "out of memory");
    scan_frame *f = &d->stack[s->depth++];
    f->is_object = is_object;
    f->role = is_object ? role : ROLE_NONE;
    f->keys_base = (uint32_t)s->d->n_keys;
    if (is_object && role == ROLE_MAP)
        s->d->map_seen = true;
    s->p++;
    return true;
}

/*
 * One scalar value, or the opening of a container (p at its first byte). The
 * depth is jansson's: every value counts, the root is 1.
 */
static bool scan_value_start(scanner *s, bool *opened)
{
    *opened = false;
    if (s->depth + 1 > MAX_DEPTH)
        return fail(s, "maximum parsing depth reached");
    if (s->p == s->end)
        return fail(s, "premature end of input");
    scan_key *member = recorded_member(s);
    uint8_t role = ROLE_NONE;
    if (member && s->d->stack[s->depth - 1].role == ROLE_ROOT)
        role = child_role(s, &s->d->stack[s->depth - 1]);
    switch (*s->p) {
    case '{':
        if (member)
            member->kind = HOOK_JSON_OBJECT;
        *opened = true;
        return open_container(s, true, role);
    case '[': *opened = true; return open_container(s, false, ROLE_NONE);
    case '"':
        if (member) {
            member->kind = HOOK_JSON_STRING;
            uint32_t len;
            return keep_string(s, &member->value, &len);
        }
        return scan_string(s, NULL, NULL);
    default:
        if (!(*s->p == '-' || (*s->p >= '0' && *s->p <= '9') ? scan_number(s) : scan_literal(s)))
            return false;
        /*
         * jansson's lexer reads one byte past a number or a literal and puts it
         * back; a NUL byte put back is lost (its buffer takes NUL for "empty"),
         * so one NUL right after such a token is skipped: so here.
         */
        if (s->p < s->end && *s->p == '\0')
            s->p++;
        return true;
    }
}

/* Closes the innermost container (p at its closing bracket). */
static bool close_container(scanner *s)
{
    const scan_frame *f = &s->d->stack[s->depth - 1];
    s->p++;
    if (f->is_object && !close_object(s, f))
        return false;
    s->depth--;
    return true;
}

typedef enum scan_state { NEED_VALUE, AFTER_OPEN, AFTER_VALUE } scan_state;

/*
 * The grammar as a loop over three states, the open containers on d->stack:
 * a value to read; just inside an opened container (its close, or its first
 * member or element); after a value (a comma and the next, or the close).
 */
static bool scan_document(scanner *s)
{
    skip_ws(s);
    if (s->p == s->end || (*s->p != '{' && *s->p != '['))
        return fail(s, "'[' or '{' expected");
    s->d->root_is_object = *s->p == '{';
    if (!open_container(s, s->d->root_is_object, ROLE_ROOT))
        return false;
    scan_state state = AFTER_OPEN;
    while (s->depth > 0) {
        const scan_frame *f = &s->d->stack[s->depth - 1];
        char closer = f->is_object ? '}' : ']';
        bool opened;
        skip_ws(s);
        switch (state) {
        case NEED_VALUE:
            if (!scan_value_start(s, &opened))
                return false;
            state = opened ? AFTER_OPEN : AFTER_VALUE;
            break;
        case AFTER_OPEN:
            if (s->p < s->end && *s->p == closer) {
                if (!close_container(s))
                    return false;
                state = AFTER_VALUE;
            } else {
                if (f->is_object && !scan_member_key(s))
                    return false;
                state = NEED_VALUE;
            }
            break;
        case AFTER_VALUE:
            if (s->p == s->end)
                return fail(s, "premature end of input");
            if (*s->p == ',') {
                s->p++;
                skip_ws(s);
                if (f->is_object && !scan_member_key(s))
                    return false;
                state = NEED_VALUE;
            } else if (*s->p == closer) {
                if (!close_container(s))
                    return false;
            } else {
                return fail(s, f->is_object ? "'}' expected" : "']' expected");
            }
            break;
        }
    }
    skip_ws(s);
    if (s->p != s->end)
        return fail(s, "end of file expected");
    return true;
}

int hook_doc_scan(hook_doc *d, const char *buf, size_t len, const char *map_key, const char *what,
                  pg_error *err)
{
    d->scanned = d->root_is_object = d->map_seen = false;
    d->n_keys = d->n_root = d->n_map = d->text_len = 0;
    d->map_key = map_key;
    d->map_key_len = map_key ? strlen(map_key) : 0;
    if (len > MAX_SCAN_BYTES)
        return pg_fail(err, PG_ERR_LIMIT, "%s: larger than %u bytes", what, MAX_SCAN_BYTES);
    /* Decoded strings never outgrow their quoted form, so the text fits in len + 1. */
    if (!reserve((void **)&d->text, &d->text_cap, len + 1, 1))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    scanner s = {.d = d,
                 .p = (const unsigned char *)buf,
                 .end = (const unsigned char *)buf + len,
                 .start = (const unsigned char *)buf};
    if (!scan_document(&s)) {
        int code = strcmp(s.why, "out of memory") == 0 ? PG_ERR_NOMEM : PG_ERR_INVALID;
        return pg_fail(err, code, "%s: invalid JSON at offset %zu: %s", what,
                       (size_t)(s.p - s.start), s.why);
    }
    if (!d->root_is_object)
        d->n_root = 0;
    d->scanned = true;
    return PG_OK;
}

/* ------------------------------------------------------------ results */

static const scan_key *find(const hook_doc *d, const scan_key *k, size_t n, const char *key)
{
    scan_key probe = {.key_len = (uint32_t)strlen(key)};
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const scan_key *m = &k[mid];
        size_t common = m->key_len < probe.key_len ? m->key_len : probe.key_len;
        int c = memcmp(d->text + m->key, key, common);
        if (c == 0)
            c = m->key_len < probe.key_len ? -1 : m->key_len > probe.key_len;
        if (c == 0)
            return m;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

bool hook_doc_root_is_object(const hook_doc *d) { return d->scanned && d->root_is_object; }

hook_json_kind hook_doc_member(const hook_doc *d, const char *key, const char **value)
{
    if (value)
        *value = NULL;
    const scan_key *k = d->scanned ? find(d, d->root, d->n_root, key) : NULL;
    if (!k)
        return HOOK_JSON_ABSENT;
    if (k->kind == HOOK_JSON_STRING && value)
        *value = d->text + k->value;
    return (hook_json_kind)k->kind;
}

size_t hook_doc_map_size(const hook_doc *d) { return d->scanned && d->map_seen ? d->n_map : 0; }

int hook_doc_map_entry(const hook_doc *d, size_t i, const char **key, const char **value)
{
    if (i >= hook_doc_map_size(d))
        return -1;
    const scan_key *k = &d->map[i];
    *key = d->text + k->key;
    *value = k->kind == HOOK_JSON_STRING ? d->text + k->value : NULL;
    return 0;
}

const char *hook_doc_map_get(const hook_doc *d, const char *key)
{
    if (!d || !d->scanned || !d->map_seen)
        return NULL;
    const scan_key *k = find(d, d->map, d->n_map, key);
    return k && k->kind == HOOK_JSON_STRING ? d->text + k->value : NULL;
}

/* ------------------------------------------------------------ reading */

/*
 * As pg_read_file_at(dir_fd, name, max, PG_READ_CHECK_OWNER): O_NOFOLLOW and
 * O_NONBLOCK (a planted FIFO never blocks), a regular file of root's (or of
 * the effective uid), at most max bytes; read into the doc's buffer. A read
 * that came up short once the size fstat said is in is the end of the file,
 * so a file of that size costs one read(2); anything shorter reads on to EOF.
 */
int hook_doc_read_at(hook_doc *d, int dir_fd, const char *name, size_t max, const char **buf,
                     size_t *len, pg_error *err)
{
    int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return pg_fail(err, PG_ERR_NOT_FOUND, "%s: not found", name);
        if (e == ELOOP)
            return pg_fail(err, PG_ERR_UNSAFE, "%s: is a symbolic link", name);
        return pg_fail_errno(err, e, "open %s", name);
    }
    struct stat st;
    int rc = PG_OK;
    if (fstat(fd, &st) != 0)
        rc = pg_fail_errno(err, errno, "stat %s", name);
    else if (!S_ISREG(st.st_mode))
        rc = pg_fail(err, PG_ERR_UNSAFE, "%s: not a regular file", name);
    else if (st.st_uid != 0 && st.st_uid != geteuid())
        rc =
            pg_fail(err, PG_ERR_UNSAFE, "%s: owned by uid %u, not root", name, (unsigned)st.st_uid);
    else if ((uintmax_t)st.st_size > max)
        rc = pg_fail(err, PG_ERR_LIMIT, "%s: %jd bytes, larger than the limit of %zu", name,
                     (intmax_t)st.st_size, max);
    size_t n = 0;
    /* Room for the size fstat said plus one byte, so a file that grew is seen growing. */
    size_t want = rc == PG_OK ? (size_t)st.st_size + 1 : 0;
    if (rc == PG_OK && !reserve((void **)&d->in, &d->in_cap, want + 1, 1))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    while (rc == PG_OK) {
        if (n == d->in_cap - 1 &&
            (n > max || !reserve((void **)&d->in, &d->in_cap, d->in_cap * 2, 1))) {
            rc = n > max ? pg_fail(err, PG_ERR_LIMIT, "input larger than %zu bytes", max)
                         : pg_fail(err, PG_ERR_NOMEM, "out of memory");
            break;
        }
        size_t ask = d->in_cap - 1 - n;
        ssize_t r = read(fd, d->in + n, ask);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = pg_fail_errno(err, errno, "read");
            break;
        }
        n += (size_t)r;
        if (n > max)
            rc = pg_fail(err, PG_ERR_LIMIT, "input larger than %zu bytes", max);
        else if (r == 0 || ((size_t)r < ask && n >= (size_t)st.st_size))
            break; /* EOF, or all fstat said is there and the read came up short: EOF */
    }
    close(fd);
    if (rc != PG_OK)
        return rc;
    d->in[n] = '\0';
    *buf = d->in;
    *len = n;
    return PG_OK;
}
