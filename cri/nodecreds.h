/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node's own registry credentials (config nodeCredentialFiles, by default
 * the docker config files the kubelet reads): a pull made with credentials
 * found there is node-accessible, as the kubelet records a pull with the
 * node's credentials (docs/interfaces.md §10). Only the worker thread of
 * pullgate-cri uses one set; it is not locked.
 */
#ifndef PULLGATE_CRI_NODECREDS_H
#define PULLGATE_CRI_NODECREDS_H

#include "internal.h"

#include <stdbool.h>

typedef struct cri_node_creds cri_node_creds;

/* Called for a file that exists but is not used (unsafe, too large, malformed). */
typedef void (*cri_node_creds_warn)(const char *path, const char *why);

/* A set over paths (absolute, NULL-terminated; copied); nothing read yet. */
cri_node_creds *cri_node_creds_new(const char *const *paths, pg_error *err);
void cri_node_creds_free(cri_node_creds *nc);

/*
 * Brings the set up to date: a file whose identity (device, inode, size,
 * times) changed since the last look is read again, a file that vanished is
 * dropped. Each file is read like the configuration (no symlink, a regular
 * file owned by root, not writable by group or others, at most
 * PG_MAX_DOCKERCONFIG_BYTES, kubernetes.io/dockerconfigjson or the legacy
 * .dockercfg map); one that is not is left out (warn, when not NULL, says why):
 * its credentials are then not the node's, which only ever binds a pull to its
 * pod's namespace. Fails only for PG_ERR_NOMEM.
 */
int cri_node_creds_refresh(cri_node_creds *nc, cri_node_creds_warn warn, pg_error *err);

/*
 * Whether an entry of the files that applies to image by the kubelet keyring's
 * rules has a username or password and the auth hash auth_hash (the hash with
 * the email omitted). PG_ERR_NOMEM only; *holds is false on error.
 */
int cri_node_creds_holds(const cri_node_creds *nc, const char *image, const char *auth_hash,
                         bool *holds, pg_error *err);

#endif
