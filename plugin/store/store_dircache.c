/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The names caches of record directories we cannot index as we write
 * (pullgate-dircache/): which records of a directory map an image name, for
 * the "preloaded" proof, asked without reading the cache whole. File format,
 * stamps and refresh: docs/design.md, "Read-only directories' names".
 */
#include "internal.h"
#include "store_dircache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DC_MAGIC "pullgate-dircache 3\n"
#define DC_HEADER 512
#define DC_MAX_ENTRIES (1u << 24)
#define DC_UNKNOWN 1u
#define CACHE_QUIET_S 2

typedef struct dc_name {
    unsigned char name[32], file[32];
} dc_name;

typedef struct dc_rec {
    unsigned char file[32];
    uint64_t ino, size;
    int64_t mtime_ns, ctime_ns;
    uint64_t flags;
} dc_rec;

_Static_assert(sizeof(dc_name) == 64, "name entry layout");
_Static_assert(sizeof(dc_rec) == 72, "record entry layout");

/* A table of entries, in memory. */
typedef struct dc_table {
    dc_name *names;
    size_t n_names, cap_names;
    dc_rec *recs;
    size_t n_recs, cap_recs;
    uint64_t n_unknown;
} dc_table;

struct pg_st_dirnames {
    int fd; /* a current cache file, or -1: the entries are in `mem` */
    uint64_t n_names, n_unknown;
    dc_table mem;
};

static void table_free(dc_table *t)
{
    free(t->names);
    free(t->recs);
    *t = (dc_table){0};
}

static int add_name_entry(dc_table *t, const unsigned char name[32], const unsigned char file[32])
{
    dc_name *grown = pg_st_grow(t->names, &t->cap_names, t->n_names, sizeof *grown, 1024);
    if (!grown)
        return PG_ERR_NOMEM;
    t->names = grown;
    memcpy(t->names[t->n_names].name, name, 32);
    memcpy(t->names[t->n_names].file, file, 32);
    t->n_names++;
    return PG_OK;
}

static int add_rec_entry(dc_table *t, const dc_rec *r)
{
    dc_rec *grown = pg_st_grow(t->recs, &t->cap_recs, t->n_recs, sizeof *grown, 1024);
    if (!grown)
        return PG_ERR_NOMEM;
    t->recs = grown;
    t->recs[t->n_recs++] = *r;
    t->n_unknown += (r->flags & DC_UNKNOWN) != 0;
    return PG_OK;
}

static int hex_nibble(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool hex_decode32(const char *hex, unsigned char out[32])
{
    for (size_t i = 0; i < 32; i++) {
        int hi = hex_nibble(hex[2 * i]), lo = hex_nibble(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return hex[64] == '\0';
}

int pg_st_name_hash(const char *name, unsigned char out[32], pg_error *err)
{
    char hex[PG_HASH_HEX_LEN + 1];
    int rc = pg_sha256_hex(name, strlen(name), hex, err);
    if (rc == PG_OK && !hex_decode32(hex, out))
        rc = pg_fail(err, PG_ERR_INTERNAL, "sha256: not hex");
    return rc;
}

/* ------------------------------------------------------------- stamps */

static void dir_stamp(const record_dir *d, char *out, size_t n, bool *recent)
{
    struct stat st;
    *recent = false;
    if (fstatat(d->fd, SUB_PULLED, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(out, n, "-");
        return;
    }
    *recent = st.st_mtim.tv_sec >= time(NULL) - CACHE_QUIET_S;
    /* ctime too: it moves on every change, even one that sets mtime back */
    snprintf(out, n, "%ju:%ju:%lld.%09ld:%lld.%09ld", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino,
             (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec,
             (long)st.st_ctim.tv_nsec);
}

/* ---------------------------------------------------------- the header */

typedef struct dc_header {
    char stamp[128];
    uint64_t n_names, n_recs, n_unknown;
} dc_header;

static void render_header(char out[DC_HEADER], const dc_header *h)
{
    memset(out, 0, DC_HEADER);
    snprintf(out, DC_HEADER,
             DC_MAGIC "stamp %s\nnames %" PRIu64 "\nrecords %" PRIu64 "\nunknown %" PRIu64 "\n",
             h->stamp, h->n_names, h->n_recs, h->n_unknown);
}

static bool parse_header(const char raw[DC_HEADER], off_t size, dc_header *h)
{
    char text[DC_HEADER + 1];
    memcpy(text, raw, DC_HEADER);
    text[DC_HEADER] = '\0';
    if (strncmp(text, DC_MAGIC, strlen(DC_MAGIC)) != 0)
        return false;
    char end;
    if (sscanf(text + strlen(DC_MAGIC),
               "stamp %127s\nnames %" SCNu64 "\nrecords %" SCNu64 "\nunknown %" SCNu64 "%c",
               h->stamp, &h->n_names, &h->n_recs, &h->n_unknown, &end) != 5 ||
        end != '\n')
        return false;
    if (h->n_names > DC_MAX_ENTRIES || h->n_recs > DC_MAX_ENTRIES || h->n_unknown > h->n_recs)
        return false;
    return (uint64_t)size == DC_HEADER + h->n_names * sizeof(dc_name) + h->n_recs * sizeof(dc_rec);
}

/* The file at fd is ours (regular, one link, owner, mode) and whole: its header. */
static bool cache_usable(int fd, dc_header *h)
{
    struct stat st;
    char raw[DC_HEADER];
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink <= 1 &&
           (st.st_uid == 0 || st.st_uid == geteuid()) && !(st.st_mode & (S_IWGRP | S_IWOTH)) &&
           pread(fd, raw, sizeof raw, 0) == (ssize_t)sizeof raw && parse_header(raw, st.st_size, h);
}

/* Opens dircache/<name> when usable, with its header. */
static int open_cache(int cache_dir_fd, const char *name, int *fd_out, dc_header *h)
{
    pg_autoclose int fd = pg_st_sys_openat(cache_dir_fd, name,
                                           O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0);
    if (fd < 0 || !cache_usable(fd, h))
        return -1;
    *fd_out = fd;
    fd = -1;
    return 0;
}

static bool read_at(int fd, void *buf, size_t len, off_t off)
{
    while (len) {
        ssize_t r = pread(fd, buf, len, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        buf = (char *)buf + r;
        len -= (size_t)r;
        off += r;
    }
    return true;
}

/* ------------------------------------------------------------ building */

static int cmp_name(const void *a, const void *b) { return memcmp(a, b, sizeof(dc_name)); }
static int cmp_rec(const void *a, const void *b) { return memcmp(a, b, 32); }

/* By file, then name: the old cache's names of one record are one range. */
static int cmp_by_file(const void *a, const void *b)
{
    const dc_name *x = a, *y = b;
    int c = memcmp(x->file, y->file, 32);
    return c ? c : memcmp(x->name, y->name, 32);
}

/* The old cache's entries (any stamp), for a refresh; empty when unusable. */
static void load_old(int fd, const dc_header *h, dc_table *old)
{
    *old = (dc_table){0};
    size_t names = (size_t)h->n_names * sizeof(dc_name), recs = (size_t)h->n_recs * sizeof(dc_rec);
    old->names = malloc(names ? names : 1);
    old->recs = malloc(recs ? recs : 1);
    if (!old->names || !old->recs || !read_at(fd, old->names, names, DC_HEADER) ||
        !read_at(fd, old->recs, recs, (off_t)(DC_HEADER + names))) {
        table_free(old);
        return;
    }
    old->n_names = old->cap_names = h->n_names;
    old->n_recs = old->cap_recs = h->n_recs;
    if (old->n_names)
        qsort(old->names, old->n_names, sizeof *old->names, cmp_by_file);
}

static void identity_of(const struct stat *st, dc_rec *r)
{
    r->ino = (uint64_t)st->st_ino;
    r->size = (uint64_t)st->st_size;
    r->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    r->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

/* The old entry of the same record file, unchanged since; NULL: read it. */
static const dc_rec *unchanged(const dc_table *old, const dc_rec *now)
{
    const dc_rec *r =
        old->n_recs ? bsearch(now, old->recs, old->n_recs, sizeof *old->recs, cmp_rec) : NULL;
    return r && r->ino == now->ino && r->size == now->size && r->mtime_ns == now->mtime_ns &&
                   r->ctime_ns == now->ctime_ns
               ? r
               : NULL;
}

static int copy_old_names(const dc_table *old, const unsigned char file[32], dc_table *t)
{
    size_t lo = 0, hi = old->n_names;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (memcmp(old->names[mid].file, file, 32) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    int rc = PG_OK;
    for (size_t i = lo; rc == PG_OK && i < old->n_names && !memcmp(old->names[i].file, file, 32);
         i++)
        rc = add_name_entry(t, old->names[i].name, file);
    return rc;
}

/* The names of record `name` read from pulled/ (unknown when it cannot be). */
static int read_names(int pulled_fd, const record_dir *d, const char *name, dc_rec *r, dc_table *t)
{
    pg_record *rec;
    pg_error ignored = {0};
    if (pg_st_read_record_at(pulled_fd, d, name, &rec, &ignored) != PG_OK) {
        r->flags |= DC_UNKNOWN;
        return PG_OK;
    }
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < rec->n_maps; i++) {
        char *owned = NULL;
        unsigned char h[32];
        if (pg_record_key_name(rec->maps[i].image_name, &owned) != PG_OK ||
            pg_st_name_hash(owned ? owned : rec->maps[i].image_name, h, NULL) != PG_OK)
            r->flags |= DC_UNKNOWN; /* names unknown: may map any name (the strict side) */
        else
            rc = add_name_entry(t, h, r->file);
        free(owned);
    }
    pg_record_free(rec);
    return rc;
}

/* A build: the old cache's entries (for records unchanged since), the new ones. */
typedef struct scan {
    const dc_table *old;
    dc_table *t;
} scan;

static int scan_entry(int pulled_fd, const record_dir *d, const char *name, void *ud)
{
    const scan *sc = ud;
    dc_rec r = {{0}, 0, 0, 0, 0, 0};
    if (strlen(name) != FILE_NAME_LEN || !hex_decode32(name + strlen(NAME_PREFIX), r.file))
        return PG_OK; /* not a name of a record file (content must match it) */
    struct stat st;
    int rc = PG_OK;
    if (fstatat(pulled_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT)
            return PG_OK; /* gone since the listing */
        r.flags = DC_UNKNOWN;
    } else {
        identity_of(&st, &r);
        const dc_rec *was = unchanged(sc->old, &r);
        if (was) {
            r.flags = was->flags;
            rc = copy_old_names(sc->old, r.file, sc->t);
        } else {
            rc = read_names(pulled_fd, d, name, &r, sc->t);
        }
    }
    return rc == PG_OK ? add_rec_entry(sc->t, &r) : rc;
}

/* Every record of d's pulled/ with its names; records unchanged since `old` keep theirs. */
static int build(const record_dir *d, const dc_table *old, dc_table *t, pg_error *err)
{
    scan sc = {old, t};
    int rc = pg_st_walk(d, SUB_PULLED, pg_st_is_record_name, scan_entry, &sc, err);
    if (rc == PG_ERR_NOMEM) /* scan_entry's only error */
        return pg_fail(err, rc, "out of memory");
    if (rc != PG_OK)
        return rc;
    if (t->n_names)
        qsort(t->names, t->n_names, sizeof *t->names, cmp_name);
    if (t->n_recs)
        qsort(t->recs, t->n_recs, sizeof *t->recs, cmp_rec);
    return PG_OK;
}

/* Best effort: a cache not written only means the next lookup builds again. */
static void write_cache(const record_dir *w, int cache_dir_fd, const char *name, const dc_table *t,
                        const char *stamp)
{
    dc_header h = {{0}, t->n_names, t->n_recs, t->n_unknown};
    snprintf(h.stamp, sizeof h.stamp, "%s", stamp);
    size_t names = t->n_names * sizeof(dc_name), recs = t->n_recs * sizeof(dc_rec);
    pg_autofree char *buf = malloc(DC_HEADER + names + recs);
    if (!buf || t->n_names > DC_MAX_ENTRIES || t->n_recs > DC_MAX_ENTRIES)
        return;
    render_header(buf, &h);
    if (names)
        memcpy(buf + DC_HEADER, t->names, names);
    if (recs)
        memcpy(buf + DC_HEADER + names, t->recs, recs);
    (void)pg_st_write_file_atomic(cache_dir_fd, w->path, SUB_DIRCACHE, name, buf,
                                  DC_HEADER + names + recs, NULL);
}

/* ---------------------------------------------------------------- API */

int pg_st_dirnames_get(const record_dir *w, const record_dir *d, pg_st_dirnames **out,
                       pg_error *err)
{
    char stamp[128], after[128];
    bool recent, recent_after;
    file_name cache_name;
    bool refresh_only = !out;
    pg_st_dirnames *none;
    out = out ? out : &none;
    *out = NULL;
    int rc = pg_record_file_name(d->path, cache_name, err);
    if (rc != PG_OK)
        return rc;
    dir_stamp(d, stamp, sizeof stamp, &recent);
    pg_autoclose int cache_dir_fd = -1, fd = -1;
    dc_header h;
    if (w && pg_st_open_subdir(w, SUB_DIRCACHE, &cache_dir_fd, NULL) != PG_OK)
        cache_dir_fd = -1;
    if (cache_dir_fd >= 0 && open_cache(cache_dir_fd, cache_name, &fd, &h) == 0 &&
        strcmp(h.stamp, stamp) == 0) {
        if (refresh_only)
            return PG_OK;
        if (!(*out = calloc(1, sizeof **out)))
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
        **out = (pg_st_dirnames){fd, h.n_names, h.n_unknown, {0}};
        fd = -1; /* the answer's now */
        return PG_OK;
    }
    dc_table old = {0}, t = {0};
    if (fd >= 0)
        load_old(fd, &h, &old);
    rc = build(d, &old, &t, err);
    table_free(&old);
    dir_stamp(d, after, sizeof after, &recent_after);
    if (rc == PG_OK && cache_dir_fd >= 0 && !recent && strcmp(stamp, after) == 0)
        write_cache(w, cache_dir_fd, cache_name, &t, stamp);
    if (rc == PG_OK && !refresh_only && !(*out = calloc(1, sizeof **out)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (*out)
        **out = (pg_st_dirnames){-1, t.n_names, t.n_unknown, t};
    else
        table_free(&t);
    return rc;
}

int pg_st_dirnames_from_fd(int fd, const char *stamp, pg_st_dirnames **out)
{
    dc_header h;
    *out = NULL;
    if (!cache_usable(fd, &h) || strcmp(h.stamp, stamp) != 0 || !(*out = calloc(1, sizeof **out))) {
        close(fd);
        return -1;
    }
    **out = (pg_st_dirnames){fd, h.n_names, h.n_unknown, {0}};
    return 0;
}

static bool entry_at(const pg_st_dirnames *v, uint64_t i, dc_name *e)
{
    if (v->fd < 0) {
        *e = v->mem.names[i];
        return true;
    }
    return read_at(v->fd, e, sizeof *e, (off_t)(DC_HEADER + i * sizeof *e));
}

int pg_st_dirnames_find(const pg_st_dirnames *v, const unsigned char name[32], pg_st_dirnames_fn fn,
                        void *ud, bool *unknown, pg_error *err)
{
    *unknown = v->n_unknown > 0;
    uint64_t lo = 0, hi = v->n_names;
    dc_name e;
    while (lo < hi) { /* the first entry of name */
        uint64_t mid = lo + (hi - lo) / 2;
        if (!entry_at(v, mid, &e))
            return pg_fail_errno(err, errno ? errno : EIO, "read a names cache");
        if (memcmp(e.name, name, 32) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    int rc = PG_OK;
    for (uint64_t i = lo; rc == PG_OK && i < v->n_names; i++) {
        if (!entry_at(v, i, &e))
            return pg_fail_errno(err, errno ? errno : EIO, "read a names cache");
        if (memcmp(e.name, name, 32) != 0)
            break;
        char file[FILE_NAME_LEN + 1];
        memcpy(file, NAME_PREFIX, strlen(NAME_PREFIX));
        pg_hex_encode(e.file, 32, file + strlen(NAME_PREFIX));
        rc = fn(file, ud, err);
    }
    return rc < 0 ? PG_OK : rc; /* < 0: fn stopped the walk */
}

void pg_st_dirnames_free(pg_st_dirnames *v)
{
    if (!v)
        return;
    if (v->fd >= 0)
        close(v->fd);
    table_free(&v->mem);
    free(v);
}
