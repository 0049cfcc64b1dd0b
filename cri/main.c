/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-cri: the CRI proxy that records every pull the kubelet makes
 * (cri/README.md; options and exit status: docs/man/pullgate-cri.8).
 */
#include "hook_server.h"
#include "log.h"
#include "metrics_server.h"
#include "prune.h"
#include "proxy.h"
#include "crio_auth.h"
#include "runtime_facts.h"
#include "runtime_mark.h"

#include <grpc/grpc.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PG_CONFIG_PATH PG_DEFAULT_CONFIG_PATH /* ${sysconfdir}/pullgate, from CMake */
#define SLOT_WAIT_MS 2000     /* a pull that finds every slot taken waits this long */
#define INTENT_BUDGET_MS 2000 /* then the intent must be durable, or the pull is refused */
#define RECORD_BUDGET_MS 2000 /* the answer waits this long for the pulled record */
#define WORKER_STOP_MS 2000
#define PRUNER_STOP_MS 2000
#define RUNTIME_FACTS_WAIT_MS 2500
#define NOTIFIER_TIMEOUT_MS 250
#define RECORDER_STOP_MS 5000
#define HOOK_SERVER_STOP_MS 2000

typedef struct args {
    const char *config;
    const char *listen;
    const char *runtime;
    const char *hook_socket; /* NULL: PG_DEFAULT_HOOK_SOCKET; "none": no hook server */
    const char *crio_config, *crio_config_dir; /* CRI-O's files (its namespaced auth) */
    int prune;               /* --prune: prune once and exit */
    int force;               /* --force: an empty image list prunes too */
} args;

static void usage(FILE *out)
{
    fprintf(out, "usage: pullgate-cri [--config FILE] [--listen unix:///run/pullgate/cri.sock]\n"
                 "                    [--runtime-endpoint unix:///run/containerd/containerd.sock]\n"
                 "                    [--hook-socket " PG_DEFAULT_HOOK_SOCKET "|none]\n"
                 "                    [--crio-config " CRI_CRIO_DEFAULT_CONFIG "]\n"
                 "                    [--crio-config-dir " CRI_CRIO_DEFAULT_CONFIG_DIR "]\n"
                 "       pullgate-cri --prune [--force] [--config FILE] [--runtime-endpoint ...]\n"
                 "Serves CRI on --listen, forwards every call to --runtime-endpoint, and records\n"
                 "each PullImage in pullgate's record store; decides for pullgate-hook on\n"
                 "--hook-socket. --prune deletes the records of images the runtime no longer\n"
                 "lists, once (see pullgate-cri(8)).\n");
}

/* 0 to run, 1 after --help/--version, 2 on a usage error. */
static int parse_args(int argc, char **argv, args *a)
{
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                             {"listen", required_argument, NULL, 'l'},
                                             {"runtime-endpoint", required_argument, NULL, 'r'},
                                             {"hook-socket", required_argument, NULL, 'k'},
                                             {"crio-config", required_argument, NULL, 'C'},
                                             {"crio-config-dir", required_argument, NULL, 'D'},
                                             {"prune", no_argument, NULL, 'p'},
                                             {"force", no_argument, NULL, 'f'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, 'V'},
                                             {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c': a->config = optarg; break;
        case 'l': a->listen = optarg; break;
        case 'r': a->runtime = optarg; break;
        case 'k': a->hook_socket = optarg; break;
        case 'C': a->crio_config = optarg; break;
        case 'D': a->crio_config_dir = optarg; break;
        case 'p': a->prune = 1; break;
        case 'f': a->force = 1; break;
        case 'h': usage(stdout); return 1;
        case 'V': printf("pullgate-cri %s\n", pg_version()); return 1;
        default: usage(stderr); return 2;
        }
    }
    if (a->hook_socket && strcmp(a->hook_socket, "none") != 0 && a->hook_socket[0] != '/') {
        fprintf(stderr, "pullgate-cri: --hook-socket must be an absolute path or \"none\"\n");
        return 2;
    }
    if (a->force && !a->prune) {
        fprintf(stderr, "pullgate-cri: --force goes with --prune\n");
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "pullgate-cri: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    return 0;
}

/*
 * The config file (a missing default file means defaults), then the options
 * over it. *id says which file that was, for the hook server: taken before
 * and after loading, so a file replaced meanwhile is never called "the same".
 */
static pg_config *load_config(const args *a, cri_hook_config_id *id, const char **loaded,
                              pg_error *err)
{
    pg_config *cfg = pg_config_new(err);
    if (!cfg)
        return NULL;
    int rc = PG_OK;
    const char *path = NULL;
    if (a->config)
        path = a->config;
    else if (access(PG_CONFIG_PATH, F_OK) == 0 || errno != ENOENT)
        path = PG_CONFIG_PATH;
    *loaded = path;
    cri_hook_config_id before, after;
    int ids_ok = cri_hook_config_identify(path, &before) == 0;
    if (path)
        rc = pg_config_load_file(cfg, path, err);
    ids_ok = ids_ok && cri_hook_config_identify(path, &after) == 0 &&
             cri_hook_config_same(&before, &after);
    *id = before;
    id->usable = ids_ok;
    if (rc == PG_OK && a->listen)
        rc = pg_config_set(cfg, "criListen", a->listen, err);
    if (rc == PG_OK && a->runtime)
        rc = pg_config_set(cfg, "criRuntimeEndpoint", a->runtime, err);
    if (rc != PG_OK) {
        pg_config_free(cfg);
        return NULL;
    }
    return cfg;
}

/*
 * The socket's directory: created 0700 when missing; when it exists it must be
 * a real directory of ours that nobody else can write (else someone could put
 * their own socket where the kubelet connects). Anyone who can speak CRI owns
 * the node, so the socket itself is made 0600 after binding.
 */
static int prepare_socket_dir(const char *endpoint, pg_error *err)
{
    const char *path = endpoint + strlen("unix://");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        return PG_OK; /* a socket in / : nothing to create */
    *slash = '\0';
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return pg_fail_errno(err, errno, "create %s", dir);
    struct stat st;
    if (lstat(dir, &st) != 0)
        return pg_fail_errno(err, errno, "stat %s", dir);
    if (!S_ISDIR(st.st_mode))
        return pg_fail(err, PG_ERR_UNSAFE, "%s is not a directory (symlink?)", dir);
    if ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & 022))
        return pg_fail(err, PG_ERR_UNSAFE,
                       "%s must be owned by root and not writable by group or others", dir);
    return PG_OK;
}

static int restrict_socket(const char *endpoint, pg_error *err)
{
    const char *path = endpoint + strlen("unix://");
    if (chmod(path, 0600) != 0)
        return pg_fail_errno(err, errno, "chmod %s", path);
    return PG_OK;
}

static void log_mac_key(const char *level, const char *what, const char *detail)
{
    bool error = strcmp(level, "error") == 0;
    cri_log(error ? CRI_LOG_ERROR : CRI_LOG_INFO, what, error ? "error" : "hmacKeyFile", detail,
            "effect",
            error ? "pulls with credentials are recorded unverified (bound to their namespace)"
                  : "pulls are attributed with the key now in the file",
            NULL);
}

/* SIGTERM/SIGINT end the wait; SIGUSR1 asks the pruner for a prune now. */
static int wait_for_stop_signal(cri_pruner *pruner)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig != SIGUSR1)
            return sig;
        cri_log(CRI_LOG_INFO, "prune requested (SIGUSR1)", NULL);
        cri_pruner_kick(pruner);
    }
}

typedef struct daemon_parts {
    pg_config *cfg;
    pg_notifier *notifier;
    pg_store *store;
    pg_keyholder *mac_keys;
    cri_runtime_facts *facts;
    cri_node_creds *node_creds;
    cri_worker *worker;
    cri_recorder *recorder;
    cri_proxy *proxy;
    cri_pruner *pruner;
    cri_decider *decider; /* the hook server's and the verification pulls' store */
    cri_hook_server *hook_server;
} daemon_parts;

/* The annotation key for HMAC checks, reloaded when its file changes; NULL when not keyed. */
static int open_mac_keys(daemon_parts *d, pg_error *err)
{
    const char *path = pg_config_hmac_key_file(d->cfg);
    if (!path[0])
        return PG_OK;
    /* The key as the hook reads it (strict, with PATH.previous). */
    d->mac_keys = pg_keyholder_new(path, pg_mac_key_load, log_mac_key);
    return d->mac_keys ? PG_OK : pg_fail(err, PG_ERR_NOMEM, "out of memory");
}

static void node_creds_warning(const char *path, const char *why)
{
    cri_log(CRI_LOG_WARNING, "node credential file not used", "path", path, "error", why, NULL);
}

/* needs_decider: a hook server or verification pulls will decide (one store for both). */
static int start(daemon_parts *d, const args *a, bool needs_decider, pg_error *err)
{
    const pg_config *cfg = d->cfg;
    d->facts = cri_runtime_facts_start(
        pg_config_cri_runtime_endpoint(cfg), pg_config_runtime(cfg),
        a->crio_config ? a->crio_config : CRI_CRIO_DEFAULT_CONFIG,
        a->crio_config_dir ? a->crio_config_dir : CRI_CRIO_DEFAULT_CONFIG_DIR, err);
    if (!d->facts)
        return err->code;
    /* Bounded: a runtime that is not up yet is asked again every second meanwhile. */
    if (!cri_runtime_facts_wait(d->facts, RUNTIME_FACTS_WAIT_MS))
        cri_log(CRI_LOG_WARNING,
                "the runtime has not answered Version yet: pulls without credentials are "
                "recorded for their namespace until it does",
                NULL);
    d->notifier = pg_notifier_new(pg_config_dbus(cfg), NOTIFIER_TIMEOUT_MS, err);
    if (!d->notifier)
        return err->code;
    if (!(d->store = pg_store_open(cfg, d->notifier, err)))
        return err->code;
    /* Before any pull is recorded: what the records are made against, for --prune. */
    int mrc =
        cri_runtime_mark_write(pg_config_state_dir(cfg), pg_config_cri_runtime_endpoint(cfg), err);
    if (mrc != PG_OK) {
        pg_error_prefix(err, "recording the runtime endpoint in the state directory");
        return mrc;
    }
    if (!(d->worker = cri_worker_new(err)))
        return err->code;
    if (!(d->recorder = cri_recorder_new(d->store, err)))
        return err->code;
    if (!(d->node_creds = cri_node_creds_new(pg_config_node_credential_files(cfg), err)))
        return err->code;
    /* Read once now so that a file that cannot be used is reported at start. */
    int rc = cri_node_creds_refresh(d->node_creds, node_creds_warning, err);
    if (rc != PG_OK)
        return rc;
    rc = open_mac_keys(d, err);
    if (rc != PG_OK)
        return rc;
    rc = prepare_socket_dir(pg_config_cri_listen(cfg), err);
    if (rc != PG_OK)
        return rc;
    /* A fast path and a hint only: without it the hook decides locally and ImageStatus is
     * forwarded as bytes. */
    pg_error derr = {0};
    if ((needs_decider || pg_config_cri_verify_pulls(cfg)) &&
        !(d->decider = cri_decider_new(cfg, &derr)))
        cri_log(CRI_LOG_ERROR,
                "record store not opened for deciding: no hook server, no "
                "verification pulls",
                "error", derr.message, NULL);
    cri_proxy_options o = {
        .listen = pg_config_cri_listen(cfg),
        .runtime = pg_config_cri_runtime_endpoint(cfg),
        .worker = d->worker,
        .recorder = d->recorder,
        .annotation_key = pg_config_annotation(cfg),
        .keys = d->mac_keys,
        .mac_required = pg_config_hmac_key_file(cfg)[0] != '\0',
        .node_creds = d->node_creds,
        .facts = d->facts,
        .slot_wait_ms = SLOT_WAIT_MS,
        .intent_budget_ms = INTENT_BUDGET_MS,
        .record_budget_ms = RECORD_BUDGET_MS,
        .cfg = cfg,
        .decider = d->decider,
        .notifier = d->notifier,
    };
    mode_t old = umask(0077); /* the socket is born private, chmod only confirms it */
    d->proxy = cri_proxy_start(&o, err);
    umask(old);
    if (!d->proxy)
        return err->code;
    rc = restrict_socket(o.listen, err);
    if (rc != PG_OK)
        return rc;
    d->pruner = cri_pruner_start(o.runtime, d->store, pg_config_cri_prune_interval(cfg), err);
    return d->pruner ? PG_OK : err->code;
}

/*
 * The hook server is a fast path only: without it every hook decides in its
 * own process, with the same result. So a hook socket that cannot be served
 * is logged, and the proxy (which records pulls) runs on.
 */
static void start_hook_server(daemon_parts *d, const char *path, const cri_hook_config_id *id,
                              const char *config_path)
{
    if (strcmp(path, "none") == 0 || !d->decider)
        return;
    pg_error err = {0};
    char endpoint[PATH_MAX + 8];
    snprintf(endpoint, sizeof endpoint, "unix://%s", path);
    cri_hook_server_options o = {.path = path,
                                 .cfg = d->cfg,
                                 .config_id = *id,
                                 .config_path = config_path,
                                 .notifier = d->notifier,
                                 .decider = d->decider};
    if (prepare_socket_dir(endpoint, &err) == PG_OK)
        d->hook_server = cri_hook_server_start(&o, &err);
    if (!d->hook_server)
        cri_log(CRI_LOG_ERROR, "hook server not started: pullgate-hook decides locally",
                "hookSocket", path, "error", err.message, NULL);
    else
        cri_log(CRI_LOG_INFO, "hook server listening", "hookSocket", path, "configMatchable",
                id->usable ? "true" : "false", NULL);
}

/* Releases what start() made; a part still busy (a hung store lock) is left to exit(). */
static int stop(daemon_parts *d)
{
    int clean = cri_hook_server_stop(d->hook_server, HOOK_SERVER_STOP_MS);
    clean = cri_pruner_stop(d->pruner, PRUNER_STOP_MS) && clean;
    clean = cri_proxy_stop(d->proxy, CRI_DEFAULT_DRAIN_MS) && clean;
    /* The writer's outcomes go to the worker: the worker stops last. */
    if (clean)
        clean = cri_recorder_stop(d->recorder, RECORDER_STOP_MS);
    if (clean)
        clean = cri_worker_stop(d->worker, WORKER_STOP_MS);
    /* After the worker: pulls ask it until then. Its Version call is bounded by 2 s. */
    if (clean)
        clean = cri_runtime_facts_stop(d->facts, 3000);
    if (!clean) {
        cri_log(CRI_LOG_WARNING, "exiting with work still running", NULL);
        return 0;
    }
    cri_node_creds_free(d->node_creds);
    cri_decider_free(d->decider);
    pg_store_free(d->store);
    pg_notifier_free(d->notifier);
    pg_keyholder_free(d->mac_keys);
    pg_config_free(d->cfg);
    return 1;
}

/*
 * --prune: once, against the configured runtime's own list, then exit, and only
 * when that runtime is the one the daemon serves (runtime_mark.h). The daemon
 * may run at the same time: the store's lock orders the two.
 */
static int prune_command(const args *a, pg_config *cfg)
{
    pg_error err = {0};
    const char *runtime = pg_config_cri_runtime_endpoint(cfg);
    if (cri_runtime_mark_check(pg_config_state_dir(cfg), runtime, a->runtime != NULL, &err) !=
        PG_OK) {
        fprintf(stderr, "pullgate-cri: not pruning: %s\n", err.message);
        return 1;
    }
    grpc_channel *ch = cri_runtime_channel(runtime);
    char **in_use = NULL;
    size_t n_images = 0;
    const char *why = NULL;
    int rc = ch ? cri_prune_list(ch, CRI_PRUNE_LIST_MS, &in_use, &n_images, &err)
                : pg_fail(&err, PG_ERR_INTERNAL, "gRPC setup failed");
    if (ch)
        grpc_channel_destroy(ch);
    if (rc != PG_OK) {
        fprintf(stderr, "pullgate-cri: not pruning: cannot list the images of %s: %s\n", runtime,
                err.message);
        return 1;
    }
    if (!cri_prune_allowed(n_images, a->force, &why)) {
        fprintf(stderr, "pullgate-cri: not pruning: %s (%s)\n", why, runtime);
        pg_strv_free(in_use);
        return 1;
    }
    pg_notifier *notifier = pg_notifier_new(pg_config_dbus(cfg), NOTIFIER_TIMEOUT_MS, &err);
    pg_store *store = notifier ? pg_store_open(cfg, notifier, &err) : NULL;
    unsigned pruned = 0;
    rc = store ? cri_prune_records(store, in_use, time(NULL) - CRI_PRUNE_MIN_AGE_S, &pruned, &err)
               : err.code;
    pg_strv_free(in_use);
    pg_store_free(store);
    pg_notifier_free(notifier);
    if (rc != PG_OK) {
        fprintf(stderr, "pullgate-cri: prune failed: %s\n", err.message);
        return 1;
    }
    printf("pruned %u record%s (%zu images on %s)\n", pruned, pruned == 1 ? "" : "s", n_images,
           runtime);
    return 0;
}

int main(int argc, char **argv)
{
    args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    /* Every thread inherits this mask; the main thread takes the signals with sigwait. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    umask(0077);
    OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);

    pg_error err = {0};
    daemon_parts d = {0};
    cri_hook_config_id config_id;
    const char *config_path = NULL;
    if (!(d.cfg = load_config(&a, &config_id, &config_path, &err))) {
        fprintf(stderr, "pullgate-cri: %s\n", err.message);
        return 2;
    }
    cri_log_set_level(pg_config_log_level(d.cfg));
    grpc_init();
    if (a.prune) {
        rc = prune_command(&a, d.cfg);
        pg_config_free(d.cfg);
        grpc_shutdown();
        return rc;
    }
    cri_metrics_start(d.cfg); /* before anything counts; serves until exit */
    const char *hook_socket = a.hook_socket ? a.hook_socket : PG_DEFAULT_HOOK_SOCKET;
    if (start(&d, &a, strcmp(hook_socket, "none") != 0, &err) != PG_OK) {
        cri_log(CRI_LOG_ERROR, "cannot start", "error", err.message, NULL);
        return 1;
    }
    start_hook_server(&d, hook_socket, &config_id, config_path);
    cri_log(CRI_LOG_INFO, "serving", "listen", pg_config_cri_listen(d.cfg), "runtime",
            pg_config_cri_runtime_endpoint(d.cfg), "stateDir", pg_config_state_dir(d.cfg),
            "verifyPulls", d.decider && pg_config_cri_verify_pulls(d.cfg) ? "true" : "false",
            "version", pg_version(), NULL);
    int sig = wait_for_stop_signal(d.pruner);
    cri_log(CRI_LOG_INFO, "stopping: draining calls", "signal",
            sig == SIGINT ? "SIGINT" : "SIGTERM", NULL);
    if (stop(&d))
        grpc_shutdown();
    cri_log(CRI_LOG_INFO, "stopped", NULL);
    return 0;
}
