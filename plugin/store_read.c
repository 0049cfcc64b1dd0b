/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 2 of the record store: the subdirectory descriptors a lookup reads
 * through, and reading one pulled record. A pulled/ descriptor is opened and
 * checked at store open (store.c); the other subdirectories a decision reads
 * are kept from the first lookup that opens one, and all of them from
 * pg_store_enable_cache on; a long-lived store trusts a kept descriptor only
 * while its absence cache's watches say it is still the directory at its path
 * (bench/README.md, "Round three").
 */
#include "lookup_cache.h"
#include "store_read.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The kept-descriptor field of d/sub, or NULL (pulled/ is not lazily kept). */
static atomic_int *lazy_field(record_dir *d, const char *sub, pg_lc_sub *which)
{
    const struct {
        const char *sub;
        atomic_int *fd;
        pg_lc_sub which;
    } fields[] = {
        {SUB_PULLING, &d->pulling_fd, PG_LC_PULLING},
        {SUB_IMAGES, &d->images_fd, PG_LC_IMAGES},
        {SUB_CREDTIMES, &d->credtimes_fd, PG_LC_CREDTIMES},
        {SUB_CREDIDX, &d->credidx_fd, PG_LC_CREDIDX},
    };
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
        if (strcmp(sub, fields[k].sub) == 0) {
            *which = fields[k].which;
            return fields[k].fd;
        }
    return NULL;
}

void pg_st_keep_lookup_fds(pg_store *s)
{
    /* The writable directory's pullgate-credidx/ (a validated cache, never
     * evidence) is created so that it can be kept and watched too. */
    if (s->writable)
        (void)pg_st_sys_mkdirat(s->dirs[0].fd, SUB_CREDIDX,
                                0700); /* optional: failure only costs speed */
    static const char *const subs[] = {SUB_PULLING, SUB_IMAGES, SUB_CREDTIMES, SUB_CREDIDX};
    for (size_t i = 0; i < s->n_dirs; i++)
        for (size_t k = 0; k < sizeof subs / sizeof subs[0]; k++) {
            int fd;
            bool owned;
            if (pg_st_lookup_fd(&s->dirs[i], subs[k], &fd, &owned, NULL) == PG_OK && owned)
                close(fd);
        }
}

int pg_st_kept_fd(const record_dir *d, const char *sub)
{
    pg_lc_sub which = PG_LC_PULLED;
    int fd = strcmp(sub, SUB_PULLED) == 0 ? d->pulled_fd : -1;
    atomic_int *field = fd < 0 ? lazy_field((record_dir *)d, sub, &which) : NULL;
    if (field)
        fd = atomic_load(field);
    /* A long-lived store stops using a descriptor once the subdirectory at its
     * path may be another one (moved, removed, unwatchable). */
    bool trusted = !d->lookups || pg_lookup_cache_trusted(d->lookups, d->index, which);
    return fd >= 0 && trusted ? fd : -1;
}

int pg_st_lookup_fd(const record_dir *d, const char *sub, int *fd, bool *owned, pg_error *err)
{
    *fd = pg_st_kept_fd(d, sub);
    *owned = false;
    if (*fd >= 0)
        return PG_OK;
    int rc = pg_st_open_subdir(d, sub, fd, err);
    if (rc != PG_OK)
        return rc;
    pg_lc_sub which;
    atomic_int *field = lazy_field((record_dir *)d, sub, &which);
    int none = -1;
    /* Kept unless another thread kept one first, or the cache watches (and so
     * trusts) only what was open when it was enabled. */
    *owned = !field || d->lookups || !atomic_compare_exchange_strong(field, &none, *fd);
    return PG_OK;
}

/* ------------------------------------------------------------ reading */

/* Reads and checks pulled/<name>. PG_ERR_NOT_FOUND when absent. */
int pg_st_read_record_at(int pulled_fd, const record_dir *d, const char *name, pg_record **out,
                         pg_error *err)
{
    char *buf;
    size_t len;
    *out = NULL; /* defined on every path, so callers never read garbage */
    int rc =
        pg_st_read_strict(pulled_fd, d, SUB_PULLED, name, PG_MAX_RECORD_BYTES, &buf, &len, err);
    if (rc != PG_OK)
        return rc;
    pg_record *rec;
    rc = pg_record_parse(buf, len, &rec, err);
    free(buf);
    if (rc != PG_OK)
        return pg_st_prefix_error(err, rc, d->path, SUB_PULLED, name);
    file_name expected;
    rc = pg_record_file_name(rec->image_ref, expected, err);
    if (rc == PG_OK && strcmp(expected, name) != 0)
        rc = pg_st_mismatch(err, d, SUB_PULLED, name, "imageRef", rec->image_ref);
    if (rc == PG_OK && !(rec->dir = strdup(d->path)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc != PG_OK) {
        pg_record_free(rec);
        return rc;
    }
    *out = rec;
    return PG_OK;
}

int pg_st_get_from_dir(const record_dir *d, const char *name, pg_record **out, pg_error *err)
{
    int kept = pg_st_kept_fd(d, SUB_PULLED);
    if (kept >= 0)
        return pg_st_read_record_at(kept, d, name, out, err);
    int fd;
    int rc = pg_st_open_subdir(d, SUB_PULLED, &fd, err);
    if (rc != PG_OK)
        return rc;
    rc = pg_st_read_record_at(fd, d, name, out, err);
    close(fd);
    return rc;
}
