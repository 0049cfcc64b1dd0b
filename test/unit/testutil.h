/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the Check unit tests. */
#ifndef PG_TESTUTIL_H
#define PG_TESTUTIL_H
#include <stddef.h>

/* A fresh directory under $TMPDIR; caller frees the string and removes it with tu_rmrf. */
char *tu_mkdtemp(void);
/* rm -rf path (no symlink following). */
void tu_rmrf(const char *path);
/* Writes len bytes (len = -1: strlen) to path with mode; aborts the test on error. */
void tu_write_file(const char *path, const char *data, long len, unsigned mode);
/* Reads a whole file; caller frees. NULL if missing. */
char *tu_read_file(const char *path, size_t *len);
/* Path of a file in the shared test data directory ($PG_TESTDATA); caller frees. */
char *tu_testdata(const char *name);
/* printf into a new string; caller frees. */
char *tu_sprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#endif
