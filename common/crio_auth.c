/* SPDX-License-Identifier: Apache-2.0 */
#include "crio_auth.h"

#include "crio_toml.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int cri_crio_auth_dir_of_text(const char *text, size_t len, char **value, char *why,
                              size_t why_size)
{
    return cri_toml_string_at(text, len, "crio", "image", "namespaced_auth_dir", value, why,
                              why_size);
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

/* One file: 1/0 as cri_crio_auth_dir_of_text; -1 with why (unreadable, untrusted, not TOML). */
static int setting_of_file(const char *path, bool optional, char **value, char *why,
                           size_t why_size)
{
    char *text = NULL;
    size_t len = 0;
    pg_error err = {0};
    int rc = pg_read_file_at(AT_FDCWD, path, CRI_CRIO_CONFIG_MAX_BYTES,
                             PG_READ_CHECK_OWNER | PG_READ_CHECK_MODE, &text, &len, &err);
    if (rc == PG_ERR_NOT_FOUND && optional)
        return 0;
    if (rc != PG_OK) {
        snprintf(why, why_size, "%.300s", err.message);
        return -1;
    }
    char msg[300] = "";
    int got = cri_crio_auth_dir_of_text(text, len, value, msg, sizeof msg);
    free(text);
    if (got < 0)
        snprintf(why, why_size, "%.200s: %s", path, msg);
    return got;
}

static int not_dot(const struct dirent *d)
{
    return strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0;
}

/* The walk of CRI-O's drop-in directory: what was found so far (1/0/-1 as above). */
typedef struct walk {
    char **value;
    char *why;
    size_t why_size;
    int found, files;
} walk;

#define WALK_MAX_DEPTH 8
#define WALK_MAX_FILES 512

static void walk_fail(walk *w, const char *what, const char *path)
{
    snprintf(w->why, w->why_size, "%s %.200s", what, path);
    w->found = -1;
}

/* One file of the walk: its setting, if any, replaces the one before (the last wins). */
static void walk_file(walk *w, const char *path)
{
    char *v = NULL;
    if (++w->files > WALK_MAX_FILES) {
        walk_fail(w, "more than 512 files, the last", path);
        return;
    }
    int got = setting_of_file(path, false, &v, w->why, w->why_size);
    if (got < 0)
        w->found = -1;
    if (got > 0) {
        free(*w->value);
        *w->value = v;
        w->found = 1;
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
            walk_fail(w, "cannot list", dir);
        return;
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        if (w->found < 0)
            ;
        else if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && depth + 1 >= WALK_MAX_DEPTH)
            walk_fail(w, "directories nested too deep below", dir);
        else if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            walk_dir(w, path, depth + 1);
        else
            walk_file(w, path);
        free(list[i]);
    }
    free(list);
}

/* The last setting of crio.conf, then of the drop-ins below crio.conf.d: 1/0/-1. */
static int last_setting(const char *config, const char *config_dir, char **value, char *why,
                        size_t why_size)
{
    int found = setting_of_file(config, true, value, why, why_size);
    if (found < 0)
        return -1;
    walk w = {.value = value, .why = why, .why_size = why_size, .found = found};
    if (config_dir)
        walk_dir(&w, config_dir, 0);
    if (w.found < 0) {
        free(*value);
        *value = NULL;
    }
    return w.found;
}

void cri_crio_auth_read(const char *config, const char *config_dir, const char *runtime_version,
                        cri_crio_auth *out)
{
    memset(out, 0, sizeof *out);
    char *value = NULL;
    char why[400] = "";
    int found = last_setting(config, config_dir, &value, why, sizeof why);
    if (found < 0) {
        out->namespaced = out->unreadable = true;
        snprintf(out->why, sizeof out->why,
                 "CRI-O's configuration cannot be read (%s): taken as namespaced auth on", why);
    } else if (found > 0 && !*value) {
        snprintf(out->why, sizeof out->why, "namespaced_auth_dir = \"\" in CRI-O's configuration");
    } else if (found > 0) {
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
