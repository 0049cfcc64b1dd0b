/* SPDX-License-Identifier: Apache-2.0 */
#include "crio_auth.h"

#include "cleanup.h"
#include "pg_toml.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int cri_crio_auth_dir_of_text(const char *text, size_t len, char **value, pg_error *err)
{
    return pg_toml_string_at(text, len, "crio", "image", "namespaced_auth_dir", value, err);
}

bool cri_version_at_least(const char *version, int major, int minor)
{
    if (!version)
        return false;
    if (*version == 'v')
        version++;
    int ma = 0, mi = 0;
    char dot = 0;
    if (sscanf(version, "%d%c%d", &ma, &dot, &mi) != 3 || dot != '.' || ma < 0 || mi < 0)
        return false;
    return ma > major || (ma == major && mi >= minor);
}

/* One file's setting, as cri_crio_auth_dir_of_text; unreadable or untrusted fails too. */
static int setting_of_file(const char *path, bool optional, char **value, pg_error *err)
{
    pg_autofree char *text = NULL;
    size_t len = 0;
    *value = NULL;
    int rc = pg_read_file_at(AT_FDCWD, path, CRI_CRIO_CONFIG_MAX_BYTES,
                             PG_READ_CHECK_OWNER | PG_READ_CHECK_MODE, &text, &len, err);
    if (rc == PG_ERR_NOT_FOUND && optional)
        return PG_OK;
    if (rc != PG_OK)
        return rc;
    rc = cri_crio_auth_dir_of_text(text, len, value, err);
    if (rc != PG_OK)
        pg_error_prefix(err, "%.200s", path);
    return rc;
}

static int not_dot(const struct dirent *d)
{
    return strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0;
}

/* The walk of CRI-O's drop-in directory: the last setting found so far, or the failure. */
typedef struct walk {
    char **value;
    pg_error *err;
    int rc, files;
} walk;

#define WALK_MAX_DEPTH 8
#define WALK_MAX_FILES 512

/* One file of the walk: its setting, if any, replaces the one before (the last wins). */
static void walk_file(walk *w, const char *path)
{
    char *v = NULL;
    if (++w->files > WALK_MAX_FILES)
        w->rc = pg_fail(w->err, PG_ERR_LIMIT, "more than 512 files, the last %.200s", path);
    else if ((w->rc = setting_of_file(path, false, &v, w->err)) == PG_OK && v) {
        free(*w->value);
        *w->value = v;
    }
}

/*
 * CRI-O's drop-ins as it reads them (pkg/config UpdateFromPath: filepath.Walk): every file
 * below dir, whatever its name, in lexical order, depth first. An absent dir is none; one that
 * cannot be listed fails (it may hold a setting).
 */
static void walk_dir(walk *w, const char *dir, int depth)
{
    struct dirent **list = NULL;
    int n = scandir(dir, &list, not_dot, alphasort);
    if (n < 0) {
        if (errno != ENOENT || depth > 0)
            w->rc = pg_fail(w->err, PG_ERR_IO, "cannot list %.200s", dir);
        return;
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        bool is_dir = lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
        if (w->rc != PG_OK)
            ;
        else if (is_dir && depth + 1 >= WALK_MAX_DEPTH)
            w->rc = pg_fail(w->err, PG_ERR_LIMIT, "directories nested too deep below %.200s", dir);
        else if (is_dir)
            walk_dir(w, path, depth + 1);
        else
            walk_file(w, path);
        free(list[i]);
    }
    free(list);
}

/* The last setting of crio.conf, then of the drop-ins below crio.conf.d (NULL: none). */
static int last_setting(const char *config, const char *config_dir, char **value, pg_error *err)
{
    walk w = {.value = value, .err = err, .rc = setting_of_file(config, true, value, err)};
    if (w.rc == PG_OK && config_dir)
        walk_dir(&w, config_dir, 0);
    if (w.rc != PG_OK) {
        free(*value);
        *value = NULL;
    }
    return w.rc;
}

void cri_crio_auth_read(const char *config, const char *config_dir, const char *runtime_version,
                        cri_crio_auth *out)
{
    memset(out, 0, sizeof *out);
    char *value = NULL;
    pg_error err = {0};
    if (last_setting(config, config_dir, &value, &err) != PG_OK) {
        out->namespaced = out->unreadable = true;
        snprintf(out->why, sizeof out->why,
                 "CRI-O's configuration cannot be read (%.400s): taken as namespaced auth on",
                 err.message);
    } else if (value && !*value) {
        snprintf(out->why, sizeof out->why, "namespaced_auth_dir = \"\" in CRI-O's configuration");
    } else if (value) {
        out->namespaced = true;
        snprintf(out->dir, sizeof out->dir, "%s", value);
        snprintf(out->why, sizeof out->why, "namespaced_auth_dir = \"%.200s\"", value);
    } else if (runtime_version && *runtime_version &&
               !cri_version_at_least(runtime_version, 1, 35) &&
               cri_version_at_least(runtime_version, 0, 0)) {
        snprintf(out->why, sizeof out->why,
                 "CRI-O %.40s predates namespaced_auth_dir (1.35) and the files do not set it",
                 runtime_version);
    } else {
        out->namespaced = true;
        snprintf(out->dir, sizeof out->dir, "%s", CRI_CRIO_DEFAULT_AUTH_DIR);
        snprintf(out->why, sizeof out->why, "namespaced_auth_dir unset: CRI-O %.40s's default %s",
                 runtime_version && *runtime_version ? runtime_version : "(version unknown)",
                 CRI_CRIO_DEFAULT_AUTH_DIR);
    }
    free(value);
}
