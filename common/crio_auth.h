/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whether the runtime may pull with credentials of its own for a pod's namespace, which the
 * kubelet's PullImage does not carry (docs/interfaces.md §10, "CRI-O's namespaced auth").
 * CRI-O (1.35 and later) does: with [crio.image] namespaced_auth_dir (default /etc/crio/auth),
 * a pull that names the pod's namespace uses <dir>/<namespace>-<sha256 of the image name>.json,
 * the file crio-credential-provider writes for it, and the kubelet's request carries no
 * credentials. Such a pull proves nothing node-wide: pullgate-cri records it for the namespace.
 *
 * The answer fails closed: only a runtime known not to be CRI-O, or a CRI-O whose
 * configuration, read as CRI-O reads it (crio.conf, then every file below crio.conf.d in
 * lexical order, depth first, as Go's filepath.Walk; the last setting winning), turns the
 * feature off (namespaced_auth_dir = "") or that
 * predates it (runtime_version below 1.35 with the key unset), is "no namespaced auth". A file
 * that cannot be read, trusted (not root's, writable by group or others, a symlink) or parsed
 * counts as "namespaced auth". A CRI-O command-line flag or environment variable overriding
 * the files is not seen (docs: set it in the files).
 */
#ifndef PULLGATE_COMMON_CRIO_AUTH_H
#define PULLGATE_COMMON_CRIO_AUTH_H

#include "pullgate/pullgate.h"

#include <stdbool.h>
#include <stddef.h>

#define CRI_CRIO_DEFAULT_CONFIG "/etc/crio/crio.conf"
#define CRI_CRIO_DEFAULT_CONFIG_DIR "/etc/crio/crio.conf.d"
#define CRI_CRIO_DEFAULT_AUTH_DIR "/etc/crio/auth" /* CRI-O's default since 1.35 */
#define CRI_CRIO_CONFIG_MAX_BYTES (1024u * 1024u)

typedef struct cri_crio_auth {
    bool namespaced; /* an uncredentialed pull may use the namespace's credentials */
    bool unreadable; /* a file could not be read, trusted or parsed (namespaced is then true) */
    char dir[256];   /* the directory CRI-O takes them from, when known */
    char why[512];   /* how that was decided (for logs and the doctor) */
} cri_crio_auth;

/*
 * CRI-O's namespaced auth from its configuration files and its runtime_version ("" or NULL:
 * unknown). config: the main file (absent: CRI-O's defaults); config_dir: the drop-ins.
 */
void cri_crio_auth_read(const char *config, const char *config_dir, const char *runtime_version,
                        cri_crio_auth *out);

/* One file's setting: *value (caller frees), NULL when not set; PG_ERR_INVALID when the text
 * is not TOML or the setting not a string. For the fuzzer too. */
int cri_crio_auth_dir_of_text(const char *text, size_t len, char **value, pg_error *err);

/* Whether a CRI runtime_version ("1.35.0", "v1.34.2-dev") is at least major.minor; false when
 * it cannot be read. */
bool cri_version_at_least(const char *version, int major, int minor);

#endif
