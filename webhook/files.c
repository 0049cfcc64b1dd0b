/* SPDX-License-Identifier: Apache-2.0 */
#include "files.h"

#include "cleanup.h"
#include "internal.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int wh_file_id_of(const char *path, wh_file_id *id)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->size = st.st_size;
    id->mtime = st.st_mtim;
    return 0;
}

int wh_file_id_equal(const wh_file_id *a, const wh_file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

static int check_opened(int fd, const char *path, size_t max, int private_, pg_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return pg_fail_errno(err, errno, "%.200s", path);
    if (!S_ISREG(st.st_mode))
        return pg_fail(err, PG_ERR_UNSAFE, "%.200s: not a regular file", path);
    if ((size_t)st.st_size > max)
        return pg_fail(err, PG_ERR_LIMIT, "%.200s: larger than %zu bytes", path, max);
    if (private_ && (st.st_mode & (S_IRWXO | S_IWGRP)))
        return pg_fail(err, PG_ERR_UNSAFE,
                       "%.200s: readable by others or writable by its group (mode %04o)", path,
                       (unsigned)(st.st_mode & 07777));
    return PG_OK;
}

/* Reads to EOF, bounded (the size may change under us); wipes what it read on failure. */
static int read_bounded(int fd, const char *path, size_t max, char *data, size_t *len,
                        pg_error *err)
{
    size_t used = 0;
    int rc = PG_OK;
    for (ssize_t n = 1; rc == PG_OK && n != 0;) {
        n = read(fd, data + used, max + 1 - used);
        if (n < 0 && errno != EINTR)
            rc = pg_fail_errno(err, errno, "%.200s", path);
        else if (n > 0 && (used += (size_t)n) > max)
            rc = pg_fail(err, PG_ERR_LIMIT, "%.200s: larger than %zu bytes", path, max);
    }
    if (rc != PG_OK)
        OPENSSL_cleanse(data, used < max + 1 ? used : max + 1);
    data[rc == PG_OK ? used : 0] = '\0';
    *len = used;
    return rc;
}

int wh_read_file(const char *path, size_t max, int private_, char **buf, size_t *len, pg_error *err)
{
    *buf = NULL;
    *len = 0;
    pg_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return pg_fail_errno(err, errno, "%.200s", path);
    int rc = check_opened(fd, path, max, private_, err);
    if (rc != PG_OK)
        return rc;
    char *data = malloc(max + 1);
    if (!data)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    size_t used = 0;
    rc = read_bounded(fd, path, max, data, &used, err);
    if (rc != PG_OK) {
        free(data);
        return rc;
    }
    *buf = data;
    *len = used;
    return PG_OK;
}

int wh_load_key(const char *path, pg_mac_key **out, pg_error *err)
{
    char *bytes;
    size_t len;
    *out = NULL;
    int rc = wh_read_file(path, PG_MAC_KEY_MAX_BYTES, 1, &bytes, &len, err);
    if (rc != PG_OK)
        return rc;
    rc = pg_mac_key_from_bytes(bytes, len, out, err);
    if (rc != PG_OK)
        pg_error_prefix(err, "%.200s", path);
    OPENSSL_cleanse(bytes, len);
    free(bytes);
    return rc;
}
