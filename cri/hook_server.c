/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The resident hook server (hook_server.h; trust both ways, and why the daemon opens no
 * path the hook names: docs/design.md, "The resident hook"). Per connection: one request,
 * one reply, close; syslog and D-Bus come after the reply, never delaying a start.
 */
#include "hook_server.h"

#include "cri_metrics.h"

#include "hook.h"
#include "hook_proto.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 2
#define IO_TIMEOUT_MS 1000 /* a peer that stalls holds a worker at most this long */
#define MAX_FDS 8 /* room to receive (and close) a few stray fds */

/* ------------------------------------------------------------ config identity */

int cri_hook_config_identify(const char *path, cri_hook_config_id *id)
{
    memset(id, 0, sizeof *id);
    id->usable = 1;
    if (!path)
        return 0;
    struct stat st;
    /* The checks pg_config_load_file makes before the hook reads its file (no
     * symlink, a regular file of root's, not writable by group or others): a
     * file the hook would refuse is never the file this daemon loaded. */
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
        (st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & (S_IWGRP | S_IWOTH)))
        return -1;
    id->has_file = 1;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->size = st.st_size;
    id->mtime = st.st_mtim;
    id->ctime = st.st_ctim;
    return 0;
}

static int same_time(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

int cri_hook_config_same(const cri_hook_config_id *a, const cri_hook_config_id *b)
{
    if (!a->usable || !b->usable || a->has_file != b->has_file)
        return 0;
    if (!a->has_file)
        return 1;
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           same_time(a->mtime, b->mtime) && same_time(a->ctime, b->ctime);
}

/*
 * What the hook would load from path: without --config a missing default file
 * means defaults (lstat, as the hook checks); otherwise the file's identity.
 * ctime changes with every write, rename into place or chmod, so an equal
 * identity means the same bytes the daemon parsed.
 */
static int hook_config_id(const char *path, int explicit_, cri_hook_config_id *id)
{
    struct stat st;
    if (!explicit_ && strcmp(path, PG_DEFAULT_CONFIG_PATH) == 0 && lstat(path, &st) != 0 &&
        errno == ENOENT)
        return cri_hook_config_identify(NULL, id);
    return cri_hook_config_identify(path, id);
}

/* ------------------------------------------------------------ the server */

struct cri_hook_server {
    char *path;
    int listen_fd;
    int stop_pipe[2];
    const pg_config *cfg;
    cri_hook_config_id config_id;
    char *config_path; /* the file it came from, NULL: defaults (for the log only) */
    pg_notifier *notifier;
    cri_decider *decider; /* borrowed: its store (and caches) are shared with ImageStatus */
    pthread_t workers[WORKERS];
    size_t n_workers;
};

/* ------------------------------------------------------------ one request */

int cri_hook_check_request(const unsigned char *msg, size_t len, const int *fds, size_t n_fds,
                           struct hook_request *req)
{
    if (n_fds != 1 || hook_proto_decode_request(msg, len, req) != 0)
        return -1;
    struct stat st;
    if (fstat(fds[0], &st) != 0 || !S_ISDIR(st.st_mode))
        return -1;
    char stage[HOOK_PROTO_MAX_STAGE + 1];
    memcpy(stage, req->stage, req->stage_len);
    stage[req->stage_len] = '\0';
    return hook_is_known_stage(stage) ? 0 : -1;
}

static int peer_is_root(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == 0;
}

/* 1 when fd became readable within IO_TIMEOUT_MS. */
static int readable_soon(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, IO_TIMEOUT_MS);
    while (r < 0 && errno == EINTR);
    return r == 1;
}

/* One message; every fd that came with it lands in fds (all must be closed by the caller). */
static ssize_t receive_request(int conn, unsigned char *buf, size_t cap, int *fds, size_t *n_fds)
{
    union {
        char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = control.buf,
                        .msg_controllen = sizeof control.buf};
    /*
     * The hook sends right after connecting, so the request is usually there by
     * now: try first, wait (bounded) only when it is not; a peer that stalls
     * holds a worker at most IO_TIMEOUT_MS, without a per-connection timeout.
     */
    ssize_t r;
    for (;;) {
        r = recvmsg(conn, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (r >= 0 || (errno != EINTR && errno != EAGAIN))
            break;
        if (errno == EAGAIN && !readable_soon(conn))
            break;
    }
    *n_fds = 0;
    if (r >= 0) {
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < n && *n_fds < MAX_FDS; i++)
                memcpy(&fds[(*n_fds)++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        }
    }
    /* A cut message or cut fd list is never decided on. */
    if (r >= 0 && (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
        return -1;
    return r;
}

/* 1 when the reply was handed to the hook's socket. */
static int send_reply(int conn, hook_reply_kind kind, int status, const char *line)
{
    unsigned char out[HOOK_PROTO_MAX_REPLY];
    hook_reply reply = {
        .kind = kind, .status = status, .line = line, .line_len = line ? strlen(line) : 0};
    size_t len = hook_proto_encode_reply(&reply, out, sizeof out);
    if (len == 0)
        return 0; /* cannot happen (the line is bounded); the hook then decides locally */
    /* One short message into a fresh socket's empty buffer never has to wait: a
     * send that would is a peer not playing the protocol (undelivered). */
    ssize_t w;
    do
        w = send(conn, out, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w < 0 && errno == EINTR);
    return w == (ssize_t)len;
}

/*
 * A hook that gave up waiting (this daemon was stopped or slow) has closed
 * its end and decided locally; its request may still be queued here.
 */
static int peer_gone(int conn)
{
    struct pollfd p = {.fd = conn, .events = POLLRDHUP};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/*
 * Whether the hook names the very file this daemon loaded, unchanged; when not, why,
 * for the log: the file the hook names is another one, the same one changed since
 * (the same path or the same inode: edited in place or replaced by an editor's
 * rename; a restart of pullgate-cri takes it), or one the hook itself would refuse.
 */
static int config_is_mine(const cri_hook_server *s, const hook_request *req, const char **why)
{
    char path[HOOK_PROTO_MAX_CONFIG + 1];
    memcpy(path, req->config, req->config_len);
    path[req->config_len] = '\0';
    cri_hook_config_id now;
    if (hook_config_id(path, (int)req->config_explicit, &now) != 0) {
        *why = "hook server: not mine (the hook names a configuration file it would refuse: a "
               "symbolic link, not root's, or writable by group or others)";
        return 0;
    }
    if (cri_hook_config_same(&s->config_id, &now))
        return 1;
    const cri_hook_config_id *mine = &s->config_id;
    bool same_path = s->config_path && strcmp(s->config_path, path) == 0;
    if (same_path || (mine->has_file && now.has_file && mine->dev == now.dev && mine->ino == now.ino))
        *why = "hook server: not mine (the configuration file changed since pullgate-cri "
               "loaded it: restart pullgate-cri)";
    else
        *why = "hook server: not mine (the hook names another configuration file)";
    return 0;
}

/* Decides, replies, closes the connection, then logs and signals. doc: the worker's reader. */
static void decide_and_reply(cri_hook_server *s, hook_doc *doc, int conn, const hook_request *req,
                             int bundle_fd)
{
    long long t0 = pg_metrics_now_us();
    pg_store *store = cri_decider_acquire(s->decider);
    if (!store) {
        cri_metric_hook_request("store-unavailable");
        send_reply(conn, HOOK_REPLY_NOT_MINE, 0, NULL); /* the hook reports the store error */
        close(conn);
        return;
    }
    char stage[HOOK_PROTO_MAX_STAGE + 1];
    memcpy(stage, req->stage, req->stage_len);
    stage[req->stage_len] = '\0';
    hook_run run;
    memset(&run, 0, sizeof run);
    hook_evaluate_resident(&run, s->cfg, store, doc, stage, req->state, req->state_len, bundle_fd);
    cri_decider_release(s->decider);
    hook_subject who = hook_run_subject(&run);
    pg_mode mode = hook_run_mode(&run);
    char line[HOOK_LINE_MAX];
    int status = hook_report_line(&who, &run.decision, mode, line, sizeof line);
    int delivered = send_reply(conn, HOOK_REPLY_DECISION, status, line);
    close(conn);
    cri_metric_hook_request(delivered ? "answered" : "undelivered");
    /* Undelivered, the hook decides again in its own process and counts that one. */
    if (delivered)
        cri_metric_hook_decision(run.decision.allow, mode == PG_MODE_AUDIT,
                                 run.decision.reason ? pg_reason_name(run.decision.reason)
                                                     : "not-kubernetes",
                                 (double)(pg_metrics_now_us() - t0) / 1e6);
    /* Reported only when the hook got it: otherwise it fell back and reports on its own. */
    if (delivered)
        hook_report_sinks(&who, &run.decision, mode, s->notifier);
    cri_log(CRI_LOG_INFO, delivered ? "hook decision" : "hook decision not delivered", "container",
            run.state.id, "stage", stage, "allowed", run.decision.allow ? "true" : "false",
            "reason", run.decision.reason ? pg_reason_name(run.decision.reason) : "not-kubernetes",
            NULL);
    hook_run_free(&run);
    hook_doc_trim(doc); /* a large config.json's buffers are not kept */
}

static void serve_connection(cri_hook_server *s, hook_doc *doc, int conn, unsigned char *buf,
                             size_t cap)
{
    int fds[MAX_FDS];
    size_t n_fds = 0;
    hook_request req;
    const char *why = NULL;
    if (!peer_is_root(conn)) {
        cri_log(CRI_LOG_WARNING, "hook server: refused a peer that is not root", NULL);
        cri_metric_hook_request("not-root");
        close(conn);
        return;
    }
    ssize_t r = receive_request(conn, buf, cap, fds, &n_fds);
    if (r <= 0 || cri_hook_check_request(buf, (size_t)r, fds, n_fds, &req) != 0) {
        cri_log(CRI_LOG_WARNING, "hook server: malformed request dropped", NULL);
        cri_metric_hook_request("bad-request");
        close(conn);
    } else if (peer_gone(conn)) {
        cri_log(CRI_LOG_INFO, "hook server: the hook gave up waiting; not decided", NULL);
        cri_metric_hook_request("abandoned");
        close(conn);
    } else if (!config_is_mine(s, &req, &why)) {
        cri_log(CRI_LOG_INFO, why, NULL);
        cri_metric_hook_request("not-mine");
        send_reply(conn, HOOK_REPLY_NOT_MINE, 0, NULL);
        close(conn);
    } else {
        decide_and_reply(s, doc, conn, &req, fds[0]);
    }
    for (size_t i = 0; i < n_fds; i++)
        close(fds[i]);
}

/* ------------------------------------------------------------ workers */

/*
 * 1 when a connection may be waiting, 0 when asked to stop. Every idle worker wakes and
 * the first to get a CPU takes it (the others get EAGAIN); waking one only (EPOLLEXCLUSIVE)
 * was worse at p99 under load (bench/README.md, "The hook at the exec floor, round two").
 */
static int wait_for_connection(cri_hook_server *s)
{
    struct pollfd p[2] = {{.fd = s->listen_fd, .events = POLLIN},
                          {.fd = s->stop_pipe[0], .events = POLLIN}};
    for (;;) {
        int r = poll(p, 2, -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || p[1].revents)
            return 0;
        if (p[0].revents)
            return 1;
    }
}

static void *worker_main(void *arg)
{
    cri_hook_server *s = arg;
    size_t cap = HOOK_PROTO_MAX_REQUEST + 1; /* one byte more: an oversize message is cut */
    unsigned char *buf = malloc(cap);
    hook_doc *doc = hook_doc_new(); /* this worker's JSON reader, reused request after request */
    if (!buf || !doc)
        cri_log(CRI_LOG_ERROR, "hook server: a worker could not start (out of memory)", NULL);
    while (buf && doc && wait_for_connection(s)) {
        /* Both workers wake for one connection; the one that loses gets EAGAIN. */
        int conn = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (conn >= 0)
            serve_connection(s, doc, conn, buf, cap);
        else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
            usleep(10000); /* EMFILE and the like: do not spin */
    }
    hook_doc_free(doc);
    free(buf);
    return NULL;
}

/* ------------------------------------------------------------ socket */

/*
 * A socket left by a previous run (crash, SIGKILL) is replaced; a socket
 * someone still serves is not taken over, and no other kind of file is removed.
 */
static int remove_stale_socket(const char *path, pg_error *err)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? PG_OK : pg_fail_errno(err, errno, "stat %s", path);
    if (!S_ISSOCK(st.st_mode))
        return pg_fail(err, PG_ERR_UNSAFE, "%s exists and is not a socket", path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return pg_fail_errno(err, errno, "socket");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int live = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    if (live)
        return pg_fail(err, PG_ERR_UNSAFE, "%s: another server answers there", path);
    if (unlink(path) != 0 && errno != ENOENT)
        return pg_fail_errno(err, errno, "remove stale %s", path);
    return PG_OK;
}

static int bind_socket(cri_hook_server *s, pg_error *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(s->path) >= sizeof sa.sun_path)
        return pg_fail(err, PG_ERR_INVALID, "hook socket path too long: %.200s", s->path);
    memcpy(sa.sun_path, s->path, strlen(s->path) + 1);
    int rc = remove_stale_socket(s->path, err);
    if (rc != PG_OK)
        return rc;
    s->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->listen_fd < 0)
        return pg_fail_errno(err, errno, "socket");
    mode_t old = umask(0177); /* born 0600: no window in which others may connect */
    rc = bind(s->listen_fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc != 0)
        return pg_fail_errno(err, errno, "bind %s", s->path);
    if (chmod(s->path, 0600) != 0 || listen(s->listen_fd, 128) != 0)
        return pg_fail_errno(err, errno, "listen %s", s->path);
    return PG_OK;
}

static void server_free(cri_hook_server *s)
{
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    for (int i = 0; i < 2; i++)
        if (s->stop_pipe[i] >= 0)
            close(s->stop_pipe[i]);
    free(s->path);
    free(s->config_path);
    free(s);
}

static cri_hook_server *server_new(const cri_hook_server_options *o, pg_error *err)
{
    cri_hook_server *s = calloc(1, sizeof *s);
    if (!s) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    s->listen_fd = s->stop_pipe[0] = s->stop_pipe[1] = -1;
    s->cfg = o->cfg;
    s->config_id = o->config_id;
    s->notifier = o->notifier;
    s->decider = o->decider;
    s->path = strdup(o->path);
    s->config_path = o->config_path ? strdup(o->config_path) : NULL;
    if (!s->path || (o->config_path && !s->config_path)) {
        server_free(s);
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return s;
}

cri_hook_server *cri_hook_server_start(const cri_hook_server_options *o, pg_error *err)
{
    cri_hook_server *s = server_new(o, err);
    if (!s)
        return NULL;
    int rc = s->decider ? PG_OK : pg_fail(err, PG_ERR_INVALID, "hook server: no decider");
    if (rc == PG_OK && pipe2(s->stop_pipe, O_CLOEXEC) != 0)
        rc = pg_fail_errno(err, errno, "pipe");
    if (rc == PG_OK)
        rc = bind_socket(s, err);
    if (rc != PG_OK) {
        server_free(s);
        return NULL;
    }
    /* Syslog as the hook logs (ident, facility, mask from logLevel): one record per decision. */
    hook_log_open(pg_config_log_level(s->cfg));
    for (; s->n_workers < WORKERS; s->n_workers++)
        if (pthread_create(&s->workers[s->n_workers], NULL, worker_main, s) != 0)
            break;
    if (s->n_workers == 0) {
        unlink(s->path);
        server_free(s);
        pg_fail(err, PG_ERR_NOMEM, "cannot start the hook server's threads");
        return NULL;
    }
    cri_metric_hook_server_up(true);
    return s;
}

int cri_hook_server_stop(cri_hook_server *s, int timeout_ms)
{
    if (!s)
        return 1;
    /* No new hook reaches us; one that tries now decides locally. */
    unlink(s->path);
    cri_metric_hook_server_up(false);
    ssize_t ignored = write(s->stop_pipe[1], "x", 1);
    (void)ignored;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    int all = 1;
    for (size_t i = 0; i < s->n_workers; i++)
        if (pthread_timedjoin_np(s->workers[i], NULL, &until) != 0)
            all = 0;
    if (!all)
        return 0; /* a worker is stuck in the store: left to exit() */
    server_free(s);
    return 1;
}
