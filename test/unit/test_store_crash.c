/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Power-loss crash simulation of the record store (in the spirit of SQLite's
 * crash tests and ALICE, application-level crash consistency).
 *
 * This test links pullgate_traced: plugin/store/store_fs.c built with
 * PG_STORE_TRACE reports every change the store makes to a record directory
 * (file created, data written, fsync of a file or a directory, rename,
 * unlink) to pg_st_trace below. For each operation (a scenario), the
 * store starts from a state taken as durable, the operation runs for real
 * while its changes are recorded, and then every state a power loss could
 * leave is generated from the record:
 *  - at every point of the operation (after each recorded change),
 *  - every directory entry change (create, rename, unlink) followed by an
 *    fsync of its directory before that point is on disk; any
 *    subset of the others is, applied in their order (no file-system ordering
 *    is assumed),
 *  - a file's data is durable once the file was fsync'd; data
 *    written since may be lost, so a name that reaches the file may show it
 *    torn (every such file torn on its own, and all of them at once).
 * Subsets are enumerated exhaustively up to SUBSET_EXHAUSTIVE optional
 * changes at one point; beyond, the empty and the full subset, each change
 * alone, each change left out and SUBSET_SAMPLES seeded random subsets. Equal
 * states are checked once.
 *
 * Each state is written to a directory, opened as the store, and checked
 * against docs/design.md's rules, given the state before the operation (P)
 * and after it (Q):
 *  - nothing half-written is read: every file a reader takes by name holds
 *    the whole data written to it (credential index, intent counts and
 *    intents excepted: a validated cache, a count that self-heals, and files
 *    that count by existing);
 *  - no image that was pulled looks preloaded: an image with evidence (a
 *    decision other than "preloaded", with and without its image ID) both
 *    before and after the operation has it in every state during it, and one
 *    with evidence after it has it once the call returned;
 *  - no credential gains time: a recorded credential's time is never later
 *    than its time before or after the operation, and no credential appears
 *    that neither has;
 *  - a name index marked complete lists every record under every name it maps.
 *
 * A second run treats every fsync as a no-op (nothing is ever
 * durable): the simulation must then find violations, which shows that it
 * depends on the syncs it checks.
 */
#include "engine_testing.h"
#include "decision_cases.h"
#include "internal.h"
#include "store_impl.h"
#include "store_lookup.h"
#include "store_trace.h"
#include "testutil.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SUBSET_EXHAUSTIVE 10
#define SUBSET_SAMPLES 128
#define MAX_PROBES 8
#define MAX_REPORTED 6

#define HEX_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HEX_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define HEX_C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
#define REF_A "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define REF_B "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define REF_C "sha256:3333333333333333333333333333333333333333333333333333333333333333"
#define REF_N "sha256:4444444444444444444444444444444444444444444444444444444444444444"
#define IMG_A "registry.example.com/team-a/app:1.0"
#define IMG_B "registry.example.com/team-b/web:2.0"
#define IMG_C "registry.example.com/team-c/db:3.0"
#define IMG_N "registry.example.com/team-n/new:1.0"
#define IMG_F "registry.example.com/team-f/fail:1.0"
#define IMG_G "registry.example.com/team-g/gone:1.0"
#define IMG_MIRROR "mirror.example.com/team-a/app:1.0"
#define IMG_MIRROR_N "mirror.example.com/team-n/new:1.0"

/* ------------------------------------------------------------ recorder */

enum { EV_CREATE, EV_WRITE, EV_FSYNC_FILE, EV_FSYNC_DIR, EV_RENAME, EV_UNLINK };

typedef struct ev {
    int kind;
    char *dir, *name, *to; /* relative to the store root ("" for the root) */
    int ino;               /* the model file (create, write, fsync, the file a rename moves) */
    size_t len;            /* write, fsync: the file's length after it */
} ev;

typedef struct mfile {
    char *data;
    size_t len, cap;
    dev_t dev;
    ino_t ino;
    bool live; /* still the file with that inode number */
} mfile;

typedef struct entry {
    char *path; /* relative to the store root */
    int ino;
} entry;

static struct recorder {
    pthread_mutex_t lock;
    bool on, no_syncs;
    char *root;
    ev *ev;
    size_t n_ev, cap_ev;
    mfile *f;
    size_t n_f, cap_f;
    entry *init; /* the durable state the operation starts from */
    size_t n_init, cap_init;
    char **dirs; /* every directory, created in each materialised state */
    size_t n_dirs, cap_dirs;
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return p;
    *cap = *cap ? *cap * 2 : 64;
    void *g = realloc(p, *cap * size);
    ck_assert_ptr_nonnull(g);
    return g;
}

static void add_dir(const char *rel)
{
    for (size_t i = 0; i < R.n_dirs; i++)
        if (strcmp(R.dirs[i], rel) == 0)
            return;
    R.dirs = grow(R.dirs, &R.cap_dirs, R.n_dirs, sizeof *R.dirs);
    R.dirs[R.n_dirs++] = strdup(rel);
}

static int new_file(dev_t dev, ino_t ino, const char *data, size_t len)
{
    for (size_t i = 0; i < R.n_f; i++)
        if (R.f[i].live && R.f[i].dev == dev && R.f[i].ino == ino)
            R.f[i].live = false; /* the inode number was reused */
    R.f = grow(R.f, &R.cap_f, R.n_f, sizeof *R.f);
    mfile *m = &R.f[R.n_f];
    *m = (mfile){malloc(len + 1), len, len + 1, dev, ino, true};
    memcpy(m->data, data, len);
    return (int)R.n_f++;
}

static int file_of(const struct stat *st)
{
    for (size_t i = R.n_f; i-- > 0;)
        if (R.f[i].live && R.f[i].dev == st->st_dev && R.f[i].ino == st->st_ino)
            return (int)i;
    return -1;
}

static int file_of_fd(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? file_of(&st) : -1;
}

/* path relative to the root when it is under it (caller frees), else NULL. */
static char *rel_of_full(const char *full)
{
    size_t n = strlen(R.root);
    if (strcmp(full, R.root) == 0)
        return strdup("");
    if (strncmp(full, R.root, n) != 0 || full[n] != '/')
        return NULL;
    return strdup(full + n + 1);
}

static char *fd_path(int fd)
{
    char link[64], buf[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, sizeof buf - 1);
    if (n < 0)
        return NULL;
    buf[n] = '\0';
    return strdup(buf);
}

/* dirfd/name relative to the root (caller frees), or NULL when outside it. */
static char *rel_of(int dirfd, const char *name)
{
    char *base = name[0] == '/' ? strdup("") : dirfd == AT_FDCWD ? getcwd(NULL, 0) : fd_path(dirfd);
    if (!base)
        return NULL;
    char *full = name[0] == '/' ? strdup(name) : tu_sprintf("%s/%s", base, name);
    free(base);
    char *rel = rel_of_full(full);
    free(full);
    return rel;
}

/* Splits rel into its directory ("" for the root) and base name (both new). */
static void split(const char *rel, char **dir, char **base)
{
    const char *slash = strrchr(rel, '/');
    *dir = slash ? strndup(rel, (size_t)(slash - rel)) : strdup("");
    *base = strdup(slash ? slash + 1 : rel);
}

static void push(ev e)
{
    R.ev = grow(R.ev, &R.cap_ev, R.n_ev, sizeof *R.ev);
    R.ev[R.n_ev++] = e;
}

static bool is_lock(const char *rel) { return strcmp(rel, LOCK_FILE) == 0; }

static void trace_locked(pg_st_trace_op op, int dirfd, const char *name, const char *name2, int fd,
                         const void *data, size_t len)
{
    struct stat st;
    char *rel = name ? rel_of(dirfd, name) : NULL;
    if (name && (!rel || is_lock(rel))) {
        free(rel);
        return;
    }
    ev e = {.ino = -1};
    switch (op) {
    case PG_TR_CREATE:
        if (fstat(fd, &st) != 0)
            break;
        e.kind = EV_CREATE;
        split(rel, &e.dir, &e.name);
        e.ino = new_file(st.st_dev, st.st_ino, "", 0);
        push(e);
        break;
    case PG_TR_WRITE: {
        int m = file_of_fd(fd);
        if (m < 0)
            break;
        mfile *f = &R.f[m];
        while (f->len + len + 1 > f->cap)
            f->data = realloc(f->data, f->cap *= 2);
        memcpy(f->data + f->len, data, len);
        f->len += len;
        push((ev){.kind = EV_WRITE, .ino = m, .len = f->len});
        break;
    }
    case PG_TR_FSYNC:
        if (R.no_syncs || fstat(fd, &st) != 0)
            break;
        if (S_ISDIR(st.st_mode)) {
            char *full = fd_path(fd);
            char *d = full ? rel_of_full(full) : NULL;
            free(full);
            if (d)
                push((ev){.kind = EV_FSYNC_DIR, .dir = d, .ino = -1});
        } else {
            int m = file_of(&st);
            if (m >= 0)
                push((ev){.kind = EV_FSYNC_FILE, .ino = m, .len = R.f[m].len});
        }
        break;
    case PG_TR_RENAME: {
        char *to = rel_of(dirfd, name2);
        if (!to || fstatat(dirfd, name2, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            free(to);
            break;
        }
        e.kind = EV_RENAME;
        split(rel, &e.dir, &e.name);
        char *to_dir;
        split(to, &to_dir, &e.to);
        free(to_dir);
        free(to);
        e.ino = file_of(&st);
        push(e);
        break;
    }
    case PG_TR_UNLINK:
        e.kind = EV_UNLINK;
        split(rel, &e.dir, &e.name);
        push(e);
        break;
    case PG_TR_MKDIR: add_dir(rel); break;
    case PG_TR_OPEN: break; /* reads change nothing */
    }
    free(rel);
}

void pg_st_trace(pg_st_trace_op op, int dirfd, const char *name, const char *name2, int fd,
                 const void *data, size_t len)
{
    pthread_mutex_lock(&R.lock);
    if (R.on)
        trace_locked(op, dirfd, name, name2, fd, data, len);
    pthread_mutex_unlock(&R.lock);
}

/* The tree under root/rel as the durable starting state. */
static void snapshot_dir(const char *rel)
{
    char *full = *rel ? tu_sprintf("%s/%s", R.root, rel) : strdup(R.root);
    DIR *d = opendir(full);
    ck_assert_ptr_nonnull(d);
    add_dir(rel);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *child = *rel ? tu_sprintf("%s/%s", rel, de->d_name) : strdup(de->d_name);
        char *path = tu_sprintf("%s/%s", R.root, child);
        struct stat st;
        ck_assert_int_eq(lstat(path, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            snapshot_dir(child);
        } else if (!is_lock(child)) {
            size_t len = 0;
            char *data = tu_read_file(path, &len);
            ck_assert_ptr_nonnull(data);
            R.init = grow(R.init, &R.cap_init, R.n_init, sizeof *R.init);
            R.init[R.n_init++] = (entry){strdup(child), new_file(st.st_dev, st.st_ino, data, len)};
            free(data);
        }
        free(path);
        free(child);
    }
    closedir(d);
    free(full);
}

static void recorder_start(const char *root, bool no_syncs)
{
    pthread_mutex_lock(&R.lock);
    R.root = realpath(root, NULL);
    ck_assert_ptr_nonnull(R.root);
    R.no_syncs = no_syncs;
    snapshot_dir("");
    R.on = true;
    pthread_mutex_unlock(&R.lock);
}

static void recorder_stop(void)
{
    pthread_mutex_lock(&R.lock);
    R.on = false;
    pthread_mutex_unlock(&R.lock);
}

static void recorder_clear(void)
{
    for (size_t i = 0; i < R.n_ev; i++) {
        free(R.ev[i].dir);
        free(R.ev[i].name);
        free(R.ev[i].to);
    }
    for (size_t i = 0; i < R.n_f; i++)
        free(R.f[i].data);
    for (size_t i = 0; i < R.n_init; i++)
        free(R.init[i].path);
    for (size_t i = 0; i < R.n_dirs; i++)
        free(R.dirs[i]);
    free(R.ev);
    free(R.f);
    free(R.init);
    free(R.dirs);
    free(R.root);
    pthread_mutex_t keep = R.lock;
    R = (struct recorder){.lock = keep};
}

/* ---------------------------------------------------------- crash states */

/* One crash state: names and how much of their file's data is there. */
typedef struct cstate {
    entry *e;
    size_t *len;
    size_t n, cap;
} cstate;

static void cs_free(cstate *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->e[i].path);
    free(s->e);
    free(s->len);
    *s = (cstate){0};
}

static char *join(const char *dir, const char *base)
{
    return *dir ? tu_sprintf("%s/%s", dir, base) : strdup(base);
}

static ssize_t cs_find(const cstate *s, const char *path)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->e[i].path, path) == 0)
            return (ssize_t)i;
    return -1;
}

static void cs_set(cstate *s, const char *path, int ino)
{
    ssize_t i = cs_find(s, path);
    if (i >= 0) {
        s->e[i].ino = ino;
        return;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->e = realloc(s->e, s->cap * sizeof *s->e);
        s->len = realloc(s->len, s->cap * sizeof *s->len);
    }
    s->e[s->n++] = (entry){strdup(path), ino};
}

static void cs_remove(cstate *s, const char *path)
{
    ssize_t i = cs_find(s, path);
    if (i < 0)
        return;
    free(s->e[i].path);
    s->e[i] = s->e[--s->n];
}

static bool is_entry_op(int kind)
{
    return kind == EV_CREATE || kind == EV_RENAME || kind == EV_UNLINK;
}

static void cs_apply(cstate *s, const ev *e)
{
    if (!is_entry_op(e->kind))
        return;
    char *from = join(e->dir, e->name);
    if (e->kind == EV_CREATE) {
        cs_set(s, from, e->ino);
    } else if (e->kind == EV_UNLINK) {
        cs_remove(s, from);
    } else if (e->kind == EV_RENAME) {
        char *to = join(e->dir, e->to);
        cs_remove(s, from);
        if (e->ino >= 0)
            cs_set(s, to, e->ino);
        free(to);
    }
    free(from);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->path, ((const entry *)b)->path);
}

/* Sorted (with the lengths) so that equal states hash equal. */
static uint64_t cs_hash(cstate *s)
{
    entry *sorted = malloc((s->n + 1) * sizeof *sorted);
    for (size_t i = 0; i < s->n; i++) {
        sorted[i] = s->e[i];
        sorted[i].ino = (int)i; /* index into s->len */
    }
    qsort(sorted, s->n, sizeof *sorted, cmp_entry);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < s->n; i++) {
        const entry *e = &sorted[i];
        const mfile *f = &R.f[s->e[e->ino].ino];
        size_t len = s->len[e->ino];
        for (const char *p = e->path; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
        h = (h ^ 0xff) * 1099511628211ull;
        for (size_t k = 0; k < len; k++)
            h = (h ^ (unsigned char)f->data[k]) * 1099511628211ull;
        h = (h ^ (len & 0xffff) ^ 0xabcd0000) * 1099511628211ull;
    }
    free(sorted);
    return h;
}

/* ---------------------------------------------------------- the checks */

typedef struct probe_img {
    const char *image, *ref;
} probe_img;

typedef struct cred_time {
    char *key;
    time_t t;
} cred_time;

typedef struct facts {
    bool preloaded[MAX_PROBES][2]; /* [probe][0: with its image ID, 1: without (containerd)] */
    cred_time *times;
    size_t n_times, cap_times;
    char *complaint; /* a rule broken within the state itself, or NULL */
} facts;

typedef struct scenario {
    const char *name;
    void (*setup)(pg_store *s);
    int (*op)(pg_store *s, pg_error *err);
    probe_img probes[MAX_PROBES];
} scenario;

static void facts_clear(facts *f)
{
    for (size_t i = 0; i < f->n_times; i++)
        free(f->times[i].key);
    free(f->times);
    free(f->complaint);
    *f = (facts){0};
}

/* Keeps the first complaint: "<what> <subject>: <detail>". */
static void complain(facts *f, const char *what, const char *subject, const char *detail)
{
    if (!f->complaint)
        f->complaint =
            tu_sprintf("%s %s%s%s", what, subject, detail ? ": " : "", detail ? detail : "");
}

static pg_config *config_for(const char *state)
{
    pg_config *cfg = pg_config_new(NULL);
    ck_assert_ptr_nonnull(cfg);
    dc_config_set(cfg, "stateDir", state);
    ck_assert_int_eq(pg_config_clear_list(cfg, "readOnlyRecordDirs", NULL), PG_OK);
    return cfg;
}

typedef struct list_ctx {
    const pg_store *store;
    const char *state;
    facts *f;
    bool names_complete;
} list_ctx;

static void add_time(facts *f, const pg_record *rec, const char *name, const pg_pod_cred *sec,
                     const pg_pod_cred *sa, const pg_store *store)
{
    time_t t = 0;
    pg_error err = {0};
    if (pg_store_credential_time(store, rec, name, sec, sa, &t, &err) != PG_OK) {
        complain(f, "unreadable credential time of", rec->image_ref, err.message);
        return;
    }
    const pg_pod_cred *c = sec ? sec : sa;
    f->times = grow(f->times, &f->cap_times, f->n_times, sizeof *f->times);
    f->times[f->n_times++] =
        (cred_time){tu_sprintf("%s %s %s/%s/%s %s", rec->image_ref, name, c->namespace_, c->name,
                               c->uid, sec && sec->credential_hash ? sec->credential_hash : "-"),
                    t};
}

/* The name index, when marked complete, must list rec under every name it maps. */
static void check_names(list_ctx *c, const pg_record *rec, const char *key)
{
    char *owned = NULL;
    ck_assert_int_eq(pg_record_key_name(key, &owned), PG_OK);
    const char *name = owned ? owned : key;
    pg_record **recs = NULL;
    size_t n = 0;
    bool unknown = false;
    pg_error err = {0};
    bool found = false;
    if (pg_store_records_mapping(c->store, name, &recs, &n, &unknown, &err) != PG_OK)
        complain(c->f, "unreadable names of", name, err.message);
    for (size_t i = 0; i < n; i++) {
        found |= strcmp(recs[i]->image_ref, rec->image_ref) == 0;
        pg_record_free(recs[i]);
    }
    free(recs);
    if (!found && !c->f->complaint)
        complain(c->f, "the name index (marked complete) misses a record under", name,
                 rec->image_ref);
    free(owned);
}

static int list_cb(const pg_record *rec, void *ud)
{
    list_ctx *c = ud;
    if (!rec->dir || strcmp(rec->dir, c->state) != 0)
        return 0;
    for (size_t m = 0; m < rec->n_maps; m++) {
        const pg_rec_mapping *map = &rec->maps[m];
        for (size_t i = 0; i < map->n_secrets; i++)
            add_time(c->f, rec, map->image_name, &map->secrets[i], NULL, c->store);
        for (size_t i = 0; i < map->n_sas; i++)
            add_time(c->f, rec, map->image_name, NULL, &map->sas[i], c->store);
        if (c->names_complete)
            check_names(c, rec, map->image_name);
    }
    return 0;
}

static void bad_cb(const char *path, const pg_error *why, void *ud)
{
    list_ctx *c = ud;
    complain(c->f, "unreadable record", path, why->message);
}

/* What the store in directory state says (opened as after a reboot). */
static void probe_state(const char *state, const scenario *sc, facts *f)
{
    pg_config *cfg = config_for(state);
    pg_error err = {0};
    pg_store *store = pg_store_open(cfg, NULL, &err);
    if (!store) {
        complain(f, "the store does not open:", state, err.message);
        pg_config_free(cfg);
        return;
    }
    for (size_t i = 0; i < MAX_PROBES && sc->probes[i].image; i++)
        for (int mode = 0; mode < 2; mode++) {
            pg_request req = {sc->probes[i].image, mode == 0 ? sc->probes[i].ref : NULL, "ns",
                              NULL};
            pg_decision d;
            pg_decide(cfg, store, &req, &d);
            f->preloaded[i][mode] = d.reason == PG_REASON_PRELOADED;
        }
    char *marker = tu_sprintf("%s/pullgate-names/.complete-2", state);
    struct stat st;
    list_ctx c = {store, state, f, lstat(marker, &st) == 0};
    free(marker);
    if (pg_store_list(store, list_cb, bad_cb, &c, &err) != PG_OK)
        complain(f, "records cannot be listed in", state, err.message);
    pg_store_free(store);
    pg_config_free(cfg);
}

/* ------------------------------------------------------- materialising */

static void write_state(const char *dir, const cstate *s)
{
    tu_rmrf(dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    for (size_t i = 0; i < R.n_dirs; i++)
        if (*R.dirs[i]) {
            char *p = tu_sprintf("%s/%s", dir, R.dirs[i]);
            ck_assert_msg(mkdir(p, 0700) == 0 || errno == EEXIST, "mkdir %s", p);
            free(p);
        }
    for (size_t i = 0; i < s->n; i++) {
        char *p = tu_sprintf("%s/%s", dir, s->e[i].path);
        tu_write_file(p, R.f[s->e[i].ino].data, (long)s->len[i], 0600);
        free(p);
    }
}

/* ------------------------------------------------------------- the run */

typedef struct run {
    const scenario *sc;
    const char *scratch; /* where states are written */
    facts before, after;
    uint64_t *seen;
    size_t n_seen, cap_seen;
    size_t states, violations;
    char *report;
} run;

static bool seen_before(run *r, uint64_t h)
{
    for (size_t i = 0; i < r->n_seen; i++)
        if (r->seen[i] == h)
            return true;
    r->seen = grow(r->seen, &r->cap_seen, r->n_seen, sizeof *r->seen);
    r->seen[r->n_seen++] = h;
    return false;
}

static void violation(run *r, size_t k, const char *what)
{
    if (r->violations++ < MAX_REPORTED) {
        char *more = tu_sprintf("%s  [%s] crash after change %zu of %zu: %s\n",
                                r->report ? r->report : "", r->sc->name, k, R.n_ev, what);
        free(r->report);
        r->report = more;
    }
}

/* Files whose content may be torn: a validated cache, a count that self-heals, and
 * intents, which count by existing (their content is never read). */
static bool content_may_tear(const char *path)
{
    static const char *const subs[] = {SUB_CREDIDX "/", SUB_INTENTS "/", SUB_PULLING "/"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (strncmp(path, subs[i], strlen(subs[i])) == 0)
            return true;
    return false;
}

static bool is_temp(const char *path)
{
    size_t n = strlen(path);
    return n > 4 && strcmp(path + n - 4, TMP_SUFFIX) == 0;
}

static time_t max_time(const facts *f, const char *key, bool *found)
{
    time_t best = 0;
    for (size_t i = 0; i < f->n_times; i++)
        if (strcmp(f->times[i].key, key) == 0 && (!*found || f->times[i].t > best)) {
            best = f->times[i].t;
            *found = true;
        }
    return best;
}

static void check_state(run *r, size_t k, const cstate *s, const size_t *full)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->len[i] != full[s->e[i].ino] && !content_may_tear(s->e[i].path) &&
            !is_temp(s->e[i].path)) {
            char *what = tu_sprintf("%s is half-written (%zu of %zu bytes)", s->e[i].path,
                                    s->len[i], full[s->e[i].ino]);
            violation(r, k, what);
            free(what);
            return;
        }
    write_state(r->scratch, s);
    facts f = {0};
    probe_state(r->scratch, r->sc, &f);
    if (f.complaint)
        violation(r, k, f.complaint);
    bool returned = k == R.n_ev;
    for (size_t i = 0; i < MAX_PROBES && r->sc->probes[i].image; i++)
        for (int mode = 0; mode < 2; mode++) {
            bool kept = !r->after.preloaded[i][mode] && (returned || !r->before.preloaded[i][mode]);
            if (kept && f.preloaded[i][mode]) {
                char *what = tu_sprintf("%s (%s) looks preloaded", r->sc->probes[i].image,
                                        mode ? "no image ID" : "with its image ID");
                violation(r, k, what);
                free(what);
            }
        }
    for (size_t i = 0; i < f.n_times; i++) {
        bool found = false;
        time_t before = max_time(&r->before, f.times[i].key, &found);
        time_t after = max_time(&r->after, f.times[i].key, &found);
        time_t allowed = before > after ? before : after;
        if (!found || f.times[i].t > allowed) {
            char *what = found
                             ? tu_sprintf("credential %s gains time (%lld > %lld)", f.times[i].key,
                                          (long long)f.times[i].t, (long long)allowed)
                             : tu_sprintf("credential %s appears from nowhere", f.times[i].key);
            violation(r, k, what);
            free(what);
        }
    }
    facts_clear(&f);
    r->states++;
}

/* The state after the first k changes: forced ones and those taken. */
static void build_state(cstate *s, size_t k, const bool *forced, const bool *taken)
{
    *s = (cstate){0};
    for (size_t i = 0; i < R.n_init; i++)
        cs_set(s, R.init[i].path, R.init[i].ino);
    for (size_t j = 0; j < k; j++)
        if (is_entry_op(R.ev[j].kind) && (forced[j] || taken[j]))
            cs_apply(s, &R.ev[j]);
}

/* Checks the state for one subset, with every torn-data variant. */
static void check_variants(run *r, size_t k, cstate *s, const size_t *dur, const size_t *cur)
{
    size_t *pending = calloc(s->n + 1, sizeof *pending), n_pending = 0;
    for (size_t i = 0; i < s->n; i++) {
        int m = s->e[i].ino;
        s->len[i] = cur[m];
        if (cur[m] > dur[m])
            pending[n_pending++] = i;
    }
    /* variant 0: all whole; 1..n: that one torn; n+1: all torn */
    size_t variants = n_pending ? n_pending + 2 : 1;
    for (size_t v = 0; v < variants; v++) {
        for (size_t p = 0; p < n_pending; p++) {
            int m = s->e[pending[p]].ino;
            bool torn = v == n_pending + 1 || v == p + 1;
            s->len[pending[p]] = torn ? dur[m] + (cur[m] - dur[m]) / 2 : cur[m];
        }
        /* A state seen during the call is checked again once it returned: the
         * rules are stricter then (its evidence must be durable). */
        uint64_t returned = k == R.n_ev ? 0x9e3779b97f4a7c15ull : 0;
        if (!seen_before(r, cs_hash(s) ^ returned))
            check_state(r, k, s, cur);
    }
    free(pending);
}

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

/* Every state a power loss after change k could leave. */
static void crash_at(run *r, size_t k)
{
    bool *forced = calloc(R.n_ev + 1, sizeof *forced);
    size_t *cur = calloc(R.n_f + 1, sizeof *cur), *dur = calloc(R.n_f + 1, sizeof *dur);
    /* Entry changes followed by an fsync of their directory before k. */
    char **synced = calloc(R.n_ev + 1, sizeof *synced);
    size_t n_synced = 0;
    for (size_t j = k; j-- > 0;) {
        const ev *e = &R.ev[j];
        if (e->kind == EV_FSYNC_DIR)
            synced[n_synced++] = e->dir;
        else if (is_entry_op(e->kind))
            for (size_t i = 0; i < n_synced && !forced[j]; i++)
                forced[j] = strcmp(synced[i], e->dir) == 0;
    }
    free(synced);
    /* Data written and data durable at k. */
    for (size_t i = 0; i < R.n_init; i++)
        cur[R.init[i].ino] = dur[R.init[i].ino] = R.f[R.init[i].ino].len;
    for (size_t j = 0; j < k; j++) {
        const ev *e = &R.ev[j];
        if (e->kind == EV_WRITE)
            cur[e->ino] = e->len;
        else if (e->kind == EV_FSYNC_FILE)
            dur[e->ino] = e->len;
    }
    size_t *opt = calloc(R.n_ev + 1, sizeof *opt), n_opt = 0;
    for (size_t j = 0; j < k; j++)
        if (is_entry_op(R.ev[j].kind) && !forced[j])
            opt[n_opt++] = j;
    bool *taken = calloc(R.n_ev + 1, sizeof *taken);
    size_t subsets =
        n_opt <= SUBSET_EXHAUSTIVE ? (size_t)1 << n_opt : 2 + 2 * n_opt + SUBSET_SAMPLES;
    uint64_t seed = 0x5eed0000 + k;
    for (size_t s = 0; s < subsets; s++) {
        for (size_t i = 0; i < n_opt; i++) {
            bool take;
            if (n_opt <= SUBSET_EXHAUSTIVE)
                take = (s >> i) & 1;
            else if (s < 2)
                take = s == 1;
            else if (s < 2 + n_opt)
                take = i == s - 2;
            else if (s < 2 + 2 * n_opt)
                take = i != s - 2 - n_opt;
            else
                take = lcg(&seed) & 1;
            taken[opt[i]] = take;
        }
        cstate st;
        build_state(&st, k, forced, taken);
        check_variants(r, k, &st, dur, cur);
        cs_free(&st);
    }
    free(taken);
    free(opt);
    free(cur);
    free(dur);
    free(forced);
}

/* The model's final state must be the real one: every change was recorded. */
static void check_model_is_real(const char *root)
{
    cstate s = {0};
    for (size_t i = 0; i < R.n_init; i++)
        cs_set(&s, R.init[i].path, R.init[i].ino);
    for (size_t j = 0; j < R.n_ev; j++)
        cs_apply(&s, &R.ev[j]);
    for (size_t i = 0; i < s.n; i++) {
        if (strncmp(s.e[i].path, SUB_CREDIDX "/", strlen(SUB_CREDIDX) + 1) == 0)
            continue; /* store_credidx.c's removals are not recorded: a cache */
        char *p = tu_sprintf("%s/%s", root, s.e[i].path);
        size_t len = 0;
        char *real = tu_read_file(p, &len);
        const mfile *f = &R.f[s.e[i].ino];
        ck_assert_msg(real && len == f->len && memcmp(real, f->data, len) == 0,
                      "the recorded changes do not give %s", p);
        free(real);
        free(p);
    }
    cs_free(&s);
}

typedef struct outcome {
    size_t changes, states, violations;
    char *report;
} outcome;

static pg_config *g_cfg;
static char *g_state;

static pg_store *open_store(void)
{
    pg_error err = {0};
    pg_store *s = pg_store_open(g_cfg, NULL, &err);
    ck_assert_msg(s != NULL, "open: %s", err.message);
    return s;
}

static outcome simulate(const scenario *sc, bool no_syncs)
{
    char *root = tu_mkdtemp();
    g_state = tu_sprintf("%s/state", root);
    g_cfg = config_for(g_state);
    pg_store *s = open_store();
    sc->setup(s);
    pg_store_free(s);
    s = open_store();
    recorder_start(g_state, no_syncs);
    pg_error err = {0};
    int rc = sc->op(s, &err);
    recorder_stop();
    ck_assert_msg(rc == PG_OK, "%s: %s", sc->name, err.message);
    pg_store_free(s);
    check_model_is_real(g_state);

    run r = {.sc = sc};
    char *shm = access("/dev/shm", W_OK) == 0 ? tu_sprintf("/dev/shm/pgcrash.%d", (int)getpid())
                                              : tu_sprintf("%s/states", root);
    r.scratch = shm;
    /* P: the durable state before; Q: the state after (the model's, whole). */
    cstate st = {0};
    build_state(&st, 0, NULL, NULL);
    for (size_t i = 0; i < st.n; i++)
        st.len[i] = R.f[st.e[i].ino].len;
    write_state(shm, &st);
    probe_state(shm, sc, &r.before);
    ck_assert_msg(!r.before.complaint, "%s: before: %s", sc->name, r.before.complaint);
    cs_free(&st);
    for (size_t i = 0; i < R.n_init; i++)
        cs_set(&st, R.init[i].path, R.init[i].ino);
    for (size_t j = 0; j < R.n_ev; j++)
        cs_apply(&st, &R.ev[j]);
    for (size_t i = 0; i < st.n; i++)
        st.len[i] = R.f[st.e[i].ino].len;
    write_state(shm, &st);
    probe_state(shm, sc, &r.after);
    ck_assert_msg(!r.after.complaint, "%s: after: %s", sc->name, r.after.complaint);
    cs_free(&st);

    for (size_t k = 0; k <= R.n_ev; k++)
        crash_at(&r, k);
    outcome o = {R.n_ev, r.states, r.violations, r.report};
    printf("crash simulation %-16s %s: %3zu changes, %4zu states, %zu violations\n", sc->name,
           no_syncs ? "(syncs removed)" : "               ", o.changes, o.states, o.violations);
    fflush(stdout);
    facts_clear(&r.before);
    facts_clear(&r.after);
    free(r.seen);
    tu_rmrf(shm);
    free(shm);
    recorder_clear();
    pg_config_free(g_cfg);
    tu_rmrf(root);
    free(root);
    free(g_state);
    return o;
}

/* ------------------------------------------------------------- scenarios */

static void do_pull(pg_store *s, const char *image, const char *ref, const char *ns,
                    const char *name, const char *hex)
{
    pg_secret sec = {ns, name, "uid-1", hex};
    pg_pull_credentials c = {&sec, 1, NULL, 0, 0};
    pg_error err = {0};
    ck_assert_msg(pg_store_record_pulled(s, image, ref, &c, &err) == PG_OK, "pull %s: %s", image,
                  err.message);
}

static void intent(pg_store *s, const char *image)
{
    pg_error err = {0};
    ck_assert_msg(pg_store_record_intent(s, image, &err) == PG_OK, "intent: %s", err.message);
}

/* Every record and credential time of the state moved `seconds` into the past. */
static void age_all(pg_store *s, long seconds)
{
    (void)s;
    time_t then = time(NULL) - seconds;
    const char *subs[] = {SUB_PULLED, SUB_CREDTIMES, SUB_CREDIDX};
    for (size_t k = 0; k < 3; k++) {
        char *dir = tu_sprintf("%s/%s", g_state, subs[k]);
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (strncmp(de->d_name, "sha256-", 7) != 0)
                continue;
            char *p = tu_sprintf("%s/%s", dir, de->d_name);
            if (k == 2) {
                unlink(p); /* the credential index would be stale */
                free(p);
                continue;
            }
            json_t *o = json_load_file(p, 0, NULL);
            ck_assert_ptr_nonnull(o);
            if (k == 0) {
                char *text = dc_time_text(then);
                json_object_set_new(o, "lastUpdatedTime", json_string(text));
                free(text);
            } else {
                const char *key;
                json_t *v;
                json_object_foreach(json_object_get(o, "times"), key, v)
                    json_integer_set(v, (json_int_t)then);
            }
            char *text = json_dumps(o, JSON_COMPACT);
            tu_write_file(p, text, -1, 0600);
            free(text);
            json_decref(o);
            free(p);
        }
        if (d)
            closedir(d);
        free(dir);
    }
}

static void setup_a(pg_store *s) { do_pull(s, IMG_A, REF_A, "ns-a", "sec-a", HEX_A); }

/* A pulled by team a, a long time ago, then by team b: a's credential is old. */
static void setup_a_repulled(pg_store *s)
{
    setup_a(s);
    age_all(s, 1000);
    do_pull(s, IMG_A, REF_A, "ns-b", "sec-b", HEX_B);
}

static int op_intent(pg_store *s, pg_error *err) { return pg_store_record_intent(s, IMG_N, err); }

static void setup_new(pg_store *s)
{
    setup_a(s);
    intent(s, IMG_N);
}

static int op_pulled_new(pg_store *s, pg_error *err)
{
    pg_secret sec = {"ns-n", "sec-n", "uid-1", HEX_C};
    pg_pull_credentials c = {&sec, 1, NULL, 0, 0};
    return pg_store_record_pulled(s, IMG_N, REF_N, &c, err);
}

/* The record and its aliases in one write (pg_store_record_pulled_aliases). */
static int op_pulled_aliases(pg_store *s, pg_error *err)
{
    pg_secret sec = {"ns-n", "sec-n", "uid-1", HEX_C};
    pg_pull_credentials c = {&sec, 1, NULL, 0, 0};
    const char *aliases[] = {IMG_MIRROR_N, NULL};
    return pg_store_record_pulled_aliases(s, IMG_N, REF_N, &c, aliases, err);
}

static void setup_repull(pg_store *s)
{
    setup_a(s);
    age_all(s, 1000);
}

static int op_repull(pg_store *s, pg_error *err)
{
    pg_secret sec = {"ns-b", "sec-b", "uid-1", HEX_B};
    pg_pull_credentials c = {&sec, 1, NULL, 0, 0};
    return pg_store_record_pulled(s, IMG_A, REF_A, &c, err);
}

/* A record whose credentials have no times file (records written before it, or placed
 * by hand): a re-pull must make its times durable before the record, or the old
 * credential would take the new record's time. */
static void setup_repull_untimed(pg_store *s)
{
    setup_a(s);
    char *times = dc_record_path(g_state, SUB_CREDTIMES, REF_A);
    ck_assert_int_eq(unlink(times), 0);
    free(times);
    age_all(s, 1000);
}

static void setup_failed(pg_store *s)
{
    setup_a(s);
    intent(s, IMG_F);
    intent(s, IMG_F); /* two pulls of F in flight */
    intent(s, IMG_G);
}

static int op_failed(pg_store *s, pg_error *err)
{
    int rc = pg_store_record_failed(s, IMG_F, err);
    return rc == PG_OK ? pg_store_record_failed(s, IMG_G, err) : rc;
}

static int op_aliases(pg_store *s, pg_error *err)
{
    const char *aliases[] = {IMG_MIRROR, NULL};
    return pg_store_record_aliases(s, REF_A, aliases, err);
}

static void setup_prune(pg_store *s)
{
    setup_a_repulled(s);
    do_pull(s, IMG_B, REF_B, "ns-b", "sec-b", HEX_B);
    do_pull(s, IMG_C, REF_C, "ns-c", "sec-c", HEX_C);
}

static int op_prune(pg_store *s, pg_error *err)
{
    const char *in_use[] = {REF_B, NULL};
    unsigned pruned = 0;
    int rc = pg_store_prune(s, in_use, 0, &pruned, err);
    ck_assert_uint_eq(pruned, 2);
    return rc;
}

/* Records from before the name index (no marker, a name file missing). */
static void setup_unindexed(pg_store *s)
{
    setup_a(s);
    do_pull(s, IMG_B, REF_B, "ns-b", "sec-b", HEX_B);
    char *marker = tu_sprintf("%s/pullgate-names/.complete-2", g_state);
    ck_assert_int_eq(unlink(marker), 0);
    free(marker);
    char *name_file = dc_record_path(g_state, SUB_NAMES, "registry.example.com/team-a/app");
    ck_assert_int_eq(unlink(name_file), 0);
    free(name_file);
}

static int op_prune_none(pg_store *s, pg_error *err)
{
    const char *in_use[] = {REF_A, REF_B, NULL};
    unsigned pruned = 1;
    int rc = pg_store_prune(s, in_use, 0, &pruned, err);
    ck_assert_uint_eq(pruned, 0);
    return rc;
}

static const scenario scenarios[] = {
    {"intent", setup_a, op_intent, {{IMG_N, REF_N}, {IMG_A, REF_A}}},
    {"new-image", setup_new, op_pulled_new, {{IMG_N, REF_N}, {IMG_A, REF_A}}},
    {"pull-aliases",
     setup_new,
     op_pulled_aliases,
     {{IMG_N, REF_N}, {IMG_MIRROR_N, NULL}, {IMG_A, REF_A}}},
    {"re-pull", setup_repull, op_repull, {{IMG_A, REF_A}}},
    {"re-pull-untimed", setup_repull_untimed, op_repull, {{IMG_A, REF_A}}},
    {"failed-pull", setup_failed, op_failed, {{IMG_F, NULL}, {IMG_G, NULL}, {IMG_A, REF_A}}},
    {"aliases", setup_a, op_aliases, {{IMG_MIRROR, NULL}, {IMG_A, REF_A}}},
    {"prune", setup_prune, op_prune, {{IMG_A, REF_A}, {IMG_B, REF_B}, {IMG_C, REF_C}}},
    {"names-rebuild", setup_unindexed, op_prune_none, {{IMG_A, REF_A}, {IMG_B, REF_B}}},
};

static const scenario *scenario_named(const char *name)
{
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (strcmp(scenarios[i].name, name) == 0)
            return &scenarios[i];
    ck_abort_msg("no scenario %s", name);
    return NULL;
}

static void assert_crash_safe(const char *name)
{
    outcome o = simulate(scenario_named(name), false);
    ck_assert_msg(o.states > 1, "%s: no crash state checked", name);
    ck_assert_msg(o.violations == 0, "%s: %zu violations, the first:\n%s", name, o.violations,
                  o.report ? o.report : "");
    free(o.report);
}

START_TEST(crash_intent) { assert_crash_safe("intent"); }
END_TEST

START_TEST(crash_new_image) { assert_crash_safe("new-image"); }
END_TEST

START_TEST(crash_pull_aliases) { assert_crash_safe("pull-aliases"); }
END_TEST

START_TEST(crash_repull) { assert_crash_safe("re-pull"); }
END_TEST

START_TEST(crash_repull_untimed) { assert_crash_safe("re-pull-untimed"); }
END_TEST

START_TEST(crash_failed_pull) { assert_crash_safe("failed-pull"); }
END_TEST

START_TEST(crash_aliases) { assert_crash_safe("aliases"); }
END_TEST

START_TEST(crash_prune) { assert_crash_safe("prune"); }
END_TEST

START_TEST(crash_names_rebuild) { assert_crash_safe("names-rebuild"); }
END_TEST

/* fsyncs recorded and their rounds: runs of fsyncs with no other change between
 * (a round's fsyncs are issued together). */
static void count_fsyncs(size_t *fsyncs, size_t *rounds)
{
    bool in_round = false;
    *fsyncs = *rounds = 0;
    for (size_t j = 0; j < R.n_ev; j++) {
        bool sync = R.ev[j].kind == EV_FSYNC_FILE || R.ev[j].kind == EV_FSYNC_DIR;
        *rounds += sync && !in_round;
        *fsyncs += sync;
        in_round = sync;
    }
}

/*
 * A new image pulled as pullgate-cri records it: the intent under both spellings,
 * then the pull with the image ID and a repo digest as aliases. The intent is one
 * round (it counts by existing); the pull three (data; credential times and name
 * index; record and image index): docs/design.md, "Durability".
 */
START_TEST(new_image_fsync_rounds)
{
    char *root = tu_mkdtemp();
    g_state = tu_sprintf("%s/state", root);
    g_cfg = config_for(g_state);
    pg_store *s = open_store();
    recorder_start(g_state, false);
    intent(s, "nginx:1.25");
    size_t intent_fsyncs, intent_rounds;
    count_fsyncs(&intent_fsyncs, &intent_rounds);
    pg_secret sec = {"ns-n", "sec-n", "uid-1", HEX_C};
    pg_pull_credentials c = {&sec, 1, NULL, 0, 0};
    const char *aliases[] = {REF_N, "docker.io/library/nginx@sha256:" HEX_A, NULL};
    pg_error err = {0};
    ck_assert_msg(pg_store_record_pulled_aliases(s, "nginx:1.25", REF_N, &c, aliases, &err) ==
                      PG_OK,
                  "%s", err.message);
    recorder_stop();
    size_t fsyncs, rounds;
    count_fsyncs(&fsyncs, &rounds);
    printf("new image (intent, pull with 2 aliases): %zu fsyncs in %zu rounds (intent %zu in %zu)\n",
           fsyncs, rounds, intent_fsyncs, intent_rounds);
    ck_assert_uint_eq(intent_rounds, 1);
    ck_assert_uint_eq(rounds, 4);
    pg_store_free(s);
    recorder_clear();
    pg_config_free(g_cfg);
    tu_rmrf(root);
    free(root);
    free(g_state);
}
END_TEST

/* With every fsync a no-op, the simulation must find the damage. */
START_TEST(crash_without_syncs_is_caught)
{
    const char *must_fail[] = {"intent",  "new-image",     "pull-aliases",
                               "aliases", "names-rebuild", "re-pull-untimed"};
    for (size_t i = 0; i < sizeof must_fail / sizeof must_fail[0]; i++) {
        outcome o = simulate(scenario_named(must_fail[i]), true);
        ck_assert_msg(o.violations > 0, "%s: no violation found without syncs", must_fail[i]);
        free(o.report);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("store_crash");
    TCase *tc = tcase_create("power-loss");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, crash_intent);
    tcase_add_test(tc, crash_new_image);
    tcase_add_test(tc, crash_pull_aliases);
    tcase_add_test(tc, crash_repull);
    tcase_add_test(tc, crash_repull_untimed);
    tcase_add_test(tc, crash_failed_pull);
    tcase_add_test(tc, crash_aliases);
    tcase_add_test(tc, crash_prune);
    tcase_add_test(tc, crash_names_rebuild);
    tcase_add_test(tc, crash_without_syncs_is_caught);
    tcase_add_test(tc, new_image_fsync_rounds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
