/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-doctor: the hook in the runtime. containerd: every runtime handler's
 * base_runtime_spec runs pullgate-hook and its pod_annotations let exactly the
 * credentials annotation through (containerd matches them with Go's path.Match:
 * fnmatch with FNM_PATHNAME). CRI-O: the effective hooks.d entry (later
 * directories mask earlier ones) runs it for every container. Then the hook,
 * pullgate-cri and this check must name one configuration file.
 */
#include "doctor.h"
#include "cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_IMPORTS 32
#define HOOK_NAME "pullgate-hook"
#define DEFAULT_CRIO_HOOKS_DIR "/usr/share/containers/oci/hooks.d"

static void copy(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src ? src : ""); }

static json_t *load_toml(const char *path, pg_error *err)
{
    pg_autofree char *text = NULL;
    size_t len = 0;
    json_t *j = NULL;
    /* A read error names the file already; a parse error does not. */
    if (pgd_read_file(path, &text, &len, err) == PG_OK && !(j = pgd_toml_to_json(text, len, err)))
        pg_error_prefix(err, "%s", path);
    return j;
}

static json_t *load_json(const char *path, pg_error *err)
{
    pg_autofree char *text = NULL;
    size_t len = 0;
    json_t *j = NULL;
    if (pgd_read_file(path, &text, &len, err) == PG_OK)
        j = pg_json_parse(text, len, path, err);
    return j;
}

/* Values of src override dst's, tables merged key by key (containerd's imports). */
static void merge_into(json_t *dst, json_t *src)
{
    const char *key;
    json_t *value;
    json_object_foreach(src, key, value)
    {
        json_t *mine = json_object_get(dst, key);
        if (json_is_object(mine) && json_is_object(value))
            merge_into(mine, value);
        else
            json_object_set(dst, key, value);
    }
}

/* ---------------------------------------------------------- the hook entry */

/* The hook's argv as runc runs it: args[0] is the program name, as in execv. */
static char **hook_argv(const json_t *hook)
{
    const json_t *args = json_object_get(hook, "args");
    size_t n = json_array_size(args);
    char **argv = calloc(n + 2, sizeof *argv);
    if (!argv)
        return NULL;
    for (size_t i = 0; i < (n ? n : 1); i++) {
        const char *a = n ? json_string_value(json_array_get(args, i)) : HOOK_NAME;
        if (!(argv[i] = strdup(a ? a : ""))) {
            pg_strv_free(argv);
            return NULL;
        }
    }
    return argv;
}

static int binaries_ok(const char *path, pg_error *why)
{
    char local[4200];
    const char *slash = strrchr(path, '/');
    snprintf(local, sizeof local, "%.*s/pullgate-hook-local", (int)(slash - path), path);
    const char *files[] = {path, local};
    for (size_t i = 0; i < 2; i++) {
        int rc = pgd_root_owned_safe(files[i], why);
        if (rc != PG_OK)
            return rc;
        if (access(files[i], X_OK) != 0)
            return pg_fail(why, PG_ERR_UNSAFE, "%s is not executable", files[i]);
    }
    return PG_OK;
}

static void note_hook(pgd_node *n, const json_t *hook)
{
    char **argv = hook_argv(hook);
    const char *config = argv ? pgd_flag(argv, "config") : NULL;
    const char *daemon = argv ? pgd_flag(argv, "daemon-socket") : NULL;
    copy(n->hook_config, sizeof n->hook_config, config ? config : PG_DEFAULT_CONFIG_PATH);
    copy(n->hook_daemon, sizeof n->hook_daemon, daemon ? daemon : PG_DEFAULT_HOOK_SOCKET);
    n->hook_found = true;
    pg_strv_free(argv);
}

/* The first pullgate-hook in an OCI spec's hooks of a creation stage, or NULL. */
static const json_t *hook_in_spec(const json_t *spec, const char **stage)
{
    static const char *const stages[] = {"createRuntime", "prestart", "createContainer", NULL};
    for (const char *const *s = stages; *s; s++) {
        size_t i;
        json_t *h;
        json_array_foreach(json_object_get(json_object_get(spec, "hooks"), *s), i, h)
        {
            if (pgd_is_our_hook(h)) {
                *stage = *s;
                return h;
            }
        }
    }
    return NULL;
}

/* ------------------------------------------------- fixes through `wire` */

/* Appends " WORD" (shell-quoted when it must be) to cmd; false when it does not fit. */
static bool add_word(char *cmd, size_t n, const char *word)
{
    char q[PGD_COMMAND_MAX];
    size_t used = strlen(cmd);
    if (!pgd_sh_word(word, q, sizeof q))
        return false;
    int w = snprintf(cmd + used, n - used, "%s%s", used ? " " : "", q);
    return w >= 0 && (size_t)w < n - used;
}

static bool add_option(char *cmd, size_t n, const char *option, const char *value)
{
    return add_word(cmd, n, option) && add_word(cmd, n, value);
}

/*
 * `pullgatectl wire` as the command that repairs what a check found, then the restart the
 * runtime needs to read it: the files doctor read (containerd's configuration, cd_config;
 * NULL for CRI-O: its drop-in directory and the hooks.d directory it reads last), this
 * configuration for the hook (named when it is not the default, or when pullgate-cri names
 * one: wire would otherwise give the hook pullgate-cri's), the hook binary and the socket
 * pullgate-cri serves. wire changes only what is missing, keeps a backup and refuses what it
 * cannot edit, saying why.
 */
static void wire_command(const pgd_node *n, pgd_result *r, const char *cd_config,
                         const char *crio_hooks_dir)
{
    const pgd_options *o = n->opt;
    char cmd[PGD_COMMAND_MAX] = "";
    bool ok = add_word(cmd, sizeof cmd, "pullgatectl");
    if (strcmp(o->config_path, PG_DEFAULT_CONFIG_PATH) != 0 ||
        (n->cri_argv && pgd_flag(n->cri_argv, "config")))
        ok = ok && add_option(cmd, sizeof cmd, "--config", o->config_path);
    ok = ok && add_word(cmd, sizeof cmd, "wire");
    if (cd_config) {
        ok = ok && add_option(cmd, sizeof cmd, "--containerd-config", cd_config);
    } else {
        ok = ok && add_option(cmd, sizeof cmd, "--runtime", "cri-o");
        if (strcmp(o->crio_config_dir, PGD_CRIO_CONFIG_DIR) != 0)
            ok = ok && add_option(cmd, sizeof cmd, "--crio-config-dir", o->crio_config_dir);
        if (crio_hooks_dir && strcmp(crio_hooks_dir, PGD_ADMIN_HOOKS_DIR) != 0)
            ok = ok && add_option(cmd, sizeof cmd, "--hooks-dir", crio_hooks_dir);
    }
    if (strcmp(o->hook_path, PG_HOOK_INSTALL_DIR "/" HOOK_NAME) != 0)
        ok = ok && add_option(cmd, sizeof cmd, "--hook-path", o->hook_path);
    if (strcmp(n->hook_socket, "none") != 0 &&
        !pgd_same_endpoint(n->hook_socket, PG_DEFAULT_HOOK_SOCKET))
        ok = ok && add_option(cmd, sizeof cmd, "--hook-socket", n->hook_socket);
    if (ok)
        pgd_command(r, "%s && systemctl restart %s", cmd, cd_config ? "containerd" : "crio");
}

/* ---------------------------------------------------------- containerd */

typedef struct handlers {
    json_t *runtimes; /* borrowed from the configuration */
    const char *plugin;
} handlers;

static int containerd_handlers(json_t *cfg, handlers *h, pg_error *err)
{
    json_t *version = json_object_get(cfg, "version");
    long v = json_is_integer(version) ? (long)json_integer_value(version) : 1;
    static const char *const v2[] = {"plugins", "io.containerd.grpc.v1.cri", "containerd", NULL};
    static const char *const v3[] = {"plugins", "io.containerd.cri.v1.runtime", "containerd", NULL};
    if (v != 2 && v != 3)
        return pg_fail(err, PG_ERR_INVALID,
                       "configuration version %ld: only version 2 (containerd 1.6/1.7) and 3 "
                       "(2.x) are checked",
                       v);
    h->plugin = v == 2 ? "io.containerd.grpc.v1.cri" : "io.containerd.cri.v1.runtime";
    h->runtimes = json_object_get(pgd_json_path(cfg, v == 2 ? v2 : v3), "runtimes");
    return PG_OK;
}

static json_t *load_containerd(const char *path, pg_error *err)
{
    pg_autojson json_t *cfg = load_toml(path, err);
    if (!cfg)
        return NULL;
    size_t i;
    json_t *pattern;
    int count = 0;
    json_array_foreach(json_object_get(cfg, "imports"), i, pattern)
    {
        const char *p = json_string_value(pattern);
        glob_t g;
        if (!p || glob(p, 0, NULL, &g) != 0)
            continue;
        for (size_t k = 0; k < g.gl_pathc && count < MAX_IMPORTS; k++, count++) {
            pg_autojson json_t *part = load_toml(g.gl_pathv[k], err);
            if (!part) {
                globfree(&g);
                return NULL;
            }
            merge_into(cfg, part);
        }
        globfree(&g);
    }
    return pg_steal(&cfg);
}

static bool pattern_passes(const json_t *patterns, const char *key)
{
    size_t i;
    json_t *p;
    json_array_foreach(patterns, i, p)
    {
        const char *s = json_string_value(p);
        if (s && fnmatch(s, key, FNM_PATHNAME) == 0)
            return true;
    }
    return false;
}

/* One handler's base spec: its hook, the binaries, the file's own safety. *wireable when
 * what is missing is what `wire` puts in (a base spec, the hook in it). */
static int check_handler_spec(pgd_node *n, const char *name, const json_t *handler, pg_error *why,
                              bool *wireable)
{
    const char *spec_path = json_string_value(json_object_get(handler, "base_runtime_spec"));
    *wireable = false;
    if (!spec_path || !*spec_path) {
        *wireable = true;
        return pg_fail(why, PG_ERR_CONFIG,
                       "runtime handler %s has no base_runtime_spec: its containers start "
                       "without the hook",
                       name);
    }
    int rc = pgd_root_owned_safe(spec_path, why);
    pg_autojson json_t *spec = rc == PG_OK ? load_json(spec_path, why) : NULL;
    const char *stage = NULL;
    const json_t *hook = spec ? hook_in_spec(spec, &stage) : NULL;
    if (rc == PG_OK && !spec) {
        rc = PG_ERR_INVALID;
    } else if (rc == PG_OK && !hook) {
        *wireable = true;
        rc = pg_fail(why, PG_ERR_CONFIG,
                     "%s (handler %s) runs no %s in createRuntime, prestart or createContainer",
                     spec_path, name, HOOK_NAME);
    } else if (rc == PG_OK) {
        rc = binaries_ok(json_string_value(json_object_get(hook, "path")), why);
    }
    if (rc == PG_OK)
        note_hook(n, hook);
    return rc;
}

static void check_containerd(pgd_node *n, pgd_result *r, pgd_result *ann)
{
    char running[4096];
    pg_error unnamed = {0};
    size_t candidates = 0;
    const char *path = pgd_containerd_config(n->opt->containerd_config, n->opt->proc_root,
                                             running, sizeof running, &candidates, &unnamed);
    if (!path) {
        pgd_fail(r,
                 "name containerd's configuration: pullgatectl doctor --containerd-config FILE "
                 "(the file containerd runs with, its --config)",
                 "containerd: %s", unnamed.message);
        pgd_fail(ann, "see hook", "cannot be checked: containerd's configuration is not known");
        return;
    }
    const char *key = n->cfg ? pg_config_annotation(n->cfg) : "pullgate.dev/credentials";
    char fix[PGD_TEXT_MAX];
    snprintf(fix, sizeof fix,
             "give every runtime handler in %s a base_runtime_spec whose createRuntime hook is "
             "pullgate-hook (pullgatectl wire does; by hand: " PG_DOC_DIR
             "/examples/containerd/README.md), then restart containerd",
             path);
    pg_error err = {0};
    pg_autojson json_t *cfg = load_containerd(path, &err);
    handlers h = {0};
    if (!cfg || containerd_handlers(cfg, &h, &err) != PG_OK) {
        bool missing = !cfg && err.code == PG_ERR_NOT_FOUND;
        pgd_fail(r,
                 missing ? "name containerd's configuration: pullgatectl doctor "
                           "--containerd-config FILE (the file containerd runs with, its "
                           "--config)"
                         : "fix containerd's configuration (it must be root's, not writable by "
                           "others, TOML of version 2 or 3)",
                 "containerd: %s", err.message);
        pgd_fail(ann, "see hook", "cannot be checked: containerd's configuration cannot be read");
        return;
    }
    snprintf(n->cd_config, sizeof n->cd_config, "%s", path);
    if (json_object_size(h.runtimes) == 0) {
        pgd_fail(r, fix,
                 "%s defines no runtime handler: containerd's default runc handler "
                 "runs no hook",
                 path);
        wire_command(n, r, path, NULL);
        pgd_fail(ann, "see hook: each handler it adds needs pod_annotations too",
                 "no runtime handler to let %s through", key);
        return;
    }
    pg_error why = {0};
    const char *name, *missing_ann = NULL, *broad = NULL;
    json_t *handler;
    bool specs_ok = true, wireable = false;
    json_object_foreach(h.runtimes, name, handler)
    {
        if (specs_ok)
            specs_ok = check_handler_spec(n, name, handler, &why, &wireable) == PG_OK;
        json_t *patterns = json_object_get(handler, "pod_annotations");
        if (!missing_ann && !pattern_passes(patterns, key))
            missing_ann = name;
        /* runtime "auto" trusts CRI-O's keys: a pattern passing them lets a pod forge them */
        if (!broad && (!n->cfg || pg_config_runtime(n->cfg) != PG_RUNTIME_CONTAINERD) &&
            (pattern_passes(patterns, "io.container.manager") ||
             pattern_passes(patterns, "io.kubernetes.cri-o.ImageRef")))
            broad = name;
    }
    if (specs_ok) {
        pgd_pass(r, "every runtime handler of %s (%zu) runs %s from its base_runtime_spec", path,
                 json_object_size(h.runtimes), HOOK_NAME);
    } else {
        pgd_fail(r, fix, "%s", why.message);
        if (wireable)
            wire_command(n, r, path, NULL);
    }
    char afix[PGD_TEXT_MAX];
    snprintf(afix, sizeof afix,
             "pod_annotations = [\"%s\"] in every runtime handler of %s (exactly that key; "
             "pullgatectl wire adds it), then restart containerd",
             key, path);
    if (missing_ann) {
        pgd_fail(ann, afix,
                 "runtime handler %s does not pass %s: every pod looks like one without "
                 "credentials (presented 0 secrets)",
                 missing_ann, key);
        wire_command(n, ann, path, NULL);
    } else if (broad) {
        pgd_fail(ann,
                 "list exactly the credentials annotation, or set \"runtime\": \"containerd\" in "
                 "the configuration",
                 "runtime handler %s's pod_annotations pass CRI-O's keys "
                 "(io.container.manager, io.kubernetes.cri-o.*): a pod could forge its identity",
                 broad);
    } else {
        pgd_pass(ann, "every runtime handler passes %s and no identity key", key);
    }
}

/* ---------------------------------------------------------------- CRI-O */

/* Sets files[NAME] = "dir/NAME" for each NAME in dir ending in suffix, in name order (a
 * NAME set already keeps its place and takes the later directory's path). */
static void add_dir_files(json_t *files, const char *dir, const char *suffix)
{
    struct dirent **list = NULL;
    int count = dir ? scandir(dir, &list, NULL, alphasort) : -1;
    size_t sl = strlen(suffix);
    for (int k = 0; k < count; k++) {
        size_t len = strlen(list[k]->d_name);
        if (len > sl && strcmp(list[k]->d_name + len - sl, suffix) == 0) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dir, list[k]->d_name);
            json_object_set_new(files, list[k]->d_name, json_string(path));
        }
        free(list[k]);
    }
    free(list);
}

/* hooks_dir from crio.conf, then the .conf files of crio.conf.d in name order (the last one set wins). */
static json_t *crio_hooks_dirs(const pgd_options *o, pg_error *err)
{
    /* "": no file name is empty */
    pg_autojson json_t *files = json_pack("{s:s}", "", o->crio_config);
    if (!files) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    add_dir_files(files, o->crio_config_dir, ".conf");
    pg_autojson json_t *dirs = NULL;
    json_t *path;
    const char *name;
    json_object_foreach(files, name, path)
    {
        pg_error e = {0};
        pg_autojson json_t *cfg = load_toml(json_string_value(path), &e);
        if (!cfg && e.code != PG_ERR_NOT_FOUND) {
            pg_fail(err, e.code, "%s", e.message);
            return NULL;
        }
        json_t *hd =
            json_object_get(json_object_get(json_object_get(cfg, "crio"), "runtime"), "hooks_dir");
        if (json_is_array(hd)) {
            json_decref(dirs);
            dirs = json_incref(hd);
        }
    }
    /* none set: CRI-O's own default */
    return dirs ? pg_steal(&dirs) : json_pack("[s]", DEFAULT_CRIO_HOOKS_DIR);
}

/* The entry of the effective hooks.d set (file name -> path; later directories mask). */
static void check_crio(pgd_node *n, pgd_result *r, pgd_result *ann)
{
    const pgd_options *o = n->opt;
    pg_error err = {0};
    pg_autojson json_t *dirs = NULL;
    if (o->crio_hooks_dirs) {
        dirs = json_array();
        for (const char **d = o->crio_hooks_dirs; *d; d++)
            json_array_append_new(dirs, json_string(*d));
    } else {
        dirs = crio_hooks_dirs(o, &err);
    }
    if (!dirs) {
        pgd_fail(r, "fix CRI-O's configuration", "CRI-O: %s", err.message);
        pgd_pass(ann, "CRI-O passes every pod annotation to the hook");
        return;
    }
    pg_autojson json_t *effective = json_object(); /* file name -> path */
    size_t i;
    json_t *d;
    char why[1024] = "";
    bool broken = false;
    json_array_foreach(dirs, i, d)
        add_dir_files(effective, json_string_value(d), ".json");
    const char *file;
    json_t *pathj;
    const char *found = NULL;
    json_object_foreach(effective, file, pathj)
    {
        const char *path = json_string_value(pathj);
        pg_autojson json_t *entry = load_json(path, &err);
        if (!entry) {
            /* CRI-O refuses a directory holding one invalid file: nothing in it runs */
            snprintf(why, sizeof why, "%s (CRI-O then loads no hook of that directory)",
                     err.message);
            broken = true;
            break;
        }
        json_t *hook = json_object_get(entry, "hook");
        if (!found && pgd_is_our_hook(hook)) {
            found = path;
            json_t *stages = json_object_get(entry, "stages");
            bool creation = pgd_json_array_has(stages, "createRuntime") ||
                            pgd_json_array_has(stages, "prestart") ||
                            pgd_json_array_has(stages, "createContainer");
            if (!json_is_true(json_object_get(json_object_get(entry, "when"), "always")))
                snprintf(why, sizeof why,
                         "%s: \"when\" is not {\"always\": true}: containers its "
                         "conditions miss start unchecked",
                         path);
            else if (!creation)
                snprintf(why, sizeof why,
                         "%s: no createRuntime, prestart or createContainer "
                         "stage",
                         path);
            else if (binaries_ok(json_string_value(json_object_get(hook, "path")), &err) == PG_OK)
                note_hook(n, hook);
            else
                snprintf(why, sizeof why, "%s", err.message);
            broken = !n->hook_found;
        }
    }
    bool wireable = false;
    if (!broken && !found) {
        snprintf(why, sizeof why, "no hooks.d entry in CRI-O's hooks_dir runs %s", HOOK_NAME);
        broken = wireable = true;
    }
    char dirs_text[512] = "";
    json_array_foreach(dirs, i, d)
    {
        size_t used = strlen(dirs_text);
        snprintf(dirs_text + used, sizeof dirs_text - used, "%s%s", i ? ", " : "",
                 json_string_value(d) ? json_string_value(d) : "?");
    }
    if (broken) {
        pgd_fail(r,
                 "put the package's hooks.d entry (/usr/share/containers/oci/hooks.d/"
                 "pullgate.json) in a directory of CRI-O's hooks_dir (pullgatectl wire --runtime "
                 "cri-o writes the drop-in that lists it, and an entry of its own when the hook "
                 "needs other arguments; by hand: " PG_DOC_DIR
                 "/examples/crio.conf.d/10-pullgate.conf), then restart CRI-O",
                 "%s (hooks_dir: %s)", why, dirs_text);
        /* wire's drop-in lists the packaged directory and the one it writes its own entry
         * to: the directory CRI-O reads last, unless that is the packaged one */
        const char *last = json_string_value(json_array_get(dirs, json_array_size(dirs) - 1));
        if (wireable)
            wire_command(n, r, NULL,
                         last && strcmp(last, DEFAULT_CRIO_HOOKS_DIR) != 0 ? last
                                                                           : PGD_ADMIN_HOOKS_DIR);
    } else
        pgd_pass(r, "%s runs %s for every container (hooks_dir: %s)", found, HOOK_NAME, dirs_text);
    pgd_pass(ann, "CRI-O passes every pod annotation to the hook");
}

/* ----------------------------------------------------------------- both */

static void pick_runtime(pgd_node *n)
{
    const char *o = n->opt->runtime;
    const char *rt = NULL;
    if (o && strcmp(o, "auto") != 0)
        rt = o;
    else if (n->cfg && pg_config_runtime(n->cfg) == PG_RUNTIME_CRIO)
        rt = "cri-o";
    else if (n->cfg && pg_config_runtime(n->cfg) == PG_RUNTIME_CONTAINERD)
        rt = "containerd";
    else if (strstr(n->cri_runtime, "crio"))
        rt = "cri-o";
    else
        rt = "containerd";
    copy(n->runtime, sizeof n->runtime, rt);
}

void pgd_check_hook_wiring(pgd_node *n, pgd_result *r, pgd_result *annotations)
{
    pick_runtime(n);
    if (strcmp(n->runtime, "cri-o") == 0)
        check_crio(n, r, annotations);
    else
        check_containerd(n, r, annotations);
}

/*
 * The drop-in that makes pullgate-cri read mine: its current command line with --config
 * replaced (or added), after the empty ExecStart= that clears the unit's own (systemd
 * refuses a second ExecStart= in a Type=simple unit otherwise). Only when every argument
 * is a plain word: nothing a shell, systemd's specifiers or quoting could change.
 */
/* Appends " word" (the first without the blank) to buf; false when it is not a plain word
 * or does not fit. */
static bool append_word(char *buf, size_t n, size_t *used, const char *word)
{
    if (!pgd_plain_word(word))
        return false;
    int len = snprintf(buf + *used, n - *used, "%s%s", *used ? " " : "", word);
    if (len < 0 || (size_t)len >= n - *used)
        return false;
    *used += (size_t)len;
    return true;
}

static void dropin_command(pgd_node *n, pgd_result *r)
{
    char exec[1500] = "", dir[4200], q[4300], exe[4096];
    size_t used = 0;
    const char *argv0 = n->cri_argv ? n->cri_argv[0] : NULL;
    if (argv0 && argv0[0] != '/') { /* the unit needs the absolute path: /proc/PID/exe */
        char link[4200];
        snprintf(link, sizeof link, "%s/%d/exe", n->opt->proc_root, n->cri_pid);
        ssize_t l = readlink(link, exe, sizeof exe - 1);
        exe[l > 0 ? l : 0] = '\0';
        argv0 = l > 0 ? exe : NULL;
    }
    bool ok = append_word(exec, sizeof exec, &used, argv0 ? argv0 : PG_BINDIR "/pullgate-cri");
    for (size_t i = 1; ok && n->cri_argv && n->cri_argv[i]; i++) {
        const char *a = n->cri_argv[i];
        if (strcmp(a, "--config") == 0 || strcmp(a, "-config") == 0)
            i += n->cri_argv[i + 1] != NULL; /* and its value: replaced below */
        else if (strncmp(a, "--config=", 9) != 0 && strncmp(a, "-config=", 8) != 0)
            ok = append_word(exec, sizeof exec, &used, a);
    }
    ok = ok && append_word(exec, sizeof exec, &used, "--config") &&
         append_word(exec, sizeof exec, &used, n->opt->config_path);
    snprintf(dir, sizeof dir, "%s/pullgate-cri.service.d", n->opt->systemd_dir);
    if (!ok || !pgd_sh_word(dir, q, sizeof q))
        return;
    pgd_command(r,
                "mkdir -p %s && printf '[Service]\\nExecStart=\\nExecStart=%%s\\n' '%s' "
                ">%s/50-pullgate-config.conf && systemctl daemon-reload && systemctl restart "
                "pullgate-cri",
                q, exec, q);
}

/* The hook's arguments rewritten by `wire`: containerd's base specs only (CRI-O's entry of
 * the administrators' directory is theirs: wire refuses to overwrite one it did not write). */
static void hook_args_command(const pgd_node *n, pgd_result *r)
{
    if (strcmp(n->runtime, "containerd") == 0 && n->cd_config[0])
        wire_command(n, r, n->cd_config, NULL);
}

void pgd_check_same_config(pgd_node *n, pgd_result *r)
{
    const char *mine = n->opt->config_path;
    bool cri_reads_mine = pgd_cri_reads(n, mine);
    if (!n->hook_found) {
        pgd_fail(r, "wire the hook first (see hook)", "the runtime runs no %s to compare",
                 HOOK_NAME);
    } else if (n->hook_config[0] != '/') {
        pgd_fail(r,
                 "give the hook's --config an absolute path in the runtime's configuration (the "
                 "hook's args; pullgatectl wire gives it this one), then restart containerd or "
                 "CRI-O",
                 "the hook's --config %s is relative: pullgate-cri never decides for it, and "
                 "the local hook reads it from the runtime's working directory",
                 n->hook_config);
        hook_args_command(n, r);
    } else if (!pgd_same_file(n->hook_config, mine)) {
        pgd_fail(r,
                 "name one file on both sides: the hook's args in the runtime's configuration "
                 "(\"--config\", \"FILE\"; pullgatectl wire gives it this one), then restart "
                 "containerd or CRI-O",
                 "the hook reads %s, this check %s", n->hook_config, mine);
        hook_args_command(n, r);
    } else if (!cri_reads_mine) {
        pgd_fail(r,
                 "give pullgate-cri the hook's --config: a drop-in replacing its ExecStart "
                 "(an empty ExecStart= line first), then restart it",
                 "pullgate-cri reads %s, the hook %s: it answers the hook \"not mine\"%s%s",
                 n->cri_config, n->hook_config, n->cri_config_seen ? "" : " (",
                 n->cri_config_seen ? "" : n->cri_config_why);
        if (!n->cri_config_seen)
            strncat(r->detail, ")", sizeof r->detail - strlen(r->detail) - 1);
        dropin_command(n, r);
    } else if (!pgd_same_endpoint(n->hook_daemon, n->hook_socket)) {
        pgd_fail(r,
                 "give the hook's --daemon-socket and pullgate-cri's --hook-socket one path "
                 "(pullgatectl wire gives the hook pullgate-cri's)",
                 "the hook asks %s, pullgate-cri serves %s", n->hook_daemon, n->hook_socket);
        hook_args_command(n, r);
    } else {
        pgd_pass(r, "the hook and pullgate-cri read %s; the hook asks %s", mine, n->hook_daemon);
    }
}
