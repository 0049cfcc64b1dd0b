/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pull intents (pulling/) and pullgate's reference counts of them
 * (pullgate-intents/); why counts exist: docs/design.md, "Record directories".
 */
#include "internal.h"
#include "store_intent.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ intents */

/*
 * The reference count is only bookkeeping: the intent file is the security
 * relevant bit. An unreadable count (not unsafe, merely garbage) therefore
 * self-heals instead of blocking pulls: it counts as 0.
 */
static int read_count(int fd, const record_dir *d, const char *name, long *count, pg_error *err)
{
    pg_autofree char *buf = NULL;
    *count = 0;
    int rc = pg_st_read_strict(fd, d, SUB_INTENTS, name, MAX_COUNT_BYTES, &buf, NULL, err);
    if (rc == PG_ERR_NOT_FOUND || rc == PG_ERR_LIMIT)
        return PG_OK;
    if (rc != PG_OK)
        return rc;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (!errno && end != buf && (*end == '\0' || *end == '\n') && v > 0)
        *count = v;
    return PG_OK;
}

/*
 * Atomic (rename) but not synced: a count lost in a crash reads as 0 and only
 * makes the next release remove the intent; pulls in flight did not survive
 * the crash either.
 */
static int write_count(int fd, const record_dir *d, const char *name, long count, pg_error *err)
{
    char text[32];
    int n = snprintf(text, sizeof text, "%ld\n", count);
    return pg_st_write_file_replace(fd, d->path, SUB_INTENTS, name, text, (size_t)n, false, err);
}

/* Stages pulling/<name> unless present; the caller's batch commit makes it durable. */
static int stage_intent(const record_dir *w, const char *api_version, pg_st_batch *b,
                        int pulling_fd, const char *image, const char *name, pg_error *err)
{
    if (pg_st_exists_at(pulling_fd, name))
        return PG_OK;
    pg_autofree char *text = NULL;
    int rc = pg_intent_serialize(image, api_version, &text, err);
    if (rc != PG_OK)
        return rc;
    size_t len = strlen(text);
    text[len] = '\n'; /* json_dumps' buffer: replace the NUL, Go's encoder ends with "\n" */
    return pg_st_batch_stage(b, pulling_fd, w->path, SUB_PULLING, name, text, len + 1, err);
}

typedef struct intent_dirs {
    int pulling, intents;
} intent_dirs;

static int open_intent_dirs(const record_dir *w, intent_dirs *fds, pg_error *err)
{
    fds->pulling = fds->intents = -1;
    int rc = pg_st_open_subdir(w, SUB_PULLING, &fds->pulling, err);
    if (rc == PG_OK)
        rc = pg_st_open_subdir(w, SUB_INTENTS, &fds->intents, err);
    return rc;
}

static void close_intent_dirs(intent_dirs *fds)
{
    if (fds->pulling >= 0)
        close(fds->pulling);
    if (fds->intents >= 0)
        close(fds->intents);
}

/* Under the lock: count++ then the intent file, staged in b. */
static int take_intent(const record_dir *w, const char *api_version, pg_st_batch *b,
                       const intent_dirs *fds, const char *image, pg_error *err)
{
    file_name name;
    long count = 0;
    int rc = pg_record_file_name(image, name, err);
    if (rc == PG_OK)
        rc = read_count(fds->intents, w, name, &count, err);
    if (rc == PG_OK)
        rc = write_count(fds->intents, w, name, count + 1, err);
    if (rc == PG_OK)
        rc = stage_intent(w, api_version, b, fds->pulling, image, name, err);
    return rc;
}

/*
 * Under the lock: count-- (floor 0); at 0 remove the count then the intent.
 * That order means a crash in between leaves an intent without a count, which
 * the next release of the image cleans up, and meanwhile errs on the strict side.
 * No fsync: the caller made the record durable first (or the pull failed), and
 * a removal lost in a crash leaves an intent, the strict side.
 */
static int release_intent(const record_dir *w, const intent_dirs *fds, const char *image,
                          pg_error *err)
{
    file_name name;
    long count = 0;
    int rc = pg_record_file_name(image, name, err);
    if (rc == PG_OK)
        rc = read_count(fds->intents, w, name, &count, err);
    if (rc == PG_OK && count > 1)
        rc = write_count(fds->intents, w, name, count - 1, err);
    else if (rc == PG_OK) {
        rc = pg_st_unlink(fds->intents, w->path, SUB_INTENTS, name, err);
        if (rc == PG_OK)
            rc = pg_st_unlink(fds->pulling, w->path, SUB_PULLING, name, err);
    }
    return rc;
}

/* The image as requested and, when it differs, its normalised reference: pullgate's
 * own intents go under both, so that a lookup under either spelling finds them. */
static int both_spellings(const char *image, const char *out[2])
{
    pg_ref *ref = pg_ref_parse(image, NULL);
    out[0] = image;
    out[1] = ref && strcmp(pg_ref_string(ref), image) != 0 ? strdup(pg_ref_string(ref)) : NULL;
    bool nomem = ref && strcmp(pg_ref_string(ref), image) != 0 && !out[1];
    pg_ref_free(ref);
    return nomem ? PG_ERR_NOMEM : PG_OK;
}

/*
 * Taken, both spellings' intents are staged in one batch, durable together
 * before the pull is forwarded: renamed, then their data and pulling/ fsync'd
 * in one round. An intent counts by existing (nothing reads its content), so
 * one whose data a crash tore still says "pulled by us".
 */
int pg_st_intents(const record_dir *w, const char *api_version, const char *image, bool take,
                  pg_error *err)
{
    intent_dirs fds = {-1, -1};
    const char *spellings[2] = {image, NULL};
    pg_st_batch b;
    pg_st_batch_init(&b, 0);
    int rc = both_spellings(image, spellings) == PG_OK ? open_intent_dirs(w, &fds, err)
                                                       : pg_fail(err, PG_ERR_NOMEM, "out of memory");
    for (size_t i = 0; rc == PG_OK && i < 2 && spellings[i]; i++)
        rc = take ? take_intent(w, api_version, &b, &fds, spellings[i], err)
                  : release_intent(w, &fds, spellings[i], err);
    if (rc == PG_OK && take)
        rc = pg_st_batch_commit_existence(&b, err);
    pg_st_batch_free(&b);
    close_intent_dirs(&fds);
    free((char *)spellings[1]);
    return rc;
}
