/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The options of pullgate-doctor and pullgate-wire: theirs to parse, and pullgatectl's to
 * split argv by (tools/cmd_doctor.c, tools/cmd_wire.c), which takes each table after its first
 * PGD_OWN_DOCTOR_OPTIONS / PGD_OWN_WIRE_OPTIONS entries: those are pullgatectl's own (its
 * global --config and --version) or what `unwire` and pullgate-still-wired pass.
 */
#ifndef PG_DOCTOR_OPTIONS_H
#define PG_DOCTOR_OPTIONS_H

#include <getopt.h>
#include <stddef.h>

enum {
    OPT_CONFIG = 256,
    OPT_VERSION,
    OPT_JSON,
    OPT_PROC_ROOT,
    OPT_CONTAINERD_CONFIG,
    OPT_CRIO_CONFIG,
    OPT_CRIO_CONFIG_DIR,
    OPT_CRIO_HOOKS_DIR,
    OPT_KUBELET_CONFIG,
    OPT_KUBELET_VERSION,
    OPT_HOOK_SOCKET,
    OPT_RUNTIME,
    OPT_TIMEOUT,
    OPT_SYSTEMD_DIR,
    OPT_KUBELET_FLAGS,
    OPT_HOOK_PATH
};

#define PGD_OWN_DOCTOR_OPTIONS 2
static const struct option pgd_doctor_options[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"version", no_argument, NULL, OPT_VERSION},
    {"json", no_argument, NULL, OPT_JSON},
    {"proc-root", required_argument, NULL, OPT_PROC_ROOT},
    {"containerd-config", required_argument, NULL, OPT_CONTAINERD_CONFIG},
    {"crio-config", required_argument, NULL, OPT_CRIO_CONFIG},
    {"crio-config-dir", required_argument, NULL, OPT_CRIO_CONFIG_DIR},
    {"crio-hooks-dir", required_argument, NULL, OPT_CRIO_HOOKS_DIR},
    {"kubelet-config", required_argument, NULL, OPT_KUBELET_CONFIG},
    {"kubelet-version", required_argument, NULL, OPT_KUBELET_VERSION},
    {"hook-socket", required_argument, NULL, OPT_HOOK_SOCKET},
    {"runtime", required_argument, NULL, OPT_RUNTIME},
    {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
    {"systemd-dir", required_argument, NULL, OPT_SYSTEMD_DIR},
    {"kubelet-flags-file", required_argument, NULL, OPT_KUBELET_FLAGS},
    {"hook-path", required_argument, NULL, OPT_HOOK_PATH},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

#define PGD_OWN_WIRE_OPTIONS 4
static const struct option pgd_wire_options[] = {
    {"config", required_argument, NULL, 'c'},
    {"version", no_argument, NULL, 'V'},
    {"remove", no_argument, NULL, 'r'},
    {"print-containerd-configs", no_argument, NULL, 'P'},
    {"runtime", required_argument, NULL, 'R'},
    {"containerd-config", required_argument, NULL, 'C'},
    {"base-spec", required_argument, NULL, 'b'},
    {"crio-config-dir", required_argument, NULL, 'D'},
    {"hooks-dir", required_argument, NULL, 'H'},
    {"hook-path", required_argument, NULL, 'k'},
    {"hook-socket", required_argument, NULL, 'S'},
    {"proc-root", required_argument, NULL, 'p'},
    {"dry-run", no_argument, NULL, 'n'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

#endif
