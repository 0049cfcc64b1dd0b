/* SPDX-License-Identifier: Apache-2.0 */
/* pullgate-doctor: pullgate-cri (its process, CRI socket, hook socket) and the runtime behind. */
#include "cleanup.h"
#include "doctor.h"
#include "hook_client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROBE_ID "pullgate-doctor-probe"

static void copy(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src ? src : ""); }

/*
 * The file pullgate-cri's --config names, as pullgate-cri sees it: a relative path from
 * its working directory, never the doctor's (a file planted where doctor runs would
 * otherwise answer for it). Without a process, the default path.
 */
static void see_cri_config(pgd_node *n)
{
    char shown[4200];
    pg_autoclose int fd = -1;
    pg_error why = {0};
    if (n->cri_process)
        fd = pgd_proc_open(n->opt->proc_root, n->cri_pid, n->cri_config, O_RDONLY | O_NONBLOCK,
                           shown, sizeof shown, &why);
    else if (n->cri_config[0] == '/')
        fd = open(n->cri_config, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    n->cri_config_seen = fd >= 0 && fstat(fd, &n->cri_config_st) == 0;
    if (fd < 0 && !why.code)
        pg_fail_errno(&why, errno, "%s", n->cri_config);
    snprintf(n->cri_config_why, sizeof n->cri_config_why, "%s", why.message);
}

/*
 * The node's pullgate-cri: the one serving the configured CRI socket (criListen; found by the
 * socket's peer, so the one the kubelet reaches, even among several), else the one init
 * started (a service; never one started by hand, whose settings say nothing about the node's).
 * Its flags win over the configuration, as in the daemon itself.
 */
void pgd_find_cri_process(pgd_node *n)
{
    const char *configured =
        n->cfg ? pg_config_cri_listen(n->cfg) : "unix:///run/pullgate/cri.sock";
    char **argv = pgd_socket_server(n->opt->proc_root, configured, "pullgate-cri", &n->cri_pid);
    if (!argv)
        argv = pgd_find_service(n->opt->proc_root, "pullgate-cri", &n->cri_pid,
                                &n->cri_candidates, true);
    n->cri_process = argv != NULL;
    n->cri_argv = argv;
    const char *config = argv ? pgd_flag(argv, "config") : NULL;
    const char *listen = argv ? pgd_flag(argv, "listen") : NULL;
    const char *runtime = argv ? pgd_flag(argv, "runtime-endpoint") : NULL;
    const char *hook = argv ? pgd_flag(argv, "hook-socket") : NULL;
    copy(n->cri_config, sizeof n->cri_config, config ? config : PG_DEFAULT_CONFIG_PATH);
    copy(n->cri_listen, sizeof n->cri_listen,
         listen   ? listen
         : n->cfg ? pg_config_cri_listen(n->cfg)
                  : "unix:///run/pullgate/cri.sock");
    copy(n->cri_runtime, sizeof n->cri_runtime,
         runtime  ? runtime
         : n->cfg ? pg_config_cri_runtime_endpoint(n->cfg)
                  : "unix:///run/containerd/containerd.sock");
    copy(n->hook_socket, sizeof n->hook_socket,
         n->opt->hook_socket ? n->opt->hook_socket
         : hook              ? hook
                             : PG_DEFAULT_HOOK_SOCKET);
    see_cri_config(n);
}

bool pgd_cri_reads(const pgd_node *n, const char *path)
{
    struct stat st;
    return n->cri_config_seen && stat(path, &st) == 0 && st.st_dev == n->cri_config_st.st_dev &&
           st.st_ino == n->cri_config_st.st_ino;
}

void pgd_check_runtime(pgd_node *n, pgd_result *r)
{
    char version[256];
    pg_error why = {0};
    if (pgd_cri_version(n->cri_runtime, n->opt->timeout_ms, version, sizeof version, &why) ==
        PG_OK) {
        pgd_pass(r, "%s answers on %s", version, n->cri_runtime);
        return;
    }
    pgd_fail(r,
             "start the runtime (systemctl start containerd / crio), or set criRuntimeEndpoint "
             "(pullgate-cri --runtime-endpoint) to its socket",
             "the runtime does not answer CRI Version on %s (%s): pullgate-cri answers every "
             "call UNAVAILABLE",
             n->cri_runtime, why.message);
}

void pgd_check_cri_proxy(pgd_node *n, pgd_result *r)
{
    char version[256];
    pg_error why = {0};
    if (pgd_cri_version(n->cri_listen, n->opt->timeout_ms, version, sizeof version, &why) ==
        PG_OK) {
        pgd_pass(r, "pullgate-cri answers on %s and forwards to %s", n->cri_listen, version);
        return;
    }
    char none[160];
    if (n->cri_candidates > 1)
        snprintf(none, sizeof none, "; %zu pullgate-cri services run, none serves it",
                 n->cri_candidates);
    else
        snprintf(none, sizeof none, "; no pullgate-cri process runs");
    pgd_fail(r,
             n->cri_process ? "see its log (journalctl -u pullgate-cri); the runtime must answer "
                              "behind it"
                            : "start pullgate-cri and have it start at boot",
             "no CRI answer on %s (%s)%s: the kubelet's pulls are not recorded and, with its "
             "image service endpoint at the proxy, no image can be pulled",
             n->cri_listen, why.message, n->cri_process ? "" : none);
    if (!n->cri_process)
        pgd_command(r, "systemctl enable --now pullgate-cri");
}

/*
 * A bundle the hook server can read: a directory with a config.json whose
 * annotations make a sandbox (pause) container of the configured runtime,
 * which every configuration allows without touching the records.
 */
static int make_probe_bundle(const pgd_node *node, char *dir, size_t n)
{
    snprintf(dir, n, "%s/pullgate-doctor.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    pg_autoclose int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    bool crio = node->cfg && pg_config_runtime(node->cfg) == PG_RUNTIME_CRIO;
    const char *body =
        crio ? "{\"ociVersion\":\"1.0.2\",\"annotations\":{\"io.container.manager\":\"cri-o\","
               "\"io.kubernetes.cri-o.ContainerType\":\"sandbox\"}}\n"
             : "{\"ociVersion\":\"1.0.2\",\"annotations\":{"
               "\"io.kubernetes.cri.container-type\":\"sandbox\"}}\n";
    size_t len = strlen(body);
    return write(fd, body, len) == (ssize_t)len ? 0 : -1;
}

static void remove_probe_bundle(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}

static const char *client_error(hook_client_error e)
{
    switch (e) {
    case HOOK_CLIENT_NO_SERVER: return "nothing answers on the socket";
    case HOOK_CLIENT_NOT_ROOT: return "the server does not run as root (never trusted)";
    case HOOK_CLIENT_TIMEOUT: return "no answer in time";
    default: return "an unusable reply";
    }
}

/*
 * One real request on the hook socket, for a sandbox container (the server
 * allows it and logs it under the id pullgate-doctor-probe), naming
 * this configuration file: a decision proves the resident path answers for it;
 * "not mine" means pullgate-cri loaded another file, or this one changed since.
 */
void pgd_check_hook_socket(pgd_node *n, pgd_result *r)
{
    const pgd_options *o = n->opt;
    if (o->config_path[0] != '/') {
        pgd_fail(r, "name the configuration with an absolute --config",
                 "a relative configuration path is never sent to pullgate-cri");
        return;
    }
    char dir[4096];
    if (make_probe_bundle(n, dir, sizeof dir) != 0) {
        pgd_fail(r, "set TMPDIR to a writable directory", "cannot create a probe bundle");
        return;
    }
    char state[4600];
    snprintf(state, sizeof state,
             "{\"ociVersion\":\"1.0.2\",\"id\":\"" PROBE_ID "\",\"status\":\"creating\","
             "\"pid\":%d,\"bundle\":\"%s\"}",
             (int)getpid(), dir);
    hook_request req = {.stage = "createRuntime",
                        .stage_len = strlen("createRuntime"),
                        .config = o->config_path,
                        .config_len = strlen(o->config_path),
                        .state = state,
                        .state_len = strlen(state),
                        .config_explicit = (unsigned)o->config_explicit};
    static unsigned char msg[HOOK_PROTO_MAX_REQUEST], reply_buf[HOOK_PROTO_MAX_REPLY + 1];
    size_t len = hook_proto_encode_request(&req, msg, sizeof msg);
    int bundle_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    hook_reply reply;
    hook_client_error why = HOOK_CLIENT_BAD_REPLY;
    int rc = len && bundle_fd >= 0
                 ? hook_client_exchange_why(n->hook_socket, msg, len, bundle_fd,
                                            pg_monotonic_ms() + o->timeout_ms, reply_buf,
                                            sizeof reply_buf, &reply, &why)
                 : -1;
    if (bundle_fd >= 0)
        close(bundle_fd);
    remove_probe_bundle(dir);
    if (rc != 0) {
        pgd_fail(r,
                 n->cri_process ? "the hook's --daemon-socket and pullgate-cri's --hook-socket "
                                  "must name the same socket (see same-config)"
                                : "start pullgate-cri and have it start at boot",
                 "%s: %s; every container start falls back to pullgate-hook-local (same "
                 "decisions, several milliseconds slower)",
                 n->hook_socket, client_error(why));
        if (!n->cri_process)
            pgd_command(r, "systemctl enable --now pullgate-cri");
    } else if (reply.kind == HOOK_REPLY_NOT_MINE) {
        /* The same file: it changed since pullgate-cri read it, which a restart cures.
         * Another file: the fix is same-config's. */
        bool same = pgd_cri_reads(n, o->config_path);
        pgd_fail(r,
                 same ? "restart pullgate-cri: it reads its configuration once, at start"
                      : "give the hook and pullgate-cri the same --config (see same-config)",
                 "pullgate-cri answers \"not mine\" for %s: %s; every container start falls "
                 "back to pullgate-hook-local",
                 o->config_path,
                 same ? "the file changed since pullgate-cri started"
                      : "pullgate-cri loaded another file");
        if (same)
            pgd_command(r, "systemctl restart pullgate-cri");
    } else if (reply.status != 0) {
        pgd_fail(r, "see its log: journalctl -u pullgate-cri",
                 "pullgate-cri denied the probe (a sandbox container, always allowed): "
                 "%.*s",
                 (int)(reply.line_len > 400 ? 400 : reply.line_len), reply.line);
    } else {
        pgd_pass(r, "pullgate-cri decides for %s on %s", o->config_path, n->hook_socket);
    }
}
