/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-hook [--config FILE] [--stage STAGE] [--daemon-socket PATH|none]
 *
 * The OCI hook the runtimes run: a thin client of pullgate-cri's resident hook
 * server (docs/design.md, "The resident hook", has the protocol, the trust and
 * the fallback). On ANY failure before a valid reply, or a "not mine", it execs
 * pullgate-hook-local with the same argv and the stdin bytes already read: a
 * dead, hung or confused daemon costs time (at most HOOK_DAEMON_BUDGET_MS) but
 * never changes a decision; if even that exec fails it denies. It never forks,
 * so a runtime timeout cannot leave a child holding the runtime's pipes. Links
 * no libcrypto (checked by test_hook_daemon.sh with nm).
 */
#include "cleanup.h"
#include "hook.h"
#include "hook_client.h"
#include "hook_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define HOOK_DAEMON_BUDGET_MS 500 /* connect + send + reply, in total */
#define LOCAL_HOOK_NAME "pullgate-hook-local"

/* ------------------------------------------------------------ fallback */

/* What the local hook gets on fd 0. */
typedef enum stdin_handover {
    STDIN_AS_IS,    /* untouched: nothing read yet, or the runtime never closed it */
    STDIN_THE_BYTES /* a memfd holding exactly the bytes read */
} stdin_handover;

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Puts bytes on fd 0 as a memfd, read from its start: the local hook sees them then EOF. */
static int hand_over_stdin(const char *bytes, size_t len)
{
    pg_autoclose int fd = memfd_create("pullgate-oci-state", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (write_all(fd, bytes, len) != 0 || lseek(fd, 0, SEEK_SET) != 0)
        return -1;
    return dup2(fd, STDIN_FILENO) == STDIN_FILENO ? 0 : -1;
}

/*
 * <directory of this executable>/pullgate-hook-local into out: from
 * /proc/self/exe, or, without /proc, the absolute path the runtime exec'd
 * (AT_EXECFN; hooks.d and OCI specs require an absolute hook path).
 */
static int local_hook_path(char *out, size_t n)
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = '\0';
    } else {
        const char *execfn = (const char *)getauxval(AT_EXECFN);
        if (!execfn || execfn[0] != '/' || strlen(execfn) >= sizeof self)
            return -1;
        memcpy(self, execfn, strlen(execfn) + 1);
    }
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    int w = snprintf(out, n, "%s/%s", self, LOCAL_HOOK_NAME);
    return w > 0 && (size_t)w < n ? 0 : -1;
}

static void deny_exit(const char *why)
{
    fprintf(stderr,
            "pullgate: denied container " HOOK_UNKNOWN " (namespace " HOOK_UNKNOWN
            ", image " HOOK_UNKNOWN "): %s\n",
            why);
    _exit(1);
}

/* Decides locally: execs pullgate-hook-local with the same argv; returns only to deny. */
static void __attribute__((noreturn))
fall_back(char **argv, stdin_handover how, const char *bytes, size_t len)
{
    char path[PATH_MAX];
    if (how == STDIN_THE_BYTES && hand_over_stdin(bytes, len) != 0)
        deny_exit("cannot hand the OCI state over to " LOCAL_HOOK_NAME);
    if (local_hook_path(path, sizeof path) != 0)
        deny_exit("cannot locate " LOCAL_HOOK_NAME);
    execv(path, argv);
    char why[PATH_MAX + 128];
    snprintf(why, sizeof why, "cannot run %.*s: %s", PATH_MAX, path, strerror(errno));
    deny_exit(why);
    _exit(1); /* not reached */
}

/* ------------------------------------------------------------ exchange */

/* 0 with *reply (pointing into buf) from the daemon, or -1: decide locally. */
static int ask_daemon(const char *path, const hook_request *req, int bundle_fd, unsigned char *buf,
                      size_t cap, hook_reply *reply)
{
    static unsigned char msg[HOOK_PROTO_MAX_REQUEST];
    size_t len = hook_proto_encode_request(req, msg, sizeof msg);
    if (len == 0)
        return -1; /* over a bound: the local hook handles any size it accepts */
    int64_t deadline = pg_monotonic_ms() + HOOK_DAEMON_BUDGET_MS;
    return hook_client_exchange_why(path, msg, len, bundle_fd, deadline, buf, cap, reply, NULL);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    if (hook_print_version(argc, argv, "pullgate-hook"))
        return fclose(stdout) == 0 ? 0 : 1;
    hook_deadline_arm();
    hook_args args;
    pg_error err = {0};
    /* Bad arguments: the local hook reads the state and denies naming the container. */
    if (hook_parse_args(argc, argv, &args, &err) != PG_OK)
        fall_back(argv, STDIN_AS_IS, NULL, 0);
    const char *socket_path = args.daemon_socket ? args.daemon_socket : PG_DEFAULT_HOOK_SOCKET;
    if (strcmp(socket_path, "none") == 0)
        fall_back(argv, STDIN_AS_IS, NULL, 0);

    char *state = NULL;
    size_t state_len = 0;
    bool timed_out = false;
    if (hook_read_fd_partial(STDIN_FILENO, HOOK_MAX_STATE_BYTES, HOOK_STDIN_DEADLINE_MS, 0, &state,
                             &state_len, &timed_out, &err) != PG_OK) {
        /*
         * Let the local hook meet the same input: stdin still open (told the
         * deadline is used up, it reports it at once), or the oversize bytes
         * (it reports the size).
         */
        if (timed_out) {
            char spent[16];
            snprintf(spent, sizeof spent, "%d", HOOK_STDIN_DEADLINE_MS);
            setenv(HOOK_STDIN_SPENT_ENV, spent, 1);
        }
        fall_back(argv,
                  timed_out || state_len <= HOOK_MAX_STATE_BYTES ? STDIN_AS_IS : STDIN_THE_BYTES,
                  state, state_len);
    }
    hook_state st = {0};
    int bundle_fd = -1;
    /*
     * The daemon resolves no path of ours: a relative --config would name
     * another file in its working directory, so that is decided locally too.
     */
    if (args.config_path[0] != '/' || hook_parse_state(NULL, state, state_len, &st, &err) != PG_OK ||
        hook_open_bundle(st.bundle, &bundle_fd, &err) != PG_OK)
        fall_back(argv, STDIN_THE_BYTES, state, state_len);

    hook_request req = {
        .stage = args.stage,
        .stage_len = strlen(args.stage),
        .config = args.config_path,
        .config_len = strlen(args.config_path),
        .state = state,
        .state_len = state_len,
        .config_explicit = (unsigned)args.config_explicit,
    };
    static unsigned char reply_buf[HOOK_PROTO_MAX_REPLY + 1];
    hook_reply reply;
    if (ask_daemon(socket_path, &req, bundle_fd, reply_buf, sizeof reply_buf, &reply) != 0 ||
        reply.kind != HOOK_REPLY_DECISION)
        fall_back(argv, STDIN_THE_BYTES, state, state_len);

    /* Decided by the daemon, which also logged it: this process only relays. */
    hook_deadline_decided(reply.status);
    int status = reply.status;
    if (reply.line_len) {
        int ignored = write_all(STDERR_FILENO, reply.line, reply.line_len);
        (void)ignored; /* as the local hook: an unwritable stderr does not change the decision */
    }
    alarm(0);
    close(bundle_fd);
    hook_state_clear(&st);
    free(state);
    if (fclose(stdout) != 0)
        status = status ? status : 1;
    return status;
}
