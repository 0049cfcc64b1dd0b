/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests only: the record store's file-system changes as the crash simulation
 * (test/unit/test_store_crash.c) records them, and the files it opens to read
 * (test/unit/test_store_opens.c). plugin/store/store_fs.c reports each here when it
 * is compiled with PG_STORE_TRACE (the pullgate_traced test archive); the
 * library's own build never includes this header and has no tracing. The test
 * defines pg_st_trace.
 */
#ifndef PULLGATE_STORE_TRACE_H
#define PULLGATE_STORE_TRACE_H

#include <stddef.h>

typedef enum pg_st_trace_op {
    PG_TR_CREATE, /* name created in dirfd (fd: the new file) */
    PG_TR_WRITE,  /* data appended to fd */
    PG_TR_FSYNC,  /* fd (a file or a directory) fsync'd */
    PG_TR_RENAME, /* name renamed to name2, both in dirfd */
    PG_TR_UNLINK, /* name removed from dirfd */
    PG_TR_MKDIR,  /* directory name created in dirfd */
    PG_TR_OPEN    /* name (a file or a directory) opened to read in dirfd: each attempt */
} pg_st_trace_op;

/* name may hold a '/' (relative to dirfd); dirfd may be AT_FDCWD with an absolute name. */
void pg_st_trace(pg_st_trace_op op, int dirfd, const char *name, const char *name2, int fd,
                 const void *data, size_t len);

#endif
