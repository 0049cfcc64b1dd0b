/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store's identity support (docs/design.md, "Image identity"):
 * per-directory lookups for the decision and per-credential times
 * (credentialTTL per credential). The name index is in store_names.c.
 */
#include "lookup_cache.h"
#include "store_identity.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------- per-directory lookups */

size_t pg_store_dir_count(const pg_store *store) { return store ? store->n_dirs : 0; }

static pg_lc_sub entry_lc_sub(pg_entry_kind kind)
{
    switch (kind) {
    case PG_ENTRY_PULLED: return PG_LC_PULLED;
    case PG_ENTRY_INTENT: return PG_LC_PULLING;
    default: return PG_LC_IMAGES;
    }
}

/* fstatat of file in d/sub without the absence cache: see pg_st_stat_sub. */
static int stat_uncached(const record_dir *d, const char *sub_name, const char *file, bool checked,
                         struct stat *st)
{
    int kept = pg_st_kept_fd(d, sub_name), rc;
    if (kept >= 0) {
        rc = fstatat(kept, file, st, AT_SYMLINK_NOFOLLOW);
    } else if (checked) {
        /* The subdirectory's safety is part of the answer: open and check it. */
        int fd;
        int open_rc = pg_st_open_subdir(d, sub_name, &fd, NULL);
        if (open_rc != PG_OK)
            return open_rc == PG_ERR_NOT_FOUND ? 0 : -1;
        rc = fstatat(fd, file, st, AT_SYMLINK_NOFOLLOW);
        int e = errno;
        close(fd);
        errno = e;
    } else {
        char path[64 + FILE_NAME_LEN];
        snprintf(path, sizeof path, "%s/%s", sub_name, file);
        rc = fstatat(d->fd, path, st, AT_SYMLINK_NOFOLLOW);
    }
    if (rc == 0)
        return 1;
    return errno == ENOENT ? 0 : -1;
}

int pg_st_stat_sub(const pg_store *s, size_t i, int sub, const char *file, bool checked,
                   struct stat *st)
{
    uint64_t gen = 0;
    if (pg_lookup_cache_absent(s->lookups, i, (pg_lc_sub)sub, file, &gen))
        return 0;
    int found = stat_uncached(&s->dirs[i], pg_lc_sub_name((pg_lc_sub)sub), file, checked, st);
    if (found == 0)
        pg_lookup_cache_note_absent(s->lookups, i, (pg_lc_sub)sub, file, gen);
    return found;
}

void pg_store_lookups_refresh(const pg_store *store)
{
    if (store)
        pg_lookup_cache_refresh(store->lookups);
}

int pg_store_entry_exists(const pg_store *store, size_t i, pg_entry_kind kind, const char *key)
{
    file_name name;
    if (!store || i >= store->n_dirs || pg_st_check_input("key", key, NULL) != PG_OK ||
        pg_record_file_name(key, name, NULL) != PG_OK)
        return 0;
    struct stat st;
    /* An entry that cannot be stat'ed counts: the strict side. */
    return pg_st_stat_sub(store, i, entry_lc_sub(kind), name, false, &st) != 0;
}

int pg_store_get_in(const pg_store *store, size_t i, const char *image_ref, pg_record **out,
                    pg_error *err)
{
    file_name name;
    *out = NULL;
    int rc = pg_st_check_input("imageRef", image_ref, err);
    if (rc == PG_OK)
        rc = pg_record_file_name(image_ref, name, err);
    if (rc != PG_OK)
        return rc;
    const record_dir *d = &store->dirs[i];
    int kept = pg_st_kept_fd(d, SUB_PULLED);
    if (kept >= 0 && !store->lookups) {
        /* The open itself tells absence (ENOENT): no separate probe. */
        pg_error local = {0};
        rc = pg_st_read_record_at(kept, d, name, out, &local);
        if (rc != PG_OK && rc != PG_ERR_NOT_FOUND && err)
            *err = local;
        return rc;
    }
    if (!pg_store_entry_exists(store, i, PG_ENTRY_PULLED, image_ref))
        return PG_ERR_NOT_FOUND;
    return pg_st_get_from_dir(d, name, out, err);
}

int pg_store_index_in(const pg_store *store, size_t i, const char *key, char **ref_out,
                      pg_error *err)
{
    *ref_out = NULL;
    int rc = pg_st_check_input("image", key, err);
    if (rc != PG_OK)
        return rc;
    if (pg_st_kept_fd(&store->dirs[i], SUB_IMAGES) >= 0 && !store->lookups) {
        /* The open through the kept descriptor tells absence: no separate probe. */
        pg_error local = {0};
        rc = pg_st_resolve_in_dir(&store->dirs[i], key, ref_out, &local);
        if (rc != PG_OK && rc != PG_ERR_NOT_FOUND && err)
            *err = local;
        return rc;
    }
    if (!pg_store_entry_exists(store, i, PG_ENTRY_INDEX, key))
        return PG_ERR_NOT_FOUND;
    return pg_st_resolve_in_dir(&store->dirs[i], key, ref_out, err);
}
