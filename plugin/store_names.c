/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store's name index (pullgate-names/, writable directory) and
 * the name caches of read-only directories (pullgate-dircache/): which
 * records map an image name, the "preloaded" proof (docs/design.md, "Image
 * identity").
 */
#include "store_names.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ name index */

/*
 * "Preloaded" must be proven, which includes: no record in any directory maps
 * the image's normalised name. Scanning every record per decision would cost
 * O(records), so:
 *  - the writable directory keeps pullgate-names/<hash(name)>: the record file
 *    names that map name, one a line, written under the lock with the record
 *    and rebuilt by prune. An entry may be stale (record since deleted): that
 *    errs on the strict side and lookups skip missing records.
 *  - a read-only directory (the kubelet's) gets a names cache in the writable
 *    one, pullgate-dircache/<hash(path)> (store_dircache.c: sorted fixed-width
 *    entries searched with pread, refreshed incrementally when pulled/
 *    changes, by prune or else by the lookup that finds it stale); without a
 *    writable directory, every lookup scans.
 */

#define MAX_NAMES_BYTES (16u << 20)
/*
 * pullgate-names/ covers every record of pulled/ only from the moment this
 * marker exists: written when the layout is new (pulled/ empty) and by prune's
 * rebuild. Without it (records from before the name index, or placed by hand)
 * the writable directory is treated like a read-only one: scanned, cached.
 */
#define NAMES_COMPLETE SUB_NAMES "/.complete-2" /* -2: lines by the image a key names */

static bool names_complete(const record_dir *d) { return pg_st_exists_at(d->fd, NAMES_COMPLETE); }

static void names_mark_complete(const record_dir *d)
{
    int fd =
        pg_st_sys_openat(d->fd, NAMES_COMPLETE, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
}

/*
 * Runs at every store open while the name index is not complete (a store with
 * records from before it): getdents64 with a small buffer, stopping at the
 * first record, instead of readdir's 32 KiB batch (~340 entries read for the
 * hook's every run). A read error counts as "has records" (nothing marked).
 */
static bool has_no_records(const record_dir *d)
{
    int fd;
    if (pg_st_open_subdir(d, SUB_PULLED, &fd, NULL) != PG_OK)
        return false;
    char buf[1024] __attribute__((aligned(8)));
    bool empty = true, done = false;
    while (empty && !done) {
        ssize_t n = getdents64(fd, buf, sizeof buf);
        if (n < 0)
            empty = false;
        done = n <= 0;
        for (ssize_t off = 0; empty && off < n;) {
            const struct dirent64 *de = (const struct dirent64 *)(buf + off);
            empty = !pg_st_is_record_name(de->d_name);
            off += de->d_reclen;
        }
    }
    close(fd);
    return empty;
}

void pg_st_names_mark_complete_if_empty(const record_dir *d)
{
    if (!names_complete(d) && has_no_records(d))
        names_mark_complete(d);
}
static bool line_present(const char *text, const char *line, size_t n)
{
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, line, n) == 0 && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

/* Adds the line file to pullgate-names/<name> unless present. */
static int name_add_file(const pg_store *s, pg_st_batch *b, int fd, const char *name,
                         const char *file, pg_error *err)
{
    char *old = NULL;
    size_t len = 0;
    int rc = pg_st_read_strict(fd, &s->dirs[0], SUB_NAMES, name, MAX_NAMES_BYTES, &old, &len, err);
    if (rc == PG_ERR_NOT_FOUND)
        rc = PG_OK;
    if (rc != PG_OK || (old && line_present(old, file, strlen(file)))) {
        free(old);
        return rc;
    }
    size_t n = len + strlen(file) + 2;
    char *text = malloc(n);
    if (!text) {
        free(old);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    int w = snprintf(text, n, "%s%s\n", old ? old : "", file);
    rc = pg_st_batch_stage(b, fd, s->dirs[0].path, SUB_NAMES, name, text, (size_t)w, err);
    free(text);
    free(old);
    return rc;
}

/*
 * The name a credentialMapping key is indexed under: the image it names, so
 * the kubelet's "secretorg/myimage" is found under "docker.io/secretorg/myimage"
 * (pg_record_key_name). *owned is freed by the caller.
 */
static int indexed_name(const char *key, char **owned, const char **name, pg_error *err)
{
    if (pg_record_key_name(key, owned) != PG_OK)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    *name = *owned ? *owned : key;
    return PG_OK;
}

int pg_st_names_add_locked(const pg_store *s, pg_st_batch *b, const pg_record *rec,
                           const char *file, pg_error *err)
{
    int fd;
    int rc = pg_st_open_subdir(&s->dirs[0], SUB_NAMES, &fd, err);
    if (rc != PG_OK)
        return rc;
    for (size_t i = 0; rc == PG_OK && i < rec->n_maps; i++) {
        file_name name;
        char *owned = NULL;
        const char *image = NULL;
        rc = indexed_name(rec->maps[i].image_name, &owned, &image, err);
        if (rc == PG_OK)
            rc = pg_record_file_name(image, name, err);
        if (rc == PG_OK)
            rc = name_add_file(s, b, fd, name, file, err);
        free(owned);
    }
    close(fd);
    return rc;
}

/* A growable text buffer. */
typedef struct text_buf {
    char *p;
    size_t len, cap;
    bool failed;
} text_buf;

static void buf_add(text_buf *b, const char *a, const char *c)
{
    size_t need = strlen(a) + strlen(c) + 3;
    if (b->failed)
        return;
    if (b->len + need > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + need)
            cap *= 2;
        char *grown = realloc(b->p, cap);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
    b->len += (size_t)snprintf(b->p + b->len, b->cap - b->len, "%s %s\n", a, c);
}

/* The writable directory's index as the same line format, from pullgate-names/. */
static int own_names(const pg_store *s, const char *image_name, const char *hex, char **text_out,
                     pg_error *err)
{
    file_name name;
    int fd;
    *text_out = NULL;
    int rc = pg_record_file_name(image_name, name, err);
    if (rc == PG_OK &&
        (rc = pg_st_open_subdir(&s->dirs[0], SUB_NAMES, &fd, err)) == PG_ERR_NOT_FOUND)
        return PG_OK;
    if (rc != PG_OK)
        return rc;
    char *files = NULL;
    rc = pg_st_read_strict(fd, &s->dirs[0], SUB_NAMES, name, MAX_NAMES_BYTES, &files, NULL, err);
    close(fd);
    if (rc == PG_ERR_NOT_FOUND)
        return PG_OK;
    if (rc != PG_OK)
        return rc;
    text_buf b = {0};
    for (char *line = strtok(files, "\n"); line; line = strtok(NULL, "\n"))
        buf_add(&b, hex, line);
    free(files);
    if (b.failed) {
        free(b.p);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    *text_out = b.p;
    return PG_OK;
}

typedef struct name_hits {
    bool load; /* false: count only */
    pg_record **recs;
    size_t n, cap;
    bool unknown;
} name_hits;

static int hit_load(const pg_store *s, size_t i, const char *file, const char *image_name,
                    name_hits *h, pg_error *err)
{
    if (!h->load) {
        /* Counting (the preloaded proof): the record file existing is enough. A
         * record never loses a mapping (merges only add), and anything at that
         * name, even unreadable, errs on the strict side. A stale line is skipped. */
        char path[sizeof SUB_PULLED + FILE_NAME_LEN + 1];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", SUB_PULLED, file);
        if (fstatat(s->dirs[i].fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
            h->n++;
        return PG_OK;
    }
    pg_record *rec;
    int rc = pg_st_get_from_dir(&s->dirs[i], file, &rec, err);
    if (rc == PG_ERR_NOT_FOUND) /* a stale line: the record is gone */
        return PG_OK;
    if (rc != PG_OK)
        return rc;
    if (!pg_record_find(rec, image_name)) {
        pg_record_free(rec);
        return PG_OK;
    }
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 8;
        pg_record **grown = realloc(h->recs, cap * sizeof *grown);
        if (!grown) {
            pg_record_free(rec);
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
        }
        h->recs = grown;
        h->cap = cap;
    }
    h->recs[h->n++] = rec;
    return PG_OK;
}

/* Applies the lines of text that name hex (or "?") to h. */
static int hits_from_text(const pg_store *s, size_t i, const char *text, const char *hex,
                          const char *image_name, name_hits *h, pg_error *err)
{
    int rc = PG_OK;
    for (const char *p = text; rc == PG_OK && p && *p;) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char file[FILE_NAME_LEN + 1];
        if (!h->load && h->n)
            break; /* counting stops at the first record: one is proof enough */
        if (n == PG_HASH_HEX_LEN + 1 + FILE_NAME_LEN && memcmp(p, hex, PG_HASH_HEX_LEN) == 0) {
            memcpy(file, p + PG_HASH_HEX_LEN + 1, FILE_NAME_LEN);
            file[FILE_NAME_LEN] = '\0';
            if (pg_st_is_record_name(file))
                rc = hit_load(s, i, file, image_name, h, err);
        } else if (n > 2 && p[0] == '?' && p[1] == ' ') {
            h->unknown = true;
        }
        p = end ? end + 1 : NULL;
    }
    return rc;
}

/* A record file a directory's names cache lists under the name. */
typedef struct dir_hit_ctx {
    const pg_store *s;
    size_t i;
    const char *image_name;
    name_hits *h;
} dir_hit_ctx;

static int dir_hit(const char *file, void *ud, pg_error *err)
{
    dir_hit_ctx *c = ud;
    if (!c->h->load && c->h->n)
        return -1; /* counting stops at the first record: one is proof enough */
    int rc = hit_load(c->s, c->i, file, c->image_name, c->h, err);
    return rc == PG_OK && !c->h->load && c->h->n ? -1 : rc;
}

/* The records of directory i that map the name, from its names cache. */
static int hits_from_cache(const pg_store *s, size_t i, const unsigned char raw[32],
                           const char *image_name, name_hits *h, pg_error *err)
{
    pg_st_dirnames *v;
    int rc = pg_st_dirnames_open(s, &s->dirs[i], &v, err);
    if (rc != PG_OK)
        return rc;
    dir_hit_ctx c = {s, i, image_name, h};
    bool unknown = false;
    rc = pg_st_dirnames_find(v, raw, dir_hit, &c, &unknown, err);
    h->unknown |= unknown;
    pg_st_dirnames_free(v);
    return rc;
}

int pg_store_records_mapping(const pg_store *store, const char *image_name, pg_record ***recs,
                             size_t *n_out, bool *unknown_out, pg_error *err)
{
    *n_out = 0;
    *unknown_out = false;
    if (recs)
        *recs = NULL;
    char hex[PG_HASH_HEX_LEN + 1];
    unsigned char raw[32];
    int rc = store ? pg_st_check_input("image name", image_name, err)
                   : pg_fail(err, PG_ERR_INVALID, "no store");
    if (rc == PG_OK)
        rc = pg_sha256_hex(image_name, strlen(image_name), hex, err);
    if (rc == PG_OK)
        rc = pg_st_name_hash(image_name, raw, err);
    name_hits h = {recs != NULL, NULL, 0, 0, false};
    for (size_t i = 0; rc == PG_OK && i < store->n_dirs && (h.load || !h.n); i++) {
        if (i == 0 && store->writable && names_complete(&store->dirs[0])) {
            char *text = NULL;
            rc = own_names(store, image_name, hex, &text, err);
            if (rc == PG_OK && text)
                rc = hits_from_text(store, i, text, hex, image_name, &h, err);
            free(text);
        } else {
            rc = hits_from_cache(store, i, raw, image_name, &h, err);
        }
    }
    if (rc != PG_OK) {
        for (size_t i = 0; h.recs && i < h.n; i++)
            pg_record_free(h.recs[i]);
        free(h.recs);
        return rc;
    }
    *n_out = h.n;
    *unknown_out = h.unknown;
    if (recs)
        *recs = h.recs;
    return PG_OK;
}

int pg_store_refresh_name_caches(const pg_store *store, pg_error *err)
{
    if (!store || !store->writable)
        return PG_OK; /* no cache without a writable directory */
    int rc = PG_OK;
    for (size_t i = names_complete(&store->dirs[0]) ? 1 : 0; rc == PG_OK && i < store->n_dirs; i++)
        rc = pg_st_dirnames_refresh(store, &store->dirs[i], err);
    return rc;
}

/* ------------------------------------------------ prune's upkeep of the index */

/*
 * Prune keeps the name index exact without a rebuild under the lock: its walk
 * of pulled/ (outside the lock) collects every record's name lines; then each
 * name file that must change (lines of records gone, lines missing) is
 * rewritten in short locked steps, durably (data fsync'd before the rename:
 * a name file is never read torn), and name files with nothing left go.
 * What a file lists is recomputed under the lock as the union of its current
 * lines and the walk's, each kept only while its record file exists: a
 * record written by a concurrent pull added its own line under the lock, so
 * nothing is lost; a record removed since the walk drops out. Unchanged name
 * files are not touched and nothing calls syncfs.
 *
 * Without the completeness marker (records from before the index, or an
 * interrupted rebuild) every name file is rewritten durably, and only then is
 * the marker created and its directory fsync'd.
 */

int pg_st_name_lines_add(pg_st_name_lines *l, const pg_record *rec, const char *file, pg_error *err)
{
    for (size_t i = 0; i < rec->n_maps; i++) {
        char hex[PG_HASH_HEX_LEN + 1];
        char *owned = NULL;
        const char *n = NULL;
        int rc = indexed_name(rec->maps[i].image_name, &owned, &n, err);
        if (rc == PG_OK)
            rc = pg_sha256_hex(n, strlen(n), hex, err);
        free(owned);
        if (rc != PG_OK)
            return rc;
        if (l->n == l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 256;
            pg_st_name_line *grown = realloc(l->v, cap * sizeof *grown);
            if (!grown)
                return pg_fail(err, PG_ERR_NOMEM, "out of memory");
            l->v = grown;
            l->cap = cap;
        }
        memcpy(l->v[l->n].hex, hex, sizeof hex);
        snprintf(l->v[l->n].file, sizeof l->v[l->n].file, "%s", file);
        l->n++;
    }
    return PG_OK;
}

void pg_st_name_lines_free(pg_st_name_lines *l)
{
    free(l->v);
    *l = (pg_st_name_lines){0};
}

static int cmp_line(const void *a, const void *b)
{
    const pg_st_name_line *x = a, *y = b;
    int c = strcmp(x->hex, y->hex);
    return c ? c : strcmp(x->file, y->file);
}

static int cmp_file(const void *a, const void *b) { return strcmp(a, b); }

/* A sorted set of record file names. */
typedef struct file_set {
    file_name *v;
    size_t n, cap;
} file_set;

static int set_add(file_set *f, const char *file)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 8;
        file_name *grown = realloc(f->v, cap * sizeof *grown);
        if (!grown)
            return PG_ERR_NOMEM;
        f->v = grown;
        f->cap = cap;
    }
    snprintf(f->v[f->n++], sizeof(file_name), "%s", file);
    return PG_OK;
}

static void set_sort(file_set *f)
{
    if (f->n)
        qsort(f->v, f->n, sizeof *f->v, cmp_file);
    size_t w = 0;
    for (size_t i = 0; i < f->n; i++)
        if (w == 0 || strcmp(f->v[w - 1], f->v[i]) != 0)
            memmove(f->v[w++], f->v[i], sizeof(file_name));
    f->n = w;
}

static bool set_equal(const file_set *a, const file_set *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i], b->v[i]) != 0)
            return false;
    return true;
}

/* Anything at pulled/<file>, even unreadable, is a record: the strict side. */
static bool record_present(int pulled_fd, const char *file)
{
    struct stat st;
    return fstatat(pulled_fd, file, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

typedef struct upkeep {
    const pg_store *s;
    const pg_st_name_lines *lines; /* sorted */
    int names_fd, pulled_fd;
    bool rebuild; /* no completeness marker: every name file rewritten durably */
    char (*names)[PG_HASH_HEX_LEN + 1];
    size_t n_names, cap_names;
    pg_st_batch batch;
} upkeep;

/* The lines of name file sha256-<hex> as a set (*exists: the file is there). */
static int name_file_set(const upkeep *u, const char *hex, file_set *out, bool *exists,
                         pg_error *err)
{
    char name[FILE_NAME_LEN + 1], *text = NULL;
    snprintf(name, sizeof name, "%s%s", NAME_PREFIX, hex);
    int rc = pg_st_read_strict(u->names_fd, &u->s->dirs[0], SUB_NAMES, name, MAX_NAMES_BYTES, &text,
                               NULL, err);
    *exists = rc == PG_OK;
    if (rc == PG_ERR_NOT_FOUND || rc == PG_ERR_CORRUPT)
        rc = PG_OK;
    for (char *save = NULL, *line = text ? strtok_r(text, "\n", &save) : NULL; rc == PG_OK && line;
         line = strtok_r(NULL, "\n", &save))
        rc = set_add(out, line) == PG_OK ? PG_OK : pg_fail(err, PG_ERR_NOMEM, "out of memory");
    free(text);
    set_sort(out);
    return rc;
}

/* What name file <hex> must list: its lines and the walk's, of records present. */
static int name_wanted(const upkeep *u, const char *hex, const file_set *old, file_set *want)
{
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < old->n; i++)
        if (strlen(old->v[i]) == FILE_NAME_LEN && pg_st_is_record_name(old->v[i]) &&
            record_present(u->pulled_fd, old->v[i]))
            rc = set_add(want, old->v[i]);
    pg_st_name_line key = {{0}, {0}};
    memcpy(key.hex, hex, sizeof key.hex);
    size_t lo = 0, hi = u->lines->n;
    while (lo < hi) { /* the first line of hex */
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(u->lines->v[mid].hex, hex) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; rc == PG_OK && i < u->lines->n && strcmp(u->lines->v[i].hex, hex) == 0; i++)
        if (record_present(u->pulled_fd, u->lines->v[i].file))
            rc = set_add(want, u->lines->v[i].file);
    set_sort(want);
    return rc;
}

/*
 * Whether name file <hex> must change and, if so, its new text (*text NULL:
 * nothing to list, the file goes; caller frees).
 */
static int name_wanted_text(const upkeep *u, const char *hex, bool *changes, char **text,
                            size_t *len, pg_error *err)
{
    file_set old = {0}, want = {0};
    bool exists = false;
    *text = NULL;
    *len = 0;
    int rc = name_file_set(u, hex, &old, &exists, err);
    if (rc == PG_OK && name_wanted(u, hex, &old, &want) != PG_OK)
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    *changes =
        rc == PG_OK && (exists || want.n) && (u->rebuild || !exists || !set_equal(&old, &want));
    if (rc == PG_OK && *changes && want.n) {
        *len = want.n * (FILE_NAME_LEN + 1);
        if (!(*text = malloc(*len + 1)))
            rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
        for (size_t i = 0; *text && i < want.n; i++)
            snprintf(*text + i * (FILE_NAME_LEN + 1), FILE_NAME_LEN + 2, "%s\n", want.v[i]);
    }
    free(old.v);
    free(want.v);
    return rc;
}

static int stage_name(upkeep *u, const char *hex, const char *text, size_t len, pg_error *err)
{
    char name[FILE_NAME_LEN + 1];
    snprintf(name, sizeof name, "%s%s", NAME_PREFIX, hex);
    return pg_st_batch_stage(&u->batch, u->names_fd, u->s->dirs[0].path, SUB_NAMES, name, text, len,
                             err);
}

#define UPKEEP_CHUNK 64

/* Under the lock: name file <hex> as it must be now; prepared: the text staged before. */
static int name_settle(upkeep *u, const char *hex, const char *prepared, pg_error *err)
{
    bool changes = false;
    char *text = NULL;
    size_t len = 0;
    int rc = name_wanted_text(u, hex, &changes, &text, &len, err);
    if (rc == PG_OK && text && (!prepared || strcmp(prepared, text) != 0)) {
        rc = stage_name(u, hex, text, len, err); /* changed since: staged again */
    } else if (rc == PG_OK && changes && !text && !prepared) {
        char name[FILE_NAME_LEN + 1];
        snprintf(name, sizeof name, "%s%s", NAME_PREFIX, hex);
        /* Not synced: a removal lost in a crash leaves only lines of records gone. */
        if (pg_st_sys_unlinkat(u->names_fd, name) != 0 && errno != ENOENT)
            rc = pg_fail_errno(err, errno, "remove %s/%s/%s", u->s->dirs[0].path, SUB_NAMES, name);
    }
    /* Nothing to list now but a text prepared: it lists only records since
     * removed (stale lines, neutral); the next prune drops it. */
    free(text);
    return rc;
}

/*
 * One chunk of name files: their new texts written and made durable OUTSIDE
 * the lock (the fsyncs are the slow part), then under it each recomputed
 * (a pull may have added a line meanwhile: staged again), renamed into place
 * and the directory fsync'd.
 */
static int upkeep_chunk(upkeep *u, size_t from, size_t to, pg_error *err)
{
    char *prepared[UPKEEP_CHUNK] = {0};
    int rc = PG_OK;
    for (size_t i = from; rc == PG_OK && i < to; i++) {
        bool changes;
        size_t len;
        rc = name_wanted_text(u, u->names[i], &changes, &prepared[i - from], &len, err);
        if (rc == PG_OK && prepared[i - from])
            rc = stage_name(u, u->names[i], prepared[i - from], len, err);
    }
    if (rc == PG_OK)
        rc = pg_st_batch_sync_data(&u->batch, err);
    int lock_fd = -1;
    if (rc == PG_OK)
        rc = pg_st_lock_store(u->s, &lock_fd, err);
    for (size_t i = from; rc == PG_OK && i < to; i++)
        rc = name_settle(u, u->names[i], prepared[i - from], err);
    if (rc == PG_OK)
        rc = pg_st_batch_commit(&u->batch, u->batch.n, err);
    pg_st_unlock_store(lock_fd);
    pg_st_batch_free(&u->batch);
    pg_st_batch_init(&u->batch, 0);
    for (size_t i = 0; i < UPKEEP_CHUNK; i++)
        free(prepared[i]);
    return rc;
}

static int add_name(upkeep *u, const char *hex)
{
    if (u->n_names == u->cap_names) {
        size_t cap = u->cap_names ? 2 * u->cap_names : 256;
        void *grown = realloc(u->names, cap * sizeof *u->names);
        if (!grown)
            return PG_ERR_NOMEM;
        u->names = grown;
        u->cap_names = cap;
    }
    memcpy(u->names[u->n_names++], hex, PG_HASH_HEX_LEN + 1);
    return PG_OK;
}

static int cmp_hex(const void *a, const void *b) { return strcmp(a, b); }

/* Every name the walk saw or a name file has, once. */
static int collect_names(upkeep *u, pg_error *err)
{
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < u->lines->n; i++)
        if (i == 0 || strcmp(u->lines->v[i].hex, u->lines->v[i - 1].hex) != 0)
            rc = add_name(u, u->lines->v[i].hex);
    int dup_fd = dup(u->names_fd);
    DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!dir) {
        if (dup_fd >= 0)
            close(dup_fd);
        return pg_fail_errno(err, errno, "list %s/%s", u->s->dirs[0].path, SUB_NAMES);
    }
    struct dirent *de;
    while (rc == PG_OK && (de = readdir(dir)) != NULL)
        if (pg_st_is_record_name(de->d_name) && strlen(de->d_name) == FILE_NAME_LEN)
            rc = add_name(u, de->d_name + strlen(NAME_PREFIX));
    closedir(dir);
    if (rc != PG_OK)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (u->n_names)
        qsort(u->names, u->n_names, sizeof *u->names, cmp_hex);
    size_t w = 0;
    for (size_t i = 0; i < u->n_names; i++)
        if (w == 0 || strcmp(u->names[w - 1], u->names[i]) != 0)
            memmove(u->names[w++], u->names[i], sizeof *u->names);
    u->n_names = w;
    return PG_OK;
}

/* Outside the lock: keeps only the names whose file must change. */
static int keep_changing(upkeep *u, pg_error *err)
{
    size_t w = 0;
    for (size_t i = 0; i < u->n_names; i++) {
        bool changes = false;
        char *text = NULL;
        size_t len = 0;
        int rc = name_wanted_text(u, u->names[i], &changes, &text, &len, err);
        free(text);
        if (rc != PG_OK)
            return rc;
        if (changes)
            memmove(u->names[w++], u->names[i], sizeof *u->names);
    }
    u->n_names = w;
    return PG_OK;
}

/* Under the lock: the index is complete once its marker is durable. */
static int mark_complete(void *ctx, size_t i, pg_error *err)
{
    (void)i;
    upkeep *u = ctx;
    const record_dir *d = &u->s->dirs[0];
    pg_st_sys_unlinkat(d->fd, SUB_NAMES "/.complete"); /* format 1's marker: no longer read */
    names_mark_complete(d);
    if (!names_complete(d) || pg_st_fsync_retry(u->names_fd) != 0)
        return pg_fail_errno(err, errno, "mark %s/%s complete", d->path, SUB_NAMES);
    return PG_OK;
}

int pg_st_names_upkeep(const pg_store *s, pg_st_name_lines *lines, pg_error *err)
{
    const record_dir *d = &s->dirs[0];
    upkeep u = {.s = s, .lines = lines, .names_fd = -1, .pulled_fd = -1};
    pg_st_batch_init(&u.batch, 0);
    u.rebuild = !names_complete(d);
    if (lines->n)
        qsort(lines->v, lines->n, sizeof *lines->v, cmp_line);
    int rc = pg_st_open_subdir(d, SUB_NAMES, &u.names_fd, err);
    if (rc == PG_OK)
        rc = pg_st_open_subdir(d, SUB_PULLED, &u.pulled_fd, err);
    if (rc == PG_OK)
        rc = collect_names(&u, err);
    if (rc == PG_OK)
        rc = keep_changing(&u, err);
    for (size_t i = 0; rc == PG_OK && i < u.n_names; i += UPKEEP_CHUNK)
        rc = upkeep_chunk(&u, i, i + UPKEEP_CHUNK < u.n_names ? i + UPKEEP_CHUNK : u.n_names, err);
    if (rc == PG_OK && u.rebuild)
        rc = pg_st_in_steps(s, 1, mark_complete, NULL, &u, err);
    pg_st_batch_free(&u.batch);
    if (u.names_fd >= 0)
        close(u.names_fd);
    if (u.pulled_fd >= 0)
        close(u.pulled_fd);
    free(u.names);
    return rc;
}
