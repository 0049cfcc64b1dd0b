/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-config-rollback [--config FILE] --to VERSION [--dry-run]: the packages' copy of
 * `pullgatectl config-rollback` (tools/config_rollback.c), a file of its own so that the
 * newer release's copy is still on disk when an RPM downgrade runs the newer %preun.
 */
#include "pgctl.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *config = NULL;
    int first = 1;
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        printf("pullgate-config-rollback %s\n", PG_VERSION_STRING);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "--config") == 0) {
        config = argv[2];
        first = 3;
    }
    /* argv for the command: argv[0] is its name, then its own options */
    argv[first - 1] = (char *)"config-rollback";
    int status = pgctl_config_rollback(config, argc - first + 1, argv + first - 1);
    return fflush(stdout) == 0 ? status : PGCTL_INTERNAL;
}
