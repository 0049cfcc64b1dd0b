/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store: kubelet-compatible record directories on disk.
 *
 * Layout of a record directory DIR (the kubelet's <root>/image_manager layout):
 *   DIR/pulling/sha256-<hex sha256(image)>        ImagePullIntent
 *   DIR/pulled/sha256-<hex sha256(imageRef)>      ImagePulledRecord
 * and, in the writable directory only (kubelets never read these):
 *   DIR/pullgate-intents/sha256-<hex(image)>      intent reference count (decimal)
 *   DIR/pullgate-images/sha256-<hex(image)>       {"image":..,"imageRef":..} index
 *   DIR/pullgate-names/sha256-<hex(name)>         record file names mapping name, one a line
 *   DIR/pullgate-credtimes/sha256-<hex(imageRef)> per-credential lastUpdatedTime
 *   DIR/pullgate-dircache/sha256-<hex(path)>      names of a read-only directory (a cache)
 *   DIR/.pullgate.lock                            flock(2) lock file
 * Directories are 0700, files 0600.
 *
 * Design:
 *  - The writable directory (stateDir) is opened once, O_DIRECTORY|O_NOFOLLOW,
 *    and its fd kept; read-only directories are opened by path at open time (a
 *    missing one is skipped). Subdirectories are opened relative to those fds
 *    on every operation (a missing pulling/ or pulled/ is empty). A directory
 *    that is a symlink, not owned by root or the effective uid, or writable by
 *    group/others is refused (PG_ERR_UNSAFE).
 *  - Files are read only through pg_read_file_at(..., PG_READ_STRICT): symlinks,
 *    hard links, FIFOs, devices, wrong owner/mode and oversize files are refused,
 *    never followed.
 *  - A record's content must match its file name (imageRef / image hashes to it),
 *    otherwise it is PG_ERR_CORRUPT. Names ending in ".tmp" or not starting with
 *    "sha256-" are not records.
 *  - Writes are atomic and durable: temp file sha256-<hex>.<random>.tmp created
 *    O_EXCL 0600 in the same directory, written, fsync'd, renamed over the
 *    target, directory fsync'd. Deletes: unlinkat + directory fsync. A pull's
 *    files are one staged write (pg_st_batch, docs/design.md "Durability"):
 *    credential times and name index durable before the record and image
 *    index are renamed; the intent released (unsynced) only after those.
 *  - Every read-modify-write takes flock(LOCK_EX) on DIR/.pullgate.lock, opened
 *    per operation so that threads sharing one pg_store exclude each other too
 *    (flock locks belong to open file descriptions). Readers never lock: rename
 *    makes every read see a whole old or a whole new file.
 *  - The intent file's content is fixed by the kubelet format, so concurrent
 *    pulls of one image are counted in pullgate-intents/. record_intent: count++
 *    (unsynced) and write the intent if absent (durable). record_pulled/record_failed: count-- (floor
 *    0); at 0 the count file then the intent are removed. An intent left by a
 *    crash makes the image count as pulled by us (the strict side).
 *  - The store holds only immutable data after open: thread-safe, no globals.
 */
#include "image_identity.h"
#include "internal.h"
#include "lookup_cache.h"
#include "record_cache.h"
#include "store_credidx.h"
#include "store_credtimes.h"
#include "store_index.h"
#include "store_intent.h"
#include "store_names.h"
#include "store_read.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Appends a directory opened by path. *skipped set when missing and optional. */
static int add_dir(pg_store *s, const char *path, bool optional, pg_error *err)
{
    if (!path || !*path)
        return pg_fail(err, PG_ERR_CONFIG, "empty record directory path");
    int fd;
    int rc = pg_st_open_dir_at(AT_FDCWD, path, path, &fd, err);
    if (rc == PG_ERR_NOT_FOUND && optional)
        return PG_OK;
    if (rc != PG_OK)
        return rc;
    char *copy = strdup(path);
    record_dir *grown = realloc(s->dirs, (s->n_dirs + 1) * sizeof *grown);
    if (grown)
        s->dirs = grown;
    if (!copy || !grown) {
        free(copy);
        close(fd);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    s->dirs[s->n_dirs] = (record_dir){copy, fd, -1, -1, -1, -1, -1, NULL, s->n_dirs};
    s->n_dirs++;
    return PG_OK;
}

/* --------------------------------------------------------- open/free */

PG_API void pg_store_free(pg_store *store)
{
    if (!store)
        return;
    for (size_t i = 0; i < store->n_dirs; i++) {
        free(store->dirs[i].path);
        close(store->dirs[i].fd);
        const record_dir *d = &store->dirs[i];
        const int kept[] = {d->pulled_fd, d->pulling_fd, d->images_fd, d->credtimes_fd,
                            d->credidx_fd};
        for (size_t k = 0; k < sizeof kept / sizeof kept[0]; k++)
            if (kept[k] >= 0)
                close(kept[k]);
    }
    free(store->dirs);
    pg_record_cache_free(store->cache);
    pg_lookup_cache_free(store->lookups);
    free(store->api_version);
    pg_strv_free(store->pinned);
    free(store);
}

/* A NULL-terminated copy of v (NULL: empty), or NULL when out of memory. */
static char **copy_strv(const char *const *v)
{
    pg_strv out = {0};
    int rc = pg_strv_ensure(&out, NULL);
    for (size_t i = 0; rc == PG_OK && v && v[i]; i++)
        rc = pg_strv_push(&out, v[i], NULL);
    if (rc != PG_OK)
        pg_strv_clear(&out);
    return out.v;
}

static pg_store *store_new(const pg_config *cfg, pg_notifier *notifier, pg_error *err)
{
    if (!cfg) {
        pg_fail(err, PG_ERR_INVALID, "no configuration");
        return NULL;
    }
    const char *api = pg_config_record_api_version(cfg);
    if (!api)
        api = PG_API_V1ALPHA1;
    if (strcmp(api, PG_API_V1ALPHA1) != 0 && strcmp(api, PG_API_V1BETA1) != 0) {
        pg_fail(err, PG_ERR_CONFIG, "recordApiVersion: unsupported \"%.80s\"", api);
        return NULL;
    }
    pg_store *s = calloc(1, sizeof *s);
    if (s) {
        s->notifier = notifier;
        s->api_version = strdup(api);
        s->pinned = copy_strv(pg_config_pinned_images(cfg));
    }
    if (!s || !s->api_version || !s->pinned) {
        pg_store_free(s);
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return s;
}

static int add_read_only_dirs(pg_store *s, const pg_config *cfg, pg_error *err)
{
    const char *const *ro = pg_config_read_only_dirs(cfg);
    for (size_t i = 0; ro && ro[i]; i++) {
        int rc = add_dir(s, ro[i], true, err);
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}

static int add_writable_dir(pg_store *s, const char *path, pg_error *err)
{
    if (!path || !*path)
        return pg_fail(err, PG_ERR_CONFIG, "stateDir: empty");
    int rc = pg_st_make_dirs(path, err);
    if (rc == PG_OK)
        rc = add_dir(s, path, false, err);
    if (rc == PG_OK)
        rc = pg_st_make_subdirs(&s->dirs[0], err);
    s->writable = rc == PG_OK;
    if (rc == PG_OK)
        pg_st_names_mark_complete_if_empty(&s->dirs[0]);
    return rc;
}

/*
 * Lookups (pg_store_get, i.e. every decision) read pulled/ through a
 * descriptor opened and checked once here, saving an openat + fstat + close
 * per lookup. A pulled/ that is missing now is still opened per lookup. The
 * other subdirectories a decision reads are kept from the first lookup that
 * opens one (pg_st_lookup_fd), not here: a one-shot store (the hook) makes one
 * decision, which probes most of them by path and opens one or two (measured:
 * bench/README.md, "Round three").
 */
static void open_lookup_fds(pg_store *s)
{
    for (size_t i = 0; i < s->n_dirs; i++)
        if (pg_st_open_subdir(&s->dirs[i], SUB_PULLED, &s->dirs[i].pulled_fd, NULL) != PG_OK)
            s->dirs[i].pulled_fd = -1;
}

PG_API pg_store *pg_store_open(const pg_config *cfg, pg_notifier *notifier, pg_error *err)
{
    pg_store *s = store_new(cfg, notifier, err);
    if (!s)
        return NULL;
    if (add_writable_dir(s, pg_config_state_dir(cfg), err) != PG_OK ||
        add_read_only_dirs(s, cfg, err) != PG_OK) {
        pg_store_free(s);
        return NULL;
    }
    open_lookup_fds(s);
    return s;
}

PG_API pg_store *pg_store_open_readonly(const pg_config *cfg, pg_error *err)
{
    pg_store *s = store_new(cfg, NULL, err);
    if (s && add_read_only_dirs(s, cfg, err) != PG_OK) {
        pg_store_free(s);
        return NULL;
    }
    if (s)
        open_lookup_fds(s);
    return s;
}

/* ------------------------------------------------------------ reading */

PG_API int pg_store_get(const pg_store *store, const char *image_ref, pg_record **out,
                        pg_error *err)
{
    *out = NULL;
    int rc = store ? pg_st_check_input("imageRef", image_ref, err)
                   : pg_fail(err, PG_ERR_INVALID, "no store");
    file_name name;
    if (rc == PG_OK)
        rc = pg_record_file_name(image_ref, name, err);
    if (rc != PG_OK)
        return rc;
    for (size_t i = 0; i < store->n_dirs; i++) {
        rc = pg_st_get_from_dir(&store->dirs[i], name, out, err);
        if (rc != PG_ERR_NOT_FOUND) /* found, or a bad file: fail closed */
            return rc;
    }
    return pg_fail(err, PG_ERR_NOT_FOUND, "no pulled record for \"%.200s\"", image_ref);
}

/* 1 if some directory has a pulled/<hash(image_ref)> entry (not parsed), else 0. */
int pg_store_record_exists(const pg_store *store, const char *image_ref)
{
    file_name name;
    if (!store || pg_st_check_input("imageRef", image_ref, NULL) != PG_OK ||
        pg_record_file_name(image_ref, name, NULL) != PG_OK)
        return 0;
    for (size_t i = 0; i < store->n_dirs; i++) {
        char path[sizeof SUB_PULLED + FILE_NAME_LEN + 1];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", SUB_PULLED, name);
        if (fstatat(store->dirs[i].fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
            return 1; /* present, or unreadable: pg_decide reads it and fails closed */
    }
    return 0;
}

/* ------------------------------------------------------ record_pulled */

static int load_or_new(const pg_store *s, int pulled_fd, const char *name, const char *image_ref,
                       pg_record **out, bool *existed, pg_error *err)
{
    int rc = pg_st_read_record_at(pulled_fd, &s->dirs[0], name, out, err);
    *existed = rc == PG_OK;
    if (rc == PG_ERR_NOT_FOUND) {
        *out = pg_record_new(image_ref, err);
        rc = *out ? PG_OK : PG_ERR_NOMEM;
    }
    return rc;
}

static int set_now(pg_record *rec, const char *api_version, pg_error *err)
{
    char when[32];
    rec->last_updated = time(NULL);
    pg_format_rfc3339(rec->last_updated, when);
    char *text = strdup(when), *api = strdup(api_version);
    if (!text || !api) {
        free(text);
        free(api);
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    free(rec->last_updated_text);
    free(rec->api_version);
    rec->last_updated_text = text;
    rec->api_version = api;
    return PG_OK;
}

/*
 * The record's file content (ending "\n", as Go's json.Encoder writes it), made before
 * anything is staged: a record its readers would refuse is never written, and finding
 * that out costs no staging of its side files. Never such a record: it would deny every
 * pod that verified with it and fail every later pull of the image; the pull's intent
 * stays instead, and the record as it was.
 */
static int record_text(const pg_store *s, const char *name, const pg_record *rec, char **text,
                       size_t *len, pg_error *err)
{
    int rc = pg_record_serialize(rec, s->api_version, text, err);
    if (rc != PG_OK)
        return rc;
    size_t n = strlen(*text);
    if (n + 1 > PG_MAX_RECORD_BYTES) {
        free(*text);
        *text = NULL;
        return pg_fail(err, PG_ERR_LIMIT,
                       "%s: the record would be %zu bytes, larger than the limit of %u; not "
                       "written",
                       name, n + 1, PG_MAX_RECORD_BYTES);
    }
    (*text)[n] = '\n'; /* the NUL is no longer needed */
    *len = n + 1;
    return PG_OK;
}

/*
 * Stages every file of a pull, then makes them durable in two groups
 * (docs/design.md, "Durability"): first the evidence that must never lag the
 * record (credential times, name index), then the record and the image index.
 */
static int write_pull_files(const pg_store *s, pg_st_batch *b, int fd, const char *name,
                            const pg_record *rec, const json_t *old_keys, const pull *p,
                            time_t previous, pg_error *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc = record_text(s, name, rec, &text, &len, err);
    if (rc == PG_OK)
        rc = pg_st_credtimes_update_locked(s, b, rec, old_keys, name, p, previous, err);
    if (rc == PG_OK)
        rc = pg_st_names_add_locked(s, b, rec, name, err);
    size_t evidence = b->n;
    if (rc == PG_OK)
        rc = pg_st_batch_stage(b, fd, s->dirs[0].path, SUB_PULLED, name, text, len, err);
    free(text);
    if (rc == PG_OK)
        rc = pg_st_update_index(s, b, p->image, p->full_name, p->digest_only, p->image_ref, err);
    if (rc == PG_OK) /* the aliases in the record's round: durable with it */
        rc = pg_st_stage_aliases(s, b, p->alias_keys, p->image_ref, err);
    if (rc == PG_OK)
        rc = pg_st_batch_commit(b, evidence, err);
    if (rc == PG_OK)
        rc = pg_st_batch_commit(b, b->n, err);
    return rc;
}

/*
 * When a recorded secret was last recorded, for a namespace whose own pod
 * bindings make room for its pull (pg_record_merge_pull): the record's
 * credential times, read once and only when needed; the record's previous
 * lastUpdatedTime for a credential they do not name.
 */
typedef struct binding_clock {
    const pg_store *s;
    const char *file;
    const char *image_ref;
    time_t fallback;
    json_t *times;
    bool loaded;
} binding_clock;

static time_t binding_recorded_at(const char *image_name, const pg_pod_cred *secret, void *ud)
{
    binding_clock *c = ud;
    if (!c->loaded) {
        int fd;
        c->loaded = true;
        if (pg_st_open_subdir(&c->s->dirs[0], SUB_CREDTIMES, &fd, NULL) == PG_OK) {
            if (pg_st_credtimes_load(c->s, fd, c->file, c->image_ref, &c->times, NULL) != PG_OK)
                c->times = NULL;
            close(fd);
        }
    }
    char *key = c->times ? pg_st_credential_key(image_name, secret, NULL) : NULL;
    json_t *t = key ? json_object_get(c->times, key) : NULL;
    free(key);
    return json_is_integer(t) ? (time_t)json_integer_value(t) : c->fallback;
}

/* Under the lock: merge into pulled/<hash(imageRef)>, index, release the intent. */
static int record_pulled_locked(const pg_store *s, const pull *p, pg_error *err)
{
    file_name name;
    int fd;
    int rc = pg_record_file_name(p->image_ref, name, err);
    if (rc == PG_OK)
        rc = pg_st_open_subdir(&s->dirs[0], SUB_PULLED, &fd, err);
    if (rc != PG_OK)
        return rc;
    pg_record *rec = NULL;
    bool existed = false;
    rc = load_or_new(s, fd, name, p->image_ref, &rec, &existed, err);
    time_t previous = rec ? rec->last_updated : 0;
    json_t *old_keys = NULL;
    if (rc == PG_OK && existed && !(old_keys = pg_st_credtimes_keys(rec)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    binding_clock clock = {s, name, p->image_ref, previous, NULL, false};
    if (rc == PG_OK) /* one key per image; a pull without credentials still maps its name */
        rc = pg_record_merge_pull(rec, p->image_name, p->creds, binding_recorded_at, &clock, err);
    json_decref(clock.times);
    if (rc == PG_OK)
        rc = set_now(rec, s->api_version, err);
    pg_st_batch b;
    pg_st_batch_init(&b, s->test_stop_after);
    if (rc == PG_OK)
        rc = write_pull_files(s, &b, fd, name, rec, old_keys, p,
                              existed ? previous : rec->last_updated, err);
    pg_st_batch_free(&b);
    json_decref(old_keys);
    pg_st_cache_forget(s, s->dirs[0].path, name); /* the record may have changed, even on error */
    if (rc == PG_OK) {
        /* An optimisation only (store_credidx.h): on failure there is no index and
         * decisions parse the record. */
        pg_error ignored = {0};
        (void)pg_st_credidx_write_locked(s, rec, name, &ignored);
    }
    pg_record_free(rec);
    close(fd);
    /* Only once the record and the index are durable may the intent go. */
    if (rc == PG_OK)
        rc = pg_st_release_intents(s, p->image, err);
    return rc;
}

static int normalise_pull(pull *p, pg_error *err)
{
    pg_ref *ref;
    int rc = pg_ref_parse_into(p->image, &ref, err);
    if (rc != PG_OK)
        return rc;
    p->image_name = pg_strdup(pg_ref_name(ref));
    p->full_name = pg_strdup(pg_ref_string(ref));
    if (pg_ref_digest(ref) &&
        asprintf(&p->digest_only, "%s@%s", pg_ref_name(ref), pg_ref_digest(ref)) < 0)
        p->digest_only = NULL;
    bool digest_missing = pg_ref_digest(ref) && !p->digest_only;
    pg_ref_free(ref);
    if (!p->image_name || !p->full_name || digest_missing)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    return PG_OK;
}

static const char *credential_kind(const pg_pull_credentials *c)
{
    if (c && c->node_pods_accessible)
        return "nodeAccessible";
    if (c && c->n_secrets)
        return "secret";
    if (c && c->n_service_accounts)
        return "serviceAccount";
    return "none";
}

static int record_pulled(pg_store *store, const char *image, const char *image_ref,
                         const pg_pull_credentials *creds, const char *const *aliases,
                         pg_error *err)
{
    pull p = {image, image_ref, creds, NULL, NULL, NULL, NULL};
    int rc = pg_st_require_writable(store, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("image", image, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("imageRef", image_ref, err);
    if (rc == PG_OK)
        rc = pg_st_alias_keys(aliases, &p.alias_keys, err);
    if (rc == PG_OK)
        rc = normalise_pull(&p, err);
    int lock_fd = -1;
    if (rc == PG_OK)
        rc = pg_st_lock_store(store, &lock_fd, err);
    if (rc == PG_OK)
        rc = record_pulled_locked(store, &p, err);
    pg_st_unlock_store(lock_fd);
    free(p.image_name);
    free(p.full_name);
    free(p.digest_only);
    pg_strv_free(p.alias_keys);
    if (rc == PG_OK && store->notifier)
        pg_notify_image_pulled(store->notifier, image, image_ref, credential_kind(creds));
    return rc;
}

/*
 * Unlike the kubelet, a pull with no credentials to record still writes the
 * record, with an empty mapping for the image: releasing the intent must not
 * make a pulled image look preloaded, which would exempt it from verification.
 */
PG_API int pg_store_record_pulled(pg_store *store, const char *image, const char *image_ref,
                                  const pg_pull_credentials *creds, pg_error *err)
{
    return record_pulled(store, image, image_ref, creds, NULL, err);
}

PG_API int pg_store_record_pulled_aliases(pg_store *store, const char *image, const char *image_ref,
                                          const pg_pull_credentials *creds,
                                          const char *const *aliases, pg_error *err)
{
    return record_pulled(store, image, image_ref, creds, aliases, err);
}

/* ------------------------------------------------------- list / prune */

typedef struct list_ctx {
    pg_record_cb cb;
    pg_bad_record_cb bad_cb;
    void *ud;
    int stop; /* the callback's non-zero return */
} list_ctx;

static int list_entry(int dirfd, const record_dir *d, const char *name, void *ud)
{
    list_ctx *c = ud;
    pg_error why = {0};
    pg_record *rec;
    if (pg_st_read_record_at(dirfd, d, name, &rec, &why) != PG_OK) {
        if (c->bad_cb) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s/%s", d->path, SUB_PULLED, name);
            c->bad_cb(path, &why, c->ud);
        }
        return PG_OK;
    }
    c->stop = c->cb ? c->cb(rec, c->ud) : 0;
    pg_record_free(rec);
    return c->stop ? -1 : PG_OK;
}

PG_API int pg_store_list(const pg_store *store, pg_record_cb cb, pg_bad_record_cb bad_cb, void *ud,
                         pg_error *err)
{
    if (!store)
        return pg_fail(err, PG_ERR_INVALID, "no store");
    list_ctx c = {cb, bad_cb, ud, 0};
    for (size_t i = 0; i < store->n_dirs; i++) {
        int rc = pg_st_walk_records(&store->dirs[i], SUB_PULLED, list_entry, &c, err);
        if (c.stop)
            return c.stop;
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}

static int delete_locked(const pg_store *s, const char *image_ref, pg_error *err)
{
    file_name name;
    int fd;
    bool removed = false;
    int rc = pg_record_file_name(image_ref, name, err);
    if (rc == PG_OK)
        rc = pg_st_open_subdir(&s->dirs[0], SUB_PULLED, &fd, err);
    if (rc != PG_OK)
        return rc;
    rc = pg_st_remove_file(fd, s->dirs[0].path, SUB_PULLED, name, &removed, err);
    close(fd);
    pg_st_cache_forget(s, s->dirs[0].path, name);
    pg_st_credidx_remove(s, name);
    if (rc == PG_OK && !removed)
        rc = pg_fail(err, PG_ERR_NOT_FOUND, "no pulled record for \"%.200s\" in %s", image_ref,
                     s->dirs[0].path);
    return rc;
}

PG_API int pg_store_delete(pg_store *store, const char *image_ref, pg_error *err)
{
    int rc = pg_st_require_writable(store, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("imageRef", image_ref, err);
    if (rc == PG_OK)
        rc = pg_st_with_lock(store, delete_locked, image_ref, err);
    return rc;
}
