/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crio-namespaced-auth: whether CRI-O may pull with a namespace's own credentials when the
 * kubelet's request carries none (namespaced_auth_dir, fed by crio-credential-provider), read
 * from CRI-O's files as pullgate-cri reads them (common/crio_auth.h). Either answer is a
 * working node: pullgate-cri then records such pulls for the pod's namespace, or node-wide.
 * Files that cannot be read or parsed fail the check (pullgate-cri takes them as "on").
 */
#include "crio_auth.h"
#include "doctor.h"

#include <string.h>

void pgd_check_crio_namespaced_auth(pgd_node *n, pgd_result *r)
{
    if (strcmp(n->runtime, "cri-o") != 0) {
        pgd_pass(r, "the runtime is %s, which pulls with no credentials of its own per namespace",
                 n->runtime[0] ? n->runtime : "not CRI-O");
        return;
    }
    cri_crio_auth a;
    cri_crio_auth_read(n->opt->crio_config, n->opt->crio_config_dir, NULL, &a);
    if (a.unreadable) {
        pgd_fail(r, "fix CRI-O's configuration files (root's, not writable by others, TOML)",
                 "%s; pullgate-cri records every pull without credentials for its pod's "
                 "namespace meanwhile",
                 a.why);
        return;
    }
    if (a.namespaced)
        pgd_pass(r,
                 "CRI-O's namespaced auth is on (%s, unless CRI-O is older than 1.35): "
                 "pullgate-cri records a pull without credentials for the pod's namespace, "
                 "never node-wide",
                 a.why);
    else
        pgd_pass(r,
                 "CRI-O's namespaced auth is off (%s): a pull without credentials is "
                 "node-accessible",
                 a.why);
}
