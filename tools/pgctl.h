/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by pullgatectl's command modules. */
#ifndef PG_PGCTL_H
#define PG_PGCTL_H
#include "pullgate/pullgate.h"

#include <getopt.h>
#include <jansson.h>
#include <stddef.h>

/* Exit statuses of docs/interfaces.md §6. */
enum { PGCTL_OK = 0, PGCTL_DENY = 1, PGCTL_USAGE = 2, PGCTL_INTERNAL = 3 };

#define PGCTL_PROG "pullgatectl"

/*
 * `pullgatectl monitor [--json]`: argv[0] is "monitor"; cfg is the loaded
 * configuration (its dbus key names the bus). Returns an exit status.
 */
int pgctl_monitor(const pg_config *cfg, int argc, char **argv);

/* ------------------------------------------------------------ commands */

/*
 * Runs a command: argv[0] is the command name, the rest its own options
 * (global options already removed). cfg is the loaded configuration, or
 * NULL when the command does not use one or only --help was asked for.
 * Returns an exit status.
 */
typedef int (*pgctl_run_fn)(const pg_config *cfg, int argc, char **argv);
/* The same for a command that takes only the global --config (config_path NULL: the default). */
typedef int (*pgctl_run_path_fn)(const char *config_path, int argc, char **argv);

typedef struct pgctl_command {
    const char *name;
    const char *summary;          /* one line for the global usage */
    const struct option *options; /* the command's options, {0}-terminated */
    int uses_config;              /* 0: run() always gets cfg == NULL */
    pgctl_run_fn run;             /* NULL: run_path instead */
    pgctl_run_path_fn run_path;
} pgctl_command;

extern const pgctl_command pgctl_cmd_hash;
extern const pgctl_command pgctl_cmd_record_intent;
extern const pgctl_command pgctl_cmd_record_pulled;
extern const pgctl_command pgctl_cmd_record_failed;
extern const pgctl_command pgctl_cmd_verify;
extern const pgctl_command pgctl_cmd_list;
extern const pgctl_command pgctl_cmd_show;
extern const pgctl_command pgctl_cmd_prune;
extern const pgctl_command pgctl_cmd_check_config;
extern const pgctl_command pgctl_cmd_annotate;
extern const pgctl_command pgctl_cmd_doctor;
extern const pgctl_command pgctl_cmd_config_rollback;
extern const pgctl_command pgctl_cmd_wire;
extern const pgctl_command pgctl_cmd_unwire;

/* `pullgatectl [--config FILE] config-rollback --to VERSION [--dry-run]` (config_rollback.c;
 * also the whole of pullgate-config-rollback): config_path NULL is the default file. */
int pgctl_config_rollback(const char *config_path, int argc, char **argv);
/* Execs HELPER (beside this executable, else in PG_HELPER_DIR) as
 * `HELPER [--config FILE] [EXTRA] argv[1..]`; returns only on failure (cmd_doctor.c). */
int pgctl_exec_helper(const char *helper, const char *config_path, const char *extra, int argc,
                      char **argv);

/* ------------------------------------------------------------- helpers */

/* Bounds on what the commands read. */
#define PGCTL_MAX_PASSWORD_BYTES (64u << 10)
#define PGCTL_MAX_IN_USE_BYTES (16u << 20)

/* Prints "pullgatectl: <message>" and a newline on stderr. */
void pgctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints err (prefixed by context when non-NULL); returns its exit status. */
int pgctl_fail(const pg_error *err, const char *context);
/* "NS/NAME/UID:HASH" (HASH 64 lowercase hex or empty) and "NS/NAME/UID", split in
 * place: out's strings point into arg. Usage errors name cmd. */
int pgctl_parse_secret(const char *cmd, char *arg, pg_secret *out);
int pgctl_parse_service_account(const char *cmd, char *arg, pg_service_account *out);
/* As pgctl_fail for errors of a store operation: exit 2 only for PG_ERR_INVALID, else 3. */
int pgctl_store_fail(const pg_error *err, const char *context);

/* Prints a usage error and a hint to `CMD --help`; returns PGCTL_USAGE. */
int pgctl_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Resets getopt for a fresh parse of a command's argv (own error messages).
 * Use the option string ":h" (leading ':' reports a missing argument as ':').
 */
void pgctl_getopt_reset(void);
/* Reports getopt_long's '?' or ':' result c; returns PGCTL_USAGE. */
int pgctl_option_error(const char *command, int c, char **argv);
/* Rejects positional arguments left after option parsing. */
int pgctl_no_operands(const char *command, int argc, char **argv);

/* What a command does with one of its options: PGCTL_OK, a usage error's status, or
 * PGCTL_NOT_MINE for an option it does not take. */
#define PGCTL_NOT_MINE (-1)
/* pgctl_parse_options printed the help: the command stops there, main exits 0. */
#define PGCTL_HELPED (-2)
typedef int (*pgctl_option_fn)(void *ctx, int c, char *arg);
/*
 * Parses a command's options (argv[0] is its name): every option but -h/--help goes to
 * set(ctx, c, optarg); an unknown or incomplete option and a positional argument are usage
 * errors naming the command. Then -h/--help prints help (and a newline) and returns
 * PGCTL_HELPED. Returns PGCTL_OK or the first error's status.
 */
int pgctl_parse_options(int argc, char **argv, const struct option *options, pgctl_option_fn set,
                        void *ctx, const char *help);

/*
 * Reads a whole input named by the user: "-" is stdin, anything else a file
 * (symlinks followed, directories refused). At most max bytes; *buf is
 * NUL-terminated, caller frees. Errors are pg_codes with a message.
 */
int pgctl_read_input(const char *path, size_t max, char **buf, size_t *len, pg_error *err);

/* Runs fn on the store, opened with a notifier from cfg's dbus key (none if that fails),
 * then closes both; fn returns an exit status. A store that cannot be opened is reported
 * and its status returned. */
typedef int (*pgctl_store_fn)(pg_store *store, void *ctx);
int pgctl_with_store(const pg_config *cfg, pgctl_store_fn fn, void *ctx);
/* For the commands that only read (list, show, verify): opens the store without
 * creating anything; a missing stateDir is skipped (it holds no records). */
pg_store *pgctl_store_open_reading(const pg_config *cfg, pg_error *err);

/* Prints a JSON document and a newline to stdout; steals the reference
 * (json may be NULL: an allocation failed). Returns an exit status. */
int pgctl_print_json(json_t *json, int indent);

/* Is s exactly 64 lowercase hex digits? */
int pgctl_is_hash(const char *s);
#endif
