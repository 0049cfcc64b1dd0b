/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-hook [--config FILE] [--stage STAGE]
 *
 * OCI hook (prestart / createRuntime / createContainer): lets a Kubernetes
 * application container start only if its pod presents credentials recorded
 * for the image's pull, or policy exempts it (docs/interfaces.md §5, §7). Exit 0 =
 * allow; exit 1 = deny with one line on stderr. Every failure denies.
 * The hook never forks, so a runtime timeout can never leave a child holding
 * the runtime's stdout/stderr pipes.
 */
#include "hook.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#define DEFAULT_CONFIG_PATH PG_DEFAULT_CONFIG_PATH /* ${sysconfdir}/pullgate, from CMake */

typedef struct hook_args {
    const char *config_path;
    int config_explicit; /* --config given: a missing file is an error */
    const char *stage;
} hook_args;

/* Everything one run knows; filled step by step, released by run_free(). */
typedef struct hook_run {
    hook_args args;
    pg_config *cfg;
    hook_state state;
    json_t *annotations;
    hook_identity identity;
    pg_store *store;
    pg_decision decision;
    char *reported_ref; /* containerd: the imageRef the index names, for the report only */
} hook_run;

static const char *const known_stages[] = {"prestart",       "createRuntime", "createContainer",
                                           "startContainer", "poststart",     "poststop", NULL};

/* ------------------------------------------------------------ failure */

/*
 * Set once the decision is made, before it is reported: a deadline that fires
 * while reporting (a stuck syslog socket, say) must not turn an allow into a
 * deny, nor print a second line after the real one.
 */
static volatile sig_atomic_t decided_status = -1;

/* Fixed text: the handler may only use async-signal-safe calls. */
static void on_deadline(int sig)
{
    (void)sig;
    if (decided_status == 0)
        _exit(0);
    static const char line[] = "pullgate: denied container " HOOK_UNKNOWN " (namespace " HOOK_UNKNOWN
                               ", image " HOOK_UNKNOWN "): the hook exceeded its internal deadline\n";
    ssize_t ignored = write(STDERR_FILENO, line, sizeof line - 1);
    (void)ignored;
    _exit(1);
}

/*
 * Whatever hangs (a stuck store filesystem, the bus) the hook exits on its own,
 * denying, before the runtime's hooks.d timeout kills it.
 */
static void arm_deadline(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_deadline;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(HOOK_HARD_DEADLINE_S);
}

/* what (may be NULL) says which step failed when err's message does not. */
static void deny(hook_run *run, int reason, const char *what, const pg_error *err)
{
    const char *why = err && err->message[0] ? err->message : "unknown error";
    run->decision.allow = 0;
    run->decision.reason = reason;
    if (what)
        snprintf(run->decision.text, sizeof run->decision.text, "%.100s: %.400s", what, why);
    else
        snprintf(run->decision.text, sizeof run->decision.text, "%.500s", why);
}

static void allow(hook_run *run, int reason, const char *text)
{
    run->decision.allow = 1;
    run->decision.reason = reason;
    snprintf(run->decision.text, sizeof run->decision.text, "%s", text);
}

/* ---------------------------------------------------------- arguments */

static int is_known_stage(const char *stage)
{
    for (const char *const *s = known_stages; *s; s++)
        if (strcmp(*s, stage) == 0)
            return 1;
    return 0;
}

/* Accepts "--name VALUE" and "--name=VALUE"; returns the value or NULL. */
static const char *option_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] == '\0' && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

static int parse_args(int argc, char **argv, hook_args *args, pg_error *err)
{
    args->config_path = DEFAULT_CONFIG_PATH;
    args->config_explicit = 0;
    args->stage = "prestart";
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = option_value(argc, argv, &i, "--config")) != NULL) {
            args->config_path = v;
            args->config_explicit = 1;
        } else if ((v = option_value(argc, argv, &i, "--stage")) != NULL) {
            args->stage = v;
        } else {
            return pg_fail(err, PG_ERR_INVALID,
                           "usage: pullgate-hook [--config FILE] [--stage STAGE]; bad argument "
                           "\"%.64s\"", argv[i]);
        }
    }
    if (!args->config_path[0])
        return pg_fail(err, PG_ERR_INVALID, "--config: empty path");
    if (!is_known_stage(args->stage))
        return pg_fail(err, PG_ERR_INVALID, "--stage: unknown OCI hook stage \"%.64s\"",
                       args->stage);
    return PG_OK;
}

/* ------------------------------------------------------------- steps */

/* A missing default file means built-in defaults; any other problem fails closed. */
static int load_config(hook_run *run, pg_error *err)
{
    run->cfg = pg_config_new(err);
    if (!run->cfg)
        return PG_ERR_NOMEM; /* pg_config_new's only failure (it has set err) */
    struct stat st;
    if (!run->args.config_explicit && lstat(run->args.config_path, &st) != 0 && errno == ENOENT)
        return PG_OK;
    return pg_config_load_file(run->cfg, run->args.config_path, err);
}

/*
 * The hook only reads records. pg_store_open_readonly() opens only
 * readOnlyRecordDirs, and pg_store_open() would create a missing stateDir,
 * so: an existing stateDir is opened with pg_store_open (nothing to create);
 * a missing one holds no records, and the read-only directories suffice.
 */
static pg_store *open_store(const pg_config *cfg, pg_error *err)
{
    struct stat st;
    const char *state_dir = pg_config_state_dir(cfg);
    if (state_dir && lstat(state_dir, &st) == 0)
        return pg_store_open(cfg, NULL, err);
    return pg_store_open_readonly(cfg, err);
}

/*
 * containerd names no image ID, so log lines and D-Bus signals would say
 * "unknown" where an operator wants the ID. The library decided over every
 * spelling already; this second index read only names the ID for the report
 * and never influences the decision (a failed lookup leaves it unknown).
 */
static void name_resolved_ref(hook_run *run)
{
    if (run->identity.image_ref || !run->store || !run->identity.image)
        return;
    if (pg_store_resolve_image(run->store, run->identity.image, &run->reported_ref, NULL) != PG_OK)
        run->reported_ref = NULL;
}

static void decide_application(hook_run *run)
{
    pg_error err = {0};
    if (!run->identity.image) {
        /* Only a policy that needs no image name can exempt an unnamed image. */
        if (pg_config_policy(run->cfg) == PG_POLICY_NEVER_VERIFY)
            allow(run, PG_REASON_NEVER_VERIFY, "policy NeverVerify");
        else
            deny(run, PG_REASON_BAD_REQUEST, "the runtime names no image",
                 &(pg_error){PG_ERR_INVALID, "only an image ID is known, not a name"});
        return;
    }
    run->store = open_store(run->cfg, &err);
    if (!run->store) {
        deny(run, PG_REASON_STORE_ERROR, "opening the record store", &err);
        return;
    }
    /*
     * Every spelling the runtime gives goes to the library, which validates,
     * looks each up in every record directory (containerd's missing image ID
     * included: the index and the name index stand in) and merges what it finds.
     */
    pg_request req = {
        .image = run->identity.image,
        .image_ref = run->identity.image_ref,
        .namespace_ = run->identity.namespace_,
        .credentials = hook_annotation(run->annotations, pg_config_annotation(run->cfg)),
    };
    pg_decide_identity(run->cfg, run->store, &req, run->identity.aliases,
                       (const char *const *)run->identity.hints, &run->decision);
    name_resolved_ref(run);
}

static void decide(hook_run *run)
{
    pg_error err = {0};
    if (hook_read_bundle_annotations(run->state.bundle, &run->annotations, &err) != PG_OK)
        deny(run, PG_REASON_BAD_REQUEST, NULL, &err); /* names the bundle */
    else if (hook_identify(pg_config_runtime(run->cfg), run->annotations, &run->identity, &err) !=
             PG_OK)
        deny(run, PG_REASON_BAD_REQUEST, "identifying the container", &err);
    else if (run->identity.kind == HOOK_NOT_KUBERNETES)
        allow(run, 0, "not a Kubernetes container (no CRI-O or containerd annotations)");
    else if (run->identity.kind == HOOK_SANDBOX)
        allow(run, PG_REASON_SANDBOX, "sandbox (pause) container");
    else
        decide_application(run);
}

/*
 * The state is read even after an argument or configuration error: it costs
 * at most the stdin deadline and lets the denial name the container.
 */
static void read_inputs_and_decide(hook_run *run, int argc, char **argv)
{
    pg_error args_err = {0}, cfg_err = {0}, state_err = {0};
    int args_rc = parse_args(argc, argv, &run->args, &args_err);
    int cfg_rc = args_rc == PG_OK ? load_config(run, &cfg_err) : PG_OK;
    int state_rc = hook_read_state(STDIN_FILENO, &run->state, &state_err);
    if (args_rc != PG_OK)
        deny(run, PG_REASON_BAD_REQUEST, "invalid arguments", &args_err);
    else if (cfg_rc != PG_OK)
        deny(run, PG_REASON_CONFIG_ERROR, "configuration", &cfg_err);
    else if (state_rc != PG_OK)
        deny(run, PG_REASON_BAD_REQUEST, NULL, &state_err); /* names the OCI state */
    else
        decide(run);
    if (cfg_rc != PG_OK || args_rc != PG_OK) {
        /* A configuration we could not load names no mode: enforce (fail closed). */
        pg_config_free(run->cfg);
        run->cfg = NULL;
    }
}

/* stdin is done with; keep fd 0 occupied so nothing opened later lands on it. */
static void release_stdin(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && fd != STDIN_FILENO) {
        dup2(fd, STDIN_FILENO);
        close(fd);
    } else if (fd < 0) {
        close(STDIN_FILENO);
    }
}

/* A session bus without an address would make libdbus autolaunch (fork) a daemon. */
static pg_notifier *open_notifier(const pg_config *cfg)
{
    const char *bus = cfg ? pg_config_dbus(cfg) : NULL;
    if (!bus || strcmp(bus, "none") == 0)
        return NULL;
    if (strcmp(bus, "session") == 0 && !getenv("DBUS_SESSION_BUS_ADDRESS"))
        return NULL;
    return pg_notifier_new(bus, HOOK_DBUS_TIMEOUT_MS, NULL);
}

static void run_free(hook_run *run)
{
    pg_store_free(run->store);
    pg_free(run->reported_ref);
    hook_identity_clear(&run->identity);
    json_decref(run->annotations);
    hook_state_clear(&run->state);
    pg_config_free(run->cfg);
}

/*
 * The hook needs only SHA-256 and HMAC from OpenSSL's default provider. Not
 * reading the node's openssl.cnf halves libcrypto's start-up cost (~1 ms per
 * container start, see bench/README.md) and keeps a system-wide OpenSSL
 * configuration out of the decision path. The engine calls EVP_sha256()
 * directly, never looks a digest or cipher up by name and never prints
 * OpenSSL's error strings, so loading the error strings and registering every
 * legacy cipher and digest name is pure start-up cost (first SHA-256 + HMAC
 * ~2.4 ms -> ~0.8 ms, bench/README.md "OpenSSL interfaces"). This is
 * process-wide, so it lives here, not in the library.
 */
static void init_crypto(void)
{
    OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS |
                            OPENSSL_INIT_NO_ADD_ALL_CIPHERS | OPENSSL_INIT_NO_ADD_ALL_DIGESTS,
                        NULL);
}

int main(int argc, char **argv)
{
    arm_deadline();
    init_crypto();
    hook_run run;
    memset(&run, 0, sizeof run);
    read_inputs_and_decide(&run, argc, argv);
    release_stdin();
    hook_log_open(run.cfg ? pg_config_log_level(run.cfg) : NULL);
    pg_notifier *notifier = open_notifier(run.cfg);
    hook_subject who = {
        .container_id = run.state.id,
        .namespace_ = run.identity.namespace_,
        .image = run.identity.image,
        .image_ref = run.identity.image_ref ? run.identity.image_ref : run.reported_ref,
        .stage = run.args.stage,
    };
    pg_mode mode = run.cfg ? pg_config_mode(run.cfg) : PG_MODE_ENFORCE;
    decided_status = run.decision.allow || mode == PG_MODE_AUDIT ? 0 : 1;
    int status = hook_report(&who, &run.decision, mode, notifier);
    alarm(0); /* reported: nothing left that may hang */
    pg_notifier_free(notifier);
    run_free(&run);
    closelog();
    if (fclose(stdout) != 0 || fflush(stderr) != 0)
        status = status ? status : 1;
    return status;
}
