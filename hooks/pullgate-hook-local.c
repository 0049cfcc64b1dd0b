/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-hook-local [--config FILE] [--stage STAGE] [--daemon-socket PATH|none]
 *
 * The hook that decides in its own process (docs/man/pullgate-hook.8; the decision:
 * docs/interfaces.md §5, §7): exit 0 allows, exit 1 denies with one line on stderr, and
 * every failure denies. pullgate-hook execs it with the same argv (--daemon-socket is
 * accepted and ignored) whenever the daemon does not answer. It never forks, so a runtime
 * timeout cannot leave a child holding the runtime's pipes. Each decision is also
 * spooled for pullgate-cri's counters (hooks/local_spool.c).
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
    if (hook_print_version(argc, argv, "pullgate-hook-local"))
        return fclose(stdout) == 0 ? 0 : 1;
    hook_deadline_arm();
    init_crypto();
    hook_run run;
    memset(&run, 0, sizeof run);
    hook_evaluate_local(&run, argc, argv, STDIN_FILENO, stdin_spent_ms());
    release_stdin();
    hook_log_open(run.cfg ? pg_config_log_level(run.cfg) : NULL);
    pg_notifier *notifier = open_notifier(run.cfg);
    hook_subject who = hook_run_subject(&run);
    hook_deadline_decided(hook_run_status(&run));
    int status = hook_report(&who, &run.decision, hook_run_mode(&run), notifier);
#ifndef PG_HOOK_NO_SPOOL /* bench/: the same hook without it, for the cost of the append */
    /* Counted by pullgate-cri once it folds the spool (the resident path counts its own):
     * after the report, the decision already final; best effort, never blocking. */
    hook_run_spool(&run);
#endif
    alarm(0); /* reported: nothing left that may hang */
    pg_notifier_free(notifier);
    hook_run_free(&run);
    closelog();
    if (fclose(stdout) != 0 || fflush(stderr) != 0)
        status = status ? status : 1;
    return status;
}
