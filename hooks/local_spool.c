/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The local decisions spool (docs/metrics.md, "Decisions of pullgate-hook-local"):
 * pullgate-hook-local appends one line per decision to a file in stateDir, and
 * pullgate-cri folds the lines into pullgate_cri_hook_decisions_total{path="local"}
 * when it next renders its metrics, so a denial made while pullgate-cri was down
 * (or answered "not mine") is counted once it is back.
 *
 * The protocol, both halves in this file:
 *   append  open(spool, O_APPEND|O_CREAT|O_NOFOLLOW) ; flock(LOCK_SH|LOCK_NB) ;
 *           nlink == 1 (not folded meanwhile) ; one write() of one line ; close.
 *           A lock refused or an unlinked file means a fold took this file: the
 *           path names a fresh file now, so the append tries once more there.
 *   take    rename(spool -> spool.folding, no replace) ; flock(LOCK_EX), waiting
 *           a bounded time for appenders that hold LOCK_SH ; read ; unlink ; close.
 *           An appender that opened the old file and locks it after the fold's
 *           lock sees it refused or unlinked and goes to the new file, so no line
 *           is written where nobody reads it. A fold that cannot get the lock in
 *           time leaves spool.folding for the next fold, which takes it first.
 * The hook never blocks on any of this (non-blocking lock, one small write to a
 * local file), never fails a decision over it, and stops appending once the file
 * holds HOOK_SPOOL_MAX_BYTES: the spool is bounded whether or not anyone folds it.
 */
#include "hook.h"

#include "cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SPOOL_FOLDING HOOK_SPOOL_NAME ".folding"
#define WORD_MAX 40
#define HOOK_SPOOL_APPEND_ATTEMPTS 8

/* stateDir as the spool's directory: ours (root's) and not writable by others. */
static int open_spool_dir(const char *state_dir)
{
    int dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (dfd >= 0 && (fstat(dfd, &st) != 0 || st.st_uid != geteuid() ||
                     (st.st_mode & (S_IWGRP | S_IWOTH)))) {
        close(dfd);
        dfd = -1;
    }
    return dfd;
}

/* A spool file the hook or pullgate-cri wrote: regular, ours, writable by nobody else. */
static bool spool_file_ok(const struct stat *st)
{
    return S_ISREG(st->st_mode) && st->st_uid == geteuid() &&
           !(st->st_mode & (S_IWGRP | S_IWOTH));
}

int hook_spool_format(long long when, const char *result, const char *reason, char *line,
                      size_t n)
{
    int len = snprintf(line, n, "%lld %s %s\n", when, result, reason);
    return len > 0 && (size_t)len < n ? len : -1;
}

/* 1 written, 0 try the path again (the file was taken by a fold), -1 give up. */
static int append_once(int dfd, const char *line, size_t len)
{
    /* Closed (which releases the lock) on every return. */
    pg_autoclose int fd = openat(
        dfd, HOOK_SPOOL_NAME,
        O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    struct stat st;
    if (flock(fd, LOCK_SH | LOCK_NB) != 0)
        return errno == EWOULDBLOCK ? 0 : -1; /* being folded */
    if (fstat(fd, &st) != 0 || !spool_file_ok(&st))
        return -1;
    if (st.st_nlink == 0)
        return 0; /* folded and unlinked after our open */
    if (st.st_size + (off_t)len > HOOK_SPOOL_MAX_BYTES)
        return -1;
    return write(fd, line, len) == (ssize_t)len ? 1 : -1;
}

int hook_spool_append(const char *state_dir, long long when, const char *result,
                      const char *reason)
{
    char line[HOOK_SPOOL_LINE_MAX];
    int len = hook_spool_format(when, result, reason, line, sizeof line);
    pg_autoclose int dfd = len > 0 && state_dir ? open_spool_dir(state_dir) : -1;
    if (dfd < 0)
        return -1;
    /* A fold renames the file and locks it: an appender that opened it just before retries at
     * the path, where a fresh file waits. Each attempt is an open and a non-blocking lock, never
     * a wait; a few cover folds that follow each other closely. */
    int rc = 0;
    for (int attempt = 0; attempt < HOOK_SPOOL_APPEND_ATTEMPTS && rc == 0; attempt++)
        rc = append_once(dfd, line, (size_t)len);
    return rc == 1 ? 0 : -1;
}

void hook_run_spool(const hook_run *run)
{
    const char *result = run->decision.allow             ? "allow"
                         : hook_run_mode(run) == PG_MODE_AUDIT ? "audit-deny"
                                                               : "deny";
    const char *reason = run->decision.reason ? pg_reason_name(run->decision.reason)
                                              : "not-kubernetes";
    const char *state_dir = run->cfg ? pg_config_state_dir(run->cfg) : PG_DEFAULT_STATE_DIR;
    hook_spool_append(state_dir, (long long)time(NULL), result, reason);
}

/* ------------------------------------------------------------ reading */

/* A word of the spool's vocabulary: [a-z-]{1,WORD_MAX}. */
static size_t word_len(const char *p, const char *end)
{
    size_t n = 0;
    while (p + n < end && n <= WORD_MAX && ((p[n] >= 'a' && p[n] <= 'z') || p[n] == '-'))
        n++;
    return n <= WORD_MAX ? n : 0;
}

/* One line (without its newline): "<unix seconds> <result> <reason>". */
static void parse_line(const char *p, const char *end, hook_spool_fn fn, void *ctx)
{
    long long when = 0;
    size_t digits = 0;
    while (p < end && *p >= '0' && *p <= '9' && digits < 18)
        when = when * 10 + (*p++ - '0'), digits++;
    char result[WORD_MAX + 1], reason[WORD_MAX + 1];
    size_t r = digits && p < end && *p == ' ' ? word_len(++p, end) : 0;
    memcpy(result, p, r);
    result[r] = '\0';
    p += r;
    size_t s = r && p < end && *p == ' ' ? word_len(++p, end) : 0;
    memcpy(reason, p, s);
    reason[s] = '\0';
    if (s && p + s == end)
        fn(ctx, when, result, reason);
    else
        fn(ctx, 0, NULL, NULL);
}

size_t hook_spool_parse(const char *text, size_t len, hook_spool_fn fn, void *ctx)
{
    size_t lines = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl)
            parse_line(p, nl, fn, ctx);
        else
            fn(ctx, 0, NULL, NULL); /* unterminated: a write cut short */
        lines++;
        p = nl ? nl + 1 : end;
    }
    return lines;
}

/* Waits up to wait_ms for the appenders that hold the file: 0 locked, -1 not in time. */
static int lock_exclusive(int fd, int wait_ms)
{
    for (int waited = 0;; waited++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK || waited >= wait_ms)
            return -1;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
}

/* spool.folding, when there is one: read, handed to fn line by line, removed. */
static int take_folding(int dfd, int wait_ms, hook_spool_fn fn, void *ctx, size_t *lines)
{
    pg_autoclose int fd =
        openat(dfd, SPOOL_FOLDING, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    struct stat st;
    if (lock_exclusive(fd, wait_ms) != 0 || fstat(fd, &st) != 0)
        return -1;
    if (st.st_nlink == 0)
        return 0; /* another fold took it while we waited */
    if (!spool_file_ok(&st))
        return unlinkat(dfd, SPOOL_FOLDING, 0); /* not ours to read: dropped, never counted */
    pg_autofree char *text = NULL;
    size_t len = 0;
    if (pg_read_fd(fd, HOOK_SPOOL_MAX_BYTES + HOOK_SPOOL_LINE_MAX, &text, &len, NULL) != PG_OK)
        return -1;
    /* Removed before the lock goes (the close on return): a late appender finds it unlinked. */
    if (unlinkat(dfd, SPOOL_FOLDING, 0) != 0)
        return -1;
    *lines += hook_spool_parse(text, len, fn, ctx);
    return 0;
}

long hook_spool_take(const char *state_dir, int wait_ms, hook_spool_fn fn, void *ctx)
{
    pg_autoclose int dfd = state_dir ? open_spool_dir(state_dir) : -1;
    if (dfd < 0)
        return -1;
    size_t lines = 0;
    int rc = take_folding(dfd, wait_ms, fn, ctx, &lines); /* a fold left unfinished first */
    if (rc == 0) {
        /* No replace: a spool.folding appearing meanwhile is another fold's, left alone. */
        int moved = renameat2(dfd, HOOK_SPOOL_NAME, dfd, SPOOL_FOLDING, RENAME_NOREPLACE);
        if (moved != 0 && errno == EINVAL) /* a file system without it: the caller serialises */
            moved = renameat(dfd, HOOK_SPOOL_NAME, dfd, SPOOL_FOLDING);
        if (moved == 0)
            rc = take_folding(dfd, wait_ms, fn, ctx, &lines);
        else if (errno != ENOENT)
            rc = -1;
    }
    return rc == 0 ? (long)lines : -1;
}
