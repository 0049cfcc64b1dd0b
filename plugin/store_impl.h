/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store's private types (record directories, the store, a pull),
 * shared by its files, and its layers. Each layer's functions are declared in
 * its own header, which includes only the headers of layers below it, so a
 * call upwards does not compile (docs/design.md, "Parts and data flow"):
 *   1 store_fs.c       (store_fs.h) safe-filesystem primitives: directory
 *                      checks, strict reads, atomic durable writes and write
 *                      batches, the lock and its short steps, directory walks
 *   2 store_read.c     (store_read.h) the subdirectory descriptors lookups read
 *                      through, reading one pulled record
 *   3 store_intent.c   (store_intent.h) intents and their reference counts
 *     store_index.c    (store_index.h) the identity -> imageRef index, aliases
 *     store_credtimes.c (store_credtimes.h) per-credential times files
 *     store_dircache.c (store_dircache.h) names caches of read-only directories
 *   4 store_identity.c (store_identity.h) per-directory lookups for the decision
 *   5 store_credidx.c  (store_credidx.h) focused records, the credential index,
 *                      the record cache's use, credential times for decisions
 *     store_names.c    (store_names.h) the name index, which records map a
 *                      name, prune's upkeep of the index
 *   6 store.c          open/free, pulled records (get, record_pulled), list, delete
 *     store_prune.c    prune
 * Beside them, below the store: lookup_cache.c (absences), record_cache.c
 * (parsed records). Above: store_lookup.h gathers the lookups for decide.c.
 * Not installed; nothing outside the engine includes these headers.
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

#endif
