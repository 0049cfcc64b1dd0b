/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store's private parts, shared by its files:
 *   store.c          open/free, pulled records (read, record_pulled), list, prune
 *   store_fs.c       safe-filesystem primitives: directory checks, strict reads,
 *                    atomic durable writes, the lock, directory walks
 *   store_intent.c   intents and their reference counts
 *   store_index.c    the image -> imageRef index and aliases
 *   store_names.c    the name index and the read-only directories' name caches
 *   store_identity.c per-directory lookups for the decision, per-credential times
 * Not installed; nothing outside the store includes it.
 */
#ifndef PULLGATE_STORE_IMPL_H
#define PULLGATE_STORE_IMPL_H

#include "internal.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <time.h>

#define SUB_PULLING "pulling"
#define SUB_PULLED "pulled"
#define SUB_INTENTS "pullgate-intents"
#define SUB_IMAGES "pullgate-images"
#define SUB_NAMES "pullgate-names"
#define SUB_CREDTIMES "pullgate-credtimes"
#define SUB_DIRCACHE "pullgate-dircache"
#define SUB_CREDIDX "pullgate-credidx" /* store_credidx.c */
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
    /* The other subdirectories a decision reads: kept once a lookup had to open
     * one (pg_st_lookup_fd; atomic: lookups run on shared stores), and all at
     * pg_store_enable_cache (pg_st_keep_lookup_fds); -1: not kept. */
    atomic_int pulling_fd, images_fd, credtimes_fd, credidx_fd;
    /* With pg_store_enable_cache: the kept descriptors are used only while this
     * absence cache's watches say they are still the directories at their paths. */
    struct pg_lookup_cache *lookups;
    size_t index; /* of this directory in the store */
} record_dir;

struct pg_store {
    record_dir *dirs; /* dirs[0] is the writable one when writable */
    size_t n_dirs;
    bool writable;
    char *api_version;
    char **pinned; /* NULL-terminated copy of pinnedImages */
    pg_notifier *notifier;
    struct pg_record_cache *cache; /* pg_store_enable_cache (store_credidx.c); NULL: none */
    int test_stop_after;           /* tests only: record_pulled's batch stops (pg_st_batch) */
    struct pg_lookup_cache *lookups; /* absences, with cache enabled (lookup_cache.h); NULL: none */
};

/* One record_pulled call, normalised. */
typedef struct pull {
    const char *image, *image_ref;
    const pg_pull_credentials *creds;
    char *image_name;  /* normalised, no tag/digest: the credentialMapping key */
    char *full_name;   /* normalised with tag/digest: the index key */
    char *digest_only; /* "name@digest" when a digest is given, else NULL */
    char **alias_keys; /* index keys of the aliases recorded with it (pg_st_alias_keys), or NULL */
} pull;

/* ------------------------------------------------------------ store_fs.c */

/* Sets code and prefixes err's message with "dir/sub/name: " (pg_error_prefix). */
int pg_st_prefix_error(pg_error *err, int code, const char *dir, const char *sub, const char *name);
/* "sha256-..." and not a temporary file. */
bool pg_st_is_record_name(const char *name);
/* Non-empty and at most PG_MAX_IMAGE_LEN. */
int pg_st_check_input(const char *what, const char *s, pg_error *err);
/* INVALID unless store was opened writable. */
int pg_st_require_writable(const pg_store *store, pg_error *err);
/* fsync, retried on EINTR. */
int pg_st_fsync_retry(int fd);
/*
 * Every change the store makes to a record directory goes through these
 * (store_fs.c; the crash simulation records them): the calls of the same
 * names, renames and unlinks within one directory.
 */
int pg_st_sys_openat(int dirfd, const char *name, int flags, mode_t mode);
int pg_st_sys_renameat(int dirfd, const char *from, const char *to);
int pg_st_sys_unlinkat(int dirfd, const char *name);
int pg_st_sys_mkdirat(int dirfd, const char *name, mode_t mode);
int pg_st_sys_syncfs(int fd);
/* Opens base/name as a safe directory (ours, not group/other writable, no
 * symlink); shown names it in errors. Missing: PG_ERR_NOT_FOUND. */
int pg_st_open_dir_at(int base, const char *name, const char *shown, int *fd_out, pg_error *err);
/* Opens d/sub as a safe directory. Missing: PG_ERR_NOT_FOUND. */
int pg_st_open_subdir(const record_dir *d, const char *sub, int *fd_out, pg_error *err);
/* mkdir -p, mode 0700. */
int pg_st_make_dirs(const char *path, pg_error *err);
/* Every subdirectory of the layout in d (mode 0700). */
int pg_st_make_subdirs(const record_dir *d, pg_error *err);
/* flock(LOCK_EX) on the writable directory's lock file; release with unlock. */
int pg_st_lock_store(const pg_store *s, int *lock_fd, pg_error *err);
void pg_st_unlock_store(int lock_fd);
/* item(ctx, i) for i in [0, n) under the store lock, taken in short steps
 * (a few dozen items or milliseconds each, released in between); end(ctx)
 * closes each step still under the lock (may be NULL). Stops at an error. */
typedef int (*pg_st_step_item)(void *ctx, size_t i, pg_error *err);
typedef int (*pg_st_step_end)(void *ctx, pg_error *err);
int pg_st_in_steps(const pg_store *s, size_t n, pg_st_step_item item, pg_st_step_end end, void *ctx,
                   pg_error *err);
typedef int (*pg_st_locked_op)(const pg_store *s, const char *key, pg_error *err);
/* op(s, key) under the store lock. */
int pg_st_with_lock(const pg_store *s, pg_st_locked_op op, const char *key, pg_error *err);
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
/* Calls fn for each record-named entry of d/sub. A missing sub is empty. */
typedef int (*pg_st_entry_fn)(int dirfd, const record_dir *d, const char *name, void *ud);
int pg_st_walk_records(const record_dir *d, const char *sub, pg_st_entry_fn fn, void *ud,
                       pg_error *err);

/* --------------------------------------------------------------- store.c */

/* pg_store_enable_cache: keeps every subdirectory a decision reads open (pulled/
 * already is), so repeated decisions probe through descriptors the cache watches. */
void pg_st_keep_lookup_fds(pg_store *s);
/* The descriptor of d/sub the store keeps (-1 when none is kept or trusted). */
int pg_st_kept_fd(const record_dir *d, const char *sub);
/* d/sub for a lookup: the kept descriptor, or one opened and checked now and kept
 * from then on (*owned false), or, when another thread kept one first or the
 * store's cache does not trust it, a new one (*owned true: caller closes).
 * Missing: PG_ERR_NOT_FOUND (not remembered: one created later is seen). */
int pg_st_lookup_fd(const record_dir *d, const char *sub, int *fd, bool *owned, pg_error *err);

/* Reads and checks pulled/<name> (content must match the name). NOT_FOUND when absent. */
int pg_st_read_record_at(int pulled_fd, const record_dir *d, const char *name, pg_record **out,
                         pg_error *err);
int pg_st_get_from_dir(const record_dir *d, const char *name, pg_record **out, pg_error *err);

/* -------------------------------------------------------- store_intent.c */

/* Under the lock: count-- of image's intents (both spellings); at 0 they go. Not
 * synced: a release lost in a crash leaves an intent, the strict side. */
int pg_st_release_intents(const pg_store *s, const char *image, pg_error *err);

/* -------------------------------------------------- store_identity.c */

/*
 * d/sub/file stat'ed for a lookup of directory i (sub: a pg_lc_sub), the store's
 * absence cache first: 1 present (*st filled), 0 absent, -1 cannot tell. Through
 * the subdirectory's kept descriptor (checked at open); without one, `checked`
 * opens and checks the subdirectory first (an answer that can lead to an allow),
 * else stats by path (a probe, where "present" is the strict side).
 */
int pg_st_stat_sub(const pg_store *s, size_t i, int sub, const char *file, bool checked,
                   struct stat *st);

/* --------------------------------------------------------- store_index.c */

/* Under the lock: the index entries of a pull (as written, normalised, name@digest),
 * staged in b (unchanged entries are not). */
int pg_st_update_index(const pg_store *s, pg_st_batch *b, const char *image, const char *normalised,
                       const char *digest_only, const char *image_ref, pg_error *err);
/* Prune: images/<entry> is readable and names an imageRef with no record in
 * pulled/ (the writable directory's descriptors). */
bool pg_st_index_orphan(const pg_store *s, int images_fd, int pulled_fd, const char *entry);
/* The index keys of aliases (each validated, with its other spelling), or
 * *keys NULL when there are none; caller frees with pg_strv_free. */
int pg_st_alias_keys(const char *const *aliases, char ***keys, pg_error *err);
/* Under the lock: the index entries keys -> image_ref staged in b (unchanged ones are not). */
int pg_st_stage_aliases(const pg_store *s, pg_st_batch *b, char *const *keys,
                        const char *image_ref, pg_error *err);
/* The index entry of key in d: *ref_out caller frees. */
int pg_st_resolve_in_dir(const record_dir *d, const char *key, char **ref_out, pg_error *err);

/* -------------------------------------------------- store_identity.c */

/* The key of one credential in the credential-times file; caller frees; NULL: ENOMEM. */
char *pg_st_credential_key(const char *image_name, const pg_pod_cred *s, const pg_pod_cred *sa);
/* The times object of the credential-times file `file` (open subdir fd); new reference. */
int pg_st_credtimes_load(const pg_store *s, int fd, const char *file, const char *image_ref,
                         json_t **times, pg_error *err);
/* Under the lock: the per-credential times of rec (record file `file`) after pull p,
 * staged in b. */
int pg_st_credtimes_update_locked(const pg_store *s, pg_st_batch *b, const pg_record *rec,
                                  const json_t *old_keys, const char *file, const pull *p,
                                  time_t previous, pg_error *err);
/* The credential-time keys of rec's credentials, as a JSON object of keys (new
 * reference; NULL when out of memory). old_keys above: those of the record on
 * disk before the merge, so the side file keeps covering it until the new
 * record is durable (NULL: a new record). */
json_t *pg_st_credtimes_keys(const pg_record *rec);
/* ------------------------------------------------------ store_dircache.c */

/* The raw SHA-256 of an image name (the names caches' key). */
int pg_st_name_hash(const char *name, unsigned char out[32], pg_error *err);
/* The names of a record directory's records, asked by name (its cache, or
 * built now when stale: store_dircache.c). */
typedef struct pg_st_dirnames pg_st_dirnames;
int pg_st_dirnames_open(const pg_store *s, const record_dir *d, pg_st_dirnames **out,
                        pg_error *err);
/* fn(file) for each record file of the directory listed under the name's hash:
 * PG_OK to go on, < 0 to stop (not an error), else an error. *unknown: some
 * record could not be read, its names are unknown. */
typedef int (*pg_st_dirnames_fn)(const char *file, void *ud, pg_error *err);
int pg_st_dirnames_find(const pg_st_dirnames *v, const unsigned char name[32], pg_st_dirnames_fn fn,
                        void *ud, bool *unknown, pg_error *err);
void pg_st_dirnames_free(pg_st_dirnames *v);
/* d's cache made current (refreshed from the old one) when it is stale. */
int pg_st_dirnames_refresh(const pg_store *s, const record_dir *d, pg_error *err);

/* --------------------------------------------------------- store_names.c */

/* Under the lock: adds `file` to the name index of every name rec maps (the
 * changed name files staged in b). */
int pg_st_names_add_locked(const pg_store *s, pg_st_batch *b, const pg_record *rec,
                           const char *file, pg_error *err);
/* One line of the name index: record file `file` maps the name hashing to hex. */
typedef struct pg_st_name_line {
    char hex[PG_HASH_HEX_LEN + 1];
    file_name file;
} pg_st_name_line;
typedef struct pg_st_name_lines {
    pg_st_name_line *v;
    size_t n, cap;
} pg_st_name_lines;
/* Appends the lines of rec (record file `file`): one per name it maps. */
int pg_st_name_lines_add(pg_st_name_lines *l, const pg_record *rec, const char *file,
                         pg_error *err);
void pg_st_name_lines_free(pg_st_name_lines *l);
/* Prune, NOT under the lock (it locks in short steps): every name file made to
 * list exactly the records present that map its name, from `lines` (every
 * readable record's, collected by prune's walk; sorted here) and the files'
 * own lines; unchanged files untouched; the completeness marker written last
 * when it was missing. */
int pg_st_names_upkeep(const pg_store *s, pg_st_name_lines *lines, pg_error *err);
/* A new layout (pulled/ empty): the name index is complete from the start. */
void pg_st_names_mark_complete_if_empty(const record_dir *d);

#endif
