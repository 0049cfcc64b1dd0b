/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store: kubelet-compatible record directories on disk.
 *
 * Layout of a record directory DIR (the kubelet's <root>/image_manager layout):
 *   DIR/pulling/sha256-<hex sha256(image)>        ImagePullIntent
 *   DIR/pulled/sha256-<hex sha256(imageRef)>      ImagePulledRecord
 * and, in the writable directory only (kubelets never read these):
 *   DIR/pullgate-intents/sha256-<hex(image)>      intent reference count (decimal)
 *   DIR/pullgate-images/sha256-<hex(image)>       {"image":..,"imageRef":..} index
 *   DIR/pullgate-names/sha256-<hex(name)>         record file names mapping name, one a line
 *   DIR/pullgate-credtimes/sha256-<hex(imageRef)> per-credential lastUpdatedTime
 *   DIR/pullgate-dircache/sha256-<hex(path)>      names of a read-only directory (a cache)
 *   DIR/.pullgate.lock                            flock(2) lock file
 * Directories are 0700, files 0600.
 *
 * Design:
 *  - The writable directory (stateDir) is opened once, O_DIRECTORY|O_NOFOLLOW,
 *    and its fd kept; read-only directories are opened by path at open time (a
 *    missing one is skipped). Subdirectories are opened relative to those fds
 *    on every operation (a missing pulling/ or pulled/ is empty). A directory
 *    that is a symlink, not owned by root or the effective uid, or writable by
 *    group/others is refused (PG_ERR_UNSAFE).
 *  - Files are read only through pg_read_file_at(..., PG_READ_STRICT): symlinks,
 *    hard links, FIFOs, devices, wrong owner/mode and oversize files are refused,
 *    never followed.
 *  - A record's content must match its file name (imageRef / image hashes to it),
 *    otherwise it is PG_ERR_CORRUPT. Names ending in ".tmp" or not starting with
 *    "sha256-" are not records.
 *  - Writes are atomic and durable: temp file sha256-<hex>.<random>.tmp created
 *    O_EXCL 0600 in the same directory, written, fsync'd, renamed over the
 *    target, directory fsync'd. Deletes: unlinkat + directory fsync.
 *  - Every read-modify-write takes flock(LOCK_EX) on DIR/.pullgate.lock, opened
 *    per operation so that threads sharing one pg_store exclude each other too
 *    (flock locks belong to open file descriptions). Readers never lock: rename
 *    makes every read see a whole old or a whole new file.
 *  - The intent file's content is fixed by the kubelet format, so concurrent
 *    pulls of one image are counted in pullgate-intents/. record_intent: count++
 *    and write the intent if absent. record_pulled/record_failed: count-- (floor
 *    0); at 0 the count file then the intent are removed. An intent left by a
 *    crash makes the image count as pulled by us (the strict side).
 *  - The store holds only immutable data after open: thread-safe, no globals.
 */
#include "image_identity.h"
#include "internal.h"
#include "store_impl.h"
#include "store_lookup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ helpers */

/* Prefixes err's message with "dir/sub/name: " (dropping a leading "name: "). */
int pg_st_prefix_error(pg_error *err, int code, const char *dir, const char *sub,
                        const char *name)
{
    if (!err)
        return code;
    char msg[PG_ERROR_MESSAGE_MAX];
    const char *m = err->message;
    size_t nl = strlen(name);
    if (strncmp(m, name, nl) == 0 && m[nl] == ':' && m[nl + 1] == ' ')
        m += nl + 2;
    snprintf(msg, sizeof msg, "%s", m);
    return pg_fail(err, code, "%s/%s/%s: %s", dir, sub, name, msg);
}

bool pg_st_is_record_name(const char *name)
{
    size_t n = strlen(name);
    return strncmp(name, NAME_PREFIX, strlen(NAME_PREFIX)) == 0 &&
           !(n >= strlen(TMP_SUFFIX) && strcmp(name + n - strlen(TMP_SUFFIX), TMP_SUFFIX) == 0);
}

int pg_st_check_input(const char *what, const char *s, pg_error *err)
{
    if (!s || !*s)
        return pg_fail(err, PG_ERR_INVALID, "empty %s", what);
    if (strlen(s) > PG_MAX_IMAGE_LEN)
        return pg_fail(err, PG_ERR_LIMIT, "%s longer than %d bytes", what, PG_MAX_IMAGE_LEN);
    return PG_OK;
}

static int require_writable(const pg_store *store, pg_error *err)
{
    if (!store)
        return pg_fail(err, PG_ERR_INVALID, "no store");
    if (!store->writable)
        return pg_fail(err, PG_ERR_INVALID, "the store was opened read-only");
    return PG_OK;
}

int pg_st_fsync_retry(int fd)
{
    int rc;
    while ((rc = fsync(fd)) != 0 && errno == EINTR)
        ;
    return rc;
}

static int write_all(int fd, const char *data, size_t len)
{
    while (len) {
        ssize_t w = write(fd, data, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        data += w;
        len -= (size_t)w;
    }
    return 0;
}

/* ------------------------------------------------------- directories */

/* A record directory must be ours: owned by root/euid, not writable by others. */
static int check_dir_fd(int fd, const char *path, pg_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return pg_fail_errno(err, errno, "stat %s", path);
    if (!S_ISDIR(st.st_mode))
        return pg_fail(err, PG_ERR_UNSAFE, "%s: not a directory", path);
    if (st.st_uid != 0 && st.st_uid != geteuid())
        return pg_fail(err, PG_ERR_UNSAFE, "%s: owned by uid %u, not root", path,
                       (unsigned)st.st_uid);
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return pg_fail(err, PG_ERR_UNSAFE, "%s: writable by group or others (mode %04o)", path,
                       (unsigned)(st.st_mode & 07777));
    return PG_OK;
}

/* Opens base/name as a safe directory. Missing: PG_ERR_NOT_FOUND. */
static int open_dir_at(int base, const char *name, const char *shown, int *fd_out, pg_error *err)
{
    int fd = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return pg_fail(err, PG_ERR_NOT_FOUND, "%s: not found", shown);
        if (e == ELOOP || e == ENOTDIR)
            return pg_fail(err, PG_ERR_UNSAFE, "%s: a symbolic link or not a directory", shown);
        return pg_fail_errno(err, e, "open %s", shown);
    }
    int rc = check_dir_fd(fd, shown, err);
    if (rc != PG_OK) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return PG_OK;
}

int pg_st_open_subdir(const record_dir *d, const char *sub, int *fd_out, pg_error *err)
{
    char shown[PATH_MAX];
    snprintf(shown, sizeof shown, "%s/%s", d->path, sub);
    return open_dir_at(d->fd, sub, shown, fd_out, err);
}

/* mkdir -p with mode 0700 for the components that are missing. */
static int make_dirs(const char *path, pg_error *err)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return pg_fail(err, PG_ERR_LIMIT, "state directory path too long");
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return pg_fail_errno(err, errno, "mkdir %s", buf);
        *p = saved;
        if (!saved)
            return PG_OK;
    }
}

static int make_subdirs(const record_dir *d, pg_error *err)
{
    static const char *const subs[] = {SUB_PULLING, SUB_PULLED,    SUB_INTENTS,  SUB_IMAGES,
                                       SUB_NAMES,   SUB_CREDTIMES, SUB_DIRCACHE};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (mkdirat(d->fd, subs[i], 0700) != 0 && errno != EEXIST)
            return pg_fail_errno(err, errno, "mkdir %s/%s", d->path, subs[i]);
    return PG_OK;
}

/* Appends a directory opened by path. *skipped set when missing and optional. */
static int add_dir(pg_store *s, const char *path, bool optional, pg_error *err)
{
    if (!path || !*path)
        return pg_fail(err, PG_ERR_CONFIG, "empty record directory path");
    int fd;
    int rc = open_dir_at(AT_FDCWD, path, path, &fd, err);
    if (rc == PG_ERR_NOT_FOUND && optional)
        return PG_OK;
    if (rc != PG_OK)
        return rc;
    char *copy = strdup(path);
    record_dir *grown = realloc(s->dirs, (s->n_dirs + 1) * sizeof *grown);
    if (grown)
        s->dirs = grown;
    if (!copy || !grown) {
        free(copy);
        close(fd);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    s->dirs[s->n_dirs++] = (record_dir){copy, fd, -1};
    return PG_OK;
}

/* --------------------------------------------------------- open/free */

PG_API void pg_store_free(pg_store *store)
{
    if (!store)
        return;
    for (size_t i = 0; i < store->n_dirs; i++) {
        free(store->dirs[i].path);
        close(store->dirs[i].fd);
        if (store->dirs[i].pulled_fd >= 0)
            close(store->dirs[i].pulled_fd);
    }
    free(store->dirs);
    free(store->api_version);
    pg_strv_free(store->pinned);
    free(store);
}

static char **copy_strv(const char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++) {
        if (!(out[i] = strdup(v[i]))) {
            pg_strv_free(out);
            return NULL;
        }
    }
    return out;
}

static pg_store *store_new(const pg_config *cfg, pg_notifier *notifier, pg_error *err)
{
    if (!cfg) {
        pg_fail(err, PG_ERR_INVALID, "no configuration");
        return NULL;
    }
    const char *api = pg_config_record_api_version(cfg);
    if (!api)
        api = PG_API_V1ALPHA1;
    if (strcmp(api, PG_API_V1ALPHA1) != 0 && strcmp(api, PG_API_V1BETA1) != 0) {
        pg_fail(err, PG_ERR_CONFIG, "recordApiVersion: unsupported \"%.80s\"", api);
        return NULL;
    }
    pg_store *s = calloc(1, sizeof *s);
    if (s) {
        s->notifier = notifier;
        s->api_version = strdup(api);
        s->pinned = copy_strv(pg_config_pinned_images(cfg));
    }
    if (!s || !s->api_version || !s->pinned) {
        pg_store_free(s);
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return s;
}

static int add_read_only_dirs(pg_store *s, const pg_config *cfg, pg_error *err)
{
    const char *const *ro = pg_config_read_only_dirs(cfg);
    for (size_t i = 0; ro && ro[i]; i++) {
        int rc = add_dir(s, ro[i], true, err);
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}


static int add_writable_dir(pg_store *s, const char *path, pg_error *err)
{
    if (!path || !*path)
        return pg_fail(err, PG_ERR_CONFIG, "stateDir: empty");
    int rc = make_dirs(path, err);
    if (rc == PG_OK)
        rc = add_dir(s, path, false, err);
    if (rc == PG_OK)
        rc = make_subdirs(&s->dirs[0], err);
    s->writable = rc == PG_OK;
    if (rc == PG_OK)
        pg_st_names_mark_complete_if_empty(&s->dirs[0]);
    return rc;
}

/*
 * Lookups (pg_store_get, i.e. every decision) read pulled/ through a
 * descriptor opened and checked once here, saving an openat + fstat + close
 * per lookup. A pulled/ that is missing now is still opened per lookup.
 */
static void open_pulled_fds(pg_store *s)
{
    for (size_t i = 0; i < s->n_dirs; i++)
        if (pg_st_open_subdir(&s->dirs[i], SUB_PULLED, &s->dirs[i].pulled_fd, NULL) != PG_OK)
            s->dirs[i].pulled_fd = -1;
}

PG_API pg_store *pg_store_open(const pg_config *cfg, pg_notifier *notifier, pg_error *err)
{
    pg_store *s = store_new(cfg, notifier, err);
    if (!s)
        return NULL;
    if (add_writable_dir(s, pg_config_state_dir(cfg), err) != PG_OK ||
        add_read_only_dirs(s, cfg, err) != PG_OK) {
        pg_store_free(s);
        return NULL;
    }
    open_pulled_fds(s);
    return s;
}

PG_API pg_store *pg_store_open_readonly(const pg_config *cfg, pg_error *err)
{
    pg_store *s = store_new(cfg, NULL, err);
    if (s && add_read_only_dirs(s, cfg, err) != PG_OK) {
        pg_store_free(s);
        return NULL;
    }
    if (s)
        open_pulled_fds(s);
    return s;
}

/* ------------------------------------------------------------ locking */

static int lock_store(const pg_store *s, int *lock_fd, pg_error *err)
{
    const record_dir *d = &s->dirs[0];
    int fd = openat(d->fd, LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0)
        return pg_fail_errno(err, errno, "open %s/%s", d->path, LOCK_FILE);
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            int e = errno;
            close(fd);
            return pg_fail_errno(err, e, "lock %s/%s", d->path, LOCK_FILE);
        }
    }
    *lock_fd = fd;
    return PG_OK;
}

static void unlock_store(int lock_fd)
{
    if (lock_fd >= 0)
        close(lock_fd); /* releases the flock */
}

/* ------------------------------------------------------------ writing */

static void random_suffix(char out[17])
{
    unsigned char r[8];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        /* No entropy yet (early boot): uniqueness is all we need, O_EXCL checks it. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        unsigned long long v = (unsigned long long)ts.tv_nsec ^
                               ((unsigned long long)getpid() << 32) ^ (uintptr_t)&ts;
        memcpy(r, &v, sizeof r);
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof r; i++) {
        out[2 * i] = hex[r[i] >> 4];
        out[2 * i + 1] = hex[r[i] & 15];
    }
    out[16] = '\0';
}

static int create_temp(int dirfd, const char *name, char *tmp, size_t tmp_size, int *fd_out)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        char rnd[17];
        random_suffix(rnd);
        snprintf(tmp, tmp_size, "%s.%s%s", name, rnd, TMP_SUFFIX);
        int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            *fd_out = fd;
            return 0;
        }
        if (errno != EEXIST)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

/* Atomic, durable replacement of dir/sub/name by data. */
/* Atomic replacement; durable (file and directory fsync'd) when sync is set. */
int pg_st_write_file_replace(int dirfd, const char *dir, const char *sub, const char *name,
                              const char *data, size_t len, bool sync, pg_error *err)
{
    char tmp[FILE_NAME_LEN + 32];
    int fd;
    if (create_temp(dirfd, name, tmp, sizeof tmp, &fd) != 0)
        return pg_fail_errno(err, errno, "create a temporary file in %s/%s", dir, sub);
    const char *step = NULL;
    if (write_all(fd, data, len) != 0)
        step = "write";
    else if (sync && pg_st_fsync_retry(fd) != 0)
        step = "fsync";
    int e = errno;
    if (close(fd) != 0 && !step) {
        step = "close";
        e = errno;
    }
    if (!step && renameat(dirfd, tmp, dirfd, name) != 0) {
        step = "rename";
        e = errno;
    }
    if (step) {
        unlinkat(dirfd, tmp, 0);
        return pg_fail_errno(err, e, "%s %s/%s/%s", step, dir, sub, tmp);
    }
    if (sync && pg_st_fsync_retry(dirfd) != 0)
        return pg_fail_errno(err, errno, "fsync %s/%s", dir, sub);
    return PG_OK;
}

int pg_st_write_file_atomic(int dirfd, const char *dir, const char *sub, const char *name,
                             const char *data, size_t len, pg_error *err)
{
    return pg_st_write_file_replace(dirfd, dir, sub, name, data, len, true, err);
}

/* unlinkat + directory fsync; *removed tells whether anything was there. */
static int remove_file(int dirfd, const char *dir, const char *sub, const char *name,
                       bool *removed, pg_error *err)
{
    *removed = false;
    if (unlinkat(dirfd, name, 0) != 0) {
        if (errno == ENOENT)
            return PG_OK;
        return pg_fail_errno(err, errno, "remove %s/%s/%s", dir, sub, name);
    }
    *removed = true;
    if (pg_st_fsync_retry(dirfd) != 0)
        return pg_fail_errno(err, errno, "fsync %s/%s", dir, sub);
    return PG_OK;
}

/* ------------------------------------------------------------ reading */

int pg_st_read_strict(int dirfd, const record_dir *d, const char *sub, const char *name,
                       size_t max, char **buf, size_t *len, pg_error *err)
{
    int rc = pg_read_file_at(dirfd, name, max, PG_READ_STRICT, buf, len, err);
    if (rc != PG_OK && rc != PG_ERR_NOT_FOUND)
        pg_st_prefix_error(err, rc, d->path, sub, name);
    return rc;
}

static int mismatch(pg_error *err, const record_dir *d, const char *sub, const char *name,
                    const char *field, const char *value)
{
    return pg_fail(err, PG_ERR_CORRUPT,
                   "record %s/%s/%s does not match its file name (%s \"%.200s\")", d->path, sub,
                   name, field, value);
}

/* Reads and checks pulled/<name>. PG_ERR_NOT_FOUND when absent. */
int pg_st_read_record_at(int pulled_fd, const record_dir *d, const char *name,
                          pg_record **out, pg_error *err)
{
    char *buf;
    size_t len;
    *out = NULL; /* defined on every path, so callers never read garbage */
    int rc = pg_st_read_strict(pulled_fd, d, SUB_PULLED, name, PG_MAX_RECORD_BYTES, &buf, &len, err);
    if (rc != PG_OK)
        return rc;
    pg_record *rec;
    rc = pg_record_parse(buf, len, &rec, err);
    free(buf);
    if (rc != PG_OK)
        return pg_st_prefix_error(err, rc, d->path, SUB_PULLED, name);
    file_name expected;
    rc = pg_record_file_name(rec->image_ref, expected, err);
    if (rc == PG_OK && strcmp(expected, name) != 0)
        rc = mismatch(err, d, SUB_PULLED, name, "imageRef", rec->image_ref);
    if (rc == PG_OK && !(rec->dir = strdup(d->path)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc != PG_OK) {
        pg_record_free(rec);
        return rc;
    }
    *out = rec;
    return PG_OK;
}

int pg_st_get_from_dir(const record_dir *d, const char *name, pg_record **out, pg_error *err)
{
    if (d->pulled_fd >= 0)
        return pg_st_read_record_at(d->pulled_fd, d, name, out, err);
    int fd;
    int rc = pg_st_open_subdir(d, SUB_PULLED, &fd, err);
    if (rc != PG_OK)
        return rc;
    rc = pg_st_read_record_at(fd, d, name, out, err);
    close(fd);
    return rc;
}

PG_API int pg_store_get(const pg_store *store, const char *image_ref, pg_record **out,
                        pg_error *err)
{
    *out = NULL;
    int rc = store ? pg_st_check_input("imageRef", image_ref, err) : pg_fail(err, PG_ERR_INVALID, "no store");
    file_name name;
    if (rc == PG_OK)
        rc = pg_record_file_name(image_ref, name, err);
    if (rc != PG_OK)
        return rc;
    for (size_t i = 0; i < store->n_dirs; i++) {
        rc = pg_st_get_from_dir(&store->dirs[i], name, out, err);
        if (rc != PG_ERR_NOT_FOUND) /* found, or a bad file: fail closed */
            return rc;
    }
    return pg_fail(err, PG_ERR_NOT_FOUND, "no pulled record for \"%.200s\"", image_ref);
}

/* 1 if some directory has a pulled/<hash(image_ref)> entry (not parsed), else 0. */
int pg_store_record_exists(const pg_store *store, const char *image_ref)
{
    file_name name;
    if (!store || pg_st_check_input("imageRef", image_ref, NULL) != PG_OK ||
        pg_record_file_name(image_ref, name, NULL) != PG_OK)
        return 0;
    for (size_t i = 0; i < store->n_dirs; i++) {
        char path[sizeof SUB_PULLED + FILE_NAME_LEN + 1];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", SUB_PULLED, name);
        if (fstatat(store->dirs[i].fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
            return 1; /* present, or unreadable: pg_decide reads it and fails closed */
    }
    return 0;
}

/* ------------------------------------------------------------ intents */

/*
 * The reference count is only bookkeeping: the intent file is the security
 * relevant bit. An unreadable count (not unsafe, merely garbage) therefore
 * self-heals instead of blocking pulls: it counts as 0.
 */
static int read_count(int fd, const record_dir *d, const char *name, long *count, pg_error *err)
{
    char *buf;
    *count = 0;
    int rc = pg_st_read_strict(fd, d, SUB_INTENTS, name, MAX_COUNT_BYTES, &buf, NULL, err);
    if (rc == PG_ERR_NOT_FOUND || rc == PG_ERR_LIMIT)
        return PG_OK;
    if (rc != PG_OK)
        return rc;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (!errno && end != buf && (*end == '\0' || *end == '\n') && v > 0)
        *count = v;
    free(buf);
    return PG_OK;
}

static int write_count(int fd, const record_dir *d, const char *name, long count, pg_error *err)
{
    char text[32];
    int n = snprintf(text, sizeof text, "%ld\n", count);
    return pg_st_write_file_atomic(fd, d->path, SUB_INTENTS, name, text, (size_t)n, err);
}

bool pg_st_exists_at(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int write_intent(const pg_store *s, int pulling_fd, const char *image, const char *name,
                        pg_error *err)
{
    if (pg_st_exists_at(pulling_fd, name))
        return PG_OK;
    char *text = pg_intent_serialize(image, s->api_version, err);
    if (!text)
        return err ? err->code : PG_ERR_INVALID;
    size_t len = strlen(text);
    text[len] = '\n'; /* json_dumps' buffer: replace the NUL, Go's encoder ends with "\n" */
    int rc = pg_st_write_file_atomic(pulling_fd, s->dirs[0].path, SUB_PULLING, name, text, len + 1, err);
    free(text);
    return rc;
}

typedef struct intent_dirs {
    int pulling, intents;
} intent_dirs;

static int open_intent_dirs(const pg_store *s, intent_dirs *fds, pg_error *err)
{
    fds->pulling = fds->intents = -1;
    int rc = pg_st_open_subdir(&s->dirs[0], SUB_PULLING, &fds->pulling, err);
    if (rc == PG_OK)
        rc = pg_st_open_subdir(&s->dirs[0], SUB_INTENTS, &fds->intents, err);
    return rc;
}

static void close_intent_dirs(intent_dirs *fds)
{
    if (fds->pulling >= 0)
        close(fds->pulling);
    if (fds->intents >= 0)
        close(fds->intents);
}

/* Under the lock: count++ then the intent file. */
static int take_intent(const pg_store *s, const char *image, pg_error *err)
{
    file_name name;
    intent_dirs fds = {-1, -1};
    long count = 0;
    int rc = pg_record_file_name(image, name, err);
    if (rc == PG_OK)
        rc = open_intent_dirs(s, &fds, err);
    if (rc == PG_OK)
        rc = read_count(fds.intents, &s->dirs[0], name, &count, err);
    if (rc == PG_OK)
        rc = write_count(fds.intents, &s->dirs[0], name, count + 1, err);
    if (rc == PG_OK)
        rc = write_intent(s, fds.pulling, image, name, err);
    close_intent_dirs(&fds);
    return rc;
}

/*
 * Under the lock: count-- (floor 0); at 0 remove the count then the intent.
 * That order means a crash in between leaves an intent without a count, which
 * the next release of the image cleans up, and meanwhile errs on the strict side.
 */
static int release_intent(const pg_store *s, const char *image, pg_error *err)
{
    file_name name;
    intent_dirs fds = {-1, -1};
    long count = 0;
    bool removed;
    int rc = pg_record_file_name(image, name, err);
    if (rc == PG_OK)
        rc = open_intent_dirs(s, &fds, err);
    if (rc == PG_OK)
        rc = read_count(fds.intents, &s->dirs[0], name, &count, err);
    if (rc == PG_OK && count > 1)
        rc = write_count(fds.intents, &s->dirs[0], name, count - 1, err);
    else if (rc == PG_OK) {
        rc = remove_file(fds.intents, s->dirs[0].path, SUB_INTENTS, name, &removed, err);
        if (rc == PG_OK)
            rc = remove_file(fds.pulling, s->dirs[0].path, SUB_PULLING, name, &removed, err);
    }
    close_intent_dirs(&fds);
    return rc;
}

typedef int (*locked_op)(const pg_store *s, const char *image, pg_error *err);

/*
 * pullgate's own intents go under the image as requested AND its normalised
 * reference, so that a lookup under either spelling finds them.
 */
static int for_both_spellings(const pg_store *s, locked_op op, const char *image, pg_error *err)
{
    int rc = op(s, image, err);
    pg_ref *ref = rc == PG_OK ? pg_ref_parse(image, NULL) : NULL;
    if (ref && strcmp(pg_ref_string(ref), image) != 0)
        rc = op(s, pg_ref_string(ref), err);
    pg_ref_free(ref);
    return rc;
}

static int take_intents(const pg_store *s, const char *image, pg_error *err)
{
    return for_both_spellings(s, take_intent, image, err);
}

static int release_intents(const pg_store *s, const char *image, pg_error *err)
{
    return for_both_spellings(s, release_intent, image, err);
}

static int with_lock(const pg_store *s, locked_op op, const char *image, pg_error *err)
{
    int lock_fd;
    int rc = lock_store(s, &lock_fd, err);
    if (rc != PG_OK)
        return rc;
    rc = op(s, image, err);
    unlock_store(lock_fd);
    return rc;
}

PG_API int pg_store_record_intent(pg_store *store, const char *image, pg_error *err)
{
    int rc = require_writable(store, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("image", image, err);
    if (rc == PG_OK)
        rc = with_lock(store, take_intents, image, err);
    if (rc == PG_OK && store->notifier)
        pg_notify_pull_intent(store->notifier, image);
    return rc;
}

PG_API int pg_store_record_failed(pg_store *store, const char *image, pg_error *err)
{
    int rc = require_writable(store, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("image", image, err);
    if (rc == PG_OK)
        rc = with_lock(store, release_intents, image, err);
    if (rc == PG_OK && store->notifier)
        pg_notify_pull_failed(store->notifier, image);
    return rc;
}

static int intent_in_dir(const record_dir *d, const char *name, pg_error *err)
{
    int fd;
    int rc = pg_st_open_subdir(d, SUB_PULLING, &fd, err);
    if (rc == PG_ERR_NOT_FOUND)
        return 0;
    if (rc != PG_OK)
        return -rc;
    struct stat st;
    rc = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? 1 : 0;
    if (!rc && errno != ENOENT)
        rc = -pg_fail_errno(err, errno, "stat %s/%s/%s", d->path, SUB_PULLING, name);
    close(fd);
    return rc;
}

/*
 * Existence is what counts: whatever sits at pulling/<name> (even a file we
 * would refuse to read) makes the image "pulled by us", the strict side.
 */
int pg_store_intent_exists(const pg_store *store, const char *image, pg_error *err)
{
    file_name name;
    int rc = store ? pg_st_check_input("image", image, err) : pg_fail(err, PG_ERR_INVALID, "no store");
    if (rc == PG_OK)
        rc = pg_record_file_name(image, name, err);
    if (rc != PG_OK)
        return -rc;
    for (size_t i = 0; i < store->n_dirs; i++) {
        rc = intent_in_dir(&store->dirs[i], name, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* -------------------------------------------------------------- index */

static char *index_json(const char *image, const char *image_ref)
{
    json_t *o = json_pack("{s:s, s:s}", "image", image, "imageRef", image_ref);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

/* images/<hash(key)> = {"image":key,"imageRef":ref}; unchanged entries are not rewritten. */
static int write_index(const pg_store *s, int fd, const char *key, const char *image_ref,
                       pg_error *err)
{
    file_name name;
    int rc = pg_record_file_name(key, name, err);
    if (rc != PG_OK)
        return rc;
    char *text = index_json(key, image_ref);
    if (!text)
        return pg_fail(err, PG_ERR_INVALID, "cannot serialise the image index entry of \"%.200s\"",
                       key);
    char *old = NULL;
    rc = pg_st_read_strict(fd, &s->dirs[0], SUB_IMAGES, name, MAX_INDEX_BYTES, &old, NULL, err);
    if (rc == PG_OK && strcmp(old, text) == 0)
        rc = PG_OK;
    else if (rc == PG_OK || rc == PG_ERR_NOT_FOUND || rc == PG_ERR_LIMIT)
        rc = pg_st_write_file_atomic(fd, s->dirs[0].path, SUB_IMAGES, name, text, strlen(text), err);
    free(old);
    free(text);
    return rc;
}

/* Index keys: as written, normalised, and name@digest (a tag beside a digest is decoration). */
static int update_index(const pg_store *s, const char *image, const char *normalised,
                        const char *digest_only, const char *image_ref, pg_error *err)
{
    int fd;
    int rc = pg_st_open_subdir(&s->dirs[0], SUB_IMAGES, &fd, err);
    if (rc != PG_OK)
        return rc;
    rc = write_index(s, fd, normalised, image_ref, err);
    if (rc == PG_OK && strcmp(image, normalised) != 0)
        rc = write_index(s, fd, image, image_ref, err);
    if (rc == PG_OK && digest_only && strcmp(digest_only, normalised) != 0)
        rc = write_index(s, fd, digest_only, image_ref, err);
    close(fd);
    return rc;
}

static int parse_index(const char *buf, size_t len, const record_dir *d, const char *name,
                       char **ref_out, pg_error *err)
{
    static const char *const keys[] = {"image", "imageRef", NULL};
    json_t *o = pg_json_parse(buf, len, "image index entry", err);
    int rc = o ? PG_OK : PG_ERR_CORRUPT;
    const char *image = NULL, *ref = NULL;
    if (rc == PG_OK && (!json_is_object(o) || pg_json_only_keys(o, keys, "image index entry", err) ||
                        json_unpack(o, "{s:s, s:s}", "image", &image, "imageRef", &ref) != 0 || !*ref))
        rc = pg_fail(err, PG_ERR_CORRUPT, "not an image index entry");
    file_name expected;
    if (rc == PG_OK && (rc = pg_record_file_name(image, expected, err)) == PG_OK &&
        strcmp(expected, name) != 0)
        rc = mismatch(err, d, SUB_IMAGES, name, "image", image);
    else if (rc == PG_OK && !(*ref_out = strdup(ref)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    json_decref(o);
    if (rc == PG_ERR_CORRUPT && err && strncmp(err->message, "record ", 7) != 0)
        pg_st_prefix_error(err, rc, d->path, SUB_IMAGES, name);
    return rc;
}

int pg_st_resolve_in_dir(const record_dir *d, const char *key, char **ref_out, pg_error *err)
{
    file_name name;
    int fd;
    int rc = pg_record_file_name(key, name, err);
    if (rc == PG_OK)
        rc = pg_st_open_subdir(d, SUB_IMAGES, &fd, err);
    if (rc != PG_OK)
        return rc;
    char *buf;
    size_t len;
    rc = pg_st_read_strict(fd, d, SUB_IMAGES, name, MAX_INDEX_BYTES, &buf, &len, err);
    close(fd);
    if (rc != PG_OK)
        return rc;
    rc = parse_index(buf, len, d, name, ref_out, err);
    free(buf);
    return rc;
}

PG_API int pg_store_resolve_image(const pg_store *store, const char *image, char **ref_out,
                                  pg_error *err)
{
    *ref_out = NULL;
    int rc = store ? pg_st_check_input("image", image, err) : pg_fail(err, PG_ERR_INVALID, "no store");
    if (rc != PG_OK)
        return rc;
    pg_ref *ref = pg_ref_parse(image, NULL);
    const char *keys[2] = {ref ? pg_ref_string(ref) : image, image};
    size_t n_keys = ref && strcmp(keys[0], image) != 0 ? 2 : 1;
    rc = PG_ERR_NOT_FOUND;
    for (size_t i = 0; rc == PG_ERR_NOT_FOUND && i < store->n_dirs; i++)
        for (size_t k = 0; rc == PG_ERR_NOT_FOUND && k < n_keys; k++)
            rc = pg_st_resolve_in_dir(&store->dirs[i], keys[k], ref_out, err);
    pg_ref_free(ref);
    if (rc == PG_ERR_NOT_FOUND)
        return pg_fail(err, PG_ERR_NOT_FOUND, "no imageRef recorded for \"%.200s\"", image);
    return rc;
}

/* ------------------------------------------------------------ aliases */

/* Up to two index keys per alias: as written and its other spelling. */
typedef struct alias_keys {
    char **keys; /* NULL-terminated */
    size_t n;
} alias_keys;

static int add_key(alias_keys *k, const char *key, pg_error *err)
{
    for (size_t i = 0; i < k->n; i++)
        if (strcmp(k->keys[i], key) == 0)
            return PG_OK;
    char **grown = realloc(k->keys, (k->n + 2) * sizeof *grown);
    if (grown)
        k->keys = grown;
    char *copy = grown ? strdup(key) : NULL;
    if (!copy)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    k->keys[k->n++] = copy;
    k->keys[k->n] = NULL;
    return PG_OK;
}

/* An ID under both spellings; a reference as written and normalised. */
static int alias_spellings(alias_keys *k, const char *alias, pg_error *err)
{
    pg_ref *ref = NULL;
    int rc = pg_st_check_input("alias", alias, err);
    if (rc == PG_OK)
        rc = pg_identity_check(alias, &ref, err);
    if (rc == PG_OK)
        rc = add_key(k, alias, err);
    const char *hex = rc == PG_OK ? pg_image_id_hex(alias) : NULL;
    if (hex) {
        char prefixed[sizeof PG_ID_PREFIX + PG_ID_HEX_LEN];
        snprintf(prefixed, sizeof prefixed, "%s%s", PG_ID_PREFIX, hex);
        rc = add_key(k, hex == alias ? prefixed : hex, err);
    } else if (rc == PG_OK) {
        rc = add_key(k, pg_ref_string(ref), err);
    }
    pg_ref_free(ref);
    return rc;
}

static int record_aliases_locked(const pg_store *s, const char *image_ref, const alias_keys *k,
                                 pg_error *err)
{
    int fd;
    int rc = pg_st_open_subdir(&s->dirs[0], SUB_IMAGES, &fd, err);
    if (rc != PG_OK)
        return rc;
    for (size_t i = 0; rc == PG_OK && i < k->n; i++)
        rc = write_index(s, fd, k->keys[i], image_ref, err);
    close(fd);
    return rc;
}

PG_API int pg_store_record_aliases(pg_store *store, const char *image_ref,
                                   const char *const *aliases, pg_error *err)
{
    alias_keys k = {NULL, 0};
    int rc = require_writable(store, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("imageRef", image_ref, err);
    /* Every alias is validated before anything is written: all or nothing. */
    for (size_t i = 0; rc == PG_OK && aliases && aliases[i]; i++)
        rc = alias_spellings(&k, aliases[i], err);
    int lock_fd = -1;
    if (rc == PG_OK && k.n)
        rc = lock_store(store, &lock_fd, err);
    if (rc == PG_OK && k.n)
        rc = record_aliases_locked(store, image_ref, &k, err);
    unlock_store(lock_fd);
    pg_strv_free(k.keys);
    return rc;
}

/* ------------------------------------------------------ record_pulled */



static int load_or_new(const pg_store *s, int pulled_fd, const char *name, const char *image_ref,
                       pg_record **out, bool *existed, pg_error *err)
{
    int rc = pg_st_read_record_at(pulled_fd, &s->dirs[0], name, out, err);
    *existed = rc == PG_OK;
    if (rc == PG_ERR_NOT_FOUND) {
        *out = pg_record_new(image_ref, err);
        rc = *out ? PG_OK : PG_ERR_NOMEM;
    }
    return rc;
}

static int set_now(pg_record *rec, const char *api_version, pg_error *err)
{
    char when[32];
    rec->last_updated = time(NULL);
    pg_format_rfc3339(rec->last_updated, when);
    char *text = strdup(when), *api = strdup(api_version);
    if (!text || !api) {
        free(text);
        free(api);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    free(rec->last_updated_text);
    free(rec->api_version);
    rec->last_updated_text = text;
    rec->api_version = api;
    return PG_OK;
}

static int write_record(const pg_store *s, int pulled_fd, const char *name, const pg_record *rec,
                        pg_error *err)
{
    char *text = pg_record_serialize(rec, s->api_version, err);
    if (!text)
        return err ? err->code : PG_ERR_INVALID;
    size_t len = strlen(text);
    text[len] = '\n'; /* Go's json.Encoder ends with "\n"; the NUL is no longer needed */
    int rc = pg_st_write_file_atomic(pulled_fd, s->dirs[0].path, SUB_PULLED, name, text, len + 1, err);
    free(text);
    return rc;
}

/* Under the lock: merge into pulled/<hash(imageRef)>, index, release the intent. */
static int record_pulled_locked(const pg_store *s, const pull *p, pg_error *err)
{
    file_name name;
    int fd;
    int rc = pg_record_file_name(p->image_ref, name, err);
    if (rc == PG_OK)
        rc = pg_st_open_subdir(&s->dirs[0], SUB_PULLED, &fd, err);
    if (rc != PG_OK)
        return rc;
    pg_record *rec = NULL;
    bool existed = false;
    rc = load_or_new(s, fd, name, p->image_ref, &rec, &existed, err);
    time_t previous = rec ? rec->last_updated : 0;
    if (rc == PG_OK)
        rc = pg_record_merge(rec, p->image_name, p->creds, err);
    if (rc == PG_OK)
        rc = set_now(rec, s->api_version, err);
    /* The side files first: a record is never durable without its credential times. */
    if (rc == PG_OK)
        rc = pg_st_credtimes_update_locked(s, rec, name, p, existed ? previous : rec->last_updated, err);
    if (rc == PG_OK)
        rc = write_record(s, fd, name, rec, err);
    if (rc == PG_OK)
        rc = pg_st_names_add_locked(s, rec, name, err);
    pg_record_free(rec);
    close(fd);
    /* Only once the record is durable may the intent go. */
    if (rc == PG_OK)
        rc = update_index(s, p->image, p->full_name, p->digest_only, p->image_ref, err);
    if (rc == PG_OK)
        rc = release_intents(s, p->image, err);
    return rc;
}

static int normalise_pull(pull *p, pg_error *err)
{
    pg_ref *ref = pg_ref_parse(p->image, err);
    if (!ref)
        return err ? err->code : PG_ERR_INVALID;
    p->image_name = pg_strdup(pg_ref_name(ref));
    p->full_name = pg_strdup(pg_ref_string(ref));
    if (pg_ref_digest(ref) && asprintf(&p->digest_only, "%s@%s", pg_ref_name(ref),
                                       pg_ref_digest(ref)) < 0)
        p->digest_only = NULL;
    bool digest_missing = pg_ref_digest(ref) && !p->digest_only;
    pg_ref_free(ref);
    if (!p->image_name || !p->full_name || digest_missing)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    return PG_OK;
}

static const char *credential_kind(const pg_pull_credentials *c)
{
    if (c && c->node_pods_accessible)
        return "nodeAccessible";
    if (c && c->n_secrets)
        return "secret";
    if (c && c->n_service_accounts)
        return "serviceAccount";
    return "none";
}

/*
 * Unlike the kubelet, a pull with no credentials to record still writes the
 * record (without a mapping for the image): releasing the intent must not make
 * a pulled image look preloaded, which would exempt it from verification.
 */
PG_API int pg_store_record_pulled(pg_store *store, const char *image, const char *image_ref,
                                  const pg_pull_credentials *creds, pg_error *err)
{
    pull p = {image, image_ref, creds, NULL, NULL, NULL};
    int rc = require_writable(store, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("image", image, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("imageRef", image_ref, err);
    if (rc == PG_OK)
        rc = normalise_pull(&p, err);
    int lock_fd = -1;
    if (rc == PG_OK)
        rc = lock_store(store, &lock_fd, err);
    if (rc == PG_OK)
        rc = record_pulled_locked(store, &p, err);
    unlock_store(lock_fd);
    free(p.image_name);
    free(p.full_name);
    free(p.digest_only);
    if (rc == PG_OK && store->notifier)
        pg_notify_image_pulled(store->notifier, image, image_ref, credential_kind(creds));
    return rc;
}

/* ------------------------------------------------------- list / prune */

typedef int (*pg_st_entry_fn)(int dirfd, const record_dir *d, const char *name, void *ud);

/* Calls fn for each record-named entry of d/sub. A missing sub is empty. */
int pg_st_walk_records(const record_dir *d, const char *sub, pg_st_entry_fn fn, void *ud,
                        pg_error *err)
{
    int fd;
    int rc = pg_st_open_subdir(d, sub, &fd, err);
    if (rc == PG_ERR_NOT_FOUND)
        return PG_OK;
    if (rc != PG_OK)
        return rc;
    int dup_fd = dup(fd); /* closedir closes its own fd; keep fd for openat */
    DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!dir) {
        int e = errno;
        if (dup_fd >= 0)
            close(dup_fd);
        close(fd);
        return pg_fail_errno(err, e, "list %s/%s", d->path, sub);
    }
    struct dirent *de;
    rc = PG_OK;
    while (rc == PG_OK && (de = readdir(dir)) != NULL)
        if (pg_st_is_record_name(de->d_name))
            rc = fn(fd, d, de->d_name, ud);
    closedir(dir);
    close(fd);
    return rc;
}

typedef struct list_ctx {
    pg_record_cb cb;
    pg_bad_record_cb bad_cb;
    void *ud;
    int stop; /* the callback's non-zero return */
} list_ctx;

static int list_entry(int dirfd, const record_dir *d, const char *name, void *ud)
{
    list_ctx *c = ud;
    pg_error why = {0};
    pg_record *rec;
    if (pg_st_read_record_at(dirfd, d, name, &rec, &why) != PG_OK) {
        if (c->bad_cb) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s/%s", d->path, SUB_PULLED, name);
            c->bad_cb(path, &why, c->ud);
        }
        return PG_OK;
    }
    c->stop = c->cb ? c->cb(rec, c->ud) : 0;
    pg_record_free(rec);
    return c->stop ? -1 : PG_OK;
}

PG_API int pg_store_list(const pg_store *store, pg_record_cb cb, pg_bad_record_cb bad_cb,
                         void *ud, pg_error *err)
{
    if (!store)
        return pg_fail(err, PG_ERR_INVALID, "no store");
    list_ctx c = {cb, bad_cb, ud, 0};
    for (size_t i = 0; i < store->n_dirs; i++) {
        int rc = pg_st_walk_records(&store->dirs[i], SUB_PULLED, list_entry, &c, err);
        if (c.stop)
            return c.stop;
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}

static int delete_locked(const pg_store *s, const char *image_ref, pg_error *err)
{
    file_name name;
    int fd;
    bool removed = false;
    int rc = pg_record_file_name(image_ref, name, err);
    if (rc == PG_OK)
        rc = pg_st_open_subdir(&s->dirs[0], SUB_PULLED, &fd, err);
    if (rc != PG_OK)
        return rc;
    rc = remove_file(fd, s->dirs[0].path, SUB_PULLED, name, &removed, err);
    close(fd);
    if (rc == PG_OK && !removed)
        rc = pg_fail(err, PG_ERR_NOT_FOUND, "no pulled record for \"%.200s\" in %s", image_ref,
                     s->dirs[0].path);
    return rc;
}

PG_API int pg_store_delete(pg_store *store, const char *image_ref, pg_error *err)
{
    int rc = require_writable(store, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("imageRef", image_ref, err);
    if (rc == PG_OK)
        rc = with_lock(store, delete_locked, image_ref, err);
    return rc;
}

typedef struct prune_ctx {
    const pg_store *store;
    const char *const *in_use;
    time_t before;
    unsigned pruned;
    pg_error *err;
} prune_ctx;

static bool in_list(const char *const *list, const char *s)
{
    for (size_t i = 0; list && list[i]; i++)
        if (strcmp(list[i], s) == 0)
            return true;
    return false;
}

static bool is_pinned(const pg_store *s, const pg_record *rec)
{
    for (size_t i = 0; i < rec->n_maps; i++)
        if (pg_pinned_match((const char *const *)s->pinned, rec->maps[i].image_name))
            return true;
    return false;
}

static bool must_keep(const prune_ctx *c, const pg_record *rec)
{
    return in_list(c->in_use, rec->image_ref) || (c->before && rec->last_updated >= c->before) ||
           is_pinned(c->store, rec);
}

/* A side file of a removed record (its credential times): best effort. */
static void remove_side_file(const record_dir *d, const char *sub, const char *name)
{
    char path[64 + FILE_NAME_LEN];
    snprintf(path, sizeof path, "%s/%s", sub, name);
    unlinkat(d->fd, path, 0);
}

/* Invalid files are left alone: pruning is not the place to destroy evidence. */
static int prune_entry(int dirfd, const record_dir *d, const char *name, void *ud)
{
    prune_ctx *c = ud;
    pg_record *rec;
    pg_error ignored = {0};
    if (pg_st_read_record_at(dirfd, d, name, &rec, &ignored) != PG_OK)
        return PG_OK;
    bool keep = must_keep(c, rec);
    pg_record_free(rec);
    if (keep)
        return PG_OK;
    if (unlinkat(dirfd, name, 0) != 0 && errno != ENOENT)
        return pg_fail_errno(c->err, errno, "remove %s/%s/%s", d->path, SUB_PULLED, name);
    remove_side_file(d, SUB_CREDTIMES, name);
    c->pruned++;
    return PG_OK;
}

/*
 * Temp files of writers that crashed. All our writers hold the lock while a
 * temp file exists, so under the lock every temp file is stale.
 */
static void remove_stale_temps(const record_dir *d)
{
    static const char *const subs[] = {SUB_PULLING, SUB_PULLED,    SUB_INTENTS,  SUB_IMAGES,
                                       SUB_NAMES,   SUB_CREDTIMES, SUB_DIRCACHE};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        int fd;
        pg_error ignored;
        if (pg_st_open_subdir(d, subs[i], &fd, &ignored) != PG_OK)
            continue;
        int dup_fd = dup(fd);
        DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
        struct dirent *de;
        while (dir && (de = readdir(dir)) != NULL) {
            size_t n = strlen(de->d_name);
            if (strncmp(de->d_name, NAME_PREFIX, strlen(NAME_PREFIX)) == 0 && n > 4 &&
                strcmp(de->d_name + n - 4, TMP_SUFFIX) == 0)
                unlinkat(fd, de->d_name, 0);
        }
        if (dir)
            closedir(dir);
        else if (dup_fd >= 0)
            close(dup_fd);
        close(fd);
    }
}


static int prune_locked(prune_ctx *c)
{
    const record_dir *d = &c->store->dirs[0];
    remove_stale_temps(d);
    int rc = pg_st_walk_records(d, SUB_PULLED, prune_entry, c, c->err);
    if (rc == PG_OK)
        rc = pg_st_names_rebuild_locked(c->store, c->err);
    int fd;
    if (c->pruned && pg_st_open_subdir(d, SUB_PULLED, &fd, NULL) == PG_OK) {
        if (pg_st_fsync_retry(fd) != 0 && rc == PG_OK)
            rc = pg_fail_errno(c->err, errno, "fsync %s/%s", d->path, SUB_PULLED);
        close(fd);
    }
    return rc;
}

PG_API int pg_store_prune(pg_store *store, const char *const *in_use, time_t before,
                          unsigned *pruned_out, pg_error *err)
{
    if (pruned_out)
        *pruned_out = 0;
    int rc = require_writable(store, err);
    int lock_fd = -1;
    if (rc == PG_OK)
        rc = lock_store(store, &lock_fd, err);
    prune_ctx c = {store, in_use, before, 0, err};
    if (rc == PG_OK)
        rc = prune_locked(&c);
    unlock_store(lock_fd);
    if (pruned_out)
        *pruned_out = c.pruned;
    if (c.pruned && store->notifier)
        pg_notify_records_pruned(store->notifier, c.pruned);
    return rc;
}

