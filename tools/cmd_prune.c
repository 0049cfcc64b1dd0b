/* SPDX-License-Identifier: Apache-2.0 */
/* pullgatectl prune: deletes pulled records of images no longer in use. */
#include "pgctl.h"
#include "internal.h"
#include "cleanup.h"
#include "store_lookup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CMD "prune"

enum { OPT_IN_USE = 256, OPT_BEFORE, OPT_ALLOW_EMPTY };

static const struct option options[] = {{"in-use", required_argument, NULL, OPT_IN_USE},
                                        {"before", required_argument, NULL, OPT_BEFORE},
                                        {"allow-empty", no_argument, NULL, OPT_ALLOW_EMPTY},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};

typedef struct prune_options {
    const char *in_use, *before;
    int allow_empty;
} prune_options;

static const char help[] =
    "Usage: " PGCTL_PROG " prune --in-use FILE [--before TIME] [--allow-empty]\n"
    "\nDeletes from the writable record directory every pulled record whose imageRef\n"
    "is not listed in FILE (one imageRef per line; '-' is standard input) and, with\n"
    "--before, that was last updated before TIME (RFC 3339, or a duration such as\n"
    "\"720h\" meaning older than that). Records of pinned images are kept. The\n"
    "image-index entries, credential times and name-index lines of deleted records\n"
    "go too. Prints the number of records deleted. An empty FILE is refused unless\n"
    "--allow-empty is given (deleting a record makes its image count as preloaded).";

static int set_option(void *ctx, int c, char *arg)
{
    prune_options *o = ctx;
    switch (c) {
    case OPT_IN_USE: o->in_use = arg; break;
    case OPT_BEFORE: o->before = arg; break;
    case OPT_ALLOW_EMPTY: o->allow_empty = 1; break;
    default: return PGCTL_NOT_MINE;
    }
    return PGCTL_OK;
}

/* TIME: RFC 3339, or a Go duration meaning "now minus that". */
static int parse_before(const char *text, time_t *out)
{
    pg_error err;
    pg_error_clear(&err);
    if (pg_parse_rfc3339(text, out, &err) == PG_OK)
        return PGCTL_OK;
    int64_t seconds;
    if (pg_parse_duration(text, &seconds, &err) != PG_OK)
        return pgctl_usage_error(CMD, "--before: \"%s\" is neither an RFC 3339 time nor a "
                                      "duration", text);
    time_t now = time(NULL);
    if (now == (time_t)-1 || seconds >= (int64_t)now) {
        *out = 1; /* before the epoch's first second: nothing is that old */
        return PGCTL_OK;
    }
    *out = now - (time_t)seconds;
    return PGCTL_OK;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Splits text (in place) into its non-empty, trimmed lines. NULL-terminated;
 * the strings point into text. Caller frees the vector. */
static char **split_lines(char *text, size_t len, size_t *count)
{
    size_t max_lines = 1;
    for (size_t i = 0; i < len; i++)
        max_lines += text[i] == '\n';
    char **lines = calloc(max_lines + 1, sizeof *lines);
    if (!lines)
        return NULL;
    size_t n = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *ref = trim(line);
        if (*ref)
            lines[n++] = ref;
    }
    *count = n;
    return lines;
}

static int read_in_use(const prune_options *o, char **text, char ***refs)
{
    pg_error err;
    pg_error_clear(&err);
    size_t len = 0, count = 0;
    if (pgctl_read_input(o->in_use, PGCTL_MAX_IN_USE_BYTES, text, &len, &err) != PG_OK)
        return pgctl_fail(&err, "cannot read the in-use list");
    if (memchr(*text, '\0', len))
        return pgctl_usage_error(CMD, "%s: contains a NUL byte", o->in_use);
    *refs = split_lines(*text, len, &count);
    if (!*refs) {
        pgctl_error("out of memory");
        return PGCTL_INTERNAL;
    }
    if (count == 0 && !o->allow_empty)
        return pgctl_usage_error(CMD, "%s lists no image in use; refusing to prune every "
                                      "record (use --allow-empty)", o->in_use);
    return PGCTL_OK;
}

typedef struct prune_args {
    const char *const *in_use;
    time_t before;
} prune_args;

static int prune(pg_store *store, void *ctx)
{
    const prune_args *a = ctx;
    pg_error err = {0};
    unsigned pruned = 0;
    if (pg_store_prune(store, a->in_use, a->before, &pruned, &err) != PG_OK)
        return pgctl_fail(&err, "prune");
    if (printf("%u\n", pruned) < 0)
        return PGCTL_INTERNAL;
    /* Best effort (a stale cache is rebuilt by the next decision that needs
     * it): the read-only directories' names caches made current here, so the
     * hook finds them so instead of building one in the container-start path. */
    (void)pg_store_refresh_name_caches(store, &err);
    return PGCTL_OK;
}

static int run_prune(const pg_config *cfg, int argc, char **argv)
{
    prune_options o = {0};
    int status = pgctl_parse_options(argc, argv, options, set_option, &o, help);
    if (status != PGCTL_OK)
        return status;
    if (!o.in_use)
        return pgctl_usage_error(CMD, "--in-use FILE is required");
    time_t before = 0;
    if (o.before && (status = parse_before(o.before, &before)) != PGCTL_OK)
        return status;
    pg_autofree char *text = NULL;
    pg_autofree char **refs = NULL; /* pointers into text */
    status = read_in_use(&o, &text, &refs);
    if (status != PGCTL_OK)
        return status;
    return pgctl_with_store(cfg, prune, &(prune_args){(const char *const *)refs, before});
}

const pgctl_command pgctl_cmd_prune = {
    CMD, "delete the records of images no longer in use", options, 1, run_prune, NULL};
