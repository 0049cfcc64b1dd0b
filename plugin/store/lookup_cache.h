/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Absence cache for long-lived hosts (pg_store_enable_cache): remembers that
 * a record directory's subdirectory had no file of a given name, so a
 * repeated decision does not fstatat(2) every spelling of an image in every
 * record directory again. Not used by one-shot callers (the hook, pullgatectl).
 *
 * Only ABSENCE is cached, and only while inotify(7) says nothing happened in
 * that subdirectory: the cache owns one inotify instance (no global state)
 * with a watch on every cached subdirectory and on each record directory
 * (for subdirectories renamed or removed). Before a decision reads the cache,
 * pg_lookup_cache_refresh drains the instance without blocking; any event in
 * a subdirectory drops every cached absence of it (a generation bump), and a
 * queue overflow, a read error, or a watched directory deleted, moved or
 * unwatched (IN_IGNORED) drops everything and stops caching that directory
 * (or everything) for good. A subdirectory is cached only when, at watch time,
 * the inode the watch was put on is the one the store holds open (stat by path
 * before and after inotify_add_watch, compared with fstat of the descriptor).
 *
 * Why that is enough: the kernel queues a directory's events before the
 * syscall that changed it returns, so any change made before a decision
 * starts is drained at its start. An absence is recorded only when no event
 * arrived between the generation read before the fstatat and the insert, so
 * a file created concurrently is either seen by the fstatat or its event
 * drops the entry at the next refresh. A decision thus sees the store as it
 * was at its start, like an uncached one whose probes all ran then. Present
 * files are never cached here (the record cache re-validates its hits with
 * fstatat): a lookup that finds nothing is not evidence, and this cache never
 * turns "something is there" into "nothing is".
 *
 * Not reported by inotify, so out of scope as for the store's kept
 * descriptors: a file system mounted over a record directory after the watch.
 *
 * If inotify is unavailable (limits), pg_lookup_cache_new returns NULL and the
 * store probes as without a cache. Thread-safe: one mutex. Internal.
 */
#ifndef PULLGATE_LOOKUP_CACHE_H
#define PULLGATE_LOOKUP_CACHE_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The subdirectories of a record directory a decision probes. */
typedef enum pg_lc_sub {
    PG_LC_PULLED = 0,
    PG_LC_PULLING,
    PG_LC_IMAGES,
    PG_LC_CREDTIMES,
    PG_LC_SUBS
} pg_lc_sub;

/* The subdirectory's name in the layout ("pulled", ...). */
const char *pg_lc_sub_name(pg_lc_sub sub);

typedef struct pg_lookup_cache pg_lookup_cache;

/*
 * n_dirs record directories: paths[i], dir_fds[i] the store's descriptor of
 * it, and sub_fds[i * PG_LC_SUBS + sub] the descriptor the store keeps for
 * that subdirectory (-1: none; not cached).
 * max_entries bounds the remembered absences (the table is cleared when full).
 * NULL with err when inotify cannot be used.
 */
pg_lookup_cache *pg_lookup_cache_new(size_t n_dirs, const char *const *paths, const int *dir_fds,
                                     const int *sub_fds, size_t max_entries, pg_error *err);
void pg_lookup_cache_free(pg_lookup_cache *lc);

/* Drains the inotify queue (non-blocking), applying what it says. NULL-safe. */
void pg_lookup_cache_refresh(pg_lookup_cache *lc);

/*
 * true: file is known absent from subdirectory sub of directory dir.
 * false: unknown; *gen is what to pass to pg_lookup_cache_note_absent if the
 * caller's own probe then finds nothing.
 */
bool pg_lookup_cache_absent(pg_lookup_cache *lc, size_t dir, pg_lc_sub sub, const char *file,
                            uint64_t *gen);
/* Records that a probe started at generation gen found no file (ignored when
 * anything happened in that subdirectory since, or it is not cached). */
void pg_lookup_cache_note_absent(pg_lookup_cache *lc, size_t dir, pg_lc_sub sub, const char *file,
                                 uint64_t gen);

/* Whether the store may still use its kept descriptor of that subdirectory:
 * watched, and no event said it was moved, removed or replaced (lock-free). */
bool pg_lookup_cache_trusted(const pg_lookup_cache *lc, size_t dir, pg_lc_sub sub);

typedef struct pg_lookup_cache_stats {
    uint64_t hits;      /* absences answered without a probe */
    uint64_t inserts;   /* absences recorded */
    uint64_t drops;     /* subdirectory generations bumped by events */
    uint64_t overflows; /* IN_Q_OVERFLOW or read errors (everything dropped) */
    size_t watched;     /* subdirectories still cached */
    size_t entries;     /* absences held now */
    size_t capacity;    /* table slots now (grows with entries, bounded by 2 * max) */
} pg_lookup_cache_stats;

void pg_lookup_cache_get_stats(pg_lookup_cache *lc, pg_lookup_cache_stats *out);

#endif
