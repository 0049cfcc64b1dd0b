/* SPDX-License-Identifier: Apache-2.0 */
/* The client side of the resident hook exchange; see hook_client.h. */
#include "hook_client.h"
#include "cleanup.h"
#include "internal.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int64_t left_ms(int64_t deadline)
{
    int64_t left = deadline - pg_monotonic_ms();
    return left > 0 ? left : 0;
}

static int wait_for(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = left_ms(deadline);
        if (left == 0)
            return -1;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || (p.revents & (POLLNVAL | POLLERR)))
            return -1;
        if (p.revents & (events | POLLHUP))
            return 0;
    }
}

/* Connected to a server that runs as root, or -1. */
static int connect_daemon(const char *path, int64_t deadline, hook_client_error *why)
{
    *why = HOOK_CLIENT_NO_SERVER;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return -1;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    pg_autoclose int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (errno != EINPROGRESS)
            return -1;
        if (wait_for(fd, POLLOUT, deadline) != 0) {
            *why = HOOK_CLIENT_TIMEOUT;
            return -1;
        }
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0)
            return -1;
    }
    /* Only root's answer is trusted: anyone else could have bound a socket at this path. */
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.uid != 0) {
        *why = HOOK_CLIENT_NOT_ROOT;
        return -1;
    }
    *why = HOOK_CLIENT_OK;
    int connected = fd;
    fd = -1; /* the caller's now */
    return connected;
}

static int send_request(int fd, const unsigned char *msg, size_t len, int bundle_fd,
                        int64_t deadline)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = control.buf,
                        .msg_controllen = sizeof control.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &bundle_fd, sizeof(int));
    for (;;) {
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (w == (ssize_t)len)
            return 0;
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN && wait_for(fd, POLLOUT, deadline) == 0)
            continue;
        return -1;
    }
}

/* Exactly one well-formed reply message, no fds with it. */
static int receive_reply(int fd, unsigned char *buf, size_t cap, hook_reply *reply,
                         int64_t deadline)
{
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } control;
    for (;;) {
        struct iovec iov = {.iov_base = buf, .iov_len = cap};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = control.buf,
                            .msg_controllen = sizeof control.buf};
        ssize_t r = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN && wait_for(fd, POLLIN, deadline) == 0)
            continue;
        if (r <= 0)
            return -1;
        int stray_fds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < n; i++) {
                int stray;
                memcpy(&stray, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                close(stray);
                stray_fds = 1;
            }
        }
        if (stray_fds || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
            return -1;
        return hook_proto_decode_reply(buf, (size_t)r, reply);
    }
}

int hook_client_exchange_why(const char *path, const unsigned char *msg, size_t len, int bundle_fd,
                             int64_t deadline, unsigned char *buf, size_t cap, hook_reply *reply,
                             hook_client_error *why)
{
    hook_client_error ignored;
    if (!why)
        why = &ignored;
    pg_autoclose int fd = connect_daemon(path, deadline, why);
    if (fd < 0)
        return -1;
    int rc = send_request(fd, msg, len, bundle_fd, deadline);
    if (rc == 0)
        rc = receive_reply(fd, buf, cap, reply, deadline);
    if (rc != 0)
        *why = left_ms(deadline) == 0 ? HOOK_CLIENT_TIMEOUT : HOOK_CLIENT_BAD_REPLY;
    return rc;
}
