/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hook's modules: arguments, OCI input, runtime identity, reporting, and
 * the evaluation that ties them together (evaluate.c), shared by
 * pullgate-hook-local and the resident server in pullgate-cri. The thin
 * pullgate-hook links only args.c, oci_input.c and proto.c (no libcrypto).
 * Not installed.
 */
#ifndef PULLGATE_HOOK_H
#define PULLGATE_HOOK_H

#include "internal.h"

#include <stdbool.h>

/* Fixed bounds on what the runtime hands us (every input is hostile). */
#define HOOK_MAX_STATE_BYTES (1u << 20)      /* OCI state JSON on stdin */
#define HOOK_MAX_BUNDLE_CONFIG_BYTES (16u << 20) /* <bundle>/config.json */
#define HOOK_STDIN_DEADLINE_MS 2000          /* stdin that never closes */
#define HOOK_HARD_DEADLINE_S 5               /* whole run; below the hooks.d timeout */
#define HOOK_DBUS_TIMEOUT_MS 100

#define HOOK_UNKNOWN "unknown" /* printed for a field not known (yet) */
#define HOOK_LINE_MAX 2048     /* one stderr line: 4 sanitised fields + a reason fit */

/* ----------------------------------------------------------------- args.c */

/* The hook's command line (both executables accept the same arguments). */
typedef struct hook_args {
    const char *config_path; /* the --config given, or the compiled-in default */
    int config_explicit;     /* --config given: a missing file is an error */
    const char *stage;
    const char *daemon_socket; /* --daemon-socket; NULL: the default, "none": never */
} hook_args;

/*
 * `--version` as the only argument: prints "<prog> <version>" on stdout and
 * returns 1 (the caller exits 0); 0 otherwise. Never part of a hook run: a
 * runtime passes the arguments of its hook entry, which never say --version.
 */
int hook_print_version(int argc, char **argv, const char *prog);
/* 1 for an OCI hook stage name the hook accepts. */
int hook_is_known_stage(const char *stage);
/* Fills *args from argv (borrowed); PG_ERR_INVALID with a usage message. */
int hook_parse_args(int argc, char **argv, hook_args *args, pg_error *err);

/* ------------------------------------------------------------ oci_input.c */

/* What the OCI state on stdin tells us. Both strings are owned. */
typedef struct hook_state {
    char *id;
    char *bundle;
} hook_state;

/*
 * Reads at most max bytes from fd until EOF or until deadline_ms elapsed (spent_ms of it
 * used up already, 0 for none); on failure
 * *buf and *len still hold what was read (never NULL, NUL-terminated; the caller
 * frees it) and *timed_out says whether the deadline passed: the thin hook hands
 * that to the local hook.
 */
int hook_read_fd_partial(int fd, size_t max, int deadline_ms, int spent_ms, char **buf,
                         size_t *len, bool *timed_out, pg_error *err);
/* ------------------------------------------------------------- oci_scan.c */

/*
 * The hook's JSON reader for the OCI state and the bundle's config.json: accepts exactly
 * what pg_json_parse (jansson, JSON_REJECT_DUPLICATES) accepts and keeps the root object's
 * members and those of the one named map_key (oci_scan.c says how). Its buffers are kept
 * from one document to the next (a warm resident worker allocates nothing per request).
 * One hook_doc per thread. Strings returned are borrowed from it, valid until its next
 * scan, trim or free.
 */
typedef struct hook_doc hook_doc;

typedef enum hook_json_kind {
    HOOK_JSON_ABSENT = 0, /* no such member */
    HOOK_JSON_STRING = 1,
    HOOK_JSON_OBJECT = 2,
    HOOK_JSON_OTHER = 3 /* an array, a number, true, false or null */
} hook_json_kind;

hook_doc *hook_doc_new(void); /* NULL when out of memory; release with hook_doc_free */
void hook_doc_free(hook_doc *doc);
/* Gives back buffers a large document grew beyond a usual one's (forgets the last scan). */
void hook_doc_trim(hook_doc *doc);
/*
 * Scans buf (len bytes; NUL bytes in it are data). PG_ERR_INVALID ("<what>: invalid
 * JSON at offset N: why") for anything jansson would refuse; the previous scan is gone.
 */
int hook_doc_scan(hook_doc *doc, const char *buf, size_t len, const char *map_key, const char *what,
                  pg_error *err);
/* After a successful scan: whether the root is an object (else an array). */
bool hook_doc_root_is_object(const hook_doc *doc);
/* A root member's kind, and *value (may be NULL) its decoded string when a string. */
hook_json_kind hook_doc_member(const hook_doc *doc, const char *key, const char **value);
/* The map's members (0 when it is absent or not an object), in byte order of their keys. */
size_t hook_doc_map_size(const hook_doc *doc);
/* Member i: *key, and *value its string (NULL when the value is not a string). */
int hook_doc_map_entry(const hook_doc *doc, size_t i, const char **key, const char **value);
/* The map member's string value, or NULL (absent, or not a string). NULL-safe. */
const char *hook_doc_map_get(const hook_doc *doc, const char *key);
/*
 * Reads dir_fd/name into doc's own buffer (*buf, NUL-terminated, valid until the
 * next read, trim or free) with pg_read_file_at's checks for PG_READ_CHECK_OWNER:
 * O_NOFOLLOW, a regular file of root's or the effective uid's, at most max bytes.
 */
int hook_doc_read_at(hook_doc *doc, int dir_fd, const char *name, size_t max, const char **buf,
                     size_t *len, pg_error *err);

/* ------------------------------------------------------------ oci_input.c (cont.) */

/* Reads and validates the OCI state JSON from fd (bounded, deadline: spent_ms of it were
 * used by the thin hook already, 0 for none); doc may be NULL. */
int hook_read_state_spent(hook_doc *doc, int fd, int spent_ms, hook_state *state, pg_error *err);
/*
 * Validates the OCI state JSON in buf (len bytes, at most HOOK_MAX_STATE_BYTES), scanned
 * with doc (NULL: a temporary one).
 */
int hook_parse_state(hook_doc *doc, const char *buf, size_t len, hook_state *state, pg_error *err);
void hook_state_clear(hook_state *state);

/*
 * Reads <bundle>/config.json (no symlink, regular file, bounded) into doc, whose
 * map is then its "annotations" object (empty when absent). Every annotation
 * value must be a string.
 */
int hook_read_bundle_annotations(const char *bundle, hook_doc *doc, pg_error *err);
/* The same from an already open bundle directory (borrowed: not closed). */
int hook_read_bundle_annotations_at(int bundle_fd, hook_doc *doc, pg_error *err);
/* The same from config.json's bytes (len of them). */
int hook_parse_bundle_config(hook_doc *doc, const char *buf, size_t len, pg_error *err);
/* Opens the bundle directory as the local hook does (O_DIRECTORY, close-on-exec). */
int hook_open_bundle(const char *bundle, int *fd, pg_error *err);

/* ------------------------------------------------------------- identity.c */

typedef enum hook_container_kind {
    HOOK_NOT_KUBERNETES = 0, /* no CRI-O or containerd annotations: not ours to judge */
    HOOK_SANDBOX = 1,        /* pause / infra container */
    HOOK_APPLICATION = 2     /* an application container: decide */
} hook_container_kind;

#define HOOK_MAX_ALIASES 2
#define HOOK_MAX_HINTS 64

/*
 * Who the container is, taken only from keys the runtime itself sets and a pod
 * cannot forge. Strings are borrowed from the annotations object, except hints
 * (owned: release with hook_identity_clear). image_ref is NULL when the
 * runtime does not name it (containerd); it is passed on unvalidated: the
 * library validates every identity (a malformed one denies).
 */
typedef struct hook_identity {
    hook_container_kind kind;
    pg_runtime runtime; /* CRIO or CONTAINERD once identified */
    const char *namespace_;
    /* The pod's UID as the runtime sets it (containerd 1.6.11+: sandbox-uid; CRI-O: the
     * kubelet's io.kubernetes.pod.uid label); NULL when absent: no pod binding matches. */
    const char *pod_uid;
    const char *image; /* NULL: the runtime names no usable image */
    const char *image_ref;
    /* Further spellings the runtime itself sets (CRI-O's Image and ImageName): trusted. */
    const char *aliases[HOOK_MAX_ALIASES + 1];
    /* Spellings a pod could inject (io.kubernetes.cri-o.ImageRepoDigests): evidence only. */
    char **hints;
} hook_identity;

/* Fills *id from annotations per the configured runtime (auto/cri-o/containerd). */
int hook_identify(pg_runtime configured, const hook_doc *annotations, hook_identity *id,
                  pg_error *err);
void hook_identity_clear(hook_identity *id);

/* ------------------------------------------------------------- deadline.c */

/* Arms the run's deadline (HOOK_HARD_DEADLINE_S, or less when an alarm is
 * already pending: the thin hook's, carried over by its exec of the local one).
 * When it fires the hook exits: 0 if hook_deadline_decided(0) was called,
 * else 1 with a denial line on stderr. */
void hook_deadline_arm(void);
/* The exit status the deadline keeps once the decision is made. */
void hook_deadline_decided(int status);

/* --------------------------------------------------------------- report.c */

/* The fields a report line names; NULL fields print as HOOK_UNKNOWN. */
typedef struct hook_subject {
    const char *container_id;
    const char *namespace_;
    const char *image;
    const char *image_ref;
    const char *stage;
} hook_subject;

/*
 * Copies s into out (size n) replacing control characters and invalid bytes so
 * that a hostile value can never split or forge a log line; truncates long
 * values at a UTF-8 boundary with "...". NULL becomes HOOK_UNKNOWN.
 */
void hook_sanitize(const char *s, char *out, size_t n);

/* Opens syslog and sets its mask from the configured logLevel (NULL = info). */
void hook_log_open(const char *log_level);
/*
 * Reports a final decision: stderr line (deny, or audit's would-deny), syslog,
 * and, when notifier is non-NULL, a D-Bus signal. Returns the exit status.
 */
int hook_report(const hook_subject *who, const pg_decision *dec, pg_mode mode,
                pg_notifier *notifier);
/*
 * The two halves of hook_report, for the resident server, which replies first
 * and logs after: the stderr line into line (size n; "" when there is none,
 * i.e. allowed) and the exit status; then syslog and D-Bus.
 */
int hook_report_line(const hook_subject *who, const pg_decision *dec, pg_mode mode, char *line,
                     size_t n);
void hook_report_sinks(const hook_subject *who, const pg_decision *dec, pg_mode mode,
                       pg_notifier *notifier);

/* ------------------------------------------------------------- evaluate.c */

/* Everything one evaluation knows; filled step by step, released by hook_run_free(). */
typedef struct hook_run {
    hook_args args;
    const pg_config *cfg; /* NULL: no usable configuration (enforce, fail closed) */
    pg_config *own_cfg;   /* the local hook's, loaded from args.config_path */
    hook_state state;
    hook_doc *doc;     /* the scanned config.json: its map is the annotations */
    hook_doc *own_doc; /* the local hook's; the server lends each worker's */
    hook_identity identity;
    pg_store *store;     /* borrowed (the server's) or own_store */
    pg_store *own_store; /* the local hook's, opened per run */
    pg_decision decision;
    char *reported_ref; /* containerd: the imageRef the index names, for the report only */
} hook_run;

/*
 * The local hook: parses argv, loads the configuration, reads the OCI state
 * from state_fd (bounded, deadline), opens the bundle by path and decides.
 * Every failure becomes a denial in run->decision.
 */
void hook_evaluate_local(hook_run *run, int argc, char **argv, int state_fd, int stdin_spent_ms);
/*
 * How the thin hook tells pullgate-hook-local how much of the stdin deadline
 * it used already (milliseconds), so a runtime that never closes stdin is
 * waited for once, not twice. It can only shorten the wait (fail closed).
 */
#define HOOK_STDIN_SPENT_ENV "PULLGATE_HOOK_STDIN_SPENT_MS"
/*
 * The resident server: cfg (borrowed, the file the hook names) and store
 * (borrowed, long-lived) are already open; doc is the worker's own reader
 * (borrowed, reused: the decision's strings point into it until the next);
 * the OCI state comes as bytes and the bundle as a directory fd (borrowed;
 * the server never opens the path).
 */
void hook_evaluate_resident(hook_run *run, const pg_config *cfg, pg_store *store, hook_doc *doc,
                            const char *stage, const char *state, size_t state_len, int bundle_fd);
/* Opens the record store as the hook reads it (see evaluate.c). */
pg_store *hook_open_store(const pg_config *cfg, pg_error *err);
/* What the decision's report names, borrowed from run. */
hook_subject hook_run_subject(const hook_run *run);
/* The configured mode, enforce when no configuration could be loaded. */
pg_mode hook_run_mode(const hook_run *run);
/* The exit status the decision maps to (0 allow or audit, 1 deny). */
int hook_run_status(const hook_run *run);
void hook_run_free(hook_run *run);

/* ----------------------------------------------------------- local_spool.c */

/* The local decisions spool (local_spool.c has the protocol): at most HOOK_SPOOL_MAX_BYTES
 * are kept; beyond, appends are dropped until a fold. */
#define HOOK_SPOOL_NAME "pullgate-local-decisions"
#define HOOK_SPOOL_MAX_BYTES (1u << 20)
#define HOOK_SPOOL_LINE_MAX 128

/* One line into line (size n): its length, or -1 when it does not fit. */
int hook_spool_format(long long when, const char *result, const char *reason, char *line,
                      size_t n);
/* Appends one decision; best effort: never blocks, 0 when written, -1 otherwise. */
int hook_spool_append(const char *state_dir, long long when, const char *result,
                      const char *reason);
/* The run's final decision into the spool of its configuration's stateDir (the built-in
 * stateDir when no configuration could be loaded); result allow / deny / audit-deny. */
void hook_run_spool(const hook_run *run);

/* Called per line: result and reason (borrowed, [a-z-]) or both NULL for a line that is
 * not a decision (a short write, another version's format). */
typedef void (*hook_spool_fn)(void *ctx, long long when, const char *result, const char *reason);
/* Every line of text (len bytes); the number of lines. */
size_t hook_spool_parse(const char *text, size_t len, hook_spool_fn fn, void *ctx);
/*
 * Takes the spool of state_dir: its lines to fn, then the file is gone. Waits at most
 * wait_ms for appenders. The number of lines, or -1 when it could not (a busy file is
 * left for the next call). Callers in one process serialise their calls.
 */
long hook_spool_take(const char *state_dir, int wait_ms, hook_spool_fn fn, void *ctx);

#endif
