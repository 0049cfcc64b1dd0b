/* SPDX-License-Identifier: Apache-2.0 */
/* The hook's inputs: the OCI state on stdin and the bundle's config.json. */
#include "hook.h"

#include "cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Waits until fd is readable (*ready) or the deadline passes (!*ready). */
static int wait_readable(int fd, int64_t deadline, bool *ready, pg_error *err)
{
    *ready = false;
    for (;;) {
        int64_t left = deadline - pg_monotonic_ms();
        if (left <= 0)
            return PG_OK;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return pg_fail_errno(err, errno, "poll stdin");
        if (r == 0)
            return PG_OK;
        if (p.revents & POLLNVAL)
            return pg_fail(err, PG_ERR_IO, "stdin is not open");
        /* POLLHUP/POLLERR: a read() tells EOF from error without blocking. */
        *ready = true;
        return PG_OK;
    }
}

static int grow(char **buf, size_t *cap, size_t max, pg_error *err)
{
    size_t ncap = *cap * 2 > max + 1 ? max + 1 : *cap * 2;
    char *nb = realloc(*buf, ncap + 1);
    if (!nb)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    *buf = nb;
    *cap = ncap;
    return PG_OK;
}

/*
 * A runtime that never closes our stdin must not make the container start
 * wait for the hooks.d timeout (and then SIGKILL), so reading has its own
 * deadline; reading one byte past max detects oversize input without
 * consuming an unbounded stream.
 */
int hook_read_fd_partial(int fd, size_t max, int deadline_ms, int spent_ms, char **buf,
                         size_t *len, bool *timed_out, pg_error *err)
{
    int64_t deadline = pg_monotonic_ms() + deadline_ms - (spent_ms > 0 ? spent_ms : 0);
    size_t cap = 4096, n = 0;
    *buf = NULL;
    *len = 0;
    *timed_out = false;
    char *b = malloc(cap + 1);
    if (!b)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    int rc = PG_OK;
    while (rc == PG_OK) {
        if (n == cap && (rc = grow(&b, &cap, max, err)) != PG_OK)
            break;
        bool ready;
        if ((rc = wait_readable(fd, deadline, &ready, err)) != PG_OK)
            break;
        if (!ready) {
            *timed_out = true;
            rc = pg_fail(err, PG_ERR_LIMIT, "stdin not closed within %d ms", deadline_ms);
            break;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r < 0) {
            rc = pg_fail_errno(err, errno, "read stdin");
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max)
            rc = pg_fail(err, PG_ERR_LIMIT, "input larger than %zu bytes", max);
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return rc;
}

/* A root member that must be a non-empty string (the scanner refuses a NUL in any string). */
static int take_string(const hook_doc *doc, const char *key, char **out, pg_error *err)
{
    const char *v;
    hook_json_kind kind = hook_doc_member(doc, key, &v);
    if (kind == HOOK_JSON_ABSENT)
        return pg_fail(err, PG_ERR_INVALID, "OCI state: no \"%s\"", key);
    if (kind != HOOK_JSON_STRING || !v[0])
        return pg_fail(err, PG_ERR_INVALID, "OCI state: \"%s\" is not a non-empty string", key);
    *out = strdup(v);
    return *out ? PG_OK : pg_fail(err, PG_ERR_NOMEM, "out of memory");
}

static int state_from_doc(const hook_doc *doc, hook_state *state, pg_error *err)
{
    if (!hook_doc_root_is_object(doc))
        return pg_fail(err, PG_ERR_INVALID, "OCI state: not a JSON object");
    int rc = take_string(doc, "id", &state->id, err);
    if (rc == PG_OK)
        rc = take_string(doc, "bundle", &state->bundle, err);
    if (rc == PG_OK && state->bundle[0] != '/')
        rc = pg_fail(err, PG_ERR_INVALID, "OCI state: bundle is not an absolute path");
    return rc;
}

int hook_parse_state(hook_doc *doc, const char *buf, size_t len, hook_state *state, pg_error *err)
{
    memset(state, 0, sizeof *state);
    if (len > HOOK_MAX_STATE_BYTES)
        return pg_fail(err, PG_ERR_LIMIT, "OCI state: larger than %u bytes", HOOK_MAX_STATE_BYTES);
    hook_doc *own = doc ? NULL : hook_doc_new();
    if (!doc && !(doc = own))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    int rc = hook_doc_scan(doc, buf, len, NULL, "OCI state", err);
    if (rc == PG_OK)
        rc = state_from_doc(doc, state, err);
    hook_doc_free(own);
    if (rc != PG_OK)
        hook_state_clear(state);
    return rc;
}

int hook_read_state_spent(hook_doc *doc, int fd, int spent_ms, hook_state *state, pg_error *err)
{
    pg_autofree char *buf = NULL;
    size_t len = 0;
    bool timed_out;
    int rc = hook_read_fd_partial(fd, HOOK_MAX_STATE_BYTES, HOOK_STDIN_DEADLINE_MS, spent_ms,
                                  &buf, &len, &timed_out, err);
    if (rc != PG_OK) {
        pg_error_prefix(err, "reading the OCI state on stdin");
        return rc;
    }
    return hook_parse_state(doc, buf, len, state, err);
}

void hook_state_clear(hook_state *state)
{
    free(state->id);
    free(state->bundle);
    state->id = state->bundle = NULL;
}

/* The runtime spec makes annotations map[string]string; anything else is forged input. */
static int check_annotations(const hook_doc *doc, pg_error *err)
{
    for (size_t i = 0; i < hook_doc_map_size(doc); i++) {
        const char *key, *value;
        if (hook_doc_map_entry(doc, i, &key, &value) == 0 && !value)
            return pg_fail(err, PG_ERR_INVALID,
                           "bundle config.json: annotation \"%.64s\" is not a string", key);
    }
    return PG_OK;
}

int hook_parse_bundle_config(hook_doc *doc, const char *buf, size_t len, pg_error *err)
{
    int rc = hook_doc_scan(doc, buf, len, "annotations", "bundle config.json", err);
    if (rc != PG_OK)
        return rc;
    if (!hook_doc_root_is_object(doc))
        return pg_fail(err, PG_ERR_INVALID, "bundle config.json: not a JSON object");
    hook_json_kind kind = hook_doc_member(doc, "annotations", NULL);
    /* No annotations: an empty map, decided later as "not Kubernetes". */
    if (kind != HOOK_JSON_ABSENT && kind != HOOK_JSON_OBJECT)
        return pg_fail(err, PG_ERR_INVALID, "bundle config.json: annotations is not an object");
    return check_annotations(doc, err);
}

/*
 * Annotations come from config.json, not from the state: runc rebuilds the
 * state's annotations from labels (drops a key named "bundle", splits keys
 * containing '='). config.json is opened relative to the bundle directory fd
 * with O_NOFOLLOW and must be a regular file (hook_doc_read_at also opens with
 * O_NONBLOCK, so a FIFO planted there cannot block us).
 */
int hook_open_bundle(const char *bundle, int *fd, pg_error *err)
{
    *fd = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY);
    if (*fd < 0)
        return pg_fail_errno(err, errno, "open bundle directory");
    return PG_OK;
}

int hook_read_bundle_annotations_at(int bundle_fd, hook_doc *doc, pg_error *err)
{
    const char *buf = NULL;
    size_t len = 0;
    int rc = hook_doc_read_at(doc, bundle_fd, "config.json", HOOK_MAX_BUNDLE_CONFIG_BYTES, &buf,
                              &len, err);
    if (rc != PG_OK) {
        pg_error_prefix(err, "bundle");
        return rc;
    }
    return hook_parse_bundle_config(doc, buf, len, err);
}

int hook_read_bundle_annotations(const char *bundle, hook_doc *doc, pg_error *err)
{
    pg_autoclose int dirfd = -1;
    int rc = hook_open_bundle(bundle, &dirfd, err);
    if (rc != PG_OK)
        return rc;
    return hook_read_bundle_annotations_at(dirfd, doc, err);
}
