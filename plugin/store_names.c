/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store's name index (pullgate-names/, writable directory) and
 * the name caches of read-only directories (pullgate-dircache/): which
 * records map an image name, the "preloaded" proof (docs/design.md, "Image
 * identity").
 */
#include "store_impl.h"
#include "store_lookup.h"

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
 *  - a read-only directory (the kubelet's) gets a cache in the writable one,
 *    pullgate-dircache/<hash(path)>: a stamp of its pulled/ and pulling/
 *    directories (dev, inode, mtime ns), taken BEFORE the scan, then one line
 *    "<hex(name)> <record file>" per mapping, "? <record file>" for a record
 *    that could not be read (its names are unknown: it may map any name).
 *    A changed stamp means a rescan; without a writable directory, every
 *    lookup scans.
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
/* 2: a record is listed under the image each key names, not the key as written
 * (a cache of format 1 never matches a stamp line, so it is rebuilt). */
#define CACHE_MAGIC "pullgate-dircache 2 "

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

/* Collects "<hex(name)> <file>" (or "? <file>") lines of every record of a directory. */
static int scan_names_entry(int dirfd, const record_dir *d, const char *name, void *ud)
{
    text_buf *b = ud;
    pg_record *rec;
    pg_error ignored = {0};
    if (pg_st_read_record_at(dirfd, d, name, &rec, &ignored) != PG_OK) {
        buf_add(b, "?", name);
        return PG_OK;
    }
    for (size_t i = 0; i < rec->n_maps; i++) {
        char hex[PG_HASH_HEX_LEN + 1];
        char *owned = NULL;
        const char *n = NULL;
        if (indexed_name(rec->maps[i].image_name, &owned, &n, NULL) == PG_OK &&
            pg_sha256_hex(n, strlen(n), hex, NULL) == PG_OK)
            buf_add(b, hex, name);
        else
            buf_add(b, "?", name); /* names unknown: may map any name (the strict side) */
        free(owned);
    }
    pg_record_free(rec);
    return PG_OK;
}

/*
 * A directory changed less than this long ago is not cached: file systems keep
 * mtime at timer-tick granularity, so a record added in the same tick as the
 * stamp could otherwise hide behind an unchanged stamp.
 */
#define CACHE_QUIET_S 2

static void stamp_of(const record_dir *d, const char *sub, char *out, size_t n, bool *recent)
{
    struct stat st;
    if (fstatat(d->fd, sub, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(out, n, "-");
        return;
    }
    if (st.st_mtim.tv_sec >= time(NULL) - CACHE_QUIET_S)
        *recent = true;
    snprintf(out, n, "%ju:%ju:%lld.%09ld", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino,
             (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
}

/* The first line of a cache: what the directory looked like before the scan. */
static void dir_stamp(const record_dir *d, char *out, size_t n, bool *recent)
{
    char pulled[96], pulling[96];
    *recent = false;
    stamp_of(d, SUB_PULLED, pulled, sizeof pulled, recent);
    stamp_of(d, SUB_PULLING, pulling, sizeof pulling, recent);
    snprintf(out, n, "%s%s %s\n", CACHE_MAGIC, pulled, pulling);
}

/* The name lines of read-only directory d: from the cache when its stamp is current. */
static int dir_names(const pg_store *s, const record_dir *d, char **text_out, pg_error *err)
{
    char stamp[256];
    bool recent;
    dir_stamp(d, stamp, sizeof stamp, &recent);
    file_name cache_name;
    int rc = pg_record_file_name(d->path, cache_name, err);
    int cache_fd = -1;
    if (rc == PG_OK && s->writable &&
        pg_st_open_subdir(&s->dirs[0], SUB_DIRCACHE, &cache_fd, NULL) != PG_OK)
        cache_fd = -1;
    if (rc == PG_OK && cache_fd >= 0) {
        char *cached = NULL;
        if (pg_read_file_at(cache_fd, cache_name, MAX_NAMES_BYTES, PG_READ_STRICT, &cached, NULL,
                            NULL) == PG_OK &&
            strncmp(cached, stamp, strlen(stamp)) == 0) {
            close(cache_fd);
            *text_out = cached;
            return PG_OK;
        }
        free(cached);
    }
    text_buf b = {0};
    buf_add(&b, stamp, ""); /* "stamp \n": the stamp line carries its own newline */
    if (rc == PG_OK)
        rc = pg_st_walk_records(d, SUB_PULLED, scan_names_entry, &b, err);
    if (rc == PG_OK && b.failed)
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc == PG_OK && cache_fd >= 0 && !recent) /* best effort: no cache means a rescan */
        pg_st_write_file_atomic(cache_fd, s->dirs[0].path, SUB_DIRCACHE, cache_name, b.p, b.len,
                                NULL);
    if (cache_fd >= 0)
        close(cache_fd);
    if (rc != PG_OK) {
        free(b.p);
        return rc;
    }
    *text_out = b.p;
    return PG_OK;
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

int pg_store_records_mapping(const pg_store *store, const char *image_name, pg_record ***recs,
                             size_t *n_out, bool *unknown_out, pg_error *err)
{
    *n_out = 0;
    *unknown_out = false;
    if (recs)
        *recs = NULL;
    char hex[PG_HASH_HEX_LEN + 1];
    int rc = store ? pg_st_check_input("image name", image_name, err)
                   : pg_fail(err, PG_ERR_INVALID, "no store");
    if (rc == PG_OK)
        rc = pg_sha256_hex(image_name, strlen(image_name), hex, err);
    name_hits h = {recs != NULL, NULL, 0, 0, false};
    for (size_t i = 0; rc == PG_OK && i < store->n_dirs && (h.load || !h.n); i++) {
        char *text = NULL;
        if (i == 0 && store->writable && names_complete(&store->dirs[0]))
            rc = own_names(store, image_name, hex, &text, err);
        else
            rc = dir_names(store, &store->dirs[i], &text, err);
        if (rc == PG_OK && text)
            rc = hits_from_text(store, i, text, hex, image_name, &h, err);
        free(text);
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

static int cmp_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Writes pullgate-names/ files from sorted "<hex(name)> <file>" lines; one file per name. */
static int names_write_groups(const pg_store *s, int fd, char **lines, size_t n, pg_error *err)
{
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < n;) {
        size_t j = i;
        text_buf b = {0};
        for (; j < n && memcmp(lines[j], lines[i], PG_HASH_HEX_LEN) == 0; j++)
            if (j == i || strcmp(lines[j], lines[j - 1]) != 0)
                buf_add(&b, lines[j] + PG_HASH_HEX_LEN + 1, "");
        char name[FILE_NAME_LEN + 1];
        snprintf(name, sizeof name, "%s%.*s", NAME_PREFIX, PG_HASH_HEX_LEN, lines[i]);
        /* buf_add wrote "file \n": drop the blank before each newline */
        size_t w = 0;
        for (size_t k = 0; b.p && k < b.len; k++)
            if (!(b.p[k] == ' ' && k + 1 < b.len && b.p[k + 1] == '\n'))
                b.p[w++] = b.p[k];
        /* Not fsync'd one by one (a rebuild may write 100k files): the caller
         * removed the .complete marker first and syncs before restoring it. */
        rc = b.failed ? pg_fail(err, PG_ERR_NOMEM, "out of memory")
                      : pg_st_write_file_replace(fd, s->dirs[0].path, SUB_NAMES, name, b.p, w,
                                                 false, err);
        free(b.p);
        i = j;
    }
    return rc;
}

/* Removes name files no line names (only after the new ones are durable). */
static void names_remove_unused(int fd, char **lines, size_t n)
{
    int dup_fd = dup(fd);
    DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    struct dirent *de;
    while (dir && (de = readdir(dir)) != NULL) {
        if (!pg_st_is_record_name(de->d_name) || strlen(de->d_name) != FILE_NAME_LEN)
            continue;
        const char *hex = de->d_name + strlen(NAME_PREFIX);
        bool used = false;
        for (size_t lo = 0, hi = n; lo < hi && !used;) {
            size_t mid = lo + (hi - lo) / 2;
            int c = memcmp(lines[mid], hex, PG_HASH_HEX_LEN);
            used = c == 0;
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (!used)
            pg_st_sys_unlinkat(fd, de->d_name);
    }
    if (dir)
        closedir(dir);
    else if (dup_fd >= 0)
        close(dup_fd);
}

/* Prune: the name index from the records that remain. */
int pg_st_names_rebuild_locked(const pg_store *s, pg_error *err)
{
    const record_dir *d = &s->dirs[0];
    text_buf b = {0};
    int rc = pg_st_walk_records(d, SUB_PULLED, scan_names_entry, &b, err);
    if (rc == PG_OK && b.failed)
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    size_t n = 0, cap = 0;
    char **lines = NULL;
    for (char *line = rc == PG_OK && b.p ? strtok(b.p, "\n") : NULL; rc == PG_OK && line;
         line = strtok(NULL, "\n")) {
        if (strlen(line) != PG_HASH_HEX_LEN + 1 + FILE_NAME_LEN)
            continue; /* "?" lines: an unreadable record maps no name we know */
        if (n == cap) {
            char **grown = realloc(lines, (cap = cap ? cap * 2 : 64) * sizeof *grown);
            if (!grown) {
                rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
                break;
            }
            lines = grown;
        }
        lines[n++] = line;
    }
    int fd = -1;
    if (rc == PG_OK)
        rc = pg_st_open_subdir(d, SUB_NAMES, &fd, err);
    /* Until the rebuilt index is on disk, a crash must leave it marked incomplete
     * (lookups then scan): marker off, write, syncfs, marker on. */
    if (rc == PG_OK && pg_st_sys_unlinkat(d->fd, NAMES_COMPLETE) != 0 && errno != ENOENT)
        rc = pg_fail_errno(err, errno, "remove %s/%s", d->path, NAMES_COMPLETE);
    if (rc == PG_OK && pg_st_fsync_retry(fd) != 0)
        rc = pg_fail_errno(err, errno, "fsync %s/%s", d->path, SUB_NAMES);
    if (rc == PG_OK) {
        if (n) /* qsort's base must not be NULL, even for 0 elements */
            qsort(lines, n, sizeof *lines, cmp_lines);
        rc = names_write_groups(s, fd, lines, n, err);
    }
    if (rc == PG_OK && pg_st_sys_syncfs(fd) != 0)
        rc = pg_fail_errno(err, errno, "syncfs %s/%s", d->path, SUB_NAMES);
    if (rc == PG_OK) {
        names_remove_unused(fd, lines, n);
        pg_st_sys_unlinkat(d->fd, SUB_NAMES "/.complete"); /* format 1's marker: no longer read */
        names_mark_complete(d);
    }
    if (fd >= 0)
        close(fd);
    free(lines);
    free(b.p);
    return rc;
}
