/* SPDX-License-Identifier: Apache-2.0 */
/* The hook's inputs: the OCI state on stdin and the bundle's config.json. */
#include "hook.h"

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
int hook_read_fd_partial(int fd, size_t max, int deadline_ms, char **buf, size_t *len,
                         bool *timed_out, pg_error *err)
{
    return hook_read_fd_spent(fd, max, deadline_ms, 0, buf, len, timed_out, err);
}

int hook_read_fd_spent(int fd, size_t max, int deadline_ms, int spent_ms, char **buf, size_t *len,
                       bool *timed_out, pg_error *err)
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

static int take_string(const json_t *obj, const char *key, char **out, pg_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return pg_fail(err, PG_ERR_INVALID, "OCI state: no \"%s\"", key);
    if (!json_is_string(v) || json_string_length(v) == 0)
        return pg_fail(err, PG_ERR_INVALID, "OCI state: \"%s\" is not a non-empty string", key);
    /* An embedded NUL would make the C string mean something else than the JSON. */
    if (strlen(json_string_value(v)) != json_string_length(v))
        return pg_fail(err, PG_ERR_INVALID, "OCI state: \"%s\" contains a NUL byte", key);
    *out = strdup(json_string_value(v));
    return *out ? PG_OK : pg_fail(err, PG_ERR_NOMEM, "out of memory");
}

static int state_from_json(const json_t *root, hook_state *state, pg_error *err)
{
    if (!json_is_object(root))
        return pg_fail(err, PG_ERR_INVALID, "OCI state: not a JSON object");
    int rc = take_string(root, "id", &state->id, err);
    if (rc == PG_OK)
        rc = take_string(root, "bundle", &state->bundle, err);
    if (rc == PG_OK && state->bundle[0] != '/')
        rc = pg_fail(err, PG_ERR_INVALID, "OCI state: bundle is not an absolute path");
    return rc;
}

int hook_parse_state(const char *buf, size_t len, hook_state *state, pg_error *err)
{
    if (len > HOOK_MAX_STATE_BYTES)
        return pg_fail(err, PG_ERR_LIMIT, "OCI state: larger than %u bytes", HOOK_MAX_STATE_BYTES);
    json_t *root = pg_json_parse(buf, len, "OCI state", err);
    if (!root)
        return PG_ERR_INVALID;
    int rc = state_from_json(root, state, err);
    json_decref(root);
    if (rc != PG_OK)
        hook_state_clear(state);
    return rc;
}

int hook_read_state(int fd, hook_state *state, pg_error *err)
{
    return hook_read_state_spent(fd, 0, state, err);
}

int hook_read_state_spent(int fd, int spent_ms, hook_state *state, pg_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    bool timed_out;
    int rc = hook_read_fd_spent(fd, HOOK_MAX_STATE_BYTES, HOOK_STDIN_DEADLINE_MS, spent_ms, &buf,
                                &len, &timed_out, err);
    if (rc != PG_OK) {
        free(buf);
        pg_error_prefix(err, "reading the OCI state on stdin");
        return rc;
    }
    rc = hook_parse_state(buf, len, state, err);
    free(buf);
    return rc;
}

void hook_state_clear(hook_state *state)
{
    free(state->id);
    free(state->bundle);
    state->id = state->bundle = NULL;
}

static int check_annotations(const json_t *ann, pg_error *err)
{
    if (!json_is_object(ann))
        return pg_fail(err, PG_ERR_INVALID, "bundle config.json: annotations is not an object");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)ann, key, v)
    {
        /* The runtime spec makes annotations map[string]string; anything else is forged input. */
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
            return pg_fail(err, PG_ERR_INVALID,
                           "bundle config.json: annotation \"%.64s\" is not a string", key);
    }
    return PG_OK;
}

static int annotations_from_config(const char *buf, size_t len, json_t **annotations,
                                   pg_error *err)
{
    json_t *root = pg_json_parse(buf, len, "bundle config.json", err);
    if (!root)
        return PG_ERR_INVALID;
    int rc = PG_OK;
    json_t *ann = json_object_get(root, "annotations");
    if (!json_is_object(root))
        rc = pg_fail(err, PG_ERR_INVALID, "bundle config.json: not a JSON object");
    else if (!ann)
        ann = json_object(); /* no annotations: decided later as "not Kubernetes" */
    else if ((rc = check_annotations(ann, err)) == PG_OK)
        json_incref(ann);
    if (rc == PG_OK && !ann)
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc == PG_OK)
        *annotations = ann;
    json_decref(root);
    return rc;
}

/*
 * Annotations come from config.json, not from the state: runc rebuilds the
 * state's annotations from labels (drops a key named "bundle", splits keys
 * containing '='). config.json is opened relative to the bundle directory fd
 * with O_NOFOLLOW and must be a regular file (pg_read_file_at also opens with
 * O_NONBLOCK, so a FIFO planted there cannot block us).
 */
int hook_open_bundle(const char *bundle, int *fd, pg_error *err)
{
    *fd = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY);
    if (*fd < 0)
        return pg_fail_errno(err, errno, "open bundle directory");
    return PG_OK;
}

int hook_read_bundle_annotations_at(int bundle_fd, json_t **annotations, pg_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = pg_read_file_at(bundle_fd, "config.json", HOOK_MAX_BUNDLE_CONFIG_BYTES,
                             PG_READ_CHECK_OWNER, &buf, &len, err);
    if (rc != PG_OK) {
        pg_error_prefix(err, "bundle");
        return rc;
    }
    rc = annotations_from_config(buf, len, annotations, err);
    free(buf);
    return rc;
}

int hook_read_bundle_annotations(const char *bundle, json_t **annotations, pg_error *err)
{
    int dirfd;
    int rc = hook_open_bundle(bundle, &dirfd, err);
    if (rc != PG_OK)
        return rc;
    rc = hook_read_bundle_annotations_at(dirfd, annotations, err);
    close(dirfd);
    return rc;
}

const char *hook_annotation(const json_t *annotations, const char *key)
{
    return json_string_value(json_object_get(annotations, key));
}
