/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: a read-only directory's names cache (plugin/store/store_dircache.c,
 * format 3). The bytes become a cache file (mode 0600, ours); whatever they
 * hold, opening it never crashes, a file whose size is not what its header
 * promises is never used, and a lookup yields only record file names, each
 * at most once per name entry. Seeds: caches written by the store for small
 * kubelet directories, their stamp replaced by STAMP.
 */
#include "store_dircache.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define STAMP "2049:131074:1764000000.000000001:1764000000.000000002"

typedef struct seen {
    size_t n;
} seen;

static int on_file(const char *file, void *ud, pg_error *err)
{
    (void)err;
    seen *s = ud;
    if (strlen(file) != FILE_NAME_LEN || strncmp(file, NAME_PREFIX, strlen(NAME_PREFIX)) != 0)
        __builtin_trap();
    s->n++;
    return s->n < 4096 ? PG_OK : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/pg-fuzz-dircache.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    unlink(path);
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    pg_st_dirnames *v = NULL;
    if (pg_st_dirnames_from_fd(fd, STAMP, &v) != 0)
        return 0; /* not usable: fd closed */
    /* The first name entry's name, and one that is nowhere. */
    unsigned char names[2][32];
    memset(names, 0, sizeof names);
    if (size >= 512 + 32)
        memcpy(names[0], data + 512, 32);
    memset(names[1], 0xee, 32);
    for (int k = 0; k < 2; k++) {
        seen s = {0};
        bool unknown = false;
        pg_error err = {0};
        int rc = pg_st_dirnames_find(v, names[k], on_file, &s, &unknown, &err);
        if (rc == PG_OK && size < 512 + 64 * s.n)
            __builtin_trap(); /* more hits than entries the file can hold */
    }
    pg_st_dirnames_free(v);
    return 0;
}
