/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hook's own deadline, shared by pullgate-hook and pullgate-hook-local:
 * whatever hangs (a stuck store filesystem, the bus, a daemon) the hook exits
 * on its own, denying, before the runtime's hooks.d timeout kills it.
 * Process-wide by nature (SIGALRM), so it lives in the executables' core, not
 * in the library.
 */
#include "hook.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

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

void hook_deadline_arm(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_deadline;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    /* A pending alarm survives execve: when the thin hook fell back to the
     * local one, the time it already spent counts. */
    unsigned left = alarm(0);
    alarm(left > 0 && left < HOOK_HARD_DEADLINE_S ? left : HOOK_HARD_DEADLINE_S);
}

void hook_deadline_decided(int status) { decided_status = status; }
