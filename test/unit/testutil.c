/* SPDX-License-Identifier: Apache-2.0 */
#include "testutil.h"

#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *tu_mkdtemp(void)
{
    const char *tmp = getenv("TMPDIR");
    char *p = tu_sprintf("%s/pgtest.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(p));
    return p;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void tu_rmrf(const char *path)
{
    if (path)
        nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

void tu_write_file(const char *path, const char *data, long len, unsigned mode)
{
    size_t n = len < 0 ? strlen(data) : (size_t)len;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    ck_assert_msg(fd >= 0, "open %s", path);
    ck_assert_int_eq(fchmod(fd, mode), 0);
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, data + off, n - off);
        ck_assert_msg(w > 0, "write %s", path);
        off += (size_t)w;
    }
    close(fd);
}

char *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap + 1);
    size_t r;
    while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            cap *= 2;
            b = realloc(b, cap + 1);
        }
    }
    fclose(f);
    ck_assert_ptr_nonnull(b);
    b[n] = '\0';
    if (len)
        *len = n;
    return b;
}

char *tu_testdata(const char *name)
{
    const char *d = getenv("PG_TESTDATA");
    ck_assert_msg(d != NULL, "PG_TESTDATA is not set (run the tests through ctest)");
    return tu_sprintf("%s/%s", d, name);
}

char *tu_sprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    ck_assert_int_ge(vasprintf(&s, fmt, ap), 0);
    va_end(ap);
    return s;
}
