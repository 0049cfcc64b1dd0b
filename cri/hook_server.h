/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-cri's resident hook server: decides for the thin pullgate-hook
 * (hooks/pullgate-hook.c) over a root-only SOCK_SEQPACKET socket, with the
 * daemon's configuration and a long-lived record store with the record
 * cache, so a container start pays no libcrypto start-up (docs/design.md,
 * "The resident hook"; wire format: hooks/hook_proto.h).
 */
#ifndef PULLGATE_CRI_HOOK_SERVER_H
#define PULLGATE_CRI_HOOK_SERVER_H

#include "decider.h"
#include "internal.h"

#include <sys/stat.h>

/*
 * Which configuration file the daemon loaded, as the hook would find it: the
 * server decides only for a hook that names this very file, unchanged (or,
 * both without a file, the defaults); any other hook is told "not mine".
 */
typedef struct cri_hook_config_id {
    int usable;   /* 0: the file changed while loading: never "mine" */
    int has_file; /* 0: built-in defaults (the default path was missing) */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
} cri_hook_config_id;

/* The identity of path (NULL: defaults, no file) now; 0, or -1 when it cannot be taken
 * or the file is one the hook would refuse to load (a symlink, not root's, writable by
 * group or others). */
int cri_hook_config_identify(const char *path, cri_hook_config_id *id);
/* 1 when a and b name the same, unchanged file (or both no file). */
int cri_hook_config_same(const cri_hook_config_id *a, const cri_hook_config_id *b);

typedef struct cri_hook_server_options {
    const char *path;             /* socket path; its directory must exist, root-only */
    const pg_config *cfg;         /* borrowed, outlives the server */
    cri_hook_config_id config_id; /* of the file cfg came from */
    const char *config_path;      /* that file's path (NULL: defaults), copied; for the log */
    pg_notifier *notifier;        /* borrowed; D-Bus signals after each reply */
    cri_decider *decider;         /* borrowed, outlives the server: the store it decides with */
} cri_hook_server_options;

typedef struct cri_hook_server cri_hook_server;

/* Binds the socket (0600; a stale socket nobody serves is replaced) and starts two workers. */
cri_hook_server *cri_hook_server_start(const cri_hook_server_options *o, pg_error *err);
/*
 * Stops accepting, waits up to timeout_ms for the workers, removes the socket.
 * Returns 1 when everything was freed, 0 when a worker is stuck (in the store):
 * then the server is left to process exit.
 */
int cri_hook_server_stop(cri_hook_server *s, int timeout_ms);

/*
 * One request as the server handles it (exported for the fuzz target):
 * decodes and validates msg, then checks fds (exactly one, a directory).
 * Returns 0 with *req pointing into msg, or -1 (the connection is dropped).
 */
struct hook_request;
int cri_hook_check_request(const unsigned char *msg, size_t len, const int *fds, size_t n_fds,
                           struct hook_request *req);

#endif
