/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-doctor (run as `pullgatectl doctor`): checks one node's wiring and
 * prints one line per check, grouped: ✔, ‼ (a warning: a supported mode or a
 * part not there yet) or ✘ with the fix, a command that repairs it where one
 * can, and the documentation anchor; then pullgate-cri's status and a summary.
 * Its own executable so that pullgatectl maps none of what it needs (gRPC for
 * the CRI Version call, libyaml for the kubelet's configuration, toml++ for
 * containerd's, libcurl for pullgate-cri's metrics).
 * Everything it reads is hostile: bounded reads; the node's files only when
 * root's, not writable by others and not a symlink; a process's relative paths
 * through its own /proc cwd and root, never the doctor's; and a check that
 * cannot tell fails (✘), never passes.
 */
#ifndef PG_DOCTOR_H
#define PG_DOCTOR_H

#include "internal.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#define PGD_MAX_FILE_BYTES (1u << 20) /* every configuration file it reads */
#define PGD_TEXT_MAX 1024
#define PGD_COMMAND_MAX 2048
#define PGD_JSON_SCHEMA_VERSION 2 /* docs/doctor.schema.json */

/* Where to look: the defaults are the node's own paths; tests point them at a fake node. */
typedef struct pgd_options {
    const char *config_path; /* the pullgate configuration (pullgatectl --config) */
    int config_explicit;
    const char *proc_root;         /* /proc */
    const char *containerd_config; /* NULL: the running containerd's, else its default */
    const char *crio_config;       /* /etc/crio/crio.conf */
    const char *crio_config_dir;   /* /etc/crio/crio.conf.d */
    const char **crio_hooks_dirs;  /* NULL-terminated; NULL: from CRI-O's configuration */
    const char *kubelet_config;    /* NULL: the running kubelet's --config, else the default */
    const char *kubelet_version;   /* NULL: `kubelet --version` of the running kubelet */
    const char *hook_socket;       /* NULL: pullgate-cri's --hook-socket, else the default */
    const char *runtime;           /* auto, containerd, cri-o */
    const char *systemd_dir;       /* /etc/systemd/system: where a fix writes a drop-in */
    const char *kubelet_flags;     /* /var/lib/kubelet/kubeadm-flags.env */
    const char *hook_path;         /* the installed pullgate-hook a `wire` fix puts in */
    int timeout_ms;                /* per CRI call and hook probe */
    int json;
} pgd_options;

typedef enum pgd_level {
    PGD_OK,   /* ✔ */
    PGD_WARN, /* ‼ a supported mode, or a part not there yet: exit 0 */
    PGD_FAIL  /* ✘ exit 1 */
} pgd_level;

/* One check's outcome: a line of output. */
typedef struct pgd_result {
    const char *name;
    const char *group;
    pgd_level level;
    char detail[PGD_TEXT_MAX];
    char fix[PGD_TEXT_MAX];         /* what to do, in words ("" when ok) */
    char command[PGD_COMMAND_MAX];  /* a shell command that repairs it, run as root; "" if none */
} pgd_result;

/* What one check learns and later checks use (paths, endpoints, the runtime). */
typedef struct pgd_node {
    const pgd_options *opt;
    pg_config *cfg;         /* NULL when the configuration could not be loaded */
    char cri_listen[512];   /* pullgate-cri's CRI socket (its --listen, else criListen) */
    char cri_runtime[512];  /* the runtime behind it (--runtime-endpoint, else the config) */
    char cri_config[4096];  /* pullgate-cri's --config (or the default), as it names it */
    char hook_socket[512];  /* pullgate-cri's --hook-socket (or the default) */
    bool cri_process;       /* a pullgate-cri process was found */
    int cri_pid;
    size_t cri_candidates;  /* when none was: how many could have been it */
    char **cri_argv;          /* its command line (NULL: none runs): a drop-in keeps it */
    struct stat cri_config_st; /* the file pullgate-cri's --config names, as it sees it */
    bool cri_config_seen;      /* cri_config_st is set */
    char cri_config_why[256];  /* why not */
    char runtime[16];       /* "containerd" or "cri-o" */
    char hook_config[4096]; /* the --config the runtime's hook entry names (or the default) */
    char hook_daemon[512];  /* the --daemon-socket it names (or the default) */
    bool hook_found;        /* the runtime's configuration names the hook */
    char cd_config[4096];   /* containerd's configuration, when it was read ("" otherwise) */
} pgd_node;

/* Fills r: ok with a detail, or a warning / a failure with a detail and a fix (printf
 * formats); the command that repairs it, when there is one, is set after. */
void pgd_pass(pgd_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pgd_warn(pgd_result *r, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void pgd_fail(pgd_result *r, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void pgd_command(pgd_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* s as one shell word into out (size n): as is when it holds only [A-Za-z0-9_./:=@+,-],
 * else single-quoted. false when it does not fit. */
bool pgd_sh_word(const char *s, char *out, size_t n);
/* Whether s is one word a shell, a systemd ExecStart= and sed's | delimiter all take as is. */
bool pgd_plain_word(const char *s);

/* ------------------------------------------------------------ the checks */

void pgd_check_config(pgd_node *n, pgd_result *r);
void pgd_check_state_dir(pgd_node *n, pgd_result *r);
void pgd_check_record_dirs(pgd_node *n, pgd_result *r);
void pgd_check_hmac_key(pgd_node *n, pgd_result *r);
void pgd_find_cri_process(pgd_node *n);
/* Whether path is the file pullgate-cri's --config names, as it sees it (device and inode). */
bool pgd_cri_reads(const pgd_node *n, const char *path);
void pgd_check_runtime(pgd_node *n, pgd_result *r);
void pgd_check_cri_proxy(pgd_node *n, pgd_result *r);
void pgd_check_hook_socket(pgd_node *n, pgd_result *r);
void pgd_check_kubelet(pgd_node *n, pgd_result *r, pgd_result *policy);
void pgd_check_hook_wiring(pgd_node *n, pgd_result *r, pgd_result *annotations);
void pgd_check_same_config(pgd_node *n, pgd_result *r);
/* doctor_crio_auth.c: CRI-O's namespaced auth, as pullgate-cri reads it (after check_runtime). */
void pgd_check_crio_namespaced_auth(pgd_node *n, pgd_result *r);

/* -------------------------------------------------------------- helpers */

/* A whole file of the node's configuration, at most PGD_MAX_FILE_BYTES, as the hook reads
 * its own: no symlink, a regular file owned by root, not writable by group or others (a file
 * anyone else could have written says nothing about the node); *buf NUL-terminated, caller
 * frees. PG_ERR_NOT_FOUND when absent, PG_ERR_UNSAFE when not trusted. */
int pgd_read_file(const char *path, char **buf, size_t *len, pg_error *err);
/* The same from an open descriptor (borrowed); path names it in messages. */
int pgd_read_fd_trusted(int fd, const char *path, char **buf, size_t *len, pg_error *err);

/*
 * Opens path as process pid (<proc_root>/<pid>) would: a relative path from its working
 * directory (<pid>/cwd), an absolute one within its root (<pid>/root), never the doctor's
 * own. flags as open(2) (O_CLOEXEC added). The file as the process names it, absolute,
 * into shown (for messages and fix commands). -1 with err (errno: the open's, or 0); the
 * process must still be a node process (pgd_node_process) once its directories are open.
 */
int pgd_proc_open(const char *proc_root, int pid, const char *path, int flags, char *shown,
                  size_t shown_n, pg_error *err);
/* PG_OK for a root-owned file or directory not writable by group or others (lstat: no
 * symlink); PG_ERR_UNSAFE otherwise, saying why. */
int pgd_root_owned_safe(const char *path, pg_error *err);

/* A process's argv from <proc_root>/<pid>/cmdline (NULL-terminated strv, caller frees with
 * pg_strv_free), for the first node process (pgd_node_process) whose comm is name; NULL when
 * none. */
char **pgd_find_process(const char *proc_root, const char *name, int *pid_out);
/* Whether pid is a process of the node's own, never a container's: it runs as root (real
 * uid) and either shares the doctor's mount namespace, or is a service systemd gave a mount
 * namespace of its own (PrivateTmp, ProtectSystem): its parent is init and its root
 * directory is the node's. */
bool pgd_node_process(const char *proc_root, int pid);
/* The argv of the process serving the unix socket endpoint ("unix:///run/x" or a path),
 * found by the socket's peer credentials (SO_PEERCRED) when that peer is root and a node
 * process whose comm is name; NULL otherwise. Connects and closes without a byte: only for
 * a gRPC socket, which takes that silently (never the hook socket, which logs it). */
char **pgd_socket_server(const char *proc_root, const char *endpoint, const char *name,
                         int *pid_out);
/* containerd's own default configuration file. */
#define PGD_CONTAINERD_DEFAULT_CONFIG "/etc/containerd/config.toml"
/* CRI-O's drop-in directory, and the administrators' hooks.d directory (where `wire` puts an
 * entry the packaged one does not cover). */
#define PGD_CRIO_CONFIG_DIR "/etc/crio/crio.conf.d"
#define PGD_ADMIN_HOOKS_DIR "/etc/containers/oci/hooks.d"
/* The node's NAME daemon (a node process, as pgd_find_process): the one started by init (a
 * service), else (unless init_only: never a process someone started by hand or a test's) the
 * only one; its argv (caller frees) and pid. NULL when none runs or several could be it
 * (*candidates says how many). */
#define PGD_MAX_SERVICES 16
char **pgd_find_service(const char *proc_root, const char *name, int *pid, size_t *candidates,
                        bool init_only);
/* A running containerd: a node process. */
typedef struct pgd_containerd {
    int pid;
    char config[4096]; /* its --config / -c, or containerd's default when it has none; "" when
                          it cannot be named (why says why) */
    char why[256];
} pgd_containerd;
/* Every running containerd (at most max written); returns how many run. */
size_t pgd_running_containerds(const char *proc_root, pgd_containerd *out, size_t max);
/* The node's containerd's (pgd_find_service) configuration file, written to out: its
 * --config as containerd opened it (through its /proc cwd and root, pgd_proc_open), or
 * containerd's default. NULL when none runs or several could be it (*candidates says how
 * many), or when its file cannot be named (*candidates 1, err says why; err may be NULL).
 * Doctor and pullgate-wire ask this; pullgate-still-wired lists them all
 * (`pullgate-wire --print-containerd-configs`). */
const char *pgd_running_containerd_config(const char *proc_root, char *out, size_t n,
                                          size_t *candidates, pg_error *err);
/* The containerd configuration to read: given (--containerd-config) when not NULL, else the
 * running one's (pgd_running_containerd_config, into buf), else containerd's default when none
 * runs. NULL with why when the running one's cannot be named, or several run (*candidates)
 * and none is the node's service. */
const char *pgd_containerd_config(const char *given, const char *proc_root, char *buf, size_t n,
                                  size_t *candidates, pg_error *why);
/* The value of --name VALUE / --name=VALUE in argv (the last one wins), or NULL. */
const char *pgd_flag(char *const *argv, const char *name);

/* j[keys[0]][keys[1]]... (keys NULL-terminated), or NULL. */
json_t *pgd_json_path(json_t *j, const char *const *keys);
/* Whether the JSON array holds the string value. */
bool pgd_json_array_has(const json_t *array, const char *value);
/* An OCI hook {"path", "args"} whose path names pullgate-hook (in any directory). */
bool pgd_is_our_hook(const json_t *hook);

/* Endpoint spellings compare equal ("unix:///run/x", "/run/x", "/var/run/x"). */
bool pgd_same_endpoint(const char *a, const char *b);
/* Two paths naming the same existing file (device and inode), or the same string. */
bool pgd_same_file(const char *a, const char *b);

/* YAML (the kubelet's configuration) to JSON: mappings to objects, sequences to
 * arrays, every scalar a string; no aliases, bounded depth. NULL with err set. */
json_t *pgd_yaml_to_json(const char *text, size_t len, pg_error *err);
/* TOML (containerd's configuration) to JSON via toml++; NULL with err set. */
json_t *pgd_toml_to_json(const char *text, size_t len, pg_error *err);

/* ------------------------------------------------------------- status */

/* What pullgate-cri's metrics say about it (doctor_status.c): doctor's status section. */
typedef struct pgd_status {
    bool available;
    char source[160];  /* http://ADDR/metrics */
    char why[256];     /* when not available */
    char version[64];
    double start_time, pulled, intents, denials_hour, last_prune; /* NAN: not exported */
} pgd_status;
void pgd_read_status(const pgd_node *n, pgd_status *st);

/* The first sample of metric name in Prometheus text (len bytes): its value, and the value
 * of label (NULL: none wanted) into label_out (size label_n). 0 found, -1 not. */
int pgd_prom_sample(const char *text, size_t len, const char *name, const char *label,
                    char *label_out, size_t label_n, double *value);

/* CRI RuntimeService/Version on a unix:// endpoint within timeout_ms: PG_OK with the
 * runtime's name and version ("containerd 1.6.20, CRI v1"). */
int pgd_cri_version(const char *endpoint, int timeout_ms, char *out, size_t n, pg_error *err);

#endif
