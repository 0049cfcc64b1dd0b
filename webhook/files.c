/* SPDX-License-Identifier: Apache-2.0 */
#include "files.h"
#include "internal.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

long long wh_now_ms(void) { return pg_monotonic_ms(); }

long long wh_now_us(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000;
}

static int check_opened(int fd, const char *path, size_t max, int private_, char *msg,
                        size_t msg_size)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(msg, msg_size, "%.200s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(msg, msg_size, "%.200s: not a regular file", path);
        return -1;
    }
    if ((size_t)st.st_size > max) {
        snprintf(msg, msg_size, "%.200s: larger than %zu bytes", path, max);
        return -1;
    }
    if (private_ && (st.st_mode & (S_IRWXO | S_IWGRP))) {
        snprintf(msg, msg_size, "%.200s: readable by others or writable by its group (mode %04o)",
                 path, (unsigned)(st.st_mode & 07777));
        return -1;
    }
    return 0;
}

int wh_read_file(const char *path, size_t max, int private_, char **buf, size_t *len, char *msg,
                 size_t msg_size)
{
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(msg, msg_size, "%.200s: %s", path, strerror(errno));
        return -1;
    }
    char *data = NULL;
    size_t used = 0;
    int rc = check_opened(fd, path, max, private_, msg, msg_size);
    if (rc == 0 && !(data = malloc(max + 1))) {
        snprintf(msg, msg_size, "out of memory");
        rc = -1;
    }
    while (rc == 0) { /* the size may change under us: read until EOF, bounded */
        ssize_t n = read(fd, data + used, max + 1 - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(msg, msg_size, "%.200s: %s", path, strerror(errno));
            rc = -1;
        } else if (n == 0)
            break;
        else if ((used += (size_t)n) > max) {
            snprintf(msg, msg_size, "%.200s: larger than %zu bytes", path, max);
            rc = -1;
        }
    }
    close(fd);
    if (rc != 0) {
        if (data)
            OPENSSL_cleanse(data, used < max + 1 ? used : max + 1);
        free(data);
        return -1;
    }
    data[used] = '\0';
    *buf = data;
    *len = used;
    return 0;
}
