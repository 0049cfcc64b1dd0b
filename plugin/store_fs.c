/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store's safe-filesystem primitives (the design is described at
 * the top of plugin/store.c): directory checks, strict reads, atomic durable
 * writes, the store lock and directory walks. Nothing here knows what a
 * record means.
 */
#include "internal.h"
#include "store_impl.h"

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

/* Sets code and prefixes err's message with "dir/sub/name: " (pg_error_prefix). */
int pg_st_prefix_error(pg_error *err, int code, const char *dir, const char *sub, const char *name)
{
    if (err)
        err->code = code;
    pg_error_prefix(err, "%s/%s/%s", dir, sub, name);
    return code;
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

int pg_st_require_writable(const pg_store *store, pg_error *err)
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
int pg_st_open_dir_at(int base, const char *name, const char *shown, int *fd_out, pg_error *err)
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
    return pg_st_open_dir_at(d->fd, sub, shown, fd_out, err);
}

/* mkdir -p with mode 0700 for the components that are missing. */
int pg_st_make_dirs(const char *path, pg_error *err)
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

int pg_st_make_subdirs(const record_dir *d, pg_error *err)
{
    static const char *const subs[] = {SUB_PULLING, SUB_PULLED,    SUB_INTENTS, SUB_IMAGES,
                                       SUB_NAMES,   SUB_CREDTIMES, SUB_DIRCACHE};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (mkdirat(d->fd, subs[i], 0700) != 0 && errno != EEXIST)
            return pg_fail_errno(err, errno, "mkdir %s/%s", d->path, subs[i]);
    return PG_OK;
}

/* ------------------------------------------------------------ locking */

int pg_st_lock_store(const pg_store *s, int *lock_fd, pg_error *err)
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

void pg_st_unlock_store(int lock_fd)
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
        unsigned long long v =
            (unsigned long long)ts.tv_nsec ^ ((unsigned long long)getpid() << 32) ^ (uintptr_t)&ts;
        memcpy(r, &v, sizeof r);
    }
    pg_hex_encode(r, sizeof r, out);
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
int pg_st_remove_file(int dirfd, const char *dir, const char *sub, const char *name, bool *removed,
                      pg_error *err)
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

int pg_st_read_strict(int dirfd, const record_dir *d, const char *sub, const char *name, size_t max,
                      char **buf, size_t *len, pg_error *err)
{
    int rc = pg_read_file_at(dirfd, name, max, PG_READ_STRICT, buf, len, err);
    if (rc != PG_OK && rc != PG_ERR_NOT_FOUND) /* pg_read_file_at's message names the file */
        pg_error_prefix(err, "%s/%s", d->path, sub);
    return rc;
}

int pg_st_mismatch(pg_error *err, const record_dir *d, const char *sub, const char *name,
                   const char *field, const char *value)
{
    return pg_fail(err, PG_ERR_CORRUPT,
                   "record %s/%s/%s does not match its file name (%s \"%.200s\")", d->path, sub,
                   name, field, value);
}

bool pg_st_exists_at(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int pg_st_with_lock(const pg_store *s, pg_st_locked_op op, const char *image, pg_error *err)
{
    int lock_fd;
    int rc = pg_st_lock_store(s, &lock_fd, err);
    if (rc != PG_OK)
        return rc;
    rc = op(s, image, err);
    pg_st_unlock_store(lock_fd);
    return rc;
}

/* ------------------------------------------------------------ walking */

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
