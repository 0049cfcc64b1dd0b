/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgatectl wire / unwire: exec pullgate-wire (tools/doctor/), which edits containerd's
 * TOML with toml++ and finds the running containerd as the doctor does; pullgatectl maps
 * neither. `unwire` is `pullgate-wire --remove`.
 */
#include "pgctl.h"

static const struct option options[] = {{"runtime", required_argument, NULL, 1},
                                        {"containerd-config", required_argument, NULL, 1},
                                        {"base-spec", required_argument, NULL, 1},
                                        {"crio-config-dir", required_argument, NULL, 1},
                                        {"hooks-dir", required_argument, NULL, 1},
                                        {"hook-path", required_argument, NULL, 1},
                                        {"hook-socket", required_argument, NULL, 1},
                                        {"proc-root", required_argument, NULL, 1},
                                        {"dry-run", no_argument, NULL, 'n'},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};

/* Execs pullgate-wire with the global --config and argv (argv[0] "wire" or "unwire");
 * returns only on failure. */
static int run_wire(const char *config_path, int argc, char **argv)
{
    int remove = argc > 0 && argv[0][0] == 'u';
    return pgctl_exec_helper("pullgate-wire", config_path, remove ? "--remove" : NULL, argc, argv);
}

const pgctl_command pgctl_cmd_wire = {
    "wire", "wire the hook into containerd or CRI-O (prints a diff with --dry-run)", options, 0,
    NULL, run_wire};
const pgctl_command pgctl_cmd_unwire = {"unwire", "take the hook out of containerd or CRI-O again",
                                        options, 0, NULL, run_wire};
