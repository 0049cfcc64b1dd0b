/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-doctor: the kubelet. Its endpoints must send image pulls through
 * pullgate-cri, and its own KEP-2535 check (feature gate
 * KubeletEnsureSecretPulledImages, alpha off in 1.33 and 1.34, beta on from 1.35;
 * imagePullCredentialsVerificationPolicy) says what it adds to pullgate's.
 * Flags win over the configuration file, as in the kubelet.
 */
#include "cleanup.h"
#include "doctor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_KUBELET_CONFIG "/var/lib/kubelet/config.yaml"
#define DEFAULT_ROOT_DIR "/var/lib/kubelet"
#define DEFAULT_RUNTIME_ENDPOINT "unix:///run/containerd/containerd.sock"
#define GATE "KubeletEnsureSecretPulledImages"
#define VERSION_TIMEOUT_MS 5000

typedef struct kubelet {
    char **argv; /* NULL: no kubelet process */
    int pid;
    json_t *config;         /* its configuration file, or NULL */
    bool config_is_json;    /* KubeletConfiguration in JSON: no line-wise edit for it */
    char config_path[4096]; /* as the kubelet names it, absolute */
    char config_error[512];
} kubelet;

static const char *config_string(const kubelet *k, const char *key)
{
    return json_string_value(json_object_get(k->config, key));
}

/*
 * The file the running kubelet reads: its --config resolved as the kubelet resolves it
 * (a relative path from its own working directory, through /proc/PID/cwd, never the
 * doctor's), and trusted only when it is the node's (root's, not writable by others, no
 * symlink). Without a kubelet, --kubelet-config or the default path.
 */
static int open_kubelet_config(pgd_node *n, kubelet *k, const char *path, pg_error *err)
{
    int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
    bool from_process = k->argv && !n->opt->kubelet_config;
    int fd = from_process ? pgd_proc_open(n->opt->proc_root, k->pid, path, flags, k->config_path,
                                          sizeof k->config_path, err)
                          : open(path, flags | O_CLOEXEC);
    if (fd >= 0)
        return fd;
    int e = errno; /* pgd_proc_open keeps the open's */
    if (e == ELOOP)
        pg_fail(err, PG_ERR_UNSAFE, "%s is a symbolic link: not read", k->config_path);
    else if (!from_process)
        pg_fail(err, e == ENOENT ? PG_ERR_NOT_FOUND : PG_ERR_UNSAFE, "%s: %s", path, strerror(e));
    return -1;
}

static void load_kubelet(pgd_node *n, kubelet *k)
{
    k->argv = pgd_find_process(n->opt->proc_root, "kubelet", &k->pid);
    const char *path = n->opt->kubelet_config ? n->opt->kubelet_config
                       : k->argv              ? pgd_flag(k->argv, "config")
                                              : DEFAULT_KUBELET_CONFIG;
    if (!path || !*path)
        return; /* a kubelet started without --config: flags and defaults only */
    snprintf(k->config_path, sizeof k->config_path, "%s", path);
    pg_autofree char *text = NULL;
    size_t len = 0;
    pg_error err = {0};
    pg_autoclose int fd = open_kubelet_config(n, k, path, &err);
    if (fd >= 0 && pgd_read_fd_trusted(fd, k->config_path, &text, &len, &err) == PG_OK) {
        k->config = pgd_yaml_to_json(text, len, &err);
        k->config_is_json = text[strspn(text, " \t\r\n")] == '{';
    }
    if (!k->config)
        snprintf(k->config_error, sizeof k->config_error, "%s", err.message);
}

/* --name flag, else the configuration's key, else def. */
static const char *setting(const kubelet *k, const char *flag, const char *key, const char *def)
{
    const char *v = k->argv && *flag ? pgd_flag(k->argv, flag) : NULL;
    if (!v && *key)
        v = config_string(k, key);
    return v && *v ? v : def;
}

/*
 * A command that points the kubelet's image service at pullgate-cri, and restarts it:
 * in its flags file when the flag overrides the configuration there (kubeadm's
 * kubeadm-flags.env), else in its YAML configuration file (the top-level key replaced).
 * Only the image service: the runtime service stays direct (docs/kubelet-setup.md).
 */
static void endpoint_command(pgd_node *n, const kubelet *k, bool from_flag, pgd_result *r)
{
    const char *ep = n->cri_listen;
    char file[4200];
    if (!pgd_plain_word(ep) || strchr(ep, '|'))
        return;
    if (from_flag) {
        pg_autofree char *text = NULL;
        size_t len = 0;
        bool there = pgd_read_file(n->opt->kubelet_flags, &text, &len, NULL) == PG_OK &&
                     strstr(text, "--image-service-endpoint=");
        if (there && pgd_sh_word(n->opt->kubelet_flags, file, sizeof file))
            pgd_command(r,
                        "sed -i 's|--image-service-endpoint=[^ \"]*|--image-service-endpoint=%s|' "
                        "%s && systemctl restart kubelet",
                        ep, file);
        return;
    }
    if (k->config && !k->config_is_json && pgd_sh_word(k->config_path, file, sizeof file))
        pgd_command(r,
                    "sed -i '/^imageServiceEndpoint:/d' %s && printf '\\nimageServiceEndpoint: "
                    "%s\\n' >>%s && systemctl restart kubelet",
                    file, ep, file);
}

static void check_endpoints(pgd_node *n, const kubelet *k, pgd_result *r)
{
    char fix[PGD_TEXT_MAX];
    snprintf(fix, sizeof fix,
             "set imageServiceEndpoint: %s in the kubelet's configuration%s%s (or its "
             "--image-service-endpoint flag, which wins), then restart the kubelet; the runtime "
             "service stays with the runtime",
             n->cri_listen, k->config_path[0] ? " " : "", k->config_path);
    if (!k->argv && !k->config) {
        pgd_warn(r,
                 "none until a kubelet runs on this node; then run doctor again (or name its "
                 "configuration: --kubelet-config FILE)",
                 "no kubelet runs on this node (yet) and its configuration cannot be read (%s)",
                 k->config_error[0] ? k->config_error : "none");
        return;
    }
    if (k->config_error[0]) {
        pgd_fail(r, "fix the kubelet's configuration file (root's, not writable by others)", "%s",
                 k->config_error);
        return;
    }
    const char *image_flag = k->argv ? pgd_flag(k->argv, "image-service-endpoint") : NULL;
    const char *runtime = setting(k, "container-runtime-endpoint", "containerRuntimeEndpoint",
                                  DEFAULT_RUNTIME_ENDPOINT);
    const char *image = setting(k, "image-service-endpoint", "imageServiceEndpoint", runtime);
    const char *who = k->argv ? "the kubelet" : "the kubelet's configuration (no kubelet runs)";
    if (!pgd_same_endpoint(image, n->cri_listen)) {
        pgd_fail(r, fix, "%s pulls through %s, not pullgate-cri (%s): no pull is recorded", who,
                 image, n->cri_listen);
        endpoint_command(n, k, image_flag && *image_flag, r);
    } else if (!k->argv) {
        pgd_warn(r, "none until the kubelet runs; then run doctor again",
                 "%s points its image service at pullgate-cri, but no kubelet runs (yet)", who);
    } else if (!pgd_same_endpoint(runtime, n->cri_listen)) {
        pgd_pass(r,
                 "images through pullgate-cri (%s); RuntimeService direct to %s (the "
                 "recommended ImageService-only setup)",
                 image, runtime);
    } else {
        pgd_pass(r, "runtime and image service endpoints are pullgate-cri (%s)", image);
    }
}

/* ---------------------------------------------------------- the version */

/* "Kubernetes v1.33.2" -> 1, 33; 0 on success. */
static int parse_version(const char *s, int *major, int *minor)
{
    const char *v = strstr(s, "v");
    while (v && !(v[1] >= '0' && v[1] <= '9'))
        v = strstr(v + 1, "v");
    return v && sscanf(v + 1, "%d.%d", major, minor) == 2 ? 0 : -1;
}

/*
 * The running kubelet's binary is run with --version only when root runs it
 * on the node's own filesystem (not in a container) and the file is root's
 * alone (owned by root, not writable by group or others): anything else would
 * run someone's program as root. The file is opened once and run through that
 * descriptor (fexecve), so the one checked is the one run. The process is
 * checked again after the open: had its pid been reused before it (by a
 * container's process), the check fails; reused after it, the descriptor is
 * still the kubelet's binary. Returns the descriptor (not close-on-exec: a
 * script's interpreter opens it as /dev/fd/N), or -1.
 */
static int trusted_binary(const pgd_node *n, const kubelet *k)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%d/exe", n->opt->proc_root, k->pid);
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd >= 0 && (!pgd_node_process(n->opt->proc_root, k->pid) || fstat(fd, &st) != 0 ||
                    !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) ||
                    !(st.st_mode & S_IXUSR))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* `kubelet --version` from exe_fd: stdin /dev/null, stdout bounded, killed after
 * VERSION_TIMEOUT_MS. */
static int run_version(int exe_fd, char *out, size_t n)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        return -1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || dup2(null, 0) < 0 || dup2(pipefd[1], 1) < 0 || dup2(null, 2) < 0)
            _exit(127);
        char *const argv[] = {(char *)"kubelet", (char *)"--version", NULL};
        char *const envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        fexecve(exe_fd, argv, envp);
        _exit(127);
    }
    close(pipefd[1]);
    size_t got = 0;
    int64_t deadline = pg_monotonic_ms() + VERSION_TIMEOUT_MS;
    for (;;) {
        int64_t left = deadline - pg_monotonic_ms();
        struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t r = read(pipefd[0], out + got, n - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got == n - 1)
            break;
    }
    out[got] = '\0';
    close(pipefd[0]);
    kill(pid, SIGKILL); /* our own child, by its pid; harmless when it has exited */
    int status;
    waitpid(pid, &status, 0);
    return got ? 0 : -1;
}

static int kubelet_version(const pgd_node *n, const kubelet *k, int *major, int *minor,
                           pg_error *why)
{
    if (n->opt->kubelet_version)
        return parse_version(n->opt->kubelet_version, major, minor) == 0
                   ? PG_OK
                   : pg_fail(why, PG_ERR_INVALID, "unusable version");
    if (!k->argv)
        return pg_fail(why, PG_ERR_NOT_FOUND, "no kubelet process runs");
    char out[256];
    pg_autoclose int exe_fd = trusted_binary(n, k);
    if (exe_fd < 0)
        return pg_fail(why, PG_ERR_UNSAFE,
                       "the kubelet's binary is not root's alone or it does not run as root: not "
                       "run");
    if (run_version(exe_fd, out, sizeof out) != 0 || parse_version(out, major, minor) != 0)
        return pg_fail(why, PG_ERR_INVALID, "`kubelet --version` said nothing usable");
    return PG_OK;
}

/* ------------------------------------------------------------- the gate */

/* The gate in a --feature-gates value ("A=true,B=false"): 1, 0, or -1 when not named. */
static int gate_in_flag(const char *flag)
{
    size_t glen = strlen(GATE);
    for (const char *p = flag; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && *p == ' ')
            p++, len--;
        if (len > glen && strncmp(p, GATE, glen) == 0 && p[glen] == '=')
            return strncmp(p + glen + 1, "true", len - glen - 1) == 0 && len - glen - 1 == 4;
        p = end ? end + 1 : NULL;
    }
    return -1;
}

static int gate_enabled(const kubelet *k, int minor, const char **source)
{
    int v = k->argv ? gate_in_flag(pgd_flag(k->argv, "feature-gates")) : -1;
    if (v >= 0) {
        *source = "--feature-gates";
        return v;
    }
    const char *s =
        json_string_value(json_object_get(json_object_get(k->config, "featureGates"), GATE));
    if (s) {
        *source = "featureGates";
        return strcmp(s, "true") == 0;
    }
    *source = minor >= 35 ? "default: beta since 1.35" : "default: alpha in 1.33 and 1.34";
    return minor >= 35;
}

static bool reads_kubelet_records(const pgd_node *n, const char *root_dir)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/image_manager", root_dir);
    const char *const *dirs = n->cfg ? pg_config_read_only_dirs(n->cfg) : NULL;
    for (size_t i = 0; dirs && dirs[i]; i++)
        if (pgd_same_file(dirs[i], dir) || strcmp(dirs[i], dir) == 0)
            return true;
    return false;
}

static void check_policy(pgd_node *n, const kubelet *k, pgd_result *r)
{
    int major = 0, minor = 0;
    pg_error why = {0};
    if (kubelet_version(n, k, &major, &minor, &why) != PG_OK) {
        if (!k->argv && !n->opt->kubelet_version)
            pgd_warn(r,
                     "none until a kubelet runs; or name its version: --kubelet-version "
                     "v1.X.Y",
                     "cannot tell which KEP-2535 check the kubelet makes: %s", why.message);
        else
            pgd_fail(r, "name it: pullgatectl doctor --kubelet-version v1.X.Y",
                     "cannot tell which KEP-2535 check the kubelet makes: %s", why.message);
        return;
    }
    if (major != 1 || minor < 33) {
        pgd_pass(r, "kubelet v%d.%d has no KEP-2535 check: pullgate's is the only one", major,
                 minor);
        return;
    }
    const char *source;
    if (!gate_enabled(k, minor, &source)) {
        pgd_pass(r,
                 "kubelet v%d.%d, " GATE " off (%s): the kubelet checks nothing and writes no "
                 "records; pullgate's check (records by pullgate-cri) is the only one",
                 major, minor, source);
        return;
    }
    const char *policy =
        setting(k, "", "imagePullCredentialsVerificationPolicy", "NeverVerifyPreloadedImages");
    const char *root = setting(k, "root-dir", "", DEFAULT_ROOT_DIR);
    pgd_pass(r,
             "kubelet v%d.%d, " GATE " on (%s), policy %s: the kubelet checks too and writes "
             "records in %s/image_manager, which pullgate %s; a container starts only if both "
             "allow",
             major, minor, source, policy, root,
             reads_kubelet_records(n, root) ? "also reads (readOnlyRecordDirs)"
                                            : "does not read (not in readOnlyRecordDirs)");
}

void pgd_check_kubelet(pgd_node *n, pgd_result *r, pgd_result *policy)
{
    kubelet k = {0};
    load_kubelet(n, &k);
    check_endpoints(n, &k, r);
    check_policy(n, &k, policy);
    json_decref(k.config);
    pg_strv_free(k.argv);
}
