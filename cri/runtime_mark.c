/* SPDX-License-Identifier: Apache-2.0 */
#include "runtime_mark.h"

#include "cleanup.h"
#include "store_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cri_runtime_mark_write(const char *state_dir, const char *endpoint, pg_error *err)
{
    if (!endpoint || !*endpoint || strchr(endpoint, '\n'))
        return pg_fail(err, PG_ERR_INVALID, "no usable runtime endpoint to record");
    pg_autoclose int dirfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0)
        return pg_fail_errno(err, errno, "open %s", state_dir);
    size_t n = strlen(endpoint);
    pg_autofree char *text = malloc(n + 2);
    if (!text)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    memcpy(text, endpoint, n);
    text[n] = '\n';
    return pg_st_write_file_atomic(dirfd, state_dir, ".", CRI_RUNTIME_MARK, text, n + 1, err);
}

/*
 * The endpoint recorded in state_dir (*endpoint: caller frees). PG_ERR_NOT_FOUND when no
 * daemon recorded one; any other error when the file cannot be trusted (a symlink, not
 * root's, writable by others, too large, holding a NUL or no endpoint).
 */
static int runtime_mark_read(const char *state_dir, char **endpoint, pg_error *err)
{
    *endpoint = NULL;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", state_dir, CRI_RUNTIME_MARK) >= sizeof path)
        return pg_fail(err, PG_ERR_INVALID, "state directory path too long");
    pg_autofree char *text = NULL;
    size_t len = 0;
    int rc =
        pg_read_file_at(AT_FDCWD, path, CRI_RUNTIME_MARK_MAX, PG_READ_STRICT, &text, &len, err);
    if (rc != PG_OK)
        return rc;
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        text[--len] = '\0';
    if (len == 0 || memchr(text, '\0', len) || memchr(text, '\n', len))
        return pg_fail(err, PG_ERR_INVALID, "%s: not one runtime endpoint", path);
    *endpoint = pg_steal(&text);
    return PG_OK;
}

static const char *endpoint_path(const char *e)
{
    return strncmp(e, "unix://", 7) == 0 ? e + 7 : e;
}

/* Whether two endpoints name one runtime ("unix://" is optional before an absolute path). */
static bool same_endpoint(const char *a, const char *b)
{
    return a && b && strcmp(endpoint_path(a), endpoint_path(b)) == 0;
}

int cri_runtime_mark_check(const char *state_dir, const char *endpoint, bool explicit_endpoint,
                           pg_error *err)
{
    pg_autofree char *recorded = NULL;
    pg_error local = {0}, *e = err ? err : &local; /* NOT_FOUND decides, message or not */
    int rc = runtime_mark_read(state_dir, &recorded, e);
    if (rc == PG_ERR_NOT_FOUND && explicit_endpoint) {
        pg_error_clear(e);
        return PG_OK; /* no daemon recorded one: the operator named the runtime */
    }
    if (rc == PG_ERR_NOT_FOUND)
        return pg_fail(err, rc,
                       "no runtime recorded in %.120s/%s: pullgate-cri records the runtime it "
                       "serves when it starts, and the records are pruned only against that one "
                       "(start pullgate-cri, or name the runtime with --runtime-endpoint)",
                       state_dir, CRI_RUNTIME_MARK);
    if (rc != PG_OK) {
        pg_error_prefix(err, "the recorded runtime cannot be read");
        return rc;
    }
    if (!same_endpoint(recorded, endpoint))
        return pg_fail(err, PG_ERR_CONFIG,
                       "the records were made against %.120s, the runtime pullgate-cri serves "
                       "(recorded in %.120s/%s), and this prune would list %.120s: every record of "
                       "an image only the first holds would be deleted; give pullgate-cri and the "
                       "prune one endpoint (criRuntimeEndpoint in the configuration file, not a "
                       "drop-in)",
                       recorded, state_dir, CRI_RUNTIME_MARK, endpoint);
    return PG_OK;
}
