/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The credential index (store_credidx.h; bench/README.md, "What each index
 * and cache buys"): DIR/pullgate-credidx/<record file>, writable directory
 * only, text: lines end in "\n", fields are separated by US (0x1f), a byte no
 * field of an index may hold (a record with such a field gets no index):
 *   pullgate-credidx US 1
 *   R US <imageRef>
 *   P US <dev> US <ino> US <size> US <mtime s> US <ns> US <ctime s> US <ns>   the record file
 *   C US -  |  C US <the same seven numbers>                        the credential-times file
 *   U US <lastUpdatedTime, unix s> US <apiVersion> US <lastUpdatedTime as written>
 *   M US <nodePodsAccessible 0|1> US <image name>                   one per mapping, sorted
 *   s US <time> US <credentialHash> US <namespace> US <name> US <uid>  secrets of the mapping above
 *   a US <time> US <namespace> US <name> US <uid>                   service accounts of it
 *   E US <number of M, s and a lines>
 * <time> is the credential's recorded time (the credential-times file's entry,
 * else lastUpdatedTime), so a decision never parses that file either.
 *
 * Trust: the index lives in the same 0700 root-owned directory as the records
 * and is written by the same code under the same lock, so it is exactly as
 * trustworthy as the record, *if it describes the record's current version*.
 * That is what the P and C lines pin: the lookup fstatat()s both files and
 * uses the index only when every field is equal (a rewrite moves ino, size or
 * the times; a chmod/chown/link moves ctime). Residual: timestamps are
 * tick-coarse, so a foreign writer replacing the record with one of the same
 * size, in the same tick, into a recycled inode number would go unnoticed;
 * pullgate itself rewrites the index after every record write.
 */
#include "store_credidx.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define IDX_FIRST_LINE                                                                             \
    "pullgate-credidx\x1f"                                                                         \
    "1\n"
#define US '\x1f'
#define MAX_IDX_BYTES (PG_MAX_RECORD_BYTES + (64u << 10))
#define MAX_FIELDS 8

/* ---------------------------------------------------------------- stamps */

typedef struct stamp {
    uintmax_t dev, ino, size;
    intmax_t mtime_s, mtime_ns, ctime_s, ctime_ns;
} stamp;

static void stamp_of(const struct stat *st, stamp *s)
{
    *s = (stamp){(uintmax_t)st->st_dev,         (uintmax_t)st->st_ino,
                 (uintmax_t)st->st_size,        (intmax_t)st->st_mtim.tv_sec,
                 (intmax_t)st->st_mtim.tv_nsec, (intmax_t)st->st_ctim.tv_sec,
                 (intmax_t)st->st_ctim.tv_nsec};
}

/* Bytewise: seven 8-byte fields (padding could only leave the index unused). */
static bool stamp_equal(const stamp *a, const stamp *b) { return memcmp(a, b, sizeof *a) == 0; }

/*
 * What a strict read of the record would refuse (pg_read_file_at with
 * PG_READ_STRICT): the index must never accept a file the parse path refuses.
 */
static bool record_file_ok(const struct stat *st)
{
    return S_ISREG(st->st_mode) && st->st_nlink <= 1 &&
           (st->st_uid == 0 || st->st_uid == geteuid()) && !(st->st_mode & (S_IWGRP | S_IWOTH)) &&
           (uintmax_t)st->st_size <= PG_MAX_RECORD_BYTES;
}

/* -------------------------------------------------------------- writing */

/* A string field: US first; one holding US or a newline makes the index unwritable. */
static void put_field(pg_buf *b, const char *s, bool *bad)
{
    s = s ? s : "";
    *bad |= strpbrk(s, "\x1f\n") != NULL;
    pg_buf_append(b, "\x1f", 1);
    pg_buf_puts(b, s);
}

static void put_num(pg_buf *b, intmax_t v)
{
    char n[32];
    snprintf(n, sizeof n, "\x1f%jd", v);
    pg_buf_puts(b, n);
}

static void put_stamp(pg_buf *b, char tag, const stamp *st)
{
    char line[200];
    if (st)
        snprintf(line, sizeof line, "%c\x1f%ju\x1f%ju\x1f%ju\x1f%jd\x1f%jd\x1f%jd\x1f%jd\n", tag,
                 st->dev, st->ino, st->size, st->mtime_s, st->mtime_ns, st->ctime_s, st->ctime_ns);
    else
        snprintf(line, sizeof line, "%c\x1f-\n", tag);
    pg_buf_puts(b, line);
}

/* One credential line: tag, time, (hash,) namespace, name, uid. */
static void put_cred(pg_buf *b, const pg_record *rec, const json_t *times, const char *image,
                     const pg_pod_cred *s, const pg_pod_cred *sa, bool *bad)
{
    const pg_pod_cred *c = s ? s : sa;
    time_t when;
    *bad |= pg_st_credential_time(times, image, s, sa, rec->last_updated, &when, NULL) != PG_OK;
    pg_buf_puts(b, s ? "s" : "a");
    put_num(b, (intmax_t)when);
    if (s)
        put_field(b, s->credential_hash, bad);
    put_field(b, c->namespace_, bad);
    put_field(b, c->name, bad);
    put_field(b, c->uid, bad);
    pg_buf_puts(b, "\n");
}

static void render(pg_buf *b, const pg_record *rec, const stamp *rec_st, const stamp *times_st,
                   const json_t *times, bool *bad)
{
    pg_buf_puts(b, IDX_FIRST_LINE "R");
    put_field(b, rec->image_ref, bad);
    pg_buf_puts(b, "\n");
    put_stamp(b, 'P', rec_st);
    put_stamp(b, 'C', times_st);
    pg_buf_puts(b, "U");
    put_num(b, (intmax_t)rec->last_updated);
    put_field(b, rec->api_version, bad);
    put_field(b, rec->last_updated_text, bad);
    pg_buf_puts(b, "\n");
    size_t lines = 0;
    for (size_t m = 0; m < rec->n_maps; m++) {
        const pg_rec_mapping *map = &rec->maps[m];
        pg_buf_puts(b, "M");
        put_num(b, map->node_pods_accessible ? 1 : 0);
        put_field(b, map->image_name, bad);
        pg_buf_puts(b, "\n");
        for (size_t i = 0; i < map->n_secrets; i++)
            put_cred(b, rec, times, map->image_name, &map->secrets[i], NULL, bad);
        for (size_t i = 0; i < map->n_sas; i++)
            put_cred(b, rec, times, map->image_name, NULL, &map->sas[i], bad);
        lines += 1 + map->n_secrets + map->n_sas;
    }
    char end[40];
    snprintf(end, sizeof end, "E\x1f%zu\n", lines);
    pg_buf_puts(b, end);
}

void pg_st_credidx_remove(const record_dir *w, const char *file)
{
    pg_autoclose int fd = -1;
    if (pg_st_open_subdir(w, SUB_CREDIDX, &fd, NULL) == PG_OK && unlinkat(fd, file, 0) == 0)
        (void)pg_st_fsync_retry(fd);
}

/* The stamps of w's record file and of its credential-times file (absent: *has_times false). */
static int current_stamps(const record_dir *w, const char *file, stamp *rec_st, stamp *times_st,
                          bool *has_times, pg_error *err)
{
    struct stat st;
    char path[sizeof SUB_CREDTIMES + FILE_NAME_LEN + 1];
    snprintf(path, sizeof path, "%s/%s", SUB_PULLED, file);
    if (fstatat(w->fd, path, &st, AT_SYMLINK_NOFOLLOW) != 0 || !record_file_ok(&st))
        return pg_fail(err, PG_ERR_CORRUPT, "%s: record file not indexable", file);
    stamp_of(&st, rec_st);
    snprintf(path, sizeof path, "%s/%s", SUB_CREDTIMES, file);
    *has_times = fstatat(w->fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!*has_times && errno != ENOENT)
        return pg_fail_errno(err, errno, "stat %s/%s", w->path, path);
    if (*has_times)
        stamp_of(&st, times_st);
    return PG_OK;
}

int pg_st_credidx_write_locked(const record_dir *w, const pg_record *rec, const json_t *times,
                               const char *file, pg_error *err)
{
    stamp rec_st, times_st;
    bool has_times = false, bad = false;
    pg_buf b = {0};
    int rc = current_stamps(w, file, &rec_st, &times_st, &has_times, err);
    if (rc == PG_OK) {
        render(&b, rec, &rec_st, has_times ? &times_st : NULL, has_times ? times : NULL, &bad);
        if (bad || b.oom || b.len > MAX_IDX_BYTES)
            rc = pg_fail(err, PG_ERR_LIMIT, "%s: record not indexable", file);
    }
    pg_autoclose int fd = -1;
    if (rc == PG_OK && (rc = pg_st_open_subdir(w, SUB_CREDIDX, &fd, err)) == PG_ERR_NOT_FOUND) {
        if (pg_st_sys_mkdirat(w->fd, SUB_CREDIDX, 0700) != 0 && errno != EEXIST)
            rc = pg_fail_errno(err, errno, "mkdir %s/%s", w->path, SUB_CREDIDX);
        else
            rc = pg_st_open_subdir(w, SUB_CREDIDX, &fd, err);
    }
    /* Not fsync'd (store_credidx.h): a lost or torn index is only stale or malformed. */
    if (rc == PG_OK)
        rc = pg_st_write_file_replace(fd, w->path, SUB_CREDIDX, file, b.p, b.len, false, err);
    free(b.p);
    if (rc != PG_OK)
        pg_st_credidx_remove(w, file);
    return rc;
}

/* -------------------------------------------------------------- reading */

/* One line split in place into NUL-terminated fields. */
typedef struct line {
    char tag;
    char *f[MAX_FIELDS];
    size_t n;
} line;

typedef struct reader {
    char *p, *end;
} reader;

/*
 * The next line, split in place in one pass (no per-field library calls: this
 * runs for every credential of a record); false at the end or on a last line
 * that does not end in "\n". A line that is not a tag byte followed by fields,
 * or has more than MAX_FIELDS fields, gets tag 0 (malformed).
 */
static bool next_line(reader *r, line *l)
{
    char *p = r->p, *end = r->end;
    if (p >= end)
        return false;
    l->tag = *p;
    l->n = 0;
    if (*p == '\n') { /* an empty line */
        r->p = p + 1;
        l->tag = 0;
        return true;
    }
    bool ok = p + 1 < end && p[1] == US;
    for (p++; p < end && *p != '\n'; p++) {
        if (*p != US)
            continue;
        *p = '\0';
        if (l->n == MAX_FIELDS)
            ok = false;
        else
            l->f[l->n++] = p + 1;
    }
    if (p >= end)
        return false;
    *p = '\0';
    r->p = p + 1;
    if (!ok || l->n == 0)
        l->tag = 0;
    return true;
}

/* Decimal digits only, no overflow (strtoimax's locale handling is measurable here). */
static bool parse_u64(const char *s, uintmax_t *out)
{
    uintmax_t v = 0;
    if (!*s || (s[0] == '0' && s[1]))
        return false;
    for (; *s; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (d > 9 || v > (UINTMAX_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static bool parse_i64(const char *s, intmax_t *out)
{
    bool neg = *s == '-';
    uintmax_t v;
    if (!parse_u64(s + neg, &v) || v > (uintmax_t)INTMAX_MAX)
        return false;
    *out = neg ? -(intmax_t)v : (intmax_t)v;
    return true;
}

static bool parse_stamp(const line *l, char tag, stamp *st, bool *absent)
{
    if (l->tag != tag)
        return false;
    if (l->n == 1 && strcmp(l->f[0], "-") == 0)
        return *absent = true;
    *absent = false;
    return l->n == 7 && parse_u64(l->f[0], &st->dev) && parse_u64(l->f[1], &st->ino) &&
           parse_u64(l->f[2], &st->size) && parse_i64(l->f[3], &st->mtime_s) &&
           parse_i64(l->f[4], &st->mtime_ns) && parse_i64(l->f[5], &st->ctime_s) &&
           parse_i64(l->f[6], &st->ctime_ns);
}

/* An index's header read; the body (M/s/a/E lines) follows. */
typedef struct index_view {
    reader body;
    const char *image_ref;
    stamp rec_st, times_st;
    bool times_absent;
    intmax_t last_updated;
    const char *api_version, *last_updated_text;
} index_view;

static bool header_ok(char *text, size_t len, index_view *v)
{
    line l;
    bool rec_absent;
    size_t n = strlen(IDX_FIRST_LINE);
    v->body = (reader){text, text + len};
    reader *r = &v->body;
    if (len < n || memcmp(r->p, IDX_FIRST_LINE, n) != 0 || strlen(text) != len)
        return false;
    r->p += n;
    if (!next_line(r, &l) || l.tag != 'R' || l.n != 1)
        return false;
    v->image_ref = l.f[0];
    if (!next_line(r, &l) || !parse_stamp(&l, 'P', &v->rec_st, &rec_absent) || rec_absent)
        return false;
    if (!next_line(r, &l) || !parse_stamp(&l, 'C', &v->times_st, &v->times_absent))
        return false;
    if (!next_line(r, &l) || l.tag != 'U' || l.n != 3 || !parse_i64(l.f[0], &v->last_updated))
        return false;
    v->api_version = l.f[1];
    v->last_updated_text = l.f[2];
    return true;
}

/* Building a focused record (and its credentials' times) from the body. */
typedef struct load_ctx {
    const pg_record_focus *focus;
    pg_focused *out;
    pg_rec_mapping *map;
    bool nomem;
} load_ctx;

/* Appends the time text to *v (one slot per credential kept); false: malformed or out
 * of memory (nomem set). */
static bool append_time(time_t **v, size_t n, const char *text, bool *nomem)
{
    intmax_t when;
    if (!parse_i64(text, &when))
        return false; /* malformed: the index is not used */
    time_t *grown = realloc(*v, (n + 1) * sizeof *grown);
    if (!grown)
        return !(*nomem = true);
    grown[n] = (time_t)when;
    *v = grown;
    return true;
}

/* A credential line of the focus's mapping: kept when the focus keeps it. */
static bool load_cred(load_ctx *c, const line *l)
{
    bool secret = l->tag == 's';
    pg_pod_cred r = secret ? (pg_pod_cred){l->f[2], l->f[3], l->f[4], l->f[1], NULL}
                           : (pg_pod_cred){l->f[1], l->f[2], l->f[3], NULL, NULL};
    if (!(secret ? pg_focus_keeps_secret : pg_focus_keeps_sa)(c->focus, &r))
        return true;
    time_t **times = secret ? &c->out->secret_times : &c->out->sa_times;
    if (!append_time(times, secret ? c->map->n_secrets : c->map->n_sas, l->f[0], &c->nomem))
        return false;
    c->nomem = !(secret ? pg_st_append_secret : pg_st_append_sa)(c->map, &r);
    return !c->nomem;
}

/* Every body line checked; the focus's mapping and credentials loaded. */
static bool load_body(index_view *v, load_ctx *c)
{
    line l;
    size_t lines = 0;
    const char *prev_map = NULL;
    bool in_focus = false;
    while (next_line(&v->body, &l)) {
        uintmax_t count;
        switch (l.tag) {
        case 'M':
            if (l.n != 2 || (strcmp(l.f[0], "0") != 0 && strcmp(l.f[0], "1") != 0) ||
                (prev_map && strcmp(prev_map, l.f[1]) >= 0))
                return false; /* mappings are sorted and unique */
            prev_map = l.f[1];
            c->out->maps_any = true;
            in_focus = strcmp(l.f[1], c->focus->image_name) == 0;
            if (in_focus && !(c->map = pg_st_focused_mapping(c->out->rec, c->focus->image_name,
                                                             l.f[0][0] == '1')))
                return !(c->nomem = true);
            break;
        case 's':
        case 'a':
            if (!prev_map || l.n != (l.tag == 's' ? 5u : 4u) || !*l.f[0])
                return false;
            if (in_focus && !load_cred(c, &l))
                return false;
            break;
        case 'E':
            return l.n == 1 && parse_u64(l.f[0], &count) && count == lines &&
                   v->body.p == v->body.end;
        default: return false;
        }
        lines++;
    }
    return false; /* no E line: truncated */
}

/* The focused record the body describes; PG_ERR_NOT_FOUND: malformed. */
static int build_focused(index_view *v, const char *dir, const pg_record_focus *f, pg_focused *out)
{
    *out = (pg_focused){0};
    out->rec = pg_st_focused_new(v->image_ref, dir, v->api_version, (time_t)v->last_updated,
                                 v->last_updated_text);
    load_ctx c = {f, out, NULL, false};
    if (out->rec && load_body(v, &c))
        return PG_OK;
    int rc = out->rec && !c.nomem ? PG_ERR_NOT_FOUND : PG_ERR_NOMEM;
    pg_focused_clear(out);
    return rc;
}

int pg_st_credidx_load(const record_dir *w, int idx_fd, const char *file, const struct stat *rec_st,
                       const struct stat *times_st, const pg_record_focus *f, pg_focused *out)
{
    pg_autofree char *text = NULL;
    size_t len = 0;
    index_view v;
    stamp now;
    file_name named;
    *out = (pg_focused){0};
    if (!record_file_ok(rec_st) ||
        pg_st_read_strict(idx_fd, w, SUB_CREDIDX, file, MAX_IDX_BYTES, &text, &len, NULL) != PG_OK)
        return PG_ERR_NOT_FOUND;
    bool ok = header_ok(text, len, &v) && pg_record_file_name(v.image_ref, named, NULL) == PG_OK &&
              !strcmp(named, file);
    stamp_of(rec_st, &now);
    ok = ok && stamp_equal(&now, &v.rec_st) && v.times_absent == !times_st;
    if (ok && times_st) {
        stamp_of(times_st, &now);
        ok = stamp_equal(&now, &v.times_st);
    }
    return ok ? build_focused(&v, w->path, f, out) : PG_ERR_NOT_FOUND;
}

int pg_credidx_decode(const char *data, size_t len, const char *image_ref, const pg_record_focus *f,
                      pg_record **out)
{
    *out = NULL;
    if (len > MAX_IDX_BYTES || memchr(data, '\0', len))
        return PG_ERR_NOT_FOUND;
    pg_autofree char *text = malloc(len + 1);
    if (!text)
        return PG_ERR_NOMEM;
    memcpy(text, data, len);
    text[len] = '\0';
    index_view v;
    pg_focused got;
    int rc = header_ok(text, len, &v) && strcmp(v.image_ref, image_ref) == 0
                 ? build_focused(&v, NULL, f, &got)
                 : PG_ERR_NOT_FOUND;
    if (rc == PG_OK) {
        *out = got.rec;
        got.rec = NULL;
        pg_focused_clear(&got);
    }
    return rc;
}
