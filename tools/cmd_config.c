/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgatectl check-config: the configuration was loaded and validated by
 * main (a bad key is reported there, exit 2); this re-checks the allowlist
 * patterns, loads the HMAC key as the hook would (a key the hook cannot use
 * makes it deny every annotated container) and prints the effective
 * configuration as JSON.
 */
#include "annotation_mac.h"
#include "internal.h"
#include "pgctl.h"

#include <stdio.h>

#define CMD "check-config"

static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};

static int no_option(void *ctx, int c, char *arg)
{
    (void)ctx, (void)c, (void)arg;
    return PGCTL_NOT_MINE;
}

static int check_allowlist(const pg_config *cfg)
{
    const char *const *patterns = pg_config_allowlist(cfg);
    for (size_t i = 0; patterns && patterns[i]; i++) {
        pg_error err;
        pg_error_clear(&err);
        if (pg_allowlist_validate(patterns[i], &err) != PG_OK)
            return pgctl_fail(&err, "allowlist");
    }
    return PGCTL_OK;
}

/* The loader the hook uses: missing, not root's, or readable by others fails here too. */
static int check_hmac_key(const pg_config *cfg)
{
    pg_error err;
    pg_error_clear(&err);
    if (pg_mac_key_file_check(pg_config_hmac_key_file(cfg), &err) != PG_OK)
        return pgctl_fail(&err, "hmacKeyFile (the hook would deny every annotated container)");
    return PGCTL_OK;
}

static int print_config(const pg_config *cfg)
{
    pg_error err;
    pg_error_clear(&err);
    char *json = pg_config_to_json(cfg, &err);
    if (!json)
        return pgctl_fail(&err, "cannot encode the configuration");
    json_t *parsed = json_loads(json, 0, NULL);
    pg_free(json);
    if (!parsed) {
        pgctl_error("the configuration's JSON does not parse");
        return PGCTL_INTERNAL;
    }
    return pgctl_print_json(parsed, 1);
}

static int run_check_config(const pg_config *cfg, int argc, char **argv)
{
    int status = pgctl_parse_options(
        argc, argv, options, no_option, NULL,
        "Usage: " PGCTL_PROG " [--config FILE] check-config\n"
        "\nLoads and validates the configuration (with the global options applied)\n"
        "and prints the effective configuration as JSON. An unknown key or an\n"
        "invalid value is reported naming the key, with exit status 2; an\n"
        "hmacKeyFile the hook could not use (missing, not root's, readable by\n"
        "group or others, wrong size) fails as well.");
    if (status != PGCTL_OK || (status = check_allowlist(cfg)) != PGCTL_OK ||
        (status = check_hmac_key(cfg)) != PGCTL_OK)
        return status;
    return print_config(cfg);
}

const pgctl_command pgctl_cmd_check_config = {
    CMD, "validate the configuration and print it as JSON", options, 1, run_check_config, NULL};
