/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgatectl wire / unwire: exec pullgate-wire (tools/doctor/), which edits containerd's
 * TOML with toml++ and finds the running containerd as the doctor does; pullgatectl maps
 * neither. `unwire` is `pullgate-wire --remove`.
 */
#include "doctor/options.h"
#include "pgctl.h"

#define OPTIONS (pgd_wire_options + PGD_OWN_WIRE_OPTIONS)

/* Execs pullgate-wire with the global --config and argv (argv[0] "wire" or "unwire");
 * returns only on failure. */
static int run_wire(const char *config_path, int argc, char **argv)
{
    int remove = argc > 0 && argv[0][0] == 'u';
    return pgctl_exec_helper("pullgate-wire", config_path, remove ? "--remove" : NULL, argc, argv);
}

const pgctl_command pgctl_cmd_wire = {
    "wire", "wire the hook into containerd or CRI-O (prints a diff with --dry-run)", OPTIONS, 0,
    NULL, run_wire};
const pgctl_command pgctl_cmd_unwire = {"unwire", "take the hook out of containerd or CRI-O again",
                                        OPTIONS, 0, NULL, run_wire};
