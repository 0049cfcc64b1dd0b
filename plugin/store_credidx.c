/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Focused record lookups and the per-record credential index
 * (store_credidx.h; bench/README.md, "Focused lookups, credential index, record cache").
 *
 * The index, DIR/pullgate-credidx/<record file> (writable directory only),
 * is text: lines end in "\n", fields are separated by US (0x1f), a byte no
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
 * the times; a chmod/chown/link moves ctime). A stale, missing, oversized,
 * unreadable or malformed index is never used and never an error: the lookup
 * reads and parses the record exactly as without an index. Residual:
 * timestamps are tick-coarse, so a foreign writer replacing the record with
 * one of the same size, in the same tick, into a recycled inode number would
 * go unnoticed; pullgate itself rewrites the index after every record write.
 */
#include "store_credidx.h"

#include "lookup_cache.h"
#include "record_cache.h"
#include "store_credtimes.h"
#include "store_identity.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IDX_FIRST_LINE "pullgate-credidx\x1f" "1\n"
#define US '\x1f'
#define MAX_IDX_BYTES (PG_MAX_RECORD_BYTES + (64u << 10))
#define MAX_FIELDS 8

/* ------------------------------------------------------ focused records */

static bool any_secret_matches(const pg_record_focus *f, const pg_pod_cred *r)
{
    if (pg_pod_binding_matches(f->pod_namespace, f->pod_uid, r))
        return true; /* the decision's pod rule */
    const pg_pod_cred *ps = NULL;
    size_t n = f->presented ? pg_presented_secrets(f->presented, f->image_name, &ps) : 0;
    for (size_t i = 0; i < n; i++)
        if (pg_pod_cred_matches(&ps[i], r)) /* the decision's own rule */
            return true;
    return false;
}

static bool any_sa_matches(const pg_record_focus *f, const pg_pod_cred *r)
{
    const pg_pod_cred *ps = NULL;
    size_t n = f->presented ? pg_presented_sas(f->presented, f->image_name, &ps) : 0;
    for (size_t i = 0; i < n; i++)
        if (pg_pod_cred_matches(&ps[i], r))
            return true;
    return false;
}

/* A record with imageRef, directory and times but no mapping yet. */
static pg_record *focused_new(const char *image_ref, const char *dir, const char *api_version,
                              time_t last_updated, const char *last_updated_text)
{
    pg_record *rec = pg_record_new(image_ref, NULL);
    if (!rec)
        return NULL;
    rec->last_updated = last_updated;
    rec->dir = pg_strdup(dir);
    rec->last_updated_text = pg_strdup(last_updated_text ? last_updated_text : "");
    char *api = pg_strdup(api_version);
    if (api) {
        free(rec->api_version);
        rec->api_version = api;
    }
    if ((dir && !rec->dir) || !rec->last_updated_text || !api) {
        pg_record_free(rec);
        return NULL;
    }
    return rec;
}

/* The record's one mapping (present even when it holds nothing for the focus). */
static pg_rec_mapping *focused_mapping(pg_record *rec, const char *image_name, bool node_accessible)
{
    rec->maps = calloc(1, sizeof *rec->maps);
    if (!rec->maps)
        return NULL;
    rec->maps[0].image_name = strdup(image_name);
    if (!rec->maps[0].image_name)
        return NULL; /* n_maps stays 0: pg_record_free frees maps alone */
    rec->maps[0].node_pods_accessible = node_accessible;
    rec->n_maps = 1;
    return &rec->maps[0];
}

static bool append_secret(pg_rec_mapping *m, const char *ns, const char *name, const char *uid,
                          const char *hash)
{
    pg_pod_cred *grown = realloc(m->secrets, (m->n_secrets + 1) * sizeof *grown);
    if (!grown)
        return false;
    m->secrets = grown;
    pg_pod_cred s = {strdup(ns), strdup(name), strdup(uid), strdup(hash ? hash : ""), NULL};
    if (!s.namespace_ || !s.name || !s.uid || !s.credential_hash) {
        free(s.namespace_);
        free(s.name);
        free(s.uid);
        free(s.credential_hash);
        return false;
    }
    grown[m->n_secrets++] = s;
    return true;
}

static bool append_sa(pg_rec_mapping *m, const char *ns, const char *name, const char *uid)
{
    pg_pod_cred *grown = realloc(m->sas, (m->n_sas + 1) * sizeof *grown);
    if (!grown)
        return false;
    m->sas = grown;
    pg_pod_cred sa = {strdup(ns), strdup(name), strdup(uid), NULL, NULL};
    if (!sa.namespace_ || !sa.name || !sa.uid) {
        free(sa.namespace_);
        free(sa.name);
        free(sa.uid);
        return false;
    }
    grown[m->n_sas++] = sa;
    return true;
}

int pg_record_project(const pg_record *full, const pg_record_focus *f, pg_record **out,
                      pg_error *err)
{
    *out = NULL;
    pg_record *rec = focused_new(full->image_ref, full->dir, full->api_version, full->last_updated,
                                 full->last_updated_text);
    const pg_rec_mapping *m = rec ? pg_record_find(full, f->image_name) : NULL;
    bool ok = rec != NULL;
    pg_rec_mapping *fm = m && ok ? focused_mapping(rec, f->image_name, m->node_pods_accessible) : NULL;
    ok = ok && (!m || fm);
    for (size_t j = 0; ok && fm && j < m->n_secrets; j++) {
        const pg_pod_cred *s = &m->secrets[j];
        if (any_secret_matches(f, s))
            ok = append_secret(fm, s->namespace_, s->name, s->uid, s->credential_hash);
    }
    for (size_t j = 0; ok && fm && j < m->n_sas; j++) {
        const pg_pod_cred *sa = &m->sas[j];
        if (any_sa_matches(f, sa))
            ok = append_sa(fm, sa->namespace_, sa->name, sa->uid);
    }
    if (!ok) {
        pg_record_free(rec);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    *out = rec;
    return PG_OK;
}

/* ---------------------------------------------------------------- stamps */

typedef struct stamp {
    uintmax_t dev, ino, size;
    intmax_t mtime_s, mtime_ns, ctime_s, ctime_ns;
} stamp;

static void stamp_of(const struct stat *st, stamp *s)
{
    *s = (stamp){(uintmax_t)st->st_dev, (uintmax_t)st->st_ino, (uintmax_t)st->st_size,
                 (intmax_t)st->st_mtim.tv_sec, (intmax_t)st->st_mtim.tv_nsec,
                 (intmax_t)st->st_ctim.tv_sec, (intmax_t)st->st_ctim.tv_nsec};
}

static bool stamp_equal(const stamp *a, const stamp *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_s == b->mtime_s &&
           a->mtime_ns == b->mtime_ns && a->ctime_s == b->ctime_s && a->ctime_ns == b->ctime_ns;
}

/*
 * What a strict read of the record would refuse (pg_read_file_at with
 * PG_READ_STRICT): the index must never accept a file the parse path refuses.
 */
static bool record_file_ok(const struct stat *st)
{
    return S_ISREG(st->st_mode) && st->st_nlink <= 1 && (st->st_uid == 0 || st->st_uid == geteuid()) &&
           !(st->st_mode & (S_IWGRP | S_IWOTH)) && (uintmax_t)st->st_size <= PG_MAX_RECORD_BYTES;
}

/* fstatat of file in an open subdirectory: 1 found, 0 absent, -1 other error. */
static int stat_in(int subfd, const char *file, struct stat *st)
{
    if (fstatat(subfd, file, st, AT_SYMLINK_NOFOLLOW) == 0)
        return 1;
    return errno == ENOENT ? 0 : -1;
}

/* -------------------------------------------------------------- writing */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool bad; /* out of memory, or a field that cannot be written */
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->bad)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->bad = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* A string field: US first; one holding US or a newline makes the index unwritable. */
static void put_field(buf *b, const char *s)
{
    s = s ? s : "";
    if (strpbrk(s, "\x1f\n"))
        b->bad = true;
    put(b, "\x1f", 1);
    put(b, s, strlen(s));
}

static void put_num(buf *b, intmax_t v)
{
    char n[32];
    int k = snprintf(n, sizeof n, "\x1f%jd", v);
    put(b, n, (size_t)k);
}

static void put_unum(buf *b, uintmax_t v)
{
    char n[32];
    int k = snprintf(n, sizeof n, "\x1f%ju", v);
    put(b, n, (size_t)k);
}

static void put_stamp(buf *b, char tag, const stamp *st)
{
    put(b, &tag, 1);
    if (!st) {
        put_field(b, "-");
    } else {
        put_unum(b, st->dev);
        put_unum(b, st->ino);
        put_unum(b, st->size);
        put_num(b, st->mtime_s);
        put_num(b, st->mtime_ns);
        put_num(b, st->ctime_s);
        put_num(b, st->ctime_ns);
    }
    put(b, "\n", 1);
}

/* When a credential was recorded: the credential-times entry, else lastUpdatedTime. */
static time_t time_of(const pg_record *rec, const json_t *times, const char *image_name,
                      const pg_pod_cred *s, const pg_pod_cred *sa, bool *bad)
{
    if (!times)
        return rec->last_updated;
    char *key = pg_st_credential_key(image_name, s, sa);
    if (!key) {
        *bad = true;
        return 0;
    }
    json_t *t = json_object_get(times, key);
    free(key);
    return json_is_integer(t) ? (time_t)json_integer_value(t) : rec->last_updated;
}

static void put_mappings(buf *b, const pg_record *rec, const json_t *times, size_t *lines)
{
    for (size_t m = 0; m < rec->n_maps; m++) {
        const pg_rec_mapping *map = &rec->maps[m];
        put(b, map->node_pods_accessible ? "M\x1f" "1" : "M\x1f" "0", 3);
        put_field(b, map->image_name);
        put(b, "\n", 1);
        for (size_t i = 0; i < map->n_secrets; i++) {
            const pg_pod_cred *s = &map->secrets[i];
            put(b, "s", 1);
            put_num(b, (intmax_t)time_of(rec, times, map->image_name, s, NULL, &b->bad));
            put_field(b, s->credential_hash);
            put_field(b, s->namespace_);
            put_field(b, s->name);
            put_field(b, s->uid);
            put(b, "\n", 1);
        }
        for (size_t i = 0; i < map->n_sas; i++) {
            const pg_pod_cred *sa = &map->sas[i];
            put(b, "a", 1);
            put_num(b, (intmax_t)time_of(rec, times, map->image_name, NULL, sa, &b->bad));
            put_field(b, sa->namespace_);
            put_field(b, sa->name);
            put_field(b, sa->uid);
            put(b, "\n", 1);
        }
        *lines += 1 + map->n_secrets + map->n_sas;
    }
}

static void render(buf *b, const pg_record *rec, const stamp *rec_st, const stamp *times_st,
                   const json_t *times)
{
    put(b, IDX_FIRST_LINE, strlen(IDX_FIRST_LINE));
    put(b, "R", 1);
    put_field(b, rec->image_ref);
    put(b, "\n", 1);
    put_stamp(b, 'P', rec_st);
    put_stamp(b, 'C', times_st);
    put(b, "U", 1);
    put_num(b, (intmax_t)rec->last_updated);
    put_field(b, rec->api_version);
    put_field(b, rec->last_updated_text);
    put(b, "\n", 1);
    size_t lines = 0;
    put_mappings(b, rec, times, &lines);
    put(b, "E", 1);
    put_unum(b, lines);
    put(b, "\n", 1);
}

static int open_sub(const pg_store *s, const char *sub, int *fd, pg_error *err)
{
    return pg_st_open_subdir(&s->dirs[0], sub, fd, err);
}

void pg_st_credidx_remove(const pg_store *s, const char *file)
{
    int fd;
    if (!s || !s->writable || open_sub(s, SUB_CREDIDX, &fd, NULL) != PG_OK)
        return;
    if (unlinkat(fd, file, 0) == 0)
        (void)pg_st_fsync_retry(fd);
    close(fd);
}

/* The stamps of the record and its credential times as they are now, and the times. */
static int current_state(const pg_store *s, const pg_record *rec, const char *file, stamp *rec_st,
                         stamp *times_st, bool *has_times, json_t **times, pg_error *err)
{
    int pfd, tfd = -1;
    struct stat st;
    int rc = open_sub(s, SUB_PULLED, &pfd, err);
    if (rc != PG_OK)
        return rc;
    int found = stat_in(pfd, file, &st);
    close(pfd);
    if (found != 1 || !record_file_ok(&st))
        return pg_fail(err, PG_ERR_CORRUPT, "%s: record file not indexable", file);
    stamp_of(&st, rec_st);
    *has_times = false;
    *times = NULL;
    rc = open_sub(s, SUB_CREDTIMES, &tfd, err);
    if (rc == PG_ERR_NOT_FOUND)
        return PG_OK;
    if (rc != PG_OK)
        return rc;
    found = stat_in(tfd, file, &st);
    /* An unusable side file fails decisions closed: such a record gets no index. */
    rc = found == 0 ? PG_OK : pg_st_credtimes_load(s, tfd, file, rec->image_ref, times, err);
    close(tfd);
    if (rc == PG_OK && found == 1) {
        stamp_of(&st, times_st);
        *has_times = true;
    }
    return rc;
}

int pg_st_credidx_write_locked(const pg_store *s, const pg_record *rec, const char *file,
                               pg_error *err)
{
    stamp rec_st, times_st;
    bool has_times = false;
    json_t *times = NULL;
    int rc = current_state(s, rec, file, &rec_st, &times_st, &has_times, &times, err);
    buf b = {0};
    if (rc == PG_OK) {
        render(&b, rec, &rec_st, has_times ? &times_st : NULL, times);
        if (b.bad || b.len > MAX_IDX_BYTES)
            rc = pg_fail(err, PG_ERR_LIMIT, "%s: record not indexable", file);
    }
    int fd = -1;
    if (rc == PG_OK && (rc = open_sub(s, SUB_CREDIDX, &fd, err)) == PG_ERR_NOT_FOUND) {
        if (mkdirat(s->dirs[0].fd, SUB_CREDIDX, 0700) != 0 && errno != EEXIST)
            rc = pg_fail_errno(err, errno, "mkdir %s/%s", s->dirs[0].path, SUB_CREDIDX);
        else
            rc = open_sub(s, SUB_CREDIDX, &fd, err);
    }
    /* Not fsync'd (store_credidx.h): a lost or torn index is only stale or malformed. */
    if (rc == PG_OK)
        rc = pg_st_write_file_replace(fd, s->dirs[0].path, SUB_CREDIDX, file, b.p, b.len, false, err);
    if (fd >= 0)
        close(fd);
    free(b.p);
    json_decref(times);
    if (rc != PG_OK)
        pg_st_credidx_remove(s, file);
    return rc;
}

int pg_store_credidx_build(const pg_store *s, const char *image_ref, pg_error *err)
{
    file_name file;
    int rc = pg_st_require_writable(s, err);
    if (rc == PG_OK)
        rc = pg_record_file_name(image_ref, file, err);
    int lock_fd = -1;
    if (rc == PG_OK)
        rc = pg_st_lock_store(s, &lock_fd, err);
    pg_record *rec = NULL;
    if (rc == PG_OK)
        rc = pg_st_get_from_dir(&s->dirs[0], file, &rec, err);
    if (rc == PG_OK)
        rc = pg_st_credidx_write_locked(s, rec, file, err);
    pg_record_free(rec);
    pg_st_unlock_store(lock_fd);
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

/* An index read and checked against the files as they are now. */
typedef struct index_view {
    char *text;
    reader body; /* the M/s/a/E lines */
    intmax_t last_updated;
    const char *api_version, *last_updated_text;
} index_view;

static bool header_ok(index_view *v, const char *image_ref, stamp *rec_st, bool *rec_absent,
                      stamp *times_st, bool *times_absent)
{
    line l;
    reader *r = &v->body;
    size_t n = strlen(IDX_FIRST_LINE);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, IDX_FIRST_LINE, n) != 0)
        return false;
    r->p += n;
    if (!next_line(r, &l) || l.tag != 'R' || l.n != 1 || strcmp(l.f[0], image_ref) != 0)
        return false;
    if (!next_line(r, &l) || !parse_stamp(&l, 'P', rec_st, rec_absent) || *rec_absent)
        return false;
    if (!next_line(r, &l) || !parse_stamp(&l, 'C', times_st, times_absent))
        return false;
    if (!next_line(r, &l) || l.tag != 'U' || l.n != 3 || !parse_i64(l.f[0], &v->last_updated))
        return false;
    v->api_version = l.f[1];
    v->last_updated_text = l.f[2];
    return true;
}

/*
 * The record file of `file` in the writable directory, stat'ed without
 * following links: 1 found (*st filled), 0 absent, -1 cannot tell.
 */
static int record_stat(const pg_store *s, const char *file, struct stat *st)
{
    return pg_st_stat_sub(s, 0, PG_LC_PULLED, file, true, st);
}

/* The record's (rec, stat'ed by the caller) and the credential-times file's identities
 * equal the index's. */
static bool stamps_current(const pg_store *s, const char *file, const struct stat *rec,
                           const stamp *rec_st, const stamp *times_st, bool times_absent)
{
    struct stat st;
    stamp now;
    if (!record_file_ok(rec))
        return false;
    stamp_of(rec, &now);
    if (!stamp_equal(&now, rec_st))
        return false;
    /* A missing pullgate-credtimes/ reads as a missing file, as it should. */
    int found = pg_st_stat_sub(s, 0, PG_LC_CREDTIMES, file, true, &st);
    if (found == 0)
        return times_absent;
    if (found < 0 || times_absent)
        return false;
    stamp_of(&st, &now);
    return stamp_equal(&now, times_st);
}

/* Reads the index of file (whose record the caller stat'ed as rec) and checks it is
 * current. false: not usable (no error). */
static bool index_open(const pg_store *s, const char *file, const struct stat *rec,
                       const char *image_ref, index_view *v)
{
    memset(v, 0, sizeof *v);
    if (!s || !s->writable || s->n_dirs == 0)
        return false;
    int fd;
    bool owned;
    uint64_t gen = 0;
    if (pg_lookup_cache_absent(s->lookups, 0, PG_LC_CREDIDX, file, &gen) ||
        pg_st_lookup_fd(&s->dirs[0], SUB_CREDIDX, &fd, &owned, NULL) != PG_OK)
        return false;
    size_t len = 0;
    int rc = pg_read_file_at(fd, file, MAX_IDX_BYTES, PG_READ_STRICT, &v->text, &len, NULL);
    if (owned)
        close(fd);
    if (rc == PG_ERR_NOT_FOUND) /* opening is what failed: the file is absent */
        pg_lookup_cache_note_absent(s->lookups, 0, PG_LC_CREDIDX, file, gen);
    if (rc != PG_OK)
        return false;
    v->body = (reader){v->text, v->text + len};
    stamp rec_st, times_st;
    bool rec_absent, times_absent;
    if (strlen(v->text) != len ||
        !header_ok(v, image_ref, &rec_st, &rec_absent, &times_st, &times_absent) ||
        !stamps_current(s, file, rec, &rec_st, &times_st, times_absent)) {
        free(v->text);
        v->text = NULL;
        return false;
    }
    return true;
}

/* Visits every body line, checking each; fn sees the lines of image_name's mapping. */
typedef bool (*line_fn)(const line *l, void *ud);

static bool walk_body(index_view *v, const char *image_name, bool (*on_map)(bool, void *),
                      line_fn fn, void *ud)
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
            in_focus = strcmp(l.f[1], image_name) == 0;
            if (in_focus && !on_map(l.f[0][0] == '1', ud))
                return false;
            break;
        case 's':
        case 'a':
            /* The time is parsed only where it is used (time_line): a number per
             * line is a measurable part of a 1,000-credential walk. */
            if (!prev_map || l.n != (l.tag == 's' ? 5u : 4u) || !*l.f[0])
                return false;
            if (in_focus && !fn(&l, ud))
                return false;
            break;
        case 'E':
            return l.n == 1 && parse_u64(l.f[0], &count) && count == lines &&
                   v->body.p == v->body.end;
        default:
            return false;
        }
        lines++;
    }
    return false; /* no E line: truncated */
}

/* Building a focused record (and its credentials' times) from the index. */
typedef struct load_ctx {
    const pg_record_focus *focus;
    pg_record *rec;
    pg_rec_mapping *map;
    pg_cred_times *times; /* NULL: not wanted */
    bool nomem;
} load_ctx;

static bool load_on_map(bool node_accessible, void *ud)
{
    load_ctx *c = ud;
    c->map = focused_mapping(c->rec, c->focus->image_name, node_accessible);
    c->nomem = !c->map;
    return c->map != NULL;
}

/* Appends when to *v (one slot per credential appended to the focused mapping). */
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

/* A malformed time (false, nomem unset) makes the whole index unusable. */
static bool load_line(const line *l, void *ud)
{
    load_ctx *c = ud;
    if (l->tag == 's') {
        pg_pod_cred r = {l->f[2], l->f[3], l->f[4], l->f[1], NULL};
        if (!any_secret_matches(c->focus, &r))
            return true;
        if (c->times && !append_time(&c->times->secrets, c->map->n_secrets, l->f[0], &c->nomem))
            return false;
        c->nomem = !append_secret(c->map, r.namespace_, r.name, r.uid, r.credential_hash);
    } else {
        pg_pod_cred r = {l->f[1], l->f[2], l->f[3], NULL, NULL};
        if (!any_sa_matches(c->focus, &r))
            return true;
        if (c->times && !append_time(&c->times->sas, c->map->n_sas, l->f[0], &c->nomem))
            return false;
        c->nomem = !append_sa(c->map, r.namespace_, r.name, r.uid);
    }
    return !c->nomem;
}

void pg_cred_times_clear(pg_cred_times *t)
{
    if (!t)
        return;
    free(t->secrets);
    free(t->sas);
    memset(t, 0, sizeof *t);
}

/* The focused record an opened index describes; PG_ERR_NOT_FOUND: malformed. */
static int build_focused(index_view *v, const char *image_ref, const char *dir,
                         const pg_record_focus *f, pg_record **out, pg_cred_times *times)
{
    load_ctx c = {
        f,
        focused_new(image_ref, dir, v->api_version, (time_t)v->last_updated, v->last_updated_text),
        NULL, times, false};
    bool ok = c.rec && walk_body(v, f->image_name, load_on_map, load_line, &c);
    if (!ok) {
        int rc = c.rec && !c.nomem ? PG_ERR_NOT_FOUND : PG_ERR_NOMEM;
        pg_record_free(c.rec);
        pg_cred_times_clear(times);
        return rc;
    }
    if (times)
        times->known = true;
    *out = c.rec;
    return PG_OK;
}

/* PG_OK: *out from a current index; PG_ERR_NOT_FOUND: no usable index. */
static int load_from_index(const pg_store *s, const char *file, const struct stat *rec,
                           const char *image_ref, const pg_record_focus *f, pg_record **out,
                           pg_cred_times *times)
{
    index_view v;
    *out = NULL;
    if (!index_open(s, file, rec, image_ref, &v))
        return PG_ERR_NOT_FOUND;
    int rc = build_focused(&v, image_ref, s->dirs[0].path, f, out, times);
    free(v.text);
    return rc;
}

int pg_credidx_decode(const char *data, size_t len, const char *image_ref,
                      const pg_record_focus *f, pg_record **out)
{
    *out = NULL;
    if (len > MAX_IDX_BYTES || memchr(data, '\0', len))
        return PG_ERR_NOT_FOUND;
    index_view v = {0};
    if (!(v.text = malloc(len + 1)))
        return PG_ERR_NOMEM;
    memcpy(v.text, data, len);
    v.text[len] = '\0';
    v.body = (reader){v.text, v.text + len};
    stamp rec_st, times_st;
    bool rec_absent, times_absent;
    pg_cred_times times; /* read as a decision reads them, then dropped */
    memset(&times, 0, sizeof times);
    int rc = header_ok(&v, image_ref, &rec_st, &rec_absent, &times_st, &times_absent)
                 ? build_focused(&v, image_ref, NULL, f, out, &times)
                 : PG_ERR_NOT_FOUND;
    pg_cred_times_clear(&times);
    free(v.text);
    return rc;
}

/* One credential's time from the index. */
typedef struct time_ctx {
    const pg_pod_cred *secret;
    const pg_pod_cred *sa;
    bool found;
    intmax_t when;
} time_ctx;

static bool time_on_map(bool node_accessible, void *ud)
{
    (void)node_accessible;
    (void)ud;
    return true;
}

static bool time_line(const line *l, void *ud)
{
    time_ctx *c = ud;
    bool same = false;
    if (l->tag == 's' && c->secret)
        same = strcmp(l->f[1], c->secret->credential_hash ? c->secret->credential_hash : "") == 0 &&
               strcmp(l->f[2], c->secret->namespace_) == 0 && strcmp(l->f[3], c->secret->name) == 0 &&
               strcmp(l->f[4], c->secret->uid) == 0;
    else if (l->tag == 'a' && c->sa)
        same = strcmp(l->f[1], c->sa->namespace_) == 0 && strcmp(l->f[2], c->sa->name) == 0 &&
               strcmp(l->f[3], c->sa->uid) == 0;
    if (same && !c->found) {
        c->found = true;
        return parse_i64(l->f[0], &c->when); /* malformed: the index is not used */
    }
    return true;
}

int pg_st_credidx_time(const pg_store *s, const char *image_ref, const char *image_name,
                       const pg_pod_cred *secret, const pg_pod_cred *sa, time_t *out)
{
    file_name file;
    index_view v;
    struct stat rec;
    uint64_t gen;
    if (!s || !s->writable || s->n_dirs == 0 ||
        pg_record_file_name(image_ref, file, NULL) != PG_OK ||
        pg_lookup_cache_absent(s->lookups, 0, PG_LC_CREDIDX, file, &gen) ||
        record_stat(s, file, &rec) != 1 || !index_open(s, file, &rec, image_ref, &v))
        return PG_ERR_NOT_FOUND;
    time_ctx c = {secret, sa, false, 0};
    bool ok = walk_body(&v, image_name, time_on_map, time_line, &c);
    free(v.text);
    if (!ok || !c.found)
        return PG_ERR_NOT_FOUND;
    *out = (time_t)c.when;
    return PG_OK;
}

/* ------------------------------------------------------- focused lookup */

static int cache_loader(int dirfd, const char *name, pg_record **out, pg_error *err, void *ud)
{
    return pg_st_read_record_at(dirfd, ud, name, out, err);
}

static int get_cached(const pg_store *s, const record_dir *d, const char *file,
                      const pg_record_focus *f, pg_record **out, pg_error *err)
{
    pg_cached_record *ref = NULL;
    int rc = pg_record_cache_get(s->cache, pg_st_kept_fd(d, SUB_PULLED), d->path, file,
                                 cache_loader, (void *)d, &ref, err);
    if (rc == PG_OK)
        rc = pg_record_project(pg_cached_record_get(ref), f, out, err);
    pg_cached_record_release(ref);
    return rc;
}

int pg_store_get_focused_timed_in(const pg_store *s, size_t i, const char *image_ref,
                                  const pg_record_focus *f, pg_record **out, pg_cred_times *times,
                                  pg_error *err)
{
    *out = NULL;
    if (times)
        memset(times, 0, sizeof *times);
    if (!f || !s || i >= s->n_dirs)
        return pg_store_get_in(s, i, image_ref, out, err);
    file_name file;
    int rc = pg_st_check_input("imageRef", image_ref, err);
    if (rc == PG_OK)
        rc = pg_record_file_name(image_ref, file, err);
    if (rc != PG_OK)
        return rc;
    const record_dir *d = &s->dirs[i];
    if (s->cache && pg_st_kept_fd(d, SUB_PULLED) >= 0) {
        /* Known absent: no probe. Else the record cache's own fstatat decides,
         * and a NOT_FOUND from it means that fstatat/openat said ENOENT. */
        uint64_t gen = 0;
        if (pg_lookup_cache_absent(s->lookups, i, PG_LC_PULLED, file, &gen))
            return PG_ERR_NOT_FOUND;
        rc = get_cached(s, d, file, f, out, err);
        if (rc == PG_ERR_NOT_FOUND)
            pg_lookup_cache_note_absent(s->lookups, i, PG_LC_PULLED, file, gen);
        return rc;
    }
    if (i == 0 && s->writable) {
        /* The record's stat first: it answers "absent" in one call and is the
         * stamp the index is checked against. */
        struct stat rec;
        int found = record_stat(s, file, &rec);
        if (found == 0)
            return PG_ERR_NOT_FOUND;
        rc = found == 1 ? load_from_index(s, file, &rec, image_ref, f, out, times)
                        : PG_ERR_NOT_FOUND;
        if (rc != PG_ERR_NOT_FOUND)
            return rc == PG_OK ? rc : pg_fail(err, rc, "out of memory");
        if (times) /* the credential times need not try it again */
            times->index_unusable = true;
    }
    return pg_store_get_in(s, i, image_ref, out, err);
}

int pg_store_get_focused_in(const pg_store *s, size_t i, const char *image_ref,
                            const pg_record_focus *f, pg_record **out, pg_error *err)
{
    return pg_store_get_focused_timed_in(s, i, image_ref, f, out, NULL, err);
}

/* ------------------------------------------------------ the record cache */

/* Absences remembered (~10 per distinct image decided; about 100 bytes each,
 * 3 MiB of table at most, touched as used); the table starts over when full. */
#define LOOKUP_CACHE_ENTRIES 131072 /* absences; the table grows to the working set */

/*
 * The absence cache (lookup_cache.h) over every record directory's kept
 * subdirectory descriptors. NULL when inotify cannot be used (limits): the
 * store then probes as without it, which is only slower.
 */
static struct pg_lookup_cache *lookups_new(const pg_store *s, size_t max_absences)
{
    const char **paths = calloc(s->n_dirs + 1, sizeof *paths);
    int *dir_fds = calloc(s->n_dirs + 1, sizeof *dir_fds);
    int *sub_fds = calloc((s->n_dirs + 1) * PG_LC_SUBS, sizeof *sub_fds);
    pg_lookup_cache *lc = NULL;
    if (paths && dir_fds && sub_fds) {
        for (size_t i = 0; i < s->n_dirs; i++) {
            const record_dir *d = &s->dirs[i];
            paths[i] = d->path;
            dir_fds[i] = d->fd;
            for (size_t k = 0; k < PG_LC_SUBS; k++)
                sub_fds[i * PG_LC_SUBS + k] = pg_st_kept_fd(d, pg_lc_sub_name((pg_lc_sub)k));
        }
        lc = pg_lookup_cache_new(s->n_dirs, paths, dir_fds, sub_fds,
                                 max_absences ? max_absences : LOOKUP_CACHE_ENTRIES, NULL);
    }
    free(paths);
    free(dir_fds);
    free(sub_fds);
    return lc;
}

static int enable_caches(pg_store *s, size_t max_entries, size_t max_bytes, size_t max_absences,
                         unsigned settle_ms, pg_error *err)
{
    if (!s)
        return pg_fail(err, PG_ERR_INVALID, "no store");
    if (s->cache)
        return pg_fail(err, PG_ERR_INVALID, "the record cache is already enabled");
    pg_error local = {0};
    s->cache = pg_record_cache_new(max_entries, max_bytes, settle_ms, &local);
    if (!s->cache)
        return pg_fail(err, local.code ? local.code : PG_ERR_INVALID, "%s", local.message);
    pg_st_keep_lookup_fds(s);
    s->lookups = lookups_new(s, max_absences);
    for (size_t i = 0; s->lookups && i < s->n_dirs; i++)
        s->dirs[i].lookups = s->lookups;
    return PG_OK;
}

int pg_store_enable_cache_settle(pg_store *s, size_t max_entries, size_t max_bytes,
                                 unsigned settle_ms, pg_error *err)
{
    return enable_caches(s, max_entries, max_bytes, 0, settle_ms, err);
}

int pg_store_enable_caches(pg_store *s, size_t max_entries, size_t max_bytes, size_t max_absences,
                           pg_error *err)
{
    return enable_caches(s, max_entries, max_bytes, max_absences, PG_RECORD_CACHE_SETTLE_MS, err);
}

PG_API int pg_store_enable_cache(pg_store *store, size_t max_entries, size_t max_bytes,
                                 pg_error *err)
{
    return pg_store_enable_cache_settle(store, max_entries, max_bytes, PG_RECORD_CACHE_SETTLE_MS,
                                        err);
}

void pg_st_cache_forget(const pg_store *s, const char *dir, const char *file)
{
    if (s && s->cache)
        pg_record_cache_forget(s->cache, dir, file);
}

/* ------------------------------------------- credential times for decisions */

static int credential_time(const pg_store *store, const pg_record *rec, const char *image_name,
                           const pg_pod_cred *secret, const pg_pod_cred *sa, bool try_index,
                           time_t *out, pg_error *err)
{
    *out = rec->last_updated;
    if (!store || !store->writable || !rec->dir || strcmp(rec->dir, store->dirs[0].path) != 0)
        return PG_OK;
    /* A current credential index holds the same times, without a JSON parse. */
    if (try_index &&
        pg_st_credidx_time(store, rec->image_ref, image_name, secret, sa, out) == PG_OK)
        return PG_OK;
    file_name file;
    int fd;
    bool owned = false;
    int rc = pg_record_file_name(rec->image_ref, file, err);
    if (rc == PG_OK && (rc = pg_st_lookup_fd(&store->dirs[0], SUB_CREDTIMES, &fd, &owned, err)) ==
                           PG_ERR_NOT_FOUND)
        return PG_OK;
    if (rc != PG_OK)
        return rc;
    json_t *times = NULL;
    uint64_t gen = 0;
    bool known_absent = pg_lookup_cache_absent(store->lookups, 0, PG_LC_CREDTIMES, file, &gen);
    rc = known_absent ? PG_ERR_NOT_FOUND
                      : pg_st_credtimes_load(store, fd, file, rec->image_ref, &times, err);
    if (owned)
        close(fd);
    if (rc == PG_ERR_NOT_FOUND) {
        if (!known_absent) /* the open said ENOENT */
            pg_lookup_cache_note_absent(store->lookups, 0, PG_LC_CREDTIMES, file, gen);
        return PG_OK;
    }
    char *key = rc == PG_OK ? pg_st_credential_key(image_name, secret, sa) : NULL;
    if (rc == PG_OK && !key)
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    json_t *t = key ? json_object_get(times, key) : NULL;
    if (json_is_integer(t))
        *out = (time_t)json_integer_value(t);
    free(key);
    json_decref(times);
    return rc;
}

int pg_store_credential_time(const pg_store *store, const pg_record *rec, const char *image_name,
                             const pg_pod_cred *secret, const pg_pod_cred *sa, time_t *out,
                             pg_error *err)
{
    return credential_time(store, rec, image_name, secret, sa, true, out, err);
}

int pg_store_credential_time_noindex(const pg_store *store, const pg_record *rec,
                                     const char *image_name, const pg_pod_cred *secret,
                                     const pg_pod_cred *sa, time_t *out, pg_error *err)
{
    return credential_time(store, rec, image_name, secret, sa, false, out, err);
}
