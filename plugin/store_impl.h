/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store's private parts, shared by plugin/store.c (directories,
 * reads, atomic writes, intents, index, records, prune) and
 * plugin/store_identity.c (per-directory identity lookups, the name index and
 * read-only name caches, per-credential times). Not installed; nothing outside
 * the store includes it.
 */
#ifndef PULLGATE_STORE_IMPL_H
#define PULLGATE_STORE_IMPL_H

#include "internal.h"

#include <stdbool.h>
#include <time.h>

#define SUB_PULLING "pulling"
#define SUB_PULLED "pulled"
#define SUB_INTENTS "pullgate-intents"
#define SUB_IMAGES "pullgate-images"
#define SUB_NAMES "pullgate-names"
#define SUB_CREDTIMES "pullgate-credtimes"
#define SUB_DIRCACHE "pullgate-dircache"
#define LOCK_FILE ".pullgate.lock"
#define NAME_PREFIX "sha256-"
#define TMP_SUFFIX ".tmp"
#define FILE_NAME_LEN (7 + PG_HASH_HEX_LEN)
#define MAX_INDEX_BYTES (2 * PG_MAX_IMAGE_LEN + 4096)
#define MAX_COUNT_BYTES 64

typedef char file_name[FILE_NAME_LEN + 1];

typedef struct record_dir {
    char *path;
    int fd;
    int pulled_fd; /* pulled/, opened and checked at store open; -1: open per lookup */
} record_dir;

struct pg_store {
    record_dir *dirs; /* dirs[0] is the writable one when writable */
    size_t n_dirs;
    bool writable;
    char *api_version;
    char **pinned; /* NULL-terminated copy of pinnedImages */
    pg_notifier *notifier;
};

/* One record_pulled call, normalised. */
typedef struct pull {
    const char *image, *image_ref;
    const pg_pull_credentials *creds;
    char *image_name; /* normalised, no tag/digest: the credentialMapping key */
    char *full_name;  /* normalised with tag/digest: the index key */
    char *digest_only; /* "name@digest" when a digest is given, else NULL */
} pull;

/* ------------------------------------------------------ store.c helpers */

/* Prefixes err's message with "dir/sub/name: " (dropping a leading "name: "). */
int pg_st_prefix_error(pg_error *err, int code, const char *dir, const char *sub,
                       const char *name);
/* "sha256-..." and not a temporary file. */
bool pg_st_is_record_name(const char *name);
/* Non-empty and at most PG_MAX_IMAGE_LEN. */
int pg_st_check_input(const char *what, const char *s, pg_error *err);
int pg_st_fsync_retry(int fd);
/* Opens d/sub as a safe directory. Missing: PG_ERR_NOT_FOUND. */
int pg_st_open_subdir(const record_dir *d, const char *sub, int *fd_out, pg_error *err);
/* Atomic replacement of dir/sub/name; durable (file and directory fsync'd) when sync. */
int pg_st_write_file_replace(int dirfd, const char *dir, const char *sub, const char *name,
                             const char *data, size_t len, bool sync, pg_error *err);
int pg_st_write_file_atomic(int dirfd, const char *dir, const char *sub, const char *name,
                            const char *data, size_t len, pg_error *err);
/* pg_read_file_at with PG_READ_STRICT, errors prefixed with the path. */
int pg_st_read_strict(int dirfd, const record_dir *d, const char *sub, const char *name,
                      size_t max, char **buf, size_t *len, pg_error *err);
/* Reads and checks pulled/<name> (content must match the name). NOT_FOUND when absent. */
int pg_st_read_record_at(int pulled_fd, const record_dir *d, const char *name, pg_record **out,
                         pg_error *err);
int pg_st_get_from_dir(const record_dir *d, const char *name, pg_record **out, pg_error *err);
bool pg_st_exists_at(int dirfd, const char *name);
/* The index entry of key in d: *ref_out caller frees. */
int pg_st_resolve_in_dir(const record_dir *d, const char *key, char **ref_out, pg_error *err);
/* Calls fn for each record-named entry of d/sub. A missing sub is empty. */
typedef int (*pg_st_entry_fn)(int dirfd, const record_dir *d, const char *name, void *ud);
int pg_st_walk_records(const record_dir *d, const char *sub, pg_st_entry_fn fn, void *ud,
                       pg_error *err);

/* -------------------------------------------------- store_identity.c */

/* Under the lock: the per-credential times of rec (record file `file`) after pull p. */
int pg_st_credtimes_update_locked(const pg_store *s, const pg_record *rec, const char *file,
                                  const pull *p, time_t previous, pg_error *err);
/* Under the lock: adds `file` to the name index of every name rec maps. */
int pg_st_names_add_locked(const pg_store *s, const pg_record *rec, const char *file,
                           pg_error *err);
/* Under the lock (prune): the name index rebuilt from the writable directory's records. */
int pg_st_names_rebuild_locked(const pg_store *s, pg_error *err);
/* A new layout (pulled/ empty): the name index is complete from the start. */
void pg_st_names_mark_complete_if_empty(const record_dir *d);

#endif
