/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pull intents (pulling/) and pullgate's reference counts of them
 * (pullgate-intents/); why counts exist is described at the top of
 * plugin/store.c.
 */
#include "internal.h"
#include "store_intent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ intents */

/*
 * The reference count is only bookkeeping: the intent file is the security
 * relevant bit. An unreadable count (not unsafe, merely garbage) therefore
 * self-heals instead of blocking pulls: it counts as 0.
 */
static int read_count(int fd, const record_dir *d, const char *name, long *count, pg_error *err)
{
    char *buf;
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
    free(buf);
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
static int stage_intent(const pg_store *s, pg_st_batch *b, int pulling_fd, const char *image,
                        const char *name, pg_error *err)
{
    if (pg_st_exists_at(pulling_fd, name))
        return PG_OK;
    char *text;
    int rc = pg_intent_serialize(image, s->api_version, &text, err);
    if (rc != PG_OK)
        return rc;
    size_t len = strlen(text);
    text[len] = '\n'; /* json_dumps' buffer: replace the NUL, Go's encoder ends with "\n" */
    rc = pg_st_batch_stage(b, pulling_fd, s->dirs[0].path, SUB_PULLING, name, text, len + 1, err);
    free(text);
    return rc;
}

typedef struct intent_dirs {
    int pulling, intents;
} intent_dirs;

static int open_intent_dirs(const pg_store *s, intent_dirs *fds, pg_error *err)
{
    fds->pulling = fds->intents = -1;
    int rc = pg_st_open_subdir(&s->dirs[0], SUB_PULLING, &fds->pulling, err);
    if (rc == PG_OK)
        rc = pg_st_open_subdir(&s->dirs[0], SUB_INTENTS, &fds->intents, err);
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
static int take_intent(const pg_store *s, pg_st_batch *b, const intent_dirs *fds, const char *image,
                       pg_error *err)
{
    file_name name;
    long count = 0;
    int rc = pg_record_file_name(image, name, err);
    if (rc == PG_OK)
        rc = read_count(fds->intents, &s->dirs[0], name, &count, err);
    if (rc == PG_OK)
        rc = write_count(fds->intents, &s->dirs[0], name, count + 1, err);
    if (rc == PG_OK)
        rc = stage_intent(s, b, fds->pulling, image, name, err);
    return rc;
}

/*
 * No fsync: the caller made the record durable first (or the pull failed), and
 * a removal lost in a crash leaves an intent, the strict side.
 */
static int remove_unsynced(int fd, const record_dir *d, const char *sub, const char *name,
                           pg_error *err)
{
    if (pg_st_sys_unlinkat(fd, name) != 0 && errno != ENOENT)
        return pg_fail_errno(err, errno, "remove %s/%s/%s", d->path, sub, name);
    return PG_OK;
}

/*
 * Under the lock: count-- (floor 0); at 0 remove the count then the intent.
 * That order means a crash in between leaves an intent without a count, which
 * the next release of the image cleans up, and meanwhile errs on the strict side.
 */
static int release_intent(const pg_store *s, const char *image, pg_error *err)
{
    file_name name;
    intent_dirs fds = {-1, -1};
    long count = 0;
    int rc = pg_record_file_name(image, name, err);
    if (rc == PG_OK)
        rc = open_intent_dirs(s, &fds, err);
    if (rc == PG_OK)
        rc = read_count(fds.intents, &s->dirs[0], name, &count, err);
    if (rc == PG_OK && count > 1)
        rc = write_count(fds.intents, &s->dirs[0], name, count - 1, err);
    else if (rc == PG_OK) {
        rc = remove_unsynced(fds.intents, &s->dirs[0], SUB_INTENTS, name, err);
        if (rc == PG_OK)
            rc = remove_unsynced(fds.pulling, &s->dirs[0], SUB_PULLING, name, err);
    }
    close_intent_dirs(&fds);
    return rc;
}

/*
 * pullgate's own intents go under the image as requested AND its normalised
 * reference, so that a lookup under either spelling finds them.
 */
static int for_both_spellings(const pg_store *s, pg_st_locked_op op, const char *image,
                              pg_error *err)
{
    int rc = op(s, image, err);
    pg_ref *ref = rc == PG_OK ? pg_ref_parse(image, NULL) : NULL;
    if (ref && strcmp(pg_ref_string(ref), image) != 0)
        rc = op(s, pg_ref_string(ref), err);
    pg_ref_free(ref);
    return rc;
}

/*
 * Both spellings' intents staged in one batch, durable together before the
 * pull is forwarded: renamed, then their data and pulling/ fsync'd in one
 * round. An intent counts by existing (nothing reads its content), so one
 * whose data a crash tore still says "pulled by us".
 */
static int take_intents(const pg_store *s, const char *image, pg_error *err)
{
    intent_dirs fds = {-1, -1};
    pg_st_batch b;
    pg_st_batch_init(&b, 0);
    int rc = open_intent_dirs(s, &fds, err);
    if (rc == PG_OK)
        rc = take_intent(s, &b, &fds, image, err);
    pg_ref *ref = rc == PG_OK ? pg_ref_parse(image, NULL) : NULL;
    if (ref && strcmp(pg_ref_string(ref), image) != 0)
        rc = take_intent(s, &b, &fds, pg_ref_string(ref), err);
    pg_ref_free(ref);
    if (rc == PG_OK)
        rc = pg_st_batch_commit_existence(&b, err);
    pg_st_batch_free(&b);
    close_intent_dirs(&fds);
    return rc;
}

int pg_st_release_intents(const pg_store *s, const char *image, pg_error *err)
{
    return for_both_spellings(s, release_intent, image, err);
}

PG_API int pg_store_record_intent(pg_store *store, const char *image, pg_error *err)
{
    int rc = pg_st_require_writable(store, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("image", image, err);
    if (rc == PG_OK)
        rc = pg_st_with_lock(store, take_intents, image, err);
    if (rc == PG_OK && store->notifier)
        pg_notify_pull_intent(store->notifier, image);
    return rc;
}

PG_API int pg_store_record_failed(pg_store *store, const char *image, pg_error *err)
{
    int rc = pg_st_require_writable(store, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("image", image, err);
    if (rc == PG_OK)
        rc = pg_st_with_lock(store, pg_st_release_intents, image, err);
    if (rc == PG_OK && store->notifier)
        pg_notify_pull_failed(store->notifier, image);
    return rc;
}

static int intent_in_dir(const record_dir *d, const char *name, bool *exists, pg_error *err)
{
    int fd;
    int rc = pg_st_open_subdir(d, SUB_PULLING, &fd, err);
    if (rc == PG_ERR_NOT_FOUND) /* no pulling/: no intents */
        return PG_OK;
    if (rc != PG_OK)
        return rc;
    struct stat st;
    *exists = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!*exists && errno != ENOENT)
        rc = pg_fail_errno(err, errno, "stat %s/%s/%s", d->path, SUB_PULLING, name);
    close(fd);
    return rc;
}

/*
 * Existence is what counts: whatever sits at pulling/<name> (even a file we
 * would refuse to read) makes the image "pulled by us", the strict side.
 */
int pg_store_intent_exists(const pg_store *store, const char *image, bool *exists,
                           pg_error *err)
{
    file_name name;
    *exists = false;
    int rc =
        store ? pg_st_check_input("image", image, err) : pg_fail(err, PG_ERR_INVALID, "no store");
    if (rc == PG_OK)
        rc = pg_record_file_name(image, name, err);
    for (size_t i = 0; rc == PG_OK && !*exists && i < store->n_dirs; i++)
        rc = intent_in_dir(&store->dirs[i], name, exists, err);
    return rc;
}
