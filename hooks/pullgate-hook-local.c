/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-hook-local [--config FILE] [--stage STAGE] [--daemon-socket PATH|none]
 *
 * OCI hook (prestart / createRuntime / createContainer): lets a Kubernetes
 * application container start only if its pod presents credentials recorded
 * for the image's pull, or policy exempts it (docs/interfaces.md §5, §7). Exit 0 =
 * allow; exit 1 = deny with one line on stderr. Every failure denies.
 * This is the hook that decides in its own process; pullgate-hook (the thin
 * client) asks the resident pullgate-cri first and execs this one with the
 * same argv (--daemon-socket is accepted and ignored) whenever the daemon
 * does not answer. The hook never forks, so a runtime timeout can never leave
 * a child holding the runtime's stdout/stderr pipes.
 */
#include "hook.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

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
 * denying, before the runtime's hooks.d timeout kills it. A pending alarm
 * survives execve: when the thin pullgate-hook fell back to this one, the
 * time it already spent counts, so the whole run stays within the deadline.
 */
static void arm_deadline(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_deadline;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    unsigned left = alarm(0);
    alarm(left > 0 && left < HOOK_HARD_DEADLINE_S ? left : HOOK_HARD_DEADLINE_S);
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

/*
 * The part of the stdin deadline the thin hook spent before it fell back here
 * (HOOK_STDIN_SPENT_ENV); removed so that nothing this process runs sees it.
 */
static int stdin_spent_ms(void)
{
    const char *v = getenv(HOOK_STDIN_SPENT_ENV);
    long ms = 0;
    if (v) {
        char *end;
        ms = strtol(v, &end, 10);
        if (end == v || *end || ms < 0 || ms > HOOK_STDIN_DEADLINE_MS)
            ms = HOOK_STDIN_DEADLINE_MS; /* garbled: no more waiting (fail closed) */
        unsetenv(HOOK_STDIN_SPENT_ENV);
    }
    return (int)ms;
}

int main(int argc, char **argv)
{
    arm_deadline();
    init_crypto();
    hook_run run;
    memset(&run, 0, sizeof run);
    hook_evaluate_local(&run, argc, argv, STDIN_FILENO, stdin_spent_ms());
    release_stdin();
    hook_log_open(run.cfg ? pg_config_log_level(run.cfg) : NULL);
    pg_notifier *notifier = open_notifier(run.cfg);
    hook_subject who = hook_run_subject(&run);
    decided_status = hook_run_status(&run);
    int status = hook_report(&who, &run.decision, hook_run_mode(&run), notifier);
    alarm(0); /* reported: nothing left that may hang */
    pg_notifier_free(notifier);
    hook_run_free(&run);
    closelog();
    if (fclose(stdout) != 0 || fflush(stderr) != 0)
        status = status ? status : 1;
    return status;
}
