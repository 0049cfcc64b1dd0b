/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-doctor (run as `pullgatectl doctor`): checks one node's wiring and
 * prints one line per check, ✔ or ✘ with the fix. Its own executable so that
 * pullgatectl maps none of what it needs (gRPC for the CRI Version call,
 * libyaml for the kubelet's configuration, toml++ for containerd's).
 * Everything it reads is hostile: bounded reads, no symlinks where it trusts a
 * file, and a check that cannot tell fails (✘), never passes.
 */
#ifndef PG_DOCTOR_H
#define PG_DOCTOR_H

#include "internal.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define PGD_MAX_FILE_BYTES (1u << 20) /* every configuration file it reads */
#define PGD_TEXT_MAX 1024

/* Where to look: the defaults are the node's own paths; tests point them at a fake node. */
typedef struct pgd_options {
    const char *config_path; /* the pullgate configuration (pullgatectl --config) */
    int config_explicit;
    const char *proc_root;         /* /proc */
    const char *containerd_config; /* /etc/containerd/config.toml */
    const char *crio_config;       /* /etc/crio/crio.conf */
    const char *crio_config_dir;   /* /etc/crio/crio.conf.d */
    const char **crio_hooks_dirs;  /* NULL-terminated; NULL: from CRI-O's configuration */
    const char *kubelet_config;    /* NULL: the running kubelet's --config, else the default */
    const char *kubelet_version;   /* NULL: `kubelet --version` of the running kubelet */
    const char *hook_socket;       /* NULL: pullgate-cri's --hook-socket, else the default */
    const char *runtime;           /* auto, containerd, cri-o */
    int timeout_ms;                /* per CRI call and hook probe */
    int json;
} pgd_options;

/* One check's outcome: a line of output. */
typedef struct pgd_result {
    const char *name;
    bool ok;
    char detail[PGD_TEXT_MAX];
    char fix[PGD_TEXT_MAX];
} pgd_result;

/* What one check learns and later checks use (paths, endpoints, the runtime). */
typedef struct pgd_node {
    const pgd_options *opt;
    pg_config *cfg;         /* NULL when the configuration could not be loaded */
    char cri_listen[512];   /* pullgate-cri's CRI socket (its --listen, else criListen) */
    char cri_runtime[512];  /* the runtime behind it (--runtime-endpoint, else the config) */
    char cri_config[4096];  /* pullgate-cri's --config (or the default) */
    char hook_socket[512];  /* pullgate-cri's --hook-socket (or the default) */
    bool cri_process;       /* a pullgate-cri process was found */
    char runtime[16];       /* "containerd" or "cri-o" */
    char hook_config[4096]; /* the --config the runtime's hook entry names (or the default) */
    char hook_daemon[512];  /* the --daemon-socket it names (or the default) */
    bool hook_found;        /* the runtime's configuration names the hook */
} pgd_node;

/* Fills r: ok with a detail, or not ok with a detail and a fix (printf formats). */
void pgd_pass(pgd_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pgd_fail(pgd_result *r, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------ the checks */

void pgd_check_config(pgd_node *n, pgd_result *r);
void pgd_check_state_dir(pgd_node *n, pgd_result *r);
void pgd_check_record_dirs(pgd_node *n, pgd_result *r);
void pgd_check_hmac_key(pgd_node *n, pgd_result *r);
void pgd_find_cri_process(pgd_node *n);
void pgd_check_runtime(pgd_node *n, pgd_result *r);
void pgd_check_cri_proxy(pgd_node *n, pgd_result *r);
void pgd_check_hook_socket(pgd_node *n, pgd_result *r);
void pgd_check_kubelet(pgd_node *n, pgd_result *r, pgd_result *policy);
void pgd_check_hook_wiring(pgd_node *n, pgd_result *r, pgd_result *annotations);
void pgd_check_same_config(pgd_node *n, pgd_result *r);
/* doctor_crio_auth.c: CRI-O's namespaced auth, as pullgate-cri reads it (after check_runtime). */
void pgd_check_crio_namespaced_auth(pgd_node *n, pgd_result *r);

/* -------------------------------------------------------------- helpers */

/* A whole file, at most PGD_MAX_FILE_BYTES, symlinks followed (these are not trusted files,
 * only read); *buf NUL-terminated, caller frees. PG_ERR_NOT_FOUND when absent. */
int pgd_read_file(const char *path, char **buf, size_t *len, pg_error *err);
/* A root-owned file or directory not writable by group or others (lstat: no symlink)? */
bool pgd_root_owned_safe(const char *path, char *why, size_t n);

/* A process's argv from <proc_root>/<pid>/cmdline (NULL-terminated strv, caller frees with
 * pg_strv_free), for the first process whose comm is name, that runs as root (real uid) and
 * shares the doctor's mount namespace (never a container's); NULL when none. */
char **pgd_find_process(const char *proc_root, const char *name, int *pid_out);
/* Whether pid is such a process now (root, the doctor's mount namespace). */
bool pgd_node_process(const char *proc_root, int pid);
/* The value of --name VALUE / --name=VALUE in argv (the last one wins), or NULL. */
const char *pgd_flag(char *const *argv, const char *name);

/* Endpoint spellings compare equal ("unix:///run/x", "/run/x", "/var/run/x"). */
bool pgd_same_endpoint(const char *a, const char *b);
/* Two paths naming the same existing file (device and inode), or the same string. */
bool pgd_same_file(const char *a, const char *b);

/* YAML (the kubelet's configuration) to JSON: mappings to objects, sequences to
 * arrays, every scalar a string; no aliases, bounded depth. NULL with err set. */
json_t *pgd_yaml_to_json(const char *text, size_t len, pg_error *err);
/* TOML (containerd's configuration) to JSON via toml++; NULL with err set. */
json_t *pgd_toml_to_json(const char *text, size_t len, pg_error *err);
/* The C++ half (doctor_toml.cc): malloc'ed JSON text, or NULL with a message in errbuf. */
char *pgd_toml_json_text(const char *text, size_t len, char *errbuf, size_t errlen);

/* CRI RuntimeService/Version on a unix:// endpoint within timeout_ms: 0 with the
 * runtime's name and version ("containerd 1.6.20, CRI v1"), or -1 with why. */
int pgd_cri_version(const char *endpoint, int timeout_ms, char *out, size_t n, char *why,
                    size_t why_n);

#endif
