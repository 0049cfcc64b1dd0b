/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store: kubelet-compatible record directories on disk. Layout,
 * durability, locking and intent counts: docs/design.md, "Record
 * directories"; the layers: store_impl.h. The store holds only immutable data
 * after open: thread-safe, no globals.
 */
#include "engine_testing.h" /* the tests' seams defined here */
#include "image_identity.h"
#include "record_cache.h"
#include "store_credidx.h"
#include "store_credtimes.h"
#include "store_dircache.h"
#include "store_impl.h"
#include "store_index.h"
#include "store_intent.h"
#include "store_names.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Appends a directory opened by path (a missing optional one is skipped). */
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
    s->dirs[s->n_dirs] = (record_dir){copy, fd, -1};
    s->n_dirs++;
    return PG_OK;
}

/* --------------------------------------------------------- open/free */

int pg_st_require_writable(const pg_store *store, pg_error *err)
{
    if (!store)
        return pg_fail(err, PG_ERR_INVALID, "no store");
    if (!store->writable)
        return pg_fail(err, PG_ERR_INVALID, "the store was opened read-only");
    /* Every subdirectory of the layout exists before a write (re-made if removed). */
    return pg_st_make_subdirs(&store->dirs[0], err);
}

PG_API void pg_store_free(pg_store *store)
{
    if (!store)
        return;
    for (size_t i = 0; i < store->n_dirs; i++) {
        free(store->dirs[i].path);
        close(store->dirs[i].fd);
        if (store->dirs[i].pulled_fd >= 0)
            close(store->dirs[i].pulled_fd);
        for (size_t k = 0; store->kept && k < PG_STORE_SUBS; k++)
            if (store->kept[i * PG_STORE_SUBS + k] >= 0)
                close(store->kept[i * PG_STORE_SUBS + k]);
    }
    free(store->kept);
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

/* stateDir, made when it does not exist yet. Its layout is made when its name
 * index is not marked complete (a new or an older layout) and by every write
 * (pg_st_require_writable): an open of a current store that only reads makes
 * nothing. */
static int add_writable_dir(pg_store *s, const char *path, pg_error *err)
{
    if (!path || !*path)
        return pg_fail(err, PG_ERR_CONFIG, "stateDir: empty");
    int rc = add_dir(s, path, true, err);
    if (rc == PG_OK && s->n_dirs == 0) {
        rc = pg_st_make_dirs(path, err);
        if (rc == PG_OK)
            rc = add_dir(s, path, false, err);
    }
    if (rc == PG_OK && !pg_st_names_complete(&s->dirs[0])) {
        rc = pg_st_make_subdirs(&s->dirs[0], err);
        if (rc == PG_OK)
            pg_st_names_mark_complete_if_empty(&s->dirs[0]);
    }
    s->writable = rc == PG_OK;
    return rc;
}

/*
 * Lookups (pg_store_get, i.e. every decision) read pulled/ through a
 * descriptor opened and checked once here, saving an openat + fstat + close
 * per lookup. A pulled/ that is missing now is still opened per lookup. The
 * other subdirectories a decision reads are opened by the decision's lookup
 * context, once each (store_lookup.c), not here: a one-shot store (the hook)
 * makes one decision, which probes most of them by path and opens one or two
 * (measured: bench/README.md, "Round three").
 */
static int open_lookup_fds(pg_store *s, pg_error *err)
{
    if (!(s->kept = malloc((s->n_dirs + 1) * PG_STORE_SUBS * sizeof *s->kept)))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < (s->n_dirs + 1) * PG_STORE_SUBS; k++)
        atomic_init(&s->kept[k], -1);
    for (size_t i = 0; i < s->n_dirs; i++)
        if (pg_st_open_subdir(&s->dirs[i], SUB_PULLED, &s->dirs[i].pulled_fd, NULL) != PG_OK)
            s->dirs[i].pulled_fd = -1;
    return PG_OK;
}

PG_API pg_store *pg_store_open(const pg_config *cfg, pg_notifier *notifier, pg_error *err)
{
    pg_store *s = store_new(cfg, notifier, err);
    if (!s)
        return NULL;
    if (add_writable_dir(s, pg_config_state_dir(cfg), err) != PG_OK ||
        add_read_only_dirs(s, cfg, err) != PG_OK || open_lookup_fds(s, err) != PG_OK) {
        pg_store_free(s);
        return NULL;
    }
    return s;
}

PG_API pg_store *pg_store_open_readonly(const pg_config *cfg, pg_error *err)
{
    pg_store *s = store_new(cfg, NULL, err);
    if (s && (add_read_only_dirs(s, cfg, err) != PG_OK || open_lookup_fds(s, err) != PG_OK)) {
        pg_store_free(s);
        return NULL;
    }
    return s;
}

/* ------------------------------------------------------------ reading */

static int get_from_dir(const record_dir *d, const char *name, pg_record **out, pg_error *err)
{
    if (d->pulled_fd >= 0)
        return pg_st_read_record_at(d->pulled_fd, d, name, out, err);
    pg_autoclose int fd = -1;
    int rc = pg_st_open_subdir(d, SUB_PULLED, &fd, err);
    return rc == PG_OK ? pg_st_read_record_at(fd, d, name, out, err) : rc;
}

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
        rc = get_from_dir(&store->dirs[i], name, out, err);
        if (rc != PG_ERR_NOT_FOUND) /* found, or a bad file: fail closed */
            return rc;
    }
    return pg_fail(err, PG_ERR_NOT_FOUND, "no pulled record for \"%.200s\"", image_ref);
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
    pg_autofree char *text = strdup(when), *api = strdup(api_version);
    if (!text || !api)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    free(rec->last_updated_text);
    free(rec->api_version);
    rec->last_updated_text = pg_steal(&text);
    rec->api_version = pg_steal(&api);
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
 * Stages every file of a pull, then makes them durable (docs/design.md,
 * "Durability"): first the evidence that must never lag the record (its
 * name-index lines; its credential times when their order matters), then the
 * record, the image index and whatever else. *times: the credential times
 * written (for the credential index; caller releases).
 */
static int write_pull_files(const pg_store *s, pg_st_batch *b, int fd, const char *name,
                            const pg_record *rec, const json_t *old_keys, const pull *p,
                            time_t previous, json_t **times, pg_error *err)
{
    const record_dir *w = &s->dirs[0];
    pg_autofree char *text = NULL;
    size_t len = 0;
    bool ordered = false;
    int rc = record_text(s, name, rec, &text, &len, err);
    if (rc == PG_OK)
        rc = pg_st_names_add_locked(w, b, rec, name, err);
    size_t evidence = b->n;
    if (rc == PG_OK)
        rc = pg_st_credtimes_update_locked(w, b, rec, old_keys, name, p, previous, &ordered,
                                           times, err);
    if (rc == PG_OK && ordered)
        evidence = b->n;
    if (rc == PG_OK)
        rc = pg_st_batch_stage(b, fd, w->path, SUB_PULLED, name, text, len, err);
    if (rc == PG_OK)
        rc = pg_st_update_index(w, b, p->image, p->full_name, p->digest_only, p->image_ref, err);
    if (rc == PG_OK) /* the aliases in the record's round: durable with it */
        rc = pg_st_stage_aliases(w, b, p->alias_keys, p->image_ref, err);
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
    const record_dir *w;
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
        pg_autoclose int fd = -1;
        c->loaded = true;
        if (pg_st_open_subdir(c->w, SUB_CREDTIMES, &fd, NULL) == PG_OK &&
            pg_st_credtimes_read(fd, c->w, c->file, c->image_ref, &c->times, NULL) != PG_OK)
            c->times = NULL;
    }
    time_t when = c->fallback;
    (void)pg_st_credential_time(c->times, image_name, secret, NULL, c->fallback, &when, NULL);
    return when;
}

/* Under the lock: merge into pulled/<hash(imageRef)>, index, release the intent. */
static int record_pulled_locked(const pg_store *s, const pull *p, pg_error *err)
{
    const record_dir *w = &s->dirs[0];
    file_name name;
    pg_autoclose int fd = -1;
    int rc = pg_record_file_name(p->image_ref, name, err);
    if (rc == PG_OK)
        rc = pg_st_open_subdir(w, SUB_PULLED, &fd, err);
    if (rc != PG_OK)
        return rc;
    pg_autorecord pg_record *rec = NULL;
    bool existed = false;
    rc = load_or_new(s, fd, name, p->image_ref, &rec, &existed, err);
    time_t previous = rec ? rec->last_updated : 0;
    pg_autojson json_t *old_keys = NULL, *times = NULL;
    if (rc == PG_OK && existed && !(old_keys = pg_st_credtimes_keys(rec)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    binding_clock clock = {w, name, p->image_ref, previous, NULL, false};
    if (rc == PG_OK) /* one key per image; a pull without credentials still maps its name */
        rc = pg_record_merge_pull(rec, p->image_name, p->creds, binding_recorded_at, &clock, err);
    json_decref(clock.times);
    if (rc == PG_OK)
        rc = set_now(rec, s->api_version, err);
    pg_st_batch b;
    pg_st_batch_init(&b, s->test_stop_after);
    if (rc == PG_OK)
        rc = write_pull_files(s, &b, fd, name, rec, old_keys, p,
                              existed ? previous : rec->last_updated, &times, err);
    pg_st_batch_free(&b);
    pg_st_cache_forget(s, name); /* the record may have changed, even on error */
    if (rc == PG_OK) {
        /* An optimisation only (store_credidx.h): on failure there is no index and
         * one-shot decisions parse the record. */
        pg_error ignored = {0};
        (void)pg_st_credidx_write_locked(w, rec, times, name, &ignored);
    }
    /* Only once the record and the index are durable may the intent go. */
    if (rc == PG_OK)
        rc = pg_st_intents(w, s->api_version, p->image, false, err);
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
        rc = pg_st_lock_store(&store->dirs[0], &lock_fd, err);
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
    pg_autorecord pg_record *rec = NULL;
    if (pg_st_read_record_at(dirfd, d, name, &rec, &why) != PG_OK) {
        if (c->bad_cb) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s/%s", d->path, SUB_PULLED, name);
            c->bad_cb(path, &why, c->ud);
        }
        return PG_OK;
    }
    c->stop = c->cb ? c->cb(rec, c->ud) : 0;
    return c->stop ? -1 : PG_OK;
}

PG_API int pg_store_list(const pg_store *store, pg_record_cb cb, pg_bad_record_cb bad_cb, void *ud,
                         pg_error *err)
{
    if (!store)
        return pg_fail(err, PG_ERR_INVALID, "no store");
    list_ctx c = {cb, bad_cb, ud, 0};
    for (size_t i = 0; i < store->n_dirs; i++) {
        int rc = pg_st_walk(&store->dirs[i], SUB_PULLED, pg_st_is_record_name, list_entry, &c, err);
        if (c.stop)
            return c.stop;
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}

static int delete_locked(const pg_store *s, const char *image_ref, pg_error *err)
{
    const record_dir *w = &s->dirs[0];
    file_name name;
    pg_autoclose int fd = -1;
    bool removed = false;
    int rc = pg_record_file_name(image_ref, name, err);
    if (rc == PG_OK)
        rc = pg_st_open_subdir(w, SUB_PULLED, &fd, err);
    if (rc != PG_OK)
        return rc;
    rc = pg_st_remove_file(fd, w->path, SUB_PULLED, name, &removed, err);
    pg_st_cache_forget(s, name);
    pg_st_credidx_remove(w, name);
    if (rc == PG_OK && !removed)
        rc = pg_fail(err, PG_ERR_NOT_FOUND, "no pulled record for \"%.200s\" in %s", image_ref,
                     w->path);
    return rc;
}

PG_API int pg_store_delete(pg_store *store, const char *image_ref, pg_error *err)
{
    int lock_fd = -1;
    int rc = pg_st_require_writable(store, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("imageRef", image_ref, err);
    if (rc == PG_OK)
        rc = pg_st_lock_store(&store->dirs[0], &lock_fd, err);
    if (rc == PG_OK)
        rc = delete_locked(store, image_ref, err);
    pg_st_unlock_store(lock_fd);
    return rc;
}

/* ------------------------------------------------------------ intents */

static int intent_op(pg_store *store, const char *image, bool take, pg_error *err)
{
    int lock_fd = -1;
    int rc = pg_st_require_writable(store, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("image", image, err);
    if (rc == PG_OK)
        rc = pg_st_lock_store(&store->dirs[0], &lock_fd, err);
    if (rc == PG_OK)
        rc = pg_st_intents(&store->dirs[0], store->api_version, image, take, err);
    pg_st_unlock_store(lock_fd);
    return rc;
}

PG_API int pg_store_record_intent(pg_store *store, const char *image, pg_error *err)
{
    int rc = intent_op(store, image, true, err);
    if (rc == PG_OK && store->notifier)
        pg_notify_pull_intent(store->notifier, image);
    return rc;
}

PG_API int pg_store_record_failed(pg_store *store, const char *image, pg_error *err)
{
    int rc = intent_op(store, image, false, err);
    if (rc == PG_OK && store->notifier)
        pg_notify_pull_failed(store->notifier, image);
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
    for (size_t i = 0; rc == PG_OK && !*exists && i < store->n_dirs; i++) {
        pg_autoclose int fd = -1;
        rc = pg_st_open_subdir(&store->dirs[i], SUB_PULLING, &fd, err);
        if (rc == PG_ERR_NOT_FOUND) { /* no pulling/: no intents */
            rc = PG_OK;
            continue;
        }
        *exists = rc == PG_OK && pg_st_exists_at(fd, name);
        if (rc == PG_OK && !*exists && errno != ENOENT)
            rc = pg_fail_errno(err, errno, "stat %s/%s/%s", store->dirs[i].path, SUB_PULLING, name);
    }
    return rc;
}

/* ------------------------------------------------------------ aliases */

/* Under the lock, the changed entries staged, then durable together (their data,
 * then the directory). */
PG_API int pg_store_record_aliases(pg_store *store, const char *image_ref,
                                   const char *const *aliases, pg_error *err)
{
    char **keys = NULL;
    int lock_fd = -1;
    pg_st_batch b;
    pg_st_batch_init(&b, 0);
    int rc = pg_st_require_writable(store, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("imageRef", image_ref, err);
    if (rc == PG_OK)
        rc = pg_st_alias_keys(aliases, &keys, err);
    bool any = rc == PG_OK && keys && keys[0];
    if (any)
        rc = pg_st_lock_store(&store->dirs[0], &lock_fd, err);
    if (any && rc == PG_OK)
        rc = pg_st_stage_aliases(&store->dirs[0], &b, keys, image_ref, err);
    if (any && rc == PG_OK)
        rc = pg_st_batch_commit(&b, b.n, err);
    pg_st_batch_free(&b);
    pg_st_unlock_store(lock_fd);
    pg_strv_free(keys);
    return rc;
}

/* The imageRef the index of some directory gives image (as written or normalised). */
PG_API int pg_store_resolve_image(const pg_store *store, const char *image, char **ref_out,
                                  pg_error *err)
{
    *ref_out = NULL;
    int rc =
        store ? pg_st_check_input("image", image, err) : pg_fail(err, PG_ERR_INVALID, "no store");
    if (rc != PG_OK)
        return rc;
    pg_ref *ref = pg_ref_parse(image, NULL);
    const char *keys[2] = {ref ? pg_ref_string(ref) : image, image};
    size_t n_keys = ref && strcmp(keys[0], image) != 0 ? 2 : 1;
    rc = PG_ERR_NOT_FOUND;
    for (size_t i = 0; rc == PG_ERR_NOT_FOUND && i < store->n_dirs; i++) {
        pg_autoclose int fd = -1;
        rc = pg_st_open_subdir(&store->dirs[i], SUB_IMAGES, &fd, err);
        for (size_t k = 0; rc == PG_OK && k < n_keys; k++) {
            file_name name;
            rc = pg_record_file_name(keys[k], name, err);
            if (rc == PG_OK)
                rc = pg_st_index_read(fd, &store->dirs[i], name, ref_out, err);
            if (rc == PG_ERR_NOT_FOUND && k + 1 < n_keys)
                rc = PG_OK; /* the next spelling */
            else if (rc == PG_OK)
                break;
        }
    }
    pg_ref_free(ref);
    if (rc == PG_ERR_NOT_FOUND)
        return pg_fail(err, PG_ERR_NOT_FOUND, "no imageRef recorded for \"%.200s\"", image);
    return rc;
}

/* ------------------------------------------------ long-lived hosts' caches */

/* Absences remembered (~10 per distinct image decided; about 100 bytes each,
 * 3 MiB of table at most, touched as used); the table starts over when full. */
#define LOOKUP_CACHE_ENTRIES 131072

/* Every subdirectory a decision reads, of every record directory, kept open (those
 * a decision kept already stay); the absence cache watches exactly these. */
static void keep_lookup_fds(pg_store *s)
{
    for (size_t i = 0; i < s->n_dirs; i++)
        for (size_t k = 0; k < PG_LC_SUBS; k++) {
            atomic_int *kept = &s->kept[i * PG_STORE_SUBS + k];
            int fd = -1;
            if (atomic_load(kept) >= 0)
                continue;
            if (k == PG_LC_PULLED && s->dirs[i].pulled_fd >= 0)
                fd = dup(s->dirs[i].pulled_fd);
            else if (pg_st_open_subdir(&s->dirs[i], pg_lc_sub_name((pg_lc_sub)k), &fd, NULL) != PG_OK)
                fd = -1;
            atomic_store(kept, fd);
        }
}

/*
 * The absence cache (lookup_cache.h) over the kept descriptors. NULL when
 * inotify cannot be used (limits): the store then probes as without it,
 * which is only slower.
 */
static struct pg_lookup_cache *lookups_new(const pg_store *s, size_t max_absences)
{
    pg_autofree const char **paths = calloc(s->n_dirs + 1, sizeof *paths);
    pg_autofree int *dir_fds = calloc(s->n_dirs + 1, sizeof *dir_fds);
    pg_autofree int *sub_fds = calloc((s->n_dirs + 1) * PG_LC_SUBS, sizeof *sub_fds);
    if (!paths || !dir_fds || !sub_fds)
        return NULL;
    for (size_t i = 0; i < s->n_dirs; i++) {
        paths[i] = s->dirs[i].path;
        dir_fds[i] = s->dirs[i].fd;
        for (size_t k = 0; k < PG_LC_SUBS; k++)
            sub_fds[i * PG_LC_SUBS + k] = atomic_load(&s->kept[i * PG_STORE_SUBS + k]);
    }
    return pg_lookup_cache_new(s->n_dirs, paths, dir_fds, sub_fds,
                               max_absences ? max_absences : LOOKUP_CACHE_ENTRIES, NULL);
}

static int enable_caches(pg_store *s, size_t max_entries, size_t max_bytes, size_t max_absences,
                         unsigned settle_ms, pg_error *err)
{
    if (!s)
        return pg_fail(err, PG_ERR_INVALID, "no store");
    if (s->cache)
        return pg_fail(err, PG_ERR_INVALID, "the record cache is already enabled");
    pg_error local = {0};
    /* A record and its credential times are two entries: twice the records asked for. */
    size_t entries = max_entries <= SIZE_MAX / 2 ? 2 * max_entries : max_entries;
    s->cache = pg_record_cache_new(entries, max_bytes, settle_ms, &local);
    if (!s->cache)
        return pg_fail(err, local.code ? local.code : PG_ERR_INVALID, "%s", local.message);
    keep_lookup_fds(s);
    s->lookups = lookups_new(s, max_absences);
    return PG_OK;
}

int pg_store_enable_cache_settle(pg_store *s, size_t max_entries, size_t max_bytes,
                                 unsigned settle_ms, pg_error *err)
{
    return enable_caches(s, max_entries, max_bytes, 0, settle_ms, err);
}

int pg_store_enable_caches(pg_store *s, size_t max_entries, size_t max_bytes, size_t max_absences,
                           pg_error *err)
{
    return enable_caches(s, max_entries, max_bytes, max_absences, PG_RECORD_CACHE_SETTLE_MS, err);
}

PG_API int pg_store_enable_cache(pg_store *store, size_t max_entries, size_t max_bytes,
                                 pg_error *err)
{
    return enable_caches(store, max_entries, max_bytes, 0, PG_RECORD_CACHE_SETTLE_MS, err);
}

/* The cache's key of a subdirectory of the writable directory (caller frees). */
char *pg_st_cache_key(const record_dir *d, const char *sub)
{
    char *key = NULL;
    return asprintf(&key, "%s/%s", d->path, sub) < 0 ? NULL : key;
}

void pg_st_cache_forget(const pg_store *s, const char *file)
{
    const char *subs[] = {SUB_PULLED, SUB_CREDTIMES};
    for (size_t k = 0; s && s->cache && k < 2; k++) {
        pg_autofree char *key = pg_st_cache_key(&s->dirs[0], subs[k]);
        if (key)
            pg_record_cache_forget(s->cache, key, file);
    }
}

/* Tests: under the lock, rebuilds the credential index of image_ref's record (the
 * writable directory's) from the record and its credential times files. */
int pg_store_credidx_build(const pg_store *s, const char *image_ref, pg_error *err)
{
    file_name file;
    int rc = pg_st_require_writable(s, err);
    if (rc == PG_OK)
        rc = pg_record_file_name(image_ref, file, err);
    int lock_fd = -1;
    pg_autoclose int fd = -1;
    if (rc == PG_OK)
        rc = pg_st_lock_store(&s->dirs[0], &lock_fd, err);
    pg_autorecord pg_record *rec = NULL;
    pg_autojson json_t *times = NULL;
    if (rc == PG_OK)
        rc = get_from_dir(&s->dirs[0], file, &rec, err);
    if (rc == PG_OK)
        rc = pg_st_open_subdir(&s->dirs[0], SUB_CREDTIMES, &fd, err);
    if (rc == PG_OK) {
        rc = pg_st_credtimes_read(fd, &s->dirs[0], file, image_ref, &times, err);
        rc = rc == PG_ERR_NOT_FOUND ? PG_OK : rc; /* an unusable times file: no index */
    }
    if (rc == PG_OK)
        rc = pg_st_credidx_write_locked(&s->dirs[0], rec, times, file, err);
    pg_st_unlock_store(lock_fd);
    return rc;
}
