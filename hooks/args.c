/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hook's arguments, shared by pullgate-hook (the thin client) and
 * pullgate-hook-local: the thin hook execs the local one with the same argv,
 * so both accept exactly the same options.
 */
#include "hook.h"

#include <stdio.h>
#include <string.h>

#define DEFAULT_CONFIG_PATH PG_DEFAULT_CONFIG_PATH /* ${sysconfdir}/pullgate, from CMake */

static const char *const known_stages[] = {
    "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
    NULL};

int hook_print_version(int argc, char **argv, const char *prog)
{
    if (argc != 2 || strcmp(argv[1], "--version") != 0)
        return 0;
    printf("%s %s\n", prog, PG_VERSION_STRING);
    return 1;
}

int hook_is_known_stage(const char *stage)
{
    for (const char *const *s = known_stages; *s; s++)
        if (strcmp(*s, stage) == 0)
            return 1;
    return 0;
}

/* Accepts "--name VALUE" and "--name=VALUE"; returns the value or NULL. */
static const char *option_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] == '\0' && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

int hook_parse_args(int argc, char **argv, hook_args *args, pg_error *err)
{
    args->config_path = DEFAULT_CONFIG_PATH;
    args->config_explicit = 0;
    args->stage = "prestart";
    args->daemon_socket = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = option_value(argc, argv, &i, "--config")) != NULL) {
            args->config_path = v;
            args->config_explicit = 1;
        } else if ((v = option_value(argc, argv, &i, "--stage")) != NULL) {
            args->stage = v;
        } else if ((v = option_value(argc, argv, &i, "--daemon-socket")) != NULL) {
            args->daemon_socket = v;
        } else {
            return pg_fail(err, PG_ERR_INVALID,
                           "usage: pullgate-hook [--config FILE] [--stage STAGE] "
                           "[--daemon-socket PATH|none]; bad argument \"%.64s\"",
                           argv[i]);
        }
    }
    if (!args->config_path[0])
        return pg_fail(err, PG_ERR_INVALID, "--config: empty path");
    if (args->daemon_socket && !args->daemon_socket[0])
        return pg_fail(err, PG_ERR_INVALID, "--daemon-socket: empty path");
    if (!hook_is_known_stage(args->stage))
        return pg_fail(err, PG_ERR_INVALID, "--stage: unknown OCI hook stage \"%.64s\"",
                       args->stage);
    return PG_OK;
}
