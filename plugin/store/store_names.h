/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 3 of the record store (store_names.c): the name index of the
 * writable directory w (which of its records map an image name), written with
 * each record, kept exact by prune.
 * Private to the record store (store_impl.h: the layers).
 */
#ifndef PULLGATE_STORE_NAMES_H
#define PULLGATE_STORE_NAMES_H

#include "store_read.h"

/* The index covers every record of w's pulled/ (its completeness marker). */
bool pg_st_names_complete(const record_dir *w);
/* A new layout (pulled/ empty): the name index is complete from the start
 * (the caller found it not marked). */
void pg_st_names_mark_complete_if_empty(const record_dir *w);
/* The record files the index lists under image_name (names_fd: pullgate-names/),
 * pushed to files; a line may name a record since deleted. */
int pg_st_names_files(const record_dir *w, int names_fd, const char *image_name, pg_strv *files,
                      pg_error *err);
/* Under the lock: adds `file` to the name index of every name rec maps (the
 * changed name files staged in b). */
int pg_st_names_add_locked(const record_dir *w, pg_st_batch *b, const pg_record *rec,
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
int pg_st_names_upkeep(const record_dir *w, pg_st_name_lines *lines, pg_error *err);

#endif
