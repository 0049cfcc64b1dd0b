/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exec floor for the hook benchmark: reads stdin (the OCI state) fully
 * and exits 0. Built like pullgate-hook (same flags, dynamic libc) so that
 * the difference is what the hook itself costs.
 */
#include <unistd.h>

int main(void)
{
    char buf[65536];
    while (read(STDIN_FILENO, buf, sizeof buf) > 0)
        ;
    return 0;
}
