/* SPDX-License-Identifier: Apache-2.0 */
/* Errors, bounded and safe file reads, strict JSON, time parsing (hashing: digest.c). */
#include "cleanup.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

__attribute__((format(printf, 4, 0)))
static int vfail(pg_error *err, int code, int errno_value, const char *fmt, va_list ap)
{
    if (err) {
        err->code = code;
        int n = vsnprintf(err->message, sizeof err->message, fmt, ap);
        if (errno_value && n >= 0 && (size_t)n < sizeof err->message)
            snprintf(err->message + n, sizeof err->message - (size_t)n, ": %s",
                     strerror(errno_value));
        /* Messages are one line: a newline from hostile input must not split logs. */
        for (char *p = err->message; *p; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
    }
    return code;
}

int pg_fail(pg_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(err, code, 0, fmt, ap);
    va_end(ap);
    return code;
}

int pg_fail_errno(pg_error *err, int errno_value, const char *fmt, ...)
{
    int code = errno_value == ENOMEM ? PG_ERR_NOMEM : PG_ERR_IO;
    va_list ap;
    va_start(ap, fmt);
    vfail(err, code, errno_value, fmt, ap);
    va_end(ap);
    return code;
}

/* Like crun's crun_error_wrap: no caller copies the message aside or guesses from its text. */
void pg_error_prefix(pg_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char context[PG_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
    char inner[PG_ERROR_MESSAGE_MAX];
    snprintf(inner, sizeof inner, "%s", err->message[0] ? err->message : pg_code_name(err->code));
    int code = err->code;
    pg_fail(err, code, "%s: %s", context, inner);
}

PG_API void pg_error_clear(pg_error *err)
{
    if (err) {
        err->code = PG_OK;
        err->message[0] = '\0';
    }
}

PG_API const char *pg_code_name(int code)
{
    static const char *const names[] = {"ok",      "invalid",  "nomem", "io",
                                        "corrupt", "unsafe",   "limit", "not-found",
                                        "config",  "internal", "quota", "timeout"};
    if (code < 0 || (size_t)code >= sizeof names / sizeof names[0])
        return "unknown";
    return names[code];
}

PG_API const char *pg_version(void) { return PG_VERSION_STRING; }

PG_API void pg_free(void *p) { free(p); }

PG_API void pg_strv_free(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

char *pg_strdup(const char *s) { return s ? strdup(s) : NULL; }

static int check_stat(const struct stat *st, const char *name, int flags, pg_error *err)
{
    if (!S_ISREG(st->st_mode))
        return pg_fail(err, PG_ERR_UNSAFE, "%s: not a regular file", name);
    if ((flags & PG_READ_CHECK_OWNER) && st->st_uid != 0 && st->st_uid != geteuid())
        return pg_fail(err, PG_ERR_UNSAFE, "%s: owned by uid %u, not root", name,
                       (unsigned)st->st_uid);
    if ((flags & PG_READ_CHECK_MODE) && (st->st_mode & (S_IWGRP | S_IWOTH)))
        return pg_fail(err, PG_ERR_UNSAFE, "%s: writable by group or others (mode %04o)", name,
                       (unsigned)(st->st_mode & 07777));
    /* 0 links is fine: a writer renamed a new version over the file after we
     * opened it, and what we read is the complete previous version. Only a
     * second name (a hard link from elsewhere) is an aliasing attack. */
    if ((flags & PG_READ_SINGLE_LINK) && st->st_nlink > 1)
        return pg_fail(err, PG_ERR_UNSAFE, "%s: has %lu hard links", name,
                       (unsigned long)st->st_nlink);
    return PG_OK;
}

static char *grow_wiping(char *old, size_t len, size_t old_cap, size_t cap);

/* What it reads may be a key file or a dockerconfig: a block it outgrows or gives up is wiped
 * before it is freed, so no copy of a secret is left in the heap. A file's size (size_hint)
 * sizes the first block, one byte over so that the read seeing EOF needs no growth: a record
 * or an index of a few hundred KiB is then read without a copy. */
static int read_fd(int fd, size_t max, size_t size_hint, char **buf, size_t *len, pg_error *err)
{
    size_t cap = size_hint >= 4096 ? (size_hint < max ? size_hint + 1 : max + 1) : 4096, n = 0;
    char *b = malloc(cap + 1);
    int rc = b ? PG_OK : pg_fail(err, PG_ERR_NOMEM, "out of memory");
    while (rc == PG_OK) {
        if (n == cap) {
            size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            char *nb = cap > max ? NULL : grow_wiping(b, n, cap + 1, ncap + 1);
            if (!nb) {
                rc = cap > max ? pg_fail(err, PG_ERR_LIMIT, "input larger than %zu bytes", max)
                               : pg_fail(err, PG_ERR_NOMEM, "out of memory");
                break;
            }
            b = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = pg_fail_errno(err, errno, "read");
        else if (r == 0)
            break;
        n += r > 0 ? (size_t)r : 0;
        if (n > max)
            rc = pg_fail(err, PG_ERR_LIMIT, "input larger than %zu bytes", max);
    }
    if (rc != PG_OK) {
        if (b)
            explicit_bzero(b, cap + 1);
        free(b);
        return rc;
    }
    b[n] = '\0';
    *buf = b;
    if (len)
        *len = n;
    return PG_OK;
}

int pg_read_fd(int fd, size_t max, char **buf, size_t *len, pg_error *err)
{
    return read_fd(fd, max, 0, buf, len, err);
}

int pg_open_file_at(int dirfd, const char *name, size_t max, int flags, int *fd_out,
                    struct stat *st, pg_error *err)
{
    pg_autoclose int fd =
        openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return pg_fail(err, PG_ERR_NOT_FOUND, "%s: not found", name);
        if (e == ELOOP)
            return pg_fail(err, PG_ERR_UNSAFE, "%s: is a symbolic link", name);
        return pg_fail_errno(err, e, "open %s", name);
    }
    if (fstat(fd, st) != 0)
        return pg_fail_errno(err, errno, "stat %s", name);
    int rc = check_stat(st, name, flags, err);
    if (rc != PG_OK)
        return rc;
    if ((uintmax_t)st->st_size > max)
        return pg_fail(err, PG_ERR_LIMIT, "%s: %jd bytes, larger than the limit of %zu", name,
                       (intmax_t)st->st_size, max);
    *fd_out = fd;
    fd = -1; /* handed on: pg_steal for a descriptor */
    return PG_OK;
}

int pg_read_file_at(int dirfd, const char *name, size_t max, int flags, char **buf, size_t *len,
                    pg_error *err)
{
    pg_autoclose int fd = -1;
    struct stat st;
    int rc = pg_open_file_at(dirfd, name, max, flags, &fd, &st, err);
    return rc == PG_OK ? read_fd(fd, max, (size_t)st.st_size, buf, len, err) : rc;
}

json_t *pg_json_parse(const char *buf, size_t len, const char *what, pg_error *err)
{
    json_error_t je;
    json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        pg_fail(err, PG_ERR_INVALID, "%s: invalid JSON at line %d column %d: %s", what, je.line,
                je.column, je.text);
    return j;
}

int pg_json_only_keys(const json_t *obj, const char *const *allowed, const char *what,
                      pg_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        (void)v;
        const char *const *a = allowed;
        while (*a && strcmp(*a, key) != 0)
            a++;
        if (!*a)
            return pg_fail(err, PG_ERR_INVALID, "%s: unknown field \"%.64s\"", what, key);
    }
    return PG_OK;
}

/* Go's time.ParseDuration units, reduced to whole seconds. */
int pg_parse_duration(const char *s, int64_t *seconds, pg_error *err)
{
    static const struct {
        const char *unit;
        double ns;
    } units[] = {{"ns", 1},       {"us", 1e3},   {"\xc2\xb5s", 1e3}, {"ms", 1e6},
                 {"s", 1e9},      {"m", 60e9},   {"h", 3600e9}};
    if (!s || !*s)
        return pg_fail(err, PG_ERR_INVALID, "empty duration");
    const char *p = s;
    if (*p == '+')
        p++;
    else if (*p == '-')
        return pg_fail(err, PG_ERR_INVALID, "duration \"%.64s\" is negative", s);
    if (strcmp(p, "0") == 0) {
        *seconds = 0;
        return PG_OK;
    }
    double total_ns = 0;
    while (*p) {
        char *end;
        if (!((*p >= '0' && *p <= '9') || *p == '.'))
            return pg_fail(err, PG_ERR_INVALID, "invalid duration \"%.64s\"", s);
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno)
            return pg_fail(err, PG_ERR_INVALID, "invalid duration \"%.64s\"", s);
        p = end;
        size_t best = 0, best_len = 0;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            size_t ul = strlen(units[i].unit);
            if (strncmp(p, units[i].unit, ul) == 0 && ul > best_len) {
                best = i;
                best_len = ul;
            }
        }
        if (!best_len)
            return pg_fail(err, PG_ERR_INVALID, "duration \"%.64s\" lacks a unit (ns, us, ms, s, m, h)", s);
        p += best_len;
        total_ns += v * units[best].ns;
        if (total_ns > 9.2e18)
            return pg_fail(err, PG_ERR_INVALID, "duration \"%.64s\" is too large", s);
    }
    *seconds = (int64_t)(total_ns / 1e9);
    return PG_OK;
}

static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/*
 * Days from 1970-01-01 to the proleptic Gregorian date y-m-d (H. Hinnant's
 * days_from_civil). Used instead of timegm(3), which in glibc reads the
 * timezone file (/etc/localtime) on first use: a decision parses record times
 * and must not touch files outside the store. Linear in d, so an out-of-range
 * day (Feb 31) normalises exactly as timegm's does.
 */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;
    const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int pg_parse_rfc3339(const char *s, time_t *out, pg_error *err)
{
    int Y, M, D, h, m, sec, oh = 0, om = 0, sign = 0;
    if (!s || strlen(s) < 20 || digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) ||
        s[7] != '-' || digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't') ||
        digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &m) || s[16] != ':' ||
        digits(s + 17, 2, &sec))
        goto bad;
    const char *p = s + 19;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            goto bad;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        sign = *p == '-' ? -1 : 1;
        if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om))
            goto bad;
        p += 6;
    } else {
        goto bad;
    }
    if (*p || M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60 || oh > 23 ||
        om > 59)
        goto bad;
    time_t t = (time_t)(days_from_civil(Y, M, D) * 86400 + h * 3600 + m * 60 + sec);
    *out = t - sign * (oh * 3600 + om * 60);
    return PG_OK;
bad:
    return pg_fail(err, PG_ERR_INVALID, "invalid RFC 3339 time \"%.64s\"", s ? s : "");
}

void pg_format_rfc3339(time_t t, char out[32])
{
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
        strcpy(out, "1970-01-01T00:00:00Z");
}

/* =============================================================== pooled helpers
 * Small helpers that several modules need; one copy here (internal.h). */

void pg_hex_encode(const void *bytes, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = bytes;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

int pg_hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool pg_lower_hex_run(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

bool pg_is_lower_hex(const char *s, size_t n)
{
    return s && strnlen(s, n + 1) == n && pg_lower_hex_run(s, n);
}

bool pg_is_hex64(const char *s) { return pg_is_lower_hex(s, PG_HASH_HEX_LEN); }

int64_t pg_monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

size_t pg_utf8_valid_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t len;
    unsigned cp;
    if ((s[0] & 0xE0) == 0xC0) {
        len = 2;
        cp = s[0] & 0x1Fu;
    } else if ((s[0] & 0xF0) == 0xE0) {
        len = 3;
        cp = s[0] & 0x0Fu;
    } else if ((s[0] & 0xF8) == 0xF0) {
        len = 4;
        cp = s[0] & 0x07u;
    } else {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0; /* also stops at the terminating NUL */
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* ---------------------------------------------------------- growable buffer */

/* realloc that leaves no copy of a secret behind in the freed block. explicit_bzero
 * (libc), not OPENSSL_cleanse: the thin hook links this file and no libcrypto. */
static char *grow_wiping(char *old, size_t len, size_t old_cap, size_t cap)
{
    char *np = malloc(cap);
    if (!np)
        return NULL; /* old stays owned by the buffer */
    if (old) {
        memcpy(np, old, len + 1 <= old_cap ? len + 1 : len);
        explicit_bzero(old, old_cap);
        free(old);
    }
    return np;
}

void pg_buf_append(pg_buf *b, const void *data, size_t n)
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
        char *np = b->wipe ? grow_wiping(b->p, b->len, b->cap, cap) : realloc(b->p, cap);
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

void pg_buf_puts(pg_buf *b, const char *s) { pg_buf_append(b, s, strlen(s)); }

void pg_buf_wipe_free(pg_buf *b)
{
    if (b->p)
        explicit_bzero(b->p, b->cap);
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------ string vector */

int pg_strv_ensure(pg_strv *l, pg_error *err)
{
    if (l->v)
        return PG_OK;
    l->n = l->cap = 0;
    if (!(l->v = calloc(1, sizeof *l->v)))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    l->cap = 1;
    return PG_OK;
}

int pg_strv_push(pg_strv *l, const char *s, pg_error *err)
{
    if (l->n + 2 > l->cap) {
        size_t cap = l->cap >= 4 ? l->cap * 2 : 8;
        char **nv = realloc(l->v, cap * sizeof *nv);
        if (!nv)
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
        l->v = nv;
        l->cap = cap;
    }
    if (!(l->v[l->n] = pg_strdup(s))) {
        l->v[l->n] = NULL;
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    l->v[++l->n] = NULL;
    return PG_OK;
}

void pg_strv_clear(pg_strv *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

int pg_write_file_replacing(const char *path, const void *data, size_t len, mode_t mode,
                            uid_t uid, gid_t gid, pg_error *err)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp)
        return pg_fail(err, PG_ERR_LIMIT, "%s: path too long", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return pg_fail_errno(err, errno, "create a file beside %s", path);
    int rc = PG_OK;
    size_t done = 0;
    while (rc == PG_OK && done < len) {
        ssize_t w = write(fd, (const char *)data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = pg_fail_errno(err, errno, "write %s", tmp);
        else
            done += (size_t)w;
    }
    if (rc == PG_OK && (fchmod(fd, mode & 07777) != 0 || fchown(fd, uid, gid) != 0 ||
                        fsync(fd) != 0))
        rc = pg_fail_errno(err, errno, "set up %s", tmp);
    if (close(fd) != 0 && rc == PG_OK)
        rc = pg_fail_errno(err, errno, "close %s", tmp);
    if (rc == PG_OK && rename(tmp, path) != 0)
        rc = pg_fail_errno(err, errno, "rename %s to %s", tmp, path);
    if (rc != PG_OK)
        unlink(tmp);
    return rc;
}
