/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store's name index (pullgate-names/, writable directory): which
 * of its records map an image name, the "preloaded" proof (docs/design.md,
 * "Image identity"), written with each record and kept exact by prune.
 */
#include "store_names.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ name index */

/* One record file a line. A line may be stale (record since deleted): that errs
 * on the strict side and lookups skip missing records. */
#define MAX_NAMES_BYTES (16u << 20)
/* pullgate-names/ covers every record of pulled/ only once this marker exists;
 * without it the writable directory is looked up like a read-only one. */
#define NAMES_COMPLETE SUB_NAMES "/.complete-2" /* -2: lines by the image a key names */

bool pg_st_names_complete(const record_dir *w) { return pg_st_exists_at(w->fd, NAMES_COMPLETE); }

static void names_mark_complete(const record_dir *w)
{
    int fd =
        pg_st_sys_openat(w->fd, NAMES_COMPLETE, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
}

/*
 * Runs at every store open while the name index is not complete (a store with
 * records from before it): getdents64 with a small buffer, stopping at the
 * first record, instead of readdir's 32 KiB batch (~340 entries read for the
 * hook's every run). A read error counts as "has records" (nothing marked).
 */
static bool has_no_records(const record_dir *w)
{
    pg_autoclose int fd = -1;
    if (pg_st_open_subdir(w, SUB_PULLED, &fd, NULL) != PG_OK)
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
    return empty;
}

void pg_st_names_mark_complete_if_empty(const record_dir *w)
{
    if (has_no_records(w))
        names_mark_complete(w);
}

static bool line_present(const char *text, const char *line, size_t n)
{
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, line, n) == 0 && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

/* Adds the line file to pullgate-names/<name> unless present. */
static int name_add_file(const record_dir *w, pg_st_batch *b, int fd, const char *name,
                         const char *file, pg_error *err)
{
    pg_autofree char *old = NULL;
    size_t len = 0;
    int rc = pg_st_read_strict(fd, w, SUB_NAMES, name, MAX_NAMES_BYTES, &old, &len, err);
    if (rc == PG_ERR_NOT_FOUND)
        rc = PG_OK;
    if (rc != PG_OK || (old && line_present(old, file, strlen(file))))
        return rc;
    size_t n = len + strlen(file) + 2;
    pg_autofree char *text = malloc(n);
    if (!text)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    int wr = snprintf(text, n, "%s%s\n", old ? old : "", file);
    return pg_st_batch_stage(b, fd, w->path, SUB_NAMES, name, text, (size_t)wr, err);
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

int pg_st_names_add_locked(const record_dir *w, pg_st_batch *b, const pg_record *rec,
                           const char *file, pg_error *err)
{
    pg_autoclose int fd = -1;
    int rc = pg_st_open_subdir(w, SUB_NAMES, &fd, err);
    for (size_t i = 0; rc == PG_OK && i < rec->n_maps; i++) {
        file_name name;
        pg_autofree char *owned = NULL;
        const char *image = NULL;
        rc = indexed_name(rec->maps[i].image_name, &owned, &image, err);
        if (rc == PG_OK)
            rc = pg_record_file_name(image, name, err);
        if (rc == PG_OK)
            rc = name_add_file(w, b, fd, name, file, err);
    }
    return rc;
}

int pg_st_names_files(const record_dir *w, int names_fd, const char *image_name, pg_strv *files,
                      pg_error *err)
{
    file_name name;
    pg_autofree char *text = NULL;
    int rc = pg_record_file_name(image_name, name, err);
    if (rc == PG_OK)
        rc = pg_st_read_strict(names_fd, w, SUB_NAMES, name, MAX_NAMES_BYTES, &text, NULL, err);
    if (rc == PG_ERR_NOT_FOUND)
        return PG_OK;
    for (char *save = NULL, *line = rc == PG_OK ? strtok_r(text, "\n", &save) : NULL;
         rc == PG_OK && line; line = strtok_r(NULL, "\n", &save))
        if (strlen(line) == FILE_NAME_LEN && pg_st_is_record_name(line))
            rc = pg_strv_push(files, line, err);
    return rc;
}

/* ------------------------------------------------ prune's upkeep of the index */

/* Prune's upkeep (docs/design.md, "The name index"): what a file lists is
 * recomputed under the lock as the union of its current lines and the walk's,
 * each kept only while its record file exists, so a concurrent pull's own line
 * is never lost. */

int pg_st_name_lines_add(pg_st_name_lines *l, const pg_record *rec, const char *file, pg_error *err)
{
    for (size_t i = 0; i < rec->n_maps; i++) {
        char hex[PG_HASH_HEX_LEN + 1];
        pg_autofree char *owned = NULL;
        const char *n = NULL;
        int rc = indexed_name(rec->maps[i].image_name, &owned, &n, err);
        if (rc == PG_OK)
            rc = pg_sha256_hex(n, strlen(n), hex, err);
        if (rc != PG_OK)
            return rc;
        pg_st_name_line *grown = pg_st_grow(l->v, &l->cap, l->n, sizeof *grown, 256);
        if (!grown)
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
        l->v = grown;
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

static int cmp_str(const void *a, const void *b) { return strcmp(a, b); }

/* Sorts n strings stored `size` bytes apart and drops repeats: the new n. */
static size_t sort_unique(void *v, size_t n, size_t size)
{
    char *p = v;
    if (n)
        qsort(p, n, size, cmp_str);
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (w == 0 || strcmp(p + (w - 1) * size, p + i * size) != 0)
            memmove(p + w++ * size, p + i * size, size);
    return w;
}

/* A sorted set of record file names. */
typedef struct file_set {
    file_name *v;
    size_t n, cap;
} file_set;

static int set_add(file_set *f, const char *file)
{
    file_name *grown = pg_st_grow(f->v, &f->cap, f->n, sizeof *grown, 8);
    if (!grown)
        return PG_ERR_NOMEM;
    f->v = grown;
    snprintf(f->v[f->n++], sizeof(file_name), "%s", file);
    return PG_OK;
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

typedef struct upkeep {
    const record_dir *w;
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
    char name[FILE_NAME_LEN + 1];
    pg_autofree char *text = NULL;
    snprintf(name, sizeof name, "%s%s", NAME_PREFIX, hex);
    int rc =
        pg_st_read_strict(u->names_fd, u->w, SUB_NAMES, name, MAX_NAMES_BYTES, &text, NULL, err);
    *exists = rc == PG_OK;
    if (rc == PG_ERR_NOT_FOUND || rc == PG_ERR_CORRUPT)
        rc = PG_OK;
    for (char *save = NULL, *line = text ? strtok_r(text, "\n", &save) : NULL; rc == PG_OK && line;
         line = strtok_r(NULL, "\n", &save))
        rc = set_add(out, line) == PG_OK ? PG_OK : pg_fail(err, PG_ERR_NOMEM, "out of memory");
    out->n = sort_unique(out->v, out->n, sizeof *out->v);
    return rc;
}

/* What name file <hex> must list: its lines and the walk's, of records present
 * (anything at pulled/<file>, even unreadable, is a record: the strict side). */
static int name_wanted(const upkeep *u, const char *hex, const file_set *old, file_set *want)
{
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < old->n; i++)
        if (strlen(old->v[i]) == FILE_NAME_LEN && pg_st_is_record_name(old->v[i]) &&
            !pg_st_absent_at(u->pulled_fd, old->v[i]))
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
        if (!pg_st_absent_at(u->pulled_fd, u->lines->v[i].file))
            rc = set_add(want, u->lines->v[i].file);
    want->n = sort_unique(want->v, want->n, sizeof *want->v);
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
    return pg_st_batch_stage(&u->batch, u->names_fd, u->w->path, SUB_NAMES, name, text, len, err);
}

#define UPKEEP_CHUNK 64

/* Under the lock: name file <hex> as it must be now; prepared: the text staged before. */
static int name_settle(upkeep *u, const char *hex, const char *prepared, pg_error *err)
{
    bool changes = false;
    pg_autofree char *text = NULL;
    size_t len = 0;
    int rc = name_wanted_text(u, hex, &changes, &text, &len, err);
    if (rc == PG_OK && text && (!prepared || strcmp(prepared, text) != 0)) {
        rc = stage_name(u, hex, text, len, err); /* changed since: staged again */
    } else if (rc == PG_OK && changes && !text && !prepared) {
        char name[FILE_NAME_LEN + 1];
        snprintf(name, sizeof name, "%s%s", NAME_PREFIX, hex);
        /* Not synced: a removal lost in a crash leaves only lines of records gone. */
        rc = pg_st_unlink(u->names_fd, u->w->path, SUB_NAMES, name, err);
    }
    /* Nothing to list now but a text prepared: it lists only records since
     * removed (stale lines, neutral); the next prune drops it. */
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
        rc = pg_st_lock_store(u->w, &lock_fd, err);
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
    void *grown = pg_st_grow(u->names, &u->cap_names, u->n_names, sizeof *u->names, 256);
    if (!grown)
        return PG_ERR_NOMEM;
    u->names = grown;
    memcpy(u->names[u->n_names++], hex, PG_HASH_HEX_LEN + 1);
    return PG_OK;
}

static bool is_name_file(const char *name)
{
    return pg_st_is_record_name(name) && strlen(name) == FILE_NAME_LEN;
}

static int add_name_file(int dirfd, const record_dir *d, const char *name, void *ud)
{
    (void)dirfd;
    (void)d;
    return add_name(ud, name + strlen(NAME_PREFIX));
}

/* Every name the walk saw or a name file has, once. */
static int collect_names(upkeep *u, pg_error *err)
{
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < u->lines->n; i++)
        if (i == 0 || strcmp(u->lines->v[i].hex, u->lines->v[i - 1].hex) != 0)
            rc = add_name(u, u->lines->v[i].hex);
    if (rc == PG_OK)
        rc = pg_st_walk(u->w, SUB_NAMES, is_name_file, add_name_file, u, err);
    if (rc == PG_ERR_NOMEM) /* add_name's only error */
        return pg_fail(err, rc, "out of memory");
    if (rc != PG_OK)
        return rc;
    u->n_names = sort_unique(u->names, u->n_names, sizeof *u->names);
    return PG_OK;
}

/* Outside the lock: keeps only the names whose file must change. */
static int keep_changing(upkeep *u, pg_error *err)
{
    size_t w = 0;
    for (size_t i = 0; i < u->n_names; i++) {
        bool changes = false;
        pg_autofree char *text = NULL;
        size_t len = 0;
        int rc = name_wanted_text(u, u->names[i], &changes, &text, &len, err);
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
    const record_dir *d = u->w;
    pg_st_sys_unlinkat(d->fd, SUB_NAMES "/.complete"); /* format 1's marker: no longer read */
    names_mark_complete(d);
    if (!pg_st_names_complete(d) || pg_st_fsync_retry(u->names_fd) != 0)
        return pg_fail_errno(err, errno, "mark %s/%s complete", d->path, SUB_NAMES);
    return PG_OK;
}

int pg_st_names_upkeep(const record_dir *d, pg_st_name_lines *lines, pg_error *err)
{
    upkeep u = {.w = d, .lines = lines, .names_fd = -1, .pulled_fd = -1};
    pg_st_batch_init(&u.batch, 0);
    u.rebuild = !pg_st_names_complete(d);
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
        rc = pg_st_in_steps(d, 1, mark_complete, NULL, &u, err);
    pg_st_batch_free(&u.batch);
    pg_cleanup_close(&u.names_fd);
    pg_cleanup_close(&u.pulled_fd);
    free(u.names);
    return rc;
}
