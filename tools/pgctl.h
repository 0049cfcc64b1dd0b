/* Shared by pullgatectl's command modules. */
#ifndef PG_PGCTL_H
#define PG_PGCTL_H
#include "pullgate/pullgate.h"

/* Exit statuses of CONTRACT §6. */
enum { PGCTL_OK = 0, PGCTL_DENY = 1, PGCTL_USAGE = 2, PGCTL_INTERNAL = 3 };

/*
 * `pullgatectl monitor [--json]`: argv[0] is "monitor"; cfg is the loaded
 * configuration (its dbus key names the bus). Returns an exit status.
 */
int pgctl_monitor(const pg_config *cfg, int argc, char **argv);
#endif
