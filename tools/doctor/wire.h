/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-wire (run as `pullgatectl wire` / `pullgatectl unwire`): puts the hook into the
 * node's runtime, or takes it out again, the way the docs do it by hand: containerd's every
 * runtime handler gets a base_runtime_spec running pullgate-hook and pod_annotations passing
 * the credentials annotation; CRI-O gets the hooks.d entry and the drop-in listing its
 * directories. It never restarts anything (it says what to restart), keeps a backup of every
 * file it changes, prints a diff instead with --dry-run, and changes nothing when the node is
 * wired already.
 */
#ifndef PG_WIRE_H
#define PG_WIRE_H

#include "doctor.h"

/* What the containerd configuration edit is asked to do. */
typedef struct pgw_cd_params {
    int remove;             /* unwire */
    const char *annotation; /* the credentials annotation key */
    const char *gen_spec;   /* the base spec wire writes for handlers that have none */
} pgw_cd_params;

/* One runtime handler's base_runtime_spec before and after the edit ("" for none). */
typedef struct pgw_handler {
    char name[256];
    char spec_before[4096];
    char spec_after[4096];
} pgw_handler;

#define PGW_MAX_HANDLERS 64

/* The edit's result: the new text (caller frees; equal to the input when nothing changes). */
typedef struct pgw_cd_result {
    char *text;
    size_t len;
    pgw_handler handlers[PGW_MAX_HANDLERS];
    size_t n_handlers;
} pgw_cd_result;

/*
 * Edits containerd's configuration text (version 2: containerd 1.6/1.7, or 3: 2.x) in place
 * of its lines, so that comments and layout elsewhere stay; re-parses the result and checks
 * that it differs from the input in exactly the intended keys. PG_ERR_UNSUPPORTED (with why)
 * for what it refuses to edit: not TOML, version 1, imports (a conf.d layout), the CRI plugin
 * disabled, a runtime handler written as an inline table or with dotted keys.
 */
int pgw_containerd_edit(const char *text, size_t len, const pgw_cd_params *p, pgw_cd_result *out,
                        pg_error *err);

#endif
