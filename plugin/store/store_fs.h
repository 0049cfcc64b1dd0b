/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 1 of the record store (store_fs.c): the layout's names, a record
 * directory, and the safe-filesystem primitives: directory checks, strict
 * reads, atomic durable writes and write batches, the lock and its short
 * steps, directory walks. Nothing here knows what a record means.
 * Private to the record store (store_impl.h: the layers).
 */
#ifndef PULLGATE_STORE_FS_H
#define PULLGATE_STORE_FS_H

#include "cleanup.h"
#include "internal.h"

#include <stdbool.h>
#include <sys/stat.h>

#define SUB_PULLING "pulling"
#define SUB_PULLED "pulled"
#define SUB_INTENTS "pullgate-intents"
#define SUB_IMAGES "pullgate-images"
#define SUB_NAMES "pullgate-names"
#define SUB_CREDTIMES "pullgate-credtimes"
#define SUB_DIRCACHE "pullgate-dircache"
#define SUB_CREDIDX "pullgate-credidx"
#define LOCK_FILE ".pullgate.lock"
#define NAME_PREFIX "sha256-"
#define TMP_SUFFIX ".tmp"
#define FILE_NAME_LEN (7 + PG_HASH_HEX_LEN)
#define MAX_INDEX_BYTES (2 * PG_MAX_IMAGE_LEN + 4096)
#define MAX_COUNT_BYTES 64

typedef char file_name[FILE_NAME_LEN + 1];

/* A record released when its block is left (cleanup.h). */
static inline void pg_st_cleanup_record(pg_record **r) { pg_record_free(*r); }
#define pg_autorecord __attribute__((cleanup(pg_st_cleanup_record)))

/* A record directory: the writable one (stateDir) or a read-only one. */
typedef struct record_dir {
    char *path;
    int fd;
    int pulled_fd; /* pulled/, opened and checked at store open; -1: open per lookup */
} record_dir;

/* Sets code and prefixes err's message with "dir/sub/name: " (pg_error_prefix). */
int pg_st_prefix_error(pg_error *err, int code, const char *dir, const char *sub, const char *name);
/* "sha256-..." and not a temporary file. */
bool pg_st_is_record_name(const char *name);
/* Non-empty and at most PG_MAX_IMAGE_LEN. */
int pg_st_check_input(const char *what, const char *s, pg_error *err);
/* fsync, retried on EINTR. */
int pg_st_fsync_retry(int fd);
/*
 * Every change the store makes to a record directory goes through these
 * (store_fs.c; the crash simulation records them): the calls of the same
 * names, renames and unlinks within one directory.
 */
int pg_st_sys_openat(int dirfd, const char *name, int flags, mode_t mode);
int pg_st_sys_unlinkat(int dirfd, const char *name);
int pg_st_sys_mkdirat(int dirfd, const char *name, mode_t mode);
/* Opens base/name as a safe directory (ours, not group/other writable, no
 * symlink); shown names it in errors. Missing: PG_ERR_NOT_FOUND. */
int pg_st_open_dir_at(int base, const char *name, const char *shown, int *fd_out, pg_error *err);
/* Opens d/sub as a safe directory. Missing: PG_ERR_NOT_FOUND. */
int pg_st_open_subdir(const record_dir *d, const char *sub, int *fd_out, pg_error *err);
/* mkdir -p, mode 0700. */
int pg_st_make_dirs(const char *path, pg_error *err);
/* Every subdirectory of the layout in d (mode 0700). */
int pg_st_make_subdirs(const record_dir *d, pg_error *err);
/* flock(LOCK_EX) on the writable directory w's lock file; release with unlock. */
int pg_st_lock_store(const record_dir *w, int *lock_fd, pg_error *err);
void pg_st_unlock_store(int lock_fd);
/* item(ctx, i) for i in [0, n) under the store lock, taken in short steps
 * (a few dozen items or milliseconds each, released in between); end(ctx)
 * closes each step still under the lock (may be NULL). Stops at an error. */
typedef int (*pg_st_step_item)(void *ctx, size_t i, pg_error *err);
typedef int (*pg_st_step_end)(void *ctx, pg_error *err);
int pg_st_in_steps(const record_dir *w, size_t n, pg_st_step_item item, pg_st_step_end end,
                   void *ctx, pg_error *err);
/* Atomic replacement of dir/sub/name; durable (file and directory fsync'd) when sync. */
int pg_st_write_file_replace(int dirfd, const char *dir, const char *sub, const char *name,
                             const char *data, size_t len, bool sync, pg_error *err);
int pg_st_write_file_atomic(int dirfd, const char *dir, const char *sub, const char *name,
                            const char *data, size_t len, pg_error *err);
/* One file of a write batch. */
typedef struct st_staged {
    int dirfd;             /* the batch's descriptor of the target directory (batch_dir) */
    const char *dir, *sub; /* for messages and to tell directories apart; borrowed */
    file_name name;
    char tmp[FILE_NAME_LEN + 32];
    int fd;       /* the temporary file while its data is not yet durable, else -1 */
    bool renamed; /* the temporary file is now the target */
} st_staged;

#define BATCH_MAX_DIRS 8  /* subdirectories of one record directory */
#define BATCH_MAX_OPEN 64 /* open temporary files; beyond, their data is synced early */

/*
 * A staged write of several files in the subdirectories of ONE record
 * directory (a subdirectory is known by its name), made durable in ordered
 * groups with their fsyncs issued together (store_fs.c, docs/design.md
 * "Durability").
 */
typedef struct pg_st_batch {
    st_staged *v;
    size_t n, cap;
    struct batch_dir {
        const char *sub;
        int fd; /* a duplicate, owned */
    } dirs[BATCH_MAX_DIRS];
    size_t n_dirs;
    size_t done;    /* entries [0, done) are renamed and durable */
    int stop_after; /* tests: stop like a killed process after this many steps; 0: never */
    int steps;
    bool abandoned; /* stopped: the temporary files stay, as after a crash */
} pg_st_batch;

void pg_st_batch_init(pg_st_batch *b, int stop_after);
/* Writes data to a new temporary file beside dir/sub/name (not yet durable). A
 * second stage of the same target replaces the first. */
int pg_st_batch_stage(pg_st_batch *b, int dirfd, const char *dir, const char *sub, const char *name,
                      const char *data, size_t len, pg_error *err);
/* The data of every file staged so far durable now (their fsyncs together),
 * e.g. before taking a lock the renames need. */
int pg_st_batch_sync_data(pg_st_batch *b, pg_error *err);
/* Every staged file's data durable (first time), then entries [done, upto)
 * renamed in staging order and their directories fsync'd: durable on return. */
int pg_st_batch_commit(pg_st_batch *b, size_t upto, pg_error *err);
/* For files read only for their existence (intents): every entry renamed, then
 * its data and directory fsync'd together (one round). Durable on return. */
int pg_st_batch_commit_existence(pg_st_batch *b, pg_error *err);
/* Removes the temporary files never renamed; closes everything. */
void pg_st_batch_free(pg_st_batch *b);
/* unlinkat + directory fsync; *removed tells whether anything was there. */
int pg_st_remove_file(int dirfd, const char *dir, const char *sub, const char *name, bool *removed,
                      pg_error *err);
/* pg_read_file_at with PG_READ_STRICT, errors prefixed with the path. */
int pg_st_read_strict(int dirfd, const record_dir *d, const char *sub, const char *name, size_t max,
                      char **buf, size_t *len, pg_error *err);
/* PG_ERR_CORRUPT: the content of d/sub/name does not hash to its name. */
int pg_st_mismatch(pg_error *err, const record_dir *d, const char *sub, const char *name,
                   const char *field, const char *value);
bool pg_st_exists_at(int dirfd, const char *name);
/* Nothing at dirfd/name (ENOENT); a name that cannot be stat'ed is not absent. */
bool pg_st_absent_at(int dirfd, const char *name);
/* v with room for element n (of `size` bytes, *cap of them), grown by doubling
 * from `first`; NULL: out of memory (v unchanged). */
void *pg_st_grow(void *v, size_t *cap, size_t n, size_t size, size_t first);
/* unlinkat, not synced; an absent name is fine. */
int pg_st_unlink(int dirfd, const char *dir, const char *sub, const char *name, pg_error *err);
/* Calls fn for each entry of d/sub whose name want() accepts. A missing sub is empty. */
typedef int (*pg_st_entry_fn)(int dirfd, const record_dir *d, const char *name, void *ud);
int pg_st_walk(const record_dir *d, const char *sub, bool (*want)(const char *name),
               pg_st_entry_fn fn, void *ud, pg_error *err);

#endif
