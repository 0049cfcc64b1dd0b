/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgatectl doctor: execs pullgate-doctor (tools/doctor/), which needs gRPC,
 * libyaml and toml++; pullgatectl itself, run by scripts and the prune timer,
 * maps none of them. The helper is looked for beside this executable first (the
 * build tree), then where the packages install it.
 */
#include "doctor/options.h"
#include "pgctl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HELPER "pullgate-doctor"


/* <directory of /proc/self/exe>/HELPER when it exists, else PG_HELPER_DIR/HELPER. */
static void helper_path(const char *helper, char *out, size_t n)
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            int w = snprintf(out, n, "%s/%s", self, helper);
            if (w > 0 && (size_t)w < n && access(out, X_OK) == 0)
                return;
        }
    }
    snprintf(out, n, "%s/%s", PG_HELPER_DIR, helper);
}

int pgctl_exec_helper(const char *helper, const char *config_path, const char *extra, int argc,
                      char **argv)
{
    char path[PATH_MAX];
    helper_path(helper, path, sizeof path);
    /* helper argv: HELPER [--config FILE] [EXTRA] <the command's own arguments> */
    char **args = calloc((size_t)argc + 5, sizeof *args);
    if (!args) {
        pgctl_error("out of memory");
        return PGCTL_INTERNAL;
    }
    int k = 0;
    args[k++] = (char *)helper;
    if (config_path) {
        args[k++] = (char *)"--config";
        args[k++] = (char *)config_path;
    }
    if (extra)
        args[k++] = (char *)extra;
    for (int i = 1; i < argc; i++)
        args[k++] = argv[i];
    args[k] = NULL;
    fflush(stdout);
    execv(path, args);
    int e = errno;
    free(args);
    pgctl_error("%s: cannot run %s: %s", argv[0], path, strerror(e));
    return PGCTL_INTERNAL;
}

/* Execs pullgate-doctor with the global --config and argv[1..]; returns only on failure. */
static int run_doctor(const char *config_path, int argc, char **argv)
{
    return pgctl_exec_helper(HELPER, config_path, NULL, argc, argv);
}

const pgctl_command pgctl_cmd_doctor = {
    "doctor", "check this node's wiring (config, pullgate-cri, kubelet, runtime, key)",
    pgd_doctor_options + PGD_OWN_DOCTOR_OPTIONS, 0, NULL, run_doctor};
