/* SPDX-License-Identifier: Apache-2.0 */
/* pullgate-hook's modules: OCI input, runtime identity, reporting. Not installed. */
#ifndef PULLGATE_HOOK_H
#define PULLGATE_HOOK_H

#include "internal.h"

#include <jansson.h>

/* Fixed bounds on what the runtime hands us (every input is hostile). */
#define HOOK_MAX_STATE_BYTES (1u << 20)      /* OCI state JSON on stdin */
#define HOOK_MAX_BUNDLE_CONFIG_BYTES (16u << 20) /* <bundle>/config.json */
#define HOOK_STDIN_DEADLINE_MS 2000          /* stdin that never closes */
#define HOOK_HARD_DEADLINE_S 5               /* whole run; below the hooks.d timeout */
#define HOOK_DBUS_TIMEOUT_MS 100

#define HOOK_UNKNOWN "unknown" /* printed for a field not known (yet) */

/* ------------------------------------------------------------ oci_input.c */

/* What the OCI state on stdin tells us. Both strings are owned. */
typedef struct hook_state {
    char *id;
    char *bundle;
} hook_state;

/* Reads at most max bytes from fd until EOF or until deadline_ms elapsed. */
int hook_read_fd_deadline(int fd, size_t max, int deadline_ms, char **buf, size_t *len,
                          pg_error *err);
/* Reads and validates the OCI state JSON from fd (bounded, deadline). */
int hook_read_state(int fd, hook_state *state, pg_error *err);
void hook_state_clear(hook_state *state);

/*
 * Reads <bundle>/config.json (no symlink, regular file, bounded) and returns
 * its "annotations" object (a new reference; an empty object when absent).
 * Every annotation value must be a string.
 */
int hook_read_bundle_annotations(const char *bundle, json_t **annotations, pg_error *err);

/* The string value of an annotation, or NULL when absent. */
const char *hook_annotation(const json_t *annotations, const char *key);

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
    const char *image; /* NULL: the runtime names no usable image */
    const char *image_ref;
    /* Further spellings the runtime itself sets (CRI-O's Image and ImageName): trusted. */
    const char *aliases[HOOK_MAX_ALIASES + 1];
    /* Spellings a pod could inject (io.kubernetes.cri-o.ImageRepoDigests): evidence only. */
    char **hints;
} hook_identity;

/* Fills *id from annotations per the configured runtime (auto/cri-o/containerd). */
int hook_identify(pg_runtime configured, const json_t *annotations, hook_identity *id,
                  pg_error *err);
void hook_identity_clear(hook_identity *id);
/* 1 when s is an image ID (64 hex digits, optionally "sha256:"-prefixed), not a name. */
int hook_is_image_id(const char *s);
const char *hook_runtime_name(pg_runtime runtime);

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

#endif
