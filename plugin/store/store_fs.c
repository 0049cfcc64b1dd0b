/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store's safe-filesystem primitives (store_fs.h; the design:
 * docs/design.md, "Record directories"). Nothing here knows what a record means.
 */
#include "internal.h"
#include "store_fs.h"
#include "store_trace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ helpers */

int pg_st_prefix_error(pg_error *err, int code, const char *dir, const char *sub, const char *name)
{
    if (err)
        err->code = code;
    pg_error_prefix(err, "%s/%s/%s", dir, sub, name);
    return code;
}

bool pg_st_is_record_name(const char *name)
{
    size_t n = strlen(name);
    return strncmp(name, NAME_PREFIX, strlen(NAME_PREFIX)) == 0 &&
           !(n >= strlen(TMP_SUFFIX) && strcmp(name + n - strlen(TMP_SUFFIX), TMP_SUFFIX) == 0);
}

int pg_st_check_input(const char *what, const char *s, pg_error *err)
{
    if (!s || !*s)
        return pg_fail(err, PG_ERR_INVALID, "empty %s", what);
    if (strlen(s) > PG_MAX_IMAGE_LEN)
        return pg_fail(err, PG_ERR_LIMIT, "%s longer than %d bytes", what, PG_MAX_IMAGE_LEN);
    return PG_OK;
}

/* ------------------------------------------------ file-system changes */

/*
 * Every change the store makes to a record directory goes through the
 * functions of this section, so that the crash simulation
 * (test/unit/test_store_crash.c) can record them: the test build compiles this
 * file a second time with PG_STORE_TRACE, which reports each successful change
 * to pg_st_trace (store_trace.h). The library's own build has no tracing.
 */
#ifdef PG_STORE_TRACE
#define TRACE(op, dirfd, name, name2, fd, data, len)                                               \
    pg_st_trace(op, dirfd, name, name2, fd, data, len)
#else
#define TRACE(op, dirfd, name, name2, fd, data, len) ((void)0)
#endif

int pg_st_fsync_retry(int fd)
{
    int rc;
    while ((rc = fsync(fd)) != 0 && errno == EINTR)
        ;
    if (rc == 0)
        TRACE(PG_TR_FSYNC, -1, NULL, NULL, fd, NULL, 0);
    return rc;
}

int pg_st_sys_openat(int dirfd, const char *name, int flags, mode_t mode)
{
#ifdef PG_STORE_TRACE
    struct stat before;
    bool existed = (flags & O_CREAT) && !(flags & O_EXCL) &&
                   fstatat(dirfd, name, &before, AT_SYMLINK_NOFOLLOW) == 0;
#endif
    int fd = openat(dirfd, name, flags, mode);
#ifdef PG_STORE_TRACE
    if (fd >= 0 && (flags & O_CREAT) && !existed)
        TRACE(PG_TR_CREATE, dirfd, name, NULL, fd, NULL, 0);
    else if (!(flags & O_CREAT))
        TRACE(PG_TR_OPEN, dirfd, name, NULL, fd, NULL, 0);
#endif
    return fd;
}

static int pg_st_sys_renameat(int dirfd, const char *from, const char *to)
{
    int rc = renameat(dirfd, from, dirfd, to);
    if (rc == 0)
        TRACE(PG_TR_RENAME, dirfd, from, to, -1, NULL, 0);
    return rc;
}

int pg_st_sys_unlinkat(int dirfd, const char *name)
{
    int rc = unlinkat(dirfd, name, 0);
    if (rc == 0)
        TRACE(PG_TR_UNLINK, dirfd, name, NULL, -1, NULL, 0);
    return rc;
}

int pg_st_sys_mkdirat(int dirfd, const char *name, mode_t mode)
{
    int rc = mkdirat(dirfd, name, mode);
    if (rc == 0)
        TRACE(PG_TR_MKDIR, dirfd, name, NULL, -1, NULL, 0);
    return rc;
}

static int write_all(int fd, const char *data, size_t len)
{
    while (len) {
        ssize_t w = write(fd, data, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        TRACE(PG_TR_WRITE, -1, NULL, NULL, fd, data, (size_t)w);
        data += w;
        len -= (size_t)w;
    }
    return 0;
}

/* ------------------------------------------------------- directories */

/* A record directory must be ours: owned by root/euid, not writable by others. */
static int check_dir_fd(int fd, const char *path, pg_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return pg_fail_errno(err, errno, "stat %s", path);
    if (!S_ISDIR(st.st_mode))
        return pg_fail(err, PG_ERR_UNSAFE, "%s: not a directory", path);
    if (st.st_uid != 0 && st.st_uid != geteuid())
        return pg_fail(err, PG_ERR_UNSAFE, "%s: owned by uid %u, not root", path,
                       (unsigned)st.st_uid);
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return pg_fail(err, PG_ERR_UNSAFE, "%s: writable by group or others (mode %04o)", path,
                       (unsigned)(st.st_mode & 07777));
    return PG_OK;
}

int pg_st_open_dir_at(int base, const char *name, const char *shown, int *fd_out, pg_error *err)
{
    pg_autoclose int fd =
        pg_st_sys_openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return pg_fail(err, PG_ERR_NOT_FOUND, "%s: not found", shown);
        if (e == ELOOP || e == ENOTDIR)
            return pg_fail(err, PG_ERR_UNSAFE, "%s: a symbolic link or not a directory", shown);
        return pg_fail_errno(err, e, "open %s", shown);
    }
    int rc = check_dir_fd(fd, shown, err);
    if (rc == PG_OK) {
        *fd_out = fd;
        fd = -1;
    }
    return rc;
}

int pg_st_open_subdir(const record_dir *d, const char *sub, int *fd_out, pg_error *err)
{
    char shown[PATH_MAX];
    snprintf(shown, sizeof shown, "%s/%s", d->path, sub);
    return pg_st_open_dir_at(d->fd, sub, shown, fd_out, err);
}

int pg_st_make_dirs(const char *path, pg_error *err)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return pg_fail(err, PG_ERR_LIMIT, "state directory path too long");
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (pg_st_sys_mkdirat(AT_FDCWD, buf, 0700) != 0 && errno != EEXIST)
            return pg_fail_errno(err, errno, "mkdir %s", buf);
        *p = saved;
        if (!saved)
            return PG_OK;
    }
}

int pg_st_make_subdirs(const record_dir *d, pg_error *err)
{
    static const char *const subs[] = {SUB_PULLING, SUB_PULLED,    SUB_INTENTS, SUB_IMAGES,
                                       SUB_NAMES,   SUB_CREDTIMES, SUB_DIRCACHE};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (pg_st_sys_mkdirat(d->fd, subs[i], 0700) != 0 && errno != EEXIST)
            return pg_fail_errno(err, errno, "mkdir %s/%s", d->path, subs[i]);
    return PG_OK;
}

/* ------------------------------------------------------------ locking */

int pg_st_lock_store(const record_dir *d, int *lock_fd, pg_error *err)
{
    pg_autoclose int fd = pg_st_sys_openat(d->fd, LOCK_FILE,
                                           O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0)
        return pg_fail_errno(err, errno, "open %s/%s", d->path, LOCK_FILE);
    while (flock(fd, LOCK_EX) != 0)
        if (errno != EINTR)
            return pg_fail_errno(err, errno, "lock %s/%s", d->path, LOCK_FILE);
    *lock_fd = fd;
    fd = -1;
    return PG_OK;
}

void pg_st_unlock_store(int lock_fd)
{
    if (lock_fd >= 0)
        close(lock_fd); /* releases the flock */
}

/*
 * Long maintenance (prune) holds the lock only in short steps, so a pull's
 * intent, which forwarding waits for, never queues behind it for long. flock
 * is not fair: a holder that re-locks at once may win again, so the steps are
 * spaced out and a waiting writer takes its turn in between.
 */
#define STEP_ITEMS 64
#define STEP_MS 25
#define STEP_GAP_NS 1000000L

int pg_st_in_steps(const record_dir *w, size_t n, pg_st_step_item item, pg_st_step_end end,
                   void *ctx, pg_error *err)
{
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < n;) {
        if (i > 0)
            nanosleep(&(struct timespec){0, STEP_GAP_NS}, NULL);
        int lock_fd = -1;
        rc = pg_st_lock_store(w, &lock_fd, err);
        if (rc != PG_OK)
            break;
        int64_t started = pg_monotonic_ms();
        for (size_t done = 0;
             rc == PG_OK && i < n && done < STEP_ITEMS && pg_monotonic_ms() - started < STEP_MS;
             done++)
            rc = item(ctx, i++, err);
        /* The step's end runs after an item failed too (what was done is closed);
         * the first error is the one reported. */
        pg_error later = {0};
        int end_rc = end ? end(ctx, rc == PG_OK ? err : &later) : PG_OK;
        if (rc == PG_OK)
            rc = end_rc;
        pg_st_unlock_store(lock_fd);
    }
    return rc;
}

/* ------------------------------------------------------------ writing */

static void random_suffix(char out[17])
{
    unsigned char r[8];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        /* No entropy yet (early boot): uniqueness is all we need, O_EXCL checks it. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        unsigned long long v =
            (unsigned long long)ts.tv_nsec ^ ((unsigned long long)getpid() << 32) ^ (uintptr_t)&ts;
        memcpy(r, &v, sizeof r);
    }
    pg_hex_encode(r, sizeof r, out);
}

static int create_temp(int dirfd, const char *name, char *tmp, size_t tmp_size, int *fd_out)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        char rnd[17];
        random_suffix(rnd);
        snprintf(tmp, tmp_size, "%s.%s%s", name, rnd, TMP_SUFFIX);
        int fd = pg_st_sys_openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                  0600);
        if (fd >= 0) {
            *fd_out = fd;
            return 0;
        }
        if (errno != EEXIST)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

int pg_st_write_file_replace(int dirfd, const char *dir, const char *sub, const char *name,
                             const char *data, size_t len, bool sync, pg_error *err)
{
    char tmp[FILE_NAME_LEN + 32];
    int fd;
    if (create_temp(dirfd, name, tmp, sizeof tmp, &fd) != 0)
        return pg_fail_errno(err, errno, "create a temporary file in %s/%s", dir, sub);
    const char *step = NULL;
    if (write_all(fd, data, len) != 0)
        step = "write";
    else if (sync && pg_st_fsync_retry(fd) != 0)
        step = "fsync";
    int e = errno;
    if (close(fd) != 0 && !step) {
        step = "close";
        e = errno;
    }
    if (!step && pg_st_sys_renameat(dirfd, tmp, name) != 0) {
        step = "rename";
        e = errno;
    }
    if (step) {
        pg_st_sys_unlinkat(dirfd, tmp);
        return pg_fail_errno(err, e, "%s %s/%s/%s", step, dir, sub, tmp);
    }
    if (sync && pg_st_fsync_retry(dirfd) != 0)
        return pg_fail_errno(err, errno, "fsync %s/%s", dir, sub);
    return PG_OK;
}

int pg_st_write_file_atomic(int dirfd, const char *dir, const char *sub, const char *name,
                            const char *data, size_t len, pg_error *err)
{
    return pg_st_write_file_replace(dirfd, dir, sub, name, data, len, true, err);
}

/* --------------------------------------------------- concurrent fsync */

/*
 * fsyncs of one device issued together share the work: the block layer
 * merges their cache flushes and a journalling file system groups them into
 * one commit (bench/README.md, "Durable writes (round three)": four together
 * took 0.35-0.65x the time of four in turn). Each descriptor gets its own
 * short-lived thread; if a thread
 * cannot be created, its fsync runs here, in turn. Signals stay with the
 * caller's threads: the helpers start with every signal blocked.
 */
#define MAX_SYNC_THREADS 16
#define SYNC_THREAD_STACK (64u << 10)

typedef struct sync_job {
    int fd;
    int err; /* errno of a failed fsync, else 0 */
} sync_job;

static void *sync_job_run(void *arg)
{
    sync_job *j = arg;
    j->err = pg_st_fsync_retry(j->fd) == 0 ? 0 : errno;
    return NULL;
}

/* tmpfs/ramfs: fsync has nothing to do, so helper threads would only cost. */
static bool fsync_is_free(int fd)
{
    struct statfs sfs;
    return fstatfs(fd, &sfs) == 0 && (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC);
}

/* 0, or the errno of the first failure (its index in *failed). */
static int fsync_together(sync_job *jobs, size_t n, size_t *failed)
{
    pthread_t tid[MAX_SYNC_THREADS];
    bool started[MAX_SYNC_THREADS] = {false};
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_t attr;
    bool ready = n > 1 && !fsync_is_free(jobs[0].fd) && pthread_attr_init(&attr) == 0;
    /* An fsync needs little stack: no 8 MiB mapping per helper. */
    if (ready)
        pthread_attr_setstacksize(&attr, SYNC_THREAD_STACK);
    bool masked = ready && pthread_sigmask(SIG_SETMASK, &all, &old) == 0;
    for (size_t i = 1; masked && i < n && i < MAX_SYNC_THREADS; i++)
        started[i] = pthread_create(&tid[i], &attr, sync_job_run, &jobs[i]) == 0;
    if (masked)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (ready)
        pthread_attr_destroy(&attr);
    for (size_t i = 0; i < n; i++) {
        if (i < MAX_SYNC_THREADS && started[i])
            pthread_join(tid[i], NULL);
        else
            sync_job_run(&jobs[i]);
    }
    for (size_t i = 0; i < n; i++)
        if (jobs[i].err) {
            *failed = i;
            return jobs[i].err;
        }
    return 0;
}

/* ------------------------------------------------------- write batch */

/*
 * A staged write of several files (docs/design.md, "Durability"): a group
 * committed earlier is durable before any rename of a later group is even
 * issued, so ordering across directories comes from that fsync, not from a
 * file-system property.
 */
void pg_st_batch_init(pg_st_batch *b, int stop_after)
{
    *b = (pg_st_batch){0};
    b->stop_after = stop_after;
}

/* Tests: after stop_after steps, stop as a killed process would (temps stay). */
static bool batch_stops_here(pg_st_batch *b, pg_error *err)
{
    if (!b->stop_after || ++b->steps < b->stop_after)
        return false;
    b->abandoned = true;
    pg_fail(err, PG_ERR_IO, "write batch stopped after step %d (test)", b->steps);
    return true;
}

static void staged_drop_temp(st_staged *e)
{
    if (e->fd >= 0)
        close(e->fd);
    e->fd = -1;
    if (!e->renamed)
        pg_st_sys_unlinkat(e->dirfd, e->tmp);
}

/* The slot for dir/sub/name: an earlier stage of the same target is replaced. */
static st_staged *batch_slot(pg_st_batch *b, const char *sub, const char *name, pg_error *err)
{
    for (size_t i = b->done; i < b->n; i++)
        if (strcmp(b->v[i].sub, sub) == 0 && strcmp(b->v[i].name, name) == 0) {
            staged_drop_temp(&b->v[i]);
            return &b->v[i];
        }
    st_staged *grown = pg_st_grow(b->v, &b->cap, b->n, sizeof *grown, 8);
    if (!grown) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    b->v = grown;
    return &b->v[b->n++];
}

/* The batch's own descriptor of directory sub (one per subdirectory), or -1. */
static int batch_dir_fd(pg_st_batch *b, int dirfd, const char *sub)
{
    for (size_t i = 0; i < b->n_dirs; i++)
        if (strcmp(b->dirs[i].sub, sub) == 0)
            return b->dirs[i].fd;
    if (b->n_dirs == BATCH_MAX_DIRS) {
        errno = EMFILE;
        return -1;
    }
    int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (fd >= 0)
        b->dirs[b->n_dirs++] = (struct batch_dir){sub, fd};
    return fd;
}

static size_t open_temps(const pg_st_batch *b)
{
    size_t n = 0;
    for (size_t i = b->done; i < b->n; i++)
        n += b->v[i].fd >= 0;
    return n;
}

int pg_st_batch_stage(pg_st_batch *b, int dirfd, const char *dir, const char *sub, const char *name,
                      const char *data, size_t len, pg_error *err)
{
    if (strlen(name) > FILE_NAME_LEN)
        return pg_fail(err, PG_ERR_INVALID, "%s/%s: file name too long", dir, sub);
    /* A record mapping many names: descriptors stay bounded, the data goes early. */
    if (open_temps(b) >= BATCH_MAX_OPEN) {
        int rc = pg_st_batch_sync_data(b, err);
        if (rc != PG_OK)
            return rc;
    }
    st_staged *e = batch_slot(b, sub, name, err);
    if (!e)
        return PG_ERR_NOMEM;
    *e = (st_staged){.dirfd = batch_dir_fd(b, dirfd, sub), .dir = dir, .sub = sub, .fd = -1};
    snprintf(e->name, sizeof e->name, "%s", name);
    const char *step = NULL;
    if (e->dirfd < 0)
        step = "dup the directory of";
    else if (create_temp(e->dirfd, name, e->tmp, sizeof e->tmp, &e->fd) != 0)
        step = "create a temporary file in";
    else if (write_all(e->fd, data, len) != 0)
        step = "write a temporary file in";
    if (step) {
        int errnum = errno;
        if (e->fd >= 0) {
            close(e->fd);
            pg_st_sys_unlinkat(e->dirfd, e->tmp);
        }
        b->n--;               /* the slot is the last one: a replaced slot had the same target */
        if (e != &b->v[b->n]) /* a replaced slot in the middle: keep the array dense */
            memmove(e, e + 1, (size_t)(&b->v[b->n] - e) * sizeof *e);
        return pg_fail_errno(err, errnum, "%s %s/%s", step, dir, sub);
    }
    return PG_OK;
}

/* Round 1: the data of every staged file, fsync'd together, then closed. */
int pg_st_batch_sync_data(pg_st_batch *b, pg_error *err)
{
    pg_autofree sync_job *jobs = calloc(b->n ? b->n : 1, sizeof *jobs);
    if (!jobs)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = b->done; i < b->n; i++)
        if (b->v[i].fd >= 0)
            jobs[n++].fd = b->v[i].fd;
    size_t bad = 0;
    int e = n ? fsync_together(jobs, n, &bad) : 0;
    int rc = PG_OK;
    for (size_t i = b->done, k = 0; i < b->n; i++) {
        if (b->v[i].fd < 0)
            continue;
        if (e && k++ == bad)
            rc = pg_fail_errno(err, e, "fsync %s/%s/%s", b->v[i].dir, b->v[i].sub, b->v[i].tmp);
        if (close(b->v[i].fd) != 0 && rc == PG_OK)
            rc = pg_fail_errno(err, errno, "close %s/%s/%s", b->v[i].dir, b->v[i].sub, b->v[i].tmp);
        b->v[i].fd = -1;
    }
    return rc;
}

/* The distinct directories of entries [from, upto), fsync'd together. */
static int batch_sync_dirs(pg_st_batch *b, size_t from, size_t upto, pg_error *err)
{
    pg_autofree sync_job *jobs = calloc(upto - from, sizeof *jobs);
    pg_autofree size_t *owner = calloc(upto - from, sizeof *owner);
    int rc = jobs && owner ? PG_OK : pg_fail(err, PG_ERR_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = from; rc == PG_OK && i < upto; i++) {
        bool seen = false;
        for (size_t k = 0; k < n && !seen; k++)
            seen = strcmp(b->v[owner[k]].sub, b->v[i].sub) == 0;
        if (!seen) {
            owner[n] = i;
            jobs[n++].fd = b->v[i].dirfd;
        }
    }
    size_t bad = 0;
    int e = rc == PG_OK && n ? fsync_together(jobs, n, &bad) : 0;
    if (e)
        rc = pg_fail_errno(err, e, "fsync %s/%s", b->v[owner[bad]].dir, b->v[owner[bad]].sub);
    return rc;
}

/* Entries [done, upto) renamed into place, in staging order. */
static int batch_rename(pg_st_batch *b, size_t upto, pg_error *err)
{
    for (size_t i = b->done; i < upto; i++) {
        st_staged *e = &b->v[i];
        if (pg_st_sys_renameat(e->dirfd, e->tmp, e->name) != 0)
            return pg_fail_errno(err, errno, "rename %s/%s/%s", e->dir, e->sub, e->tmp);
        e->renamed = true;
        if (batch_stops_here(b, err))
            return PG_ERR_IO;
    }
    return PG_OK;
}

int pg_st_batch_commit(pg_st_batch *b, size_t upto, pg_error *err)
{
    if (upto > b->n)
        upto = b->n;
    if (upto <= b->done)
        return PG_OK;
    if (b->abandoned)
        return pg_fail(err, PG_ERR_IO, "write batch already stopped");
    bool data_pending = false;
    for (size_t i = b->done; i < b->n; i++)
        data_pending |= b->v[i].fd >= 0;
    int rc = data_pending ? pg_st_batch_sync_data(b, err) : PG_OK;
    if (rc != PG_OK || (data_pending && batch_stops_here(b, err)))
        return rc == PG_OK ? PG_ERR_IO : rc;
    rc = batch_rename(b, upto, err);
    if (rc != PG_OK)
        return rc;
    rc = batch_sync_dirs(b, b->done, upto, err);
    if (rc == PG_OK)
        b->done = upto;
    if (rc == PG_OK && batch_stops_here(b, err))
        return PG_ERR_IO;
    return rc;
}

/*
 * For files whose content nobody reads (an intent counts by existing): every
 * staged entry renamed at once, then its data and its directory fsync'd in ONE
 * round, durable on return. A crash during it leaves each name old, or new
 * with its data possibly torn.
 */
int pg_st_batch_commit_existence(pg_st_batch *b, pg_error *err)
{
    if (b->abandoned)
        return pg_fail(err, PG_ERR_IO, "write batch already stopped");
    size_t from = b->done, n = b->n - from;
    int rc = batch_rename(b, b->n, err);
    if (rc != PG_OK)
        return rc;
    pg_autofree sync_job *jobs = calloc(n + BATCH_MAX_DIRS + 1, sizeof *jobs);
    if (!jobs)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = from; i < b->n; i++)
        if (b->v[i].fd >= 0)
            jobs[k++].fd = b->v[i].fd;
    for (size_t i = 0; i < b->n_dirs; i++)
        jobs[k++].fd = b->dirs[i].fd;
    size_t bad = 0;
    int e = k ? fsync_together(jobs, k, &bad) : 0;
    for (size_t i = from; i < b->n; i++)
        if (b->v[i].fd >= 0) {
            close(b->v[i].fd);
            b->v[i].fd = -1;
        }
    if (e)
        return pg_fail_errno(err, e, "fsync %s/%s", b->v[from].dir, b->v[from].sub);
    b->done = b->n;
    return batch_stops_here(b, err) ? PG_ERR_IO : PG_OK;
}

void pg_st_batch_free(pg_st_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        if (!b->abandoned)
            staged_drop_temp(&b->v[i]);
        else if (b->v[i].fd >= 0)
            close(b->v[i].fd);
    }
    for (size_t i = 0; i < b->n_dirs; i++)
        close(b->dirs[i].fd);
    free(b->v);
    *b = (pg_st_batch){0};
}

int pg_st_remove_file(int dirfd, const char *dir, const char *sub, const char *name, bool *removed,
                      pg_error *err)
{
    *removed = false;
    if (pg_st_sys_unlinkat(dirfd, name) != 0) {
        if (errno == ENOENT)
            return PG_OK;
        return pg_fail_errno(err, errno, "remove %s/%s/%s", dir, sub, name);
    }
    *removed = true;
    if (pg_st_fsync_retry(dirfd) != 0)
        return pg_fail_errno(err, errno, "fsync %s/%s", dir, sub);
    return PG_OK;
}

/* ------------------------------------------------------------ reading */

int pg_st_read_strict(int dirfd, const record_dir *d, const char *sub, const char *name, size_t max,
                      char **buf, size_t *len, pg_error *err)
{
    TRACE(PG_TR_OPEN, dirfd, name, NULL, -1, NULL, 0);
    int rc = pg_read_file_at(dirfd, name, max, PG_READ_STRICT, buf, len, err);
    if (rc != PG_OK && rc != PG_ERR_NOT_FOUND) /* pg_read_file_at's message names the file */
        pg_error_prefix(err, "%s/%s", d->path, sub);
    return rc;
}

int pg_st_mismatch(pg_error *err, const record_dir *d, const char *sub, const char *name,
                   const char *field, const char *value)
{
    return pg_fail(err, PG_ERR_CORRUPT,
                   "record %s/%s/%s does not match its file name (%s \"%.200s\")", d->path, sub,
                   name, field, value);
}

bool pg_st_exists_at(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

bool pg_st_absent_at(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT;
}

void *pg_st_grow(void *v, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap)
        return v;
    size_t c = *cap ? 2 * *cap : first;
    void *grown = realloc(v, c * size);
    if (grown)
        *cap = c;
    return grown;
}

int pg_st_unlink(int dirfd, const char *dir, const char *sub, const char *name, pg_error *err)
{
    if (pg_st_sys_unlinkat(dirfd, name) != 0 && errno != ENOENT)
        return pg_fail_errno(err, errno, "remove %s/%s/%s", dir, sub, name);
    return PG_OK;
}

/* ------------------------------------------------------------ walking */

int pg_st_walk(const record_dir *d, const char *sub, bool (*want)(const char *name),
               pg_st_entry_fn fn, void *ud, pg_error *err)
{
    pg_autoclose int fd = -1, dup_fd = -1;
    int rc = pg_st_open_subdir(d, sub, &fd, err);
    if (rc == PG_ERR_NOT_FOUND)
        return PG_OK;
    if (rc != PG_OK)
        return rc;
    dup_fd = dup(fd); /* closedir closes its own fd; keep fd for openat */
    DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!dir)
        return pg_fail_errno(err, errno, "list %s/%s", d->path, sub);
    dup_fd = -1; /* dir's now */
    struct dirent *de;
    while (rc == PG_OK && (de = readdir(dir)) != NULL)
        if (want(de->d_name))
            rc = fn(fd, d, de->d_name, ud);
    closedir(dir);
    return rc;
}
