/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgatectl config-rollback --to VERSION [--dry-run], also installed alone as
 * /usr/libexec/pullgate/pullgate-config-rollback for the packages' scripts.
 *
 * Every release refuses a configuration key it does not know: the hook then
 * denies every container and pullgate-cri exits. Before a downgrade the package
 * runs this (Debian: the newer package's prerm `upgrade OLD-VERSION`; RPM: the
 * newer package's %preun, docs/lifecycle.md), which moves every key release
 * VERSION does not read (the rollback registry, config.c's `since`, and any key
 * this binary does not know either) out of the file, after a backup of the file
 * as it was, and says so loudly. Nothing else in the file changes meaning.
 */
#include "cleanup.h"
#include "internal.h"
#include "pgctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CMD "config-rollback"

static const struct option options[] = {{"to", required_argument, NULL, 't'},
                                        {"dry-run", no_argument, NULL, 'n'},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};

static void usage(void)
{
    puts("Usage: " PGCTL_PROG " [--config FILE] " CMD " --to VERSION [--dry-run]\n"
         "\nBefore rolling pullgate back to release VERSION: moves every key of the\n"
         "configuration file that VERSION does not read out of it (a backup of the file\n"
         "as it was is kept beside it as FILE.before-rollback-to-VERSION), so that the\n"
         "older hook and pullgate-cri start instead of refusing the file. The packages\n"
         "run it by themselves on a downgrade. --dry-run only says what it would move.\n"
         "Exit 0 when the file is ready for VERSION (nothing to move, or moved).");
}

/* Keys of the file that release `to` does not read; a JSON array of names. */
static int keys_to_move(json_t *doc, const char *to, json_t *out, pg_error *err)
{
    const char *key;
    json_t *value;
    json_object_foreach(doc, key, value)
    {
        /* A key this binary does not know is newer than this release: `to` reads it only
         * when `to` is newer still (and then cannot be judged here: it stays). */
        const char *since = pg_config_key_since(key);
        int cmp;
        if (pg_release_compare(since ? since : PG_VERSION_STRING, to, &cmp, err) != PG_OK)
            return PG_ERR_INVALID;
        if (!since)
            cmp = cmp >= 0;
        if (cmp > 0 && json_array_append_new(out, json_string(key)) != 0)
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    }
    return PG_OK;
}

/* FILE.before-rollback-to-VERSION, or with .N appended when that exists already. */
static int backup_path(const char *path, const char *to, char *out, size_t n, pg_error *err)
{
    for (int i = 0; i < 100; i++) {
        int w = i ? snprintf(out, n, "%s.before-rollback-to-%s.%d", path, to, i)
                  : snprintf(out, n, "%s.before-rollback-to-%s", path, to);
        if (w < 0 || (size_t)w >= n)
            return pg_fail(err, PG_ERR_LIMIT, "%s: path too long", path);
        struct stat st;
        if (lstat(out, &st) != 0 && errno == ENOENT)
            return PG_OK;
    }
    return pg_fail(err, PG_ERR_LIMIT, "%s: 100 rollback backups already", path);
}

static void warn_moved(const char *path, const char *to, const json_t *moved, const char *backup)
{
    fprintf(stderr, "pullgate: WARNING: release %s does not read these keys of %s:", to, path);
    size_t i;
    json_t *k;
    json_array_foreach(moved, i, k) fprintf(stderr, "%s %s", i ? "," : "", json_string_value(k));
    fputc('\n', stderr);
    if (!backup) {
        fputs("pullgate: WARNING: (dry run) they would be moved out of the file\n", stderr);
        return;
    }
    fprintf(stderr,
            "pullgate: WARNING: moved them out of %s so that %s starts (it refuses keys it does "
            "not know); the file as it was: %s\n"
            "pullgate: WARNING: %s runs as that release always did, without them; after upgrading "
            "again, put them back from the backup\n",
            path, to, backup, to);
}

/* Reads and parses the file as the hook does (root's, not writable by others, bounded). */
static json_t *read_config(const char *path, char **text, size_t *len, pg_error *err)
{
    if (pg_read_file_at(AT_FDCWD, path, PG_MAX_CONFIG_BYTES,
                        PG_READ_CHECK_MODE | PG_READ_CHECK_OWNER, text, len, err) != PG_OK)
        return NULL;
    pg_autojson json_t *doc = pg_json_parse(*text, *len, path, err);
    if (doc && !json_is_object(doc)) {
        pg_fail(err, PG_ERR_CONFIG, "%s: not a JSON object", path);
        return NULL;
    }
    return pg_steal(&doc);
}

static int roll_back(const char *path, const char *to, int dry_run)
{
    pg_error err;
    pg_error_clear(&err);
    pg_autofree char *text = NULL;
    size_t len = 0;
    pg_autojson json_t *doc = read_config(path, &text, &len, &err);
    pg_autojson json_t *moved = json_array();
    if (!doc || !moved || keys_to_move(doc, to, moved, &err) != PG_OK)
        return pgctl_fail(&err, CMD);
    if (json_array_size(moved) == 0) {
        printf("%s: no key that release %s refuses: nothing to move\n", path, to);
        return PGCTL_OK;
    }
    if (dry_run) {
        warn_moved(path, to, moved, NULL);
        return PGCTL_OK;
    }
    size_t i;
    json_t *k;
    json_array_foreach(moved, i, k) json_object_del(doc, json_string_value(k));
    char backup[4300];
    struct stat st;
    pg_autofree char *dumped = json_dumps(doc, JSON_INDENT(2));
    pg_autofree char *out_text = NULL;
    if (dumped && asprintf(&out_text, "%s\n", dumped) < 0)
        out_text = NULL;
    if (!out_text) {
        pgctl_error(CMD ": out of memory");
        return PGCTL_INTERNAL;
    }
    if (stat(path, &st) != 0) {
        pgctl_error(CMD ": %s: %s", path, strerror(errno));
        return PGCTL_INTERNAL;
    }
    if (backup_path(path, to, backup, sizeof backup, &err) != PG_OK ||
        pg_write_file_replacing(backup, text, len, st.st_mode, st.st_uid, st.st_gid, &err) !=
            PG_OK ||
        pg_write_file_replacing(path, out_text, strlen(out_text), st.st_mode, st.st_uid, st.st_gid,
                                &err) != PG_OK)
        return pgctl_fail(&err, CMD);
    warn_moved(path, to, moved, backup);
    return PGCTL_OK;
}

int pgctl_config_rollback(const char *config_path, int argc, char **argv)
{
    pgctl_getopt_reset();
    const char *to = NULL;
    int dry_run = 0, c;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (c) {
        case 't': to = optarg; break;
        case 'n': dry_run = 1; break;
        case 'h': usage(); return PGCTL_OK;
        default: return pgctl_option_error(CMD, c, argv);
        }
    }
    int status = pgctl_no_operands(CMD, argc, argv);
    if (status != PGCTL_OK)
        return status;
    int cmp;
    pg_error err;
    pg_error_clear(&err);
    if (!to)
        return pgctl_usage_error(CMD, "--to VERSION is required");
    if (pg_release_compare(to, PG_VERSION_STRING, &cmp, &err) != PG_OK)
        return pgctl_usage_error(CMD, "--to: %s", err.message);
    /* It names the backup file: a version's characters only, no path. */
    if (strspn(to, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.~+-") !=
            strlen(to) ||
        strlen(to) > 64)
        return pgctl_usage_error(CMD, "--to: \"%.64s\" is not a package version", to);
    return roll_back(config_path ? config_path : PG_DEFAULT_CONFIG_PATH, to, dry_run);
}

const pgctl_command pgctl_cmd_config_rollback = {
    CMD, "before a downgrade: move the keys an older release refuses out of the configuration",
    options, 0, NULL, pgctl_config_rollback};
