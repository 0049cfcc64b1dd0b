/* SPDX-License-Identifier: Apache-2.0 */
/* pullgate-doctor: results, shell words, the node's files, /proc, endpoints, metrics text. */
#include "cleanup.h"
#include "doctor.h"
#include "pg_toml.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_CMDLINE_BYTES (256u << 10)
#define MAX_ARGS 4096

static void __attribute__((format(printf, 4, 0)))
set_result(pgd_result *r, pgd_level level, const char *fix, const char *fmt, va_list ap)
{
    r->level = level;
    vsnprintf(r->detail, sizeof r->detail, fmt, ap);
    snprintf(r->fix, sizeof r->fix, "%s", fix ? fix : "");
    r->command[0] = '\0';
}

void pgd_pass(pgd_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_result(r, PGD_OK, NULL, fmt, ap);
    va_end(ap);
}

void pgd_warn(pgd_result *r, const char *fix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_result(r, PGD_WARN, fix, fmt, ap);
    va_end(ap);
}

void pgd_fail(pgd_result *r, const char *fix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_result(r, PGD_FAIL, fix, fmt, ap);
    va_end(ap);
}

void pgd_command(pgd_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->command, sizeof r->command, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof r->command)
        r->command[0] = '\0'; /* a command cut short is worse than none */
}

/* ------------------------------------------------------------- shell words */

bool pgd_plain_word(const char *s)
{
    static const char ok[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@+,-";
    return s && *s && strspn(s, ok) == strlen(s);
}

bool pgd_sh_word(const char *s, char *out, size_t n)
{
    if (pgd_plain_word(s))
        return (size_t)snprintf(out, n, "%s", s) < n;
    if (n < 3)
        return false;
    size_t o = 0;
    out[o++] = '\'';
    for (const char *p = s; *p; p++) {
        /* A quote ends the quoted part, comes as \', and the quoted part resumes. */
        const char *piece = *p == '\'' ? "'\\''" : NULL;
        size_t len = piece ? strlen(piece) : 1;
        if (o + len + 2 > n)
            return false;
        if (piece)
            memcpy(out + o, piece, len);
        else
            out[o] = *p;
        o += len;
    }
    out[o++] = '\'';
    out[o] = '\0';
    return true;
}

/* ----------------------------------------------------------- the node's files */

int pgd_read_fd_trusted(int fd, const char *path, char **buf, size_t *len, pg_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return pg_fail_errno(err, errno, "fstat %s", path);
    if (!S_ISREG(st.st_mode))
        return pg_fail(err, PG_ERR_UNSAFE, "%s: not a regular file", path);
    if (st.st_uid != 0 && st.st_uid != geteuid())
        return pg_fail(err, PG_ERR_UNSAFE, "%s is owned by uid %u, not root: not read", path,
                       (unsigned)st.st_uid);
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return pg_fail(err, PG_ERR_UNSAFE,
                       "%s is writable by group or others (mode %04o): not read", path,
                       (unsigned)(st.st_mode & 07777));
    int rc = pg_read_fd(fd, PGD_MAX_FILE_BYTES, buf, len, err);
    if (rc == PG_ERR_LIMIT)
        return pg_fail(err, PG_ERR_LIMIT, "%s: larger than %u bytes", path, PGD_MAX_FILE_BYTES);
    return rc;
}

int pgd_read_file(const char *path, char **buf, size_t *len, pg_error *err)
{
    pg_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT)
            return pg_fail(err, PG_ERR_NOT_FOUND, "%s: no such file", path);
        if (errno == ELOOP)
            return pg_fail(err, PG_ERR_UNSAFE, "%s is a symbolic link: not read", path);
        return pg_fail_errno(err, errno, "open %s", path);
    }
    return pgd_read_fd_trusted(fd, path, buf, len, err);
}

int pgd_root_owned_safe(const char *path, pg_error *err)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return pg_fail_errno(err, errno, "%s", path);
    if (S_ISLNK(st.st_mode))
        return pg_fail(err, PG_ERR_UNSAFE, "%s is a symbolic link", path);
    if (st.st_uid != 0)
        return pg_fail(err, PG_ERR_UNSAFE, "%s is owned by uid %u, not root", path,
                       (unsigned)st.st_uid);
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return pg_fail(err, PG_ERR_UNSAFE, "%s is writable by group or others (mode %04o)", path,
                       (unsigned)(st.st_mode & 07777));
    return PG_OK;
}

/* ---------------------------------------------------------------- /proc */

static char *read_small(const char *path, size_t max, size_t *len)
{
    pg_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC);
    char *buf = NULL;
    if (fd < 0 || pg_read_fd(fd, max, &buf, len, NULL) != PG_OK)
        return NULL;
    return buf;
}

/* argv from a NUL-separated cmdline (len bytes); NULL when empty or on failure. */
static char **split_cmdline(const char *buf, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += buf[i] == '\0';
    if (len && buf[len - 1] != '\0')
        n++;
    if (n == 0 || n > MAX_ARGS)
        return NULL;
    char **argv = calloc(n + 1, sizeof *argv);
    if (!argv)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len && k < n; k++) {
        size_t l = strnlen(buf + i, len - i);
        argv[k] = strndup(buf + i, l);
        if (!argv[k]) {
            pg_strv_free(argv);
            return NULL;
        }
        i += l + 1;
    }
    return argv;
}

/* The number after field ("\nUid:", "\nPPid:") in <proc_root>/<pid>/status, or -1. */
static long status_field(const char *proc_root, int pid, const char *field)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%d/status", proc_root, pid);
    size_t len = 0, fl = strlen(field);
    pg_autofree char *text = read_small(path, 64u << 10, &len);
    const char *p = text ? strstr(text, field) : NULL;
    char *end = NULL;
    long value = p ? strtol(p + fl, &end, 10) : -1;
    if (p && end == p + fl)
        value = -1;
    return value;
}

/* Whether <proc_root>/<pid>/<entry> is the same file as ours (device and inode). */
static bool same_as_ours(const char *proc_root, int pid, const char *entry, const char *ours)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%d/%s", proc_root, pid, entry);
    return pgd_same_file(path, ours);
}

/*
 * Only root's processes on the node's own filesystem count. The host's /proc
 * lists every container's processes too: a tenant's container may run a
 * "kubelet" (as uid 0, no user namespace) whose argv names paths and endpoints
 * of its choosing and whose executable is in its image. Taking it would let it
 * pass checks and have its binary run as root outside its container.
 * A process in the doctor's mount namespace is the node's; so is a service that
 * systemd gave a mount namespace of its own (the packaged pullgate-cri.service's
 * PrivateTmp, ProtectSystem), told by two things no container's process has: init
 * is its parent (a container's processes descend from their shim, which reaps its
 * orphans itself) and its root directory is the node's (a container's is its image:
 * the kernel's view of <pid>/root, whatever its mount namespace shows under it).
 */
bool pgd_node_process(const char *proc_root, int pid)
{
    if (status_field(proc_root, pid, "\nUid:") != 0) /* the real uid */
        return false;
    if (same_as_ours(proc_root, pid, "ns/mnt", "/proc/self/ns/mnt"))
        return true;
    return status_field(proc_root, pid, "\nPPid:") == 1 &&
           same_as_ours(proc_root, pid, "root", "/");
}

/* Whether the directory open as fd is path (device and inode). */
static bool same_dir(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/*
 * The process's root and working directory as descriptors (their /proc links followed:
 * the kernel's view, whatever a name says). A process in another root (a chroot) is
 * refused: its paths are not the node's, and nothing here should guess at them.
 */
int pgd_proc_open(const char *proc_root, int pid, const char *path, int flags, char *shown,
                  size_t shown_n, pg_error *err)
{
    bool relative = path[0] != '/';
    char root_link[4200], cwd_link[4200];
    snprintf(root_link, sizeof root_link, "%s/%d/root", proc_root, pid);
    snprintf(cwd_link, sizeof cwd_link, "%s/%d/cwd", proc_root, pid);
    pg_autoclose int root = open(root_link, O_PATH | O_DIRECTORY | O_CLOEXEC);
    pg_autoclose int cwd = relative ? open(cwd_link, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
    int fd = -1, saved = 0;
    snprintf(shown, shown_n, "%s", path);
    if (root < 0 || (relative && cwd < 0))
        pg_fail(err, PG_ERR_UNSAFE, "cannot open process %d's root or working directory", pid);
    else if (!same_dir(root, "/"))
        pg_fail(err, PG_ERR_UNSAFE, "process %d runs in another root directory", pid);
    else if (!pgd_node_process(proc_root, pid)) /* the pid was reused meanwhile */
        pg_fail(err, PG_ERR_NOT_FOUND, "process %d is gone", pid);
    else if ((fd = openat(relative ? cwd : AT_FDCWD, path, flags | O_CLOEXEC)) < 0)
        saved = errno;
    if (fd < 0 && saved)
        pg_fail(err, saved == ENOENT ? PG_ERR_NOT_FOUND : PG_ERR_UNSAFE,
                "%s (from process %d's %s): %s", path, pid, relative ? "working directory" : "root",
                strerror(saved));
    if (relative) {
        char dir[4096];
        ssize_t l = readlink(cwd_link, dir, sizeof dir - 1); /* for messages only */
        if (l > 0) {
            dir[l] = '\0';
            snprintf(shown, shown_n, "%s/%s", strcmp(dir, "/") ? dir : "", path);
        }
    }
    errno = saved; /* the caller tells ENOENT and ELOOP apart */
    return fd;
}

/* The argv of process pid when its comm is name and it is a node process; NULL otherwise. */
static char **node_process_argv(const char *proc_root, int pid, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%d/comm", proc_root, pid);
    size_t len = 0;
    pg_autofree char *comm = read_small(path, 64, &len);
    bool match = comm && (comm[strcspn(comm, "\n")] = '\0', strcmp(comm, name) == 0);
    if (!match || !pgd_node_process(proc_root, pid))
        return NULL;
    snprintf(path, sizeof path, "%s/%d/cmdline", proc_root, pid);
    pg_autofree char *cmdline = read_small(path, MAX_CMDLINE_BYTES, &len);
    return cmdline ? split_cmdline(cmdline, len) : NULL;
}

/* Calls found(pid, argv, ctx) for each root process named name in our mount namespace, until it
 * returns true; found takes argv. */
static void scan_processes(const char *proc_root, const char *name,
                           bool (*found)(int pid, char **argv, void *ctx), void *ctx)
{
    DIR *d = opendir(proc_root);
    if (!d)
        return;
    struct dirent *e;
    bool done = false;
    while (!done && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9' ||
            strspn(e->d_name, "0123456789") != strlen(e->d_name))
            continue;
        char **argv = node_process_argv(proc_root, atoi(e->d_name), name);
        if (argv)
            done = found(atoi(e->d_name), argv, ctx);
    }
    closedir(d);
}

typedef struct first_process {
    char **argv;
    int pid;
} first_process;

static bool take_first(int pid, char **argv, void *ctx)
{
    first_process *f = ctx;
    f->argv = argv;
    f->pid = pid;
    return true;
}

char **pgd_find_process(const char *proc_root, const char *name, int *pid_out)
{
    first_process f = {NULL, 0};
    scan_processes(proc_root, name, take_first, &f);
    if (f.argv && pid_out)
        *pid_out = f.pid;
    return f.argv;
}

/* The pid of the root process listening on the unix socket at endpoint, or 0. */
static int socket_peer(const char *endpoint)
{
    const char *path = strncmp(endpoint, "unix://", 7) == 0 ? endpoint + 7 : endpoint;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (path[0] != '/' || strlen(path) >= sizeof addr.sun_path)
        return 0;
    memcpy(addr.sun_path, path, strlen(path) + 1);
    pg_autoclose int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct ucred cred = {0};
    socklen_t len = sizeof cred;
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == 0)
        return cred.pid;
    return 0;
}

char **pgd_socket_server(const char *proc_root, const char *endpoint, const char *name,
                         int *pid_out)
{
    int pid = socket_peer(endpoint);
    char **argv = pid > 0 ? node_process_argv(proc_root, pid, name) : NULL;
    if (argv && pid_out)
        *pid_out = pid;
    return argv;
}

/*
 * A containerd's configuration file: its --config / -c opened as containerd opened it
 * (pgd_proc_open: a relative path from its own working directory, an absolute one within its
 * root, which must be the node's), or containerd's default when it names none. out gets the
 * path doctor, wire and pullgate-still-wired then read, checked to name the very file the
 * process's open found (a mount only its namespace has, or a working directory moved since,
 * would have them read another file). A file that does not exist keeps its path: containerd
 * then runs with its defaults, and the readers say "no such file". false, with why, when the
 * file cannot be named.
 */
static int containerd_config_of(const char *proc_root, int pid, char **argv, char *out, size_t n,
                                pg_error *err)
{
    const char *config = pgd_flag(argv, "config");
    if (!config)
        config = pgd_flag(argv, "c"); /* containerd's short form */
    if (!config || !*config)
        return (size_t)snprintf(out, n, "%s", PGD_CONTAINERD_DEFAULT_CONFIG) < n
                   ? PG_OK
                   : pg_fail(err, PG_ERR_LIMIT, "containerd's default configuration path");
    char shown[4200];
    pg_error opened = {0};
    pg_autoclose int fd = pgd_proc_open(proc_root, pid, config, O_RDONLY | O_NONBLOCK | O_NOCTTY,
                                        shown, sizeof shown, &opened);
    int e = errno;
    struct stat theirs, here;
    bool here_exists = stat(shown, &here) == 0;
    bool same;
    if (fd >= 0)
        same = fstat(fd, &theirs) == 0 && here_exists && theirs.st_dev == here.st_dev &&
               theirs.st_ino == here.st_ino;
    else if (e == ENOENT)
        same = !here_exists; /* absent for both */
    else
        return pg_fail(err, opened.code ? opened.code : PG_ERR_IO, "%s", opened.message);
    if (!same)
        return pg_fail(err, PG_ERR_UNSAFE,
                       "containerd (pid %d) reads its --config %s as a file that %s at %s here "
                       "(a mount of its own, or its working directory moved)",
                       pid, config, here_exists ? "is not the one" : "is not", shown);
    if ((size_t)snprintf(out, n, "%s", shown) >= n)
        return pg_fail(err, PG_ERR_LIMIT, "containerd (pid %d): its --config is too long", pid);
    return PG_OK;
}

typedef struct services {
    const char *proc_root;
    int pid[PGD_MAX_SERVICES];
    char **argv[PGD_MAX_SERVICES];
    bool by_init[PGD_MAX_SERVICES];
    size_t n;
} services;

static bool note_service(int pid, char **argv, void *ctx)
{
    services *c = ctx;
    if (c->n == PGD_MAX_SERVICES) {
        pg_strv_free(argv);
        return true;
    }
    c->pid[c->n] = pid;
    c->argv[c->n] = argv;
    c->by_init[c->n] = status_field(c->proc_root, pid, "\nPPid:") == 1;
    c->n++;
    return false;
}

/* A node's daemon is a service: started by init. Others (a test's, a tenant's privileged
 * container's) count only when no service of that name runs. */
char **pgd_find_service(const char *proc_root, const char *name, int *pid, size_t *candidates,
                        bool init_only)
{
    services c = {.proc_root = proc_root};
    scan_processes(proc_root, name, note_service, &c);
    size_t by_init = 0, pick = 0;
    for (size_t i = 0; i < c.n; i++)
        if (c.by_init[i])
            by_init++, pick = i;
    size_t count = by_init || init_only ? by_init : c.n;
    if (candidates)
        *candidates = count;
    char **found = NULL;
    for (size_t i = 0; i < c.n; i++) {
        if (count == 1 && i == pick) {
            found = c.argv[i];
            if (pid)
                *pid = c.pid[i];
        } else {
            pg_strv_free(c.argv[i]);
        }
    }
    return found;
}

typedef struct containerds {
    const char *proc_root;
    pgd_containerd found[PGD_MAX_SERVICES];
    size_t n;
} containerds;

static bool note_containerd(int pid, char **argv, void *ctx)
{
    containerds *c = ctx;
    if (c->n < PGD_MAX_SERVICES) {
        pgd_containerd *d = &c->found[c->n++];
        d->pid = pid;
        pg_error err = {0};
        d->why[0] = '\0';
        if (containerd_config_of(c->proc_root, pid, argv, d->config, sizeof d->config, &err) !=
            PG_OK) {
            d->config[0] = '\0';
            snprintf(d->why, sizeof d->why, "%s", err.message);
        }
    }
    pg_strv_free(argv);
    return false;
}

size_t pgd_running_containerds(const char *proc_root, pgd_containerd *out, size_t max)
{
    containerds c = {.proc_root = proc_root};
    scan_processes(proc_root, "containerd", note_containerd, &c);
    size_t n = c.n < max ? c.n : max;
    memcpy(out, c.found, n * sizeof *out);
    return c.n;
}

const char *pgd_running_containerd_config(const char *proc_root, char *out, size_t n,
                                          size_t *candidates, pg_error *err)
{
    int pid = 0;
    char **argv = pgd_find_service(proc_root, "containerd", &pid, candidates, false);
    if (!argv)
        return NULL;
    int rc = containerd_config_of(proc_root, pid, argv, out, n, err);
    pg_strv_free(argv);
    return rc == PG_OK ? out : NULL;
}

const char *pgd_containerd_config(const char *given, const char *proc_root, char *buf, size_t n,
                                  size_t *candidates, pg_error *why)
{
    *candidates = 0;
    if (given)
        return given;
    const char *running = pgd_running_containerd_config(proc_root, buf, n, candidates, why);
    if (running)
        return running;
    if (*candidates > 1)
        pg_fail(why, PG_ERR_CONFIG,
                "%zu containerd processes run and none is the node's service (started by init)",
                *candidates);
    return *candidates ? NULL : PGD_CONTAINERD_DEFAULT_CONFIG;
}

const char *pgd_flag(char *const *argv, const char *name)
{
    const char *value = NULL;
    size_t n = strlen(name);
    for (size_t i = 1; argv && argv[i]; i++) {
        const char *a = argv[i];
        if (a[0] == '-' && a[1] == '-')
            a += 2;
        else if (a[0] == '-')
            a += 1; /* Go's flag package takes -name as well as --name */
        else
            continue;
        if (strncmp(a, name, n) != 0)
            continue;
        if (a[n] == '=')
            value = a + n + 1;
        else if (a[n] == '\0' && argv[i + 1])
            value = argv[++i];
    }
    return value;
}

json_t *pgd_json_path(json_t *j, const char *const *keys)
{
    for (; j && *keys; keys++)
        j = json_object_get(j, *keys);
    return j;
}

bool pgd_json_array_has(const json_t *array, const char *value)
{
    size_t i;
    json_t *v;
    json_array_foreach(array, i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), value) == 0)
            return true;
    }
    return false;
}

bool pgd_is_our_hook(const json_t *hook)
{
    const char *path = json_string_value(json_object_get(hook, "path"));
    const char *base = path ? strrchr(path, '/') : NULL;
    return base && strcmp(base + 1, "pullgate-hook") == 0;
}

/* "unix:///run/x" and "/run/x" name one socket; /var/run is /run on every systemd node. */
static const char *endpoint_path(const char *e)
{
    if (strncmp(e, "unix://", 7) == 0)
        e += 7;
    if (strncmp(e, "/var/run/", 9) == 0)
        e += 4;
    return e;
}

bool pgd_same_endpoint(const char *a, const char *b)
{
    return a && b && strcmp(endpoint_path(a), endpoint_path(b)) == 0;
}

bool pgd_same_file(const char *a, const char *b)
{
    if (!a || !b)
        return false;
    if (strcmp(a, b) == 0)
        return true;
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* ----------------------------------------------------------------- TOML */

json_t *pgd_toml_to_json(const char *text, size_t len, pg_error *err)
{
    pg_autofree char *json = pg_toml_json_text(text, len, err);
    if (!json)
        return NULL;
    json_error_t jerr;
    pg_autojson json_t *j = json_loads(json, 0, &jerr);
    if (!json_is_object(j)) {
        pg_fail(err, PG_ERR_INTERNAL, "toml++'s JSON does not parse: %s", jerr.text);
        return NULL;
    }
    return pg_steal(&j);
}

/* ------------------------------------------------------- Prometheus text */

/* The value of label within a sample's braces: p just after '{', end the line's end. */
static bool label_value(const char *p, const char *end, const char *label, char *out, size_t n)
{
    size_t ll = strlen(label);
    while (p < end && *p != '}') {
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq || eq + 1 >= end || eq[1] != '"')
            return false;
        bool match = (size_t)(eq - p) == ll && memcmp(p, label, ll) == 0;
        size_t o = 0;
        const char *q = eq + 2;
        for (; q < end && *q != '"'; q++) {
            char c = *q;
            if (c == '\\' && q + 1 < end)
                c = *++q == 'n' ? '\n' : *q;
            if (match && o + 1 < n)
                out[o++] = c;
        }
        if (q >= end)
            return false;
        if (match) {
            out[o] = '\0';
            return true;
        }
        p = q + 1;
        if (p < end && *p == ',')
            p++;
    }
    return false;
}

/* The number after a sample's name and labels (v .. line_end); 0, or -1. */
static int sample_number(const char *v, const char *line_end, double *value)
{
    while (v < line_end && *v == ' ')
        v++;
    char number[64];
    size_t vl = (size_t)(line_end - v);
    if (vl == 0 || vl >= sizeof number)
        return -1;
    memcpy(number, v, vl);
    number[vl] = '\0';
    char *stop = NULL;
    double d = strtod(number, &stop);
    if (stop == number || (*stop != '\0' && *stop != ' ') || isnan(d))
        return -1;
    *value = d;
    return 0;
}

int pgd_prom_sample(const char *text, size_t len, const char *name, const char *label,
                    char *label_out, size_t label_n, double *value)
{
    size_t nl = strlen(name);
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = eol ? eol : end;
        if ((size_t)(line_end - p) > nl && memcmp(p, name, nl) == 0 &&
            (p[nl] == ' ' || p[nl] == '{')) {
            const char *v = p + nl;
            bool labels_ok = !label;
            if (*v == '{') {
                if (label && label_n)
                    labels_ok = label_value(v + 1, line_end, label, label_out, label_n);
                const char *close = memchr(v, '}', (size_t)(line_end - v));
                v = close ? close + 1 : line_end;
            }
            if (labels_ok && sample_number(v, line_end, value) == 0)
                return 0;
        }
        p = eol ? eol + 1 : end;
    }
    return -1;
}
