/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgatectl: main, global options, command dispatch, usage.
 *
 * Global options may come before or after the command. argv is split into
 * the global options (parsed here with getopt_long) and the command's own
 * arguments (parsed by the command); a value of a command option is never
 * taken for a global option.
 */
#include "pgctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PGCTL_DEFAULT_CONFIG PG_DEFAULT_CONFIG_PATH /* ${sysconfdir}/pullgate, from CMake */

/* The overrides, in the order of the overrides[] table below, then the others. */
enum {
    OPT_STATE_DIR = 256,
    OPT_POLICY,
    OPT_CREDENTIAL_TTL,
    OPT_DBUS,
    OPT_ALLOWLIST,
    OPT_READ_ONLY_DIR,
    OPT_PINNED,
    OPT_CONFIG,
    OPT_VERSION
};
#define N_OVERRIDES (OPT_PINNED - OPT_STATE_DIR + 1)

/* The configuration key each override sets, in the order they are applied; a repeatable one
 * replaces the key's whole list, a single one takes its last value. */
static const struct {
    const char *option, *key;
    int repeatable;
} overrides[N_OVERRIDES] = {{"--state-dir", "stateDir", 0},
                             {"--policy", "policy", 0},
                             {"--credential-ttl", "credentialTTL", 0},
                             {"--dbus", "dbus", 0},
                             {"--allowlist", "allowlist", 1},
                             {"--read-only-dir", "readOnlyRecordDirs", 1},
                             {"--pinned", "pinnedImages", 1}};

static const struct option global_options[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"state-dir", required_argument, NULL, OPT_STATE_DIR},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"allowlist", required_argument, NULL, OPT_ALLOWLIST},
    {"read-only-dir", required_argument, NULL, OPT_READ_ONLY_DIR},
    {"pinned", required_argument, NULL, OPT_PINNED},
    {"credential-ttl", required_argument, NULL, OPT_CREDENTIAL_TTL},
    {"dbus", required_argument, NULL, OPT_DBUS},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0}};

static int run_monitor(const pg_config *cfg, int argc, char **argv)
{
    return pgctl_monitor(cfg, argc, argv);
}

/* Only for splitting argv: pgctl_monitor() parses its own options. */
static const struct option monitor_options[] = {{"json", no_argument, NULL, 'j'},
                                                {"count", required_argument, NULL, 'n'},
                                                {"help", no_argument, NULL, 'h'},
                                                {NULL, 0, NULL, 0}};

static const pgctl_command pgctl_cmd_monitor = {
    "monitor", "print pullgate D-Bus signals as they arrive", monitor_options, 1, run_monitor,
    NULL};

static const pgctl_command *const commands[] = {
    &pgctl_cmd_hash,         &pgctl_cmd_record_intent, &pgctl_cmd_record_pulled,
    &pgctl_cmd_record_failed, &pgctl_cmd_verify,       &pgctl_cmd_list,
    &pgctl_cmd_show,         &pgctl_cmd_prune,         &pgctl_cmd_monitor,
    &pgctl_cmd_check_config, &pgctl_cmd_annotate,      &pgctl_cmd_doctor,
    &pgctl_cmd_wire,         &pgctl_cmd_unwire,        &pgctl_cmd_config_rollback, NULL};

/* A repeatable option's values, in order. */
typedef struct value_list {
    const char **values;
    size_t n;
} value_list;

typedef struct global_settings {
    const char *config_path;           /* NULL: the default, which may be missing */
    value_list overrides[N_OVERRIDES]; /* each sized for argc values */
    int help, version;
} global_settings;

/* argv split into the global part and the command part. */
typedef struct split_argv {
    char **global; /* global[0] is the program name */
    int n_global;
    char **command_argv; /* command_argv[0] is the command name */
    int n_command;
    const pgctl_command *command;
    int command_help; /* -h/--help among the command's own arguments */
} split_argv;

static void print_usage(FILE *out)
{
    fputs("Usage: " PGCTL_PROG " [GLOBAL OPTIONS] COMMAND [OPTIONS]\n"
          "\nEnforces and inspects kubelet-compatible image pull records (KEP-2535).\n"
          "\nCommands:\n",
          out);
    for (const pgctl_command *const *c = commands; *c; c++)
        fprintf(out, "  %-15s %s\n", (*c)->name, (*c)->summary);
    fputs("\nGlobal options (before or after the command):\n"
          "  --config FILE          configuration file (default " PGCTL_DEFAULT_CONFIG ")\n"
          "  --state-dir DIR        the writable record directory\n"
          "  --policy POLICY        NeverVerify, NeverVerifyPreloadedImages,\n"
          "                         NeverVerifyAllowlistedImages or AlwaysVerify\n"
          "  --allowlist PATTERN    allowlisted image pattern (repeatable; replaces the config's)\n"
          "  --read-only-dir DIR    read-only record directory (repeatable; replaces)\n"
          "  --pinned PATTERN       pinned image pattern (repeatable; replaces)\n"
          "  --credential-ttl DUR   how long a recorded credential is valid (\"0s\" = always)\n"
          "  --dbus BUS             system, session, none or a D-Bus address\n"
          "  -h, --help             show this help\n"
          "      --version          show the version\n"
          "\nExit status: 0 success/allow, 1 deny, 2 usage or input error, 3 internal or\n"
          "store error. Run '" PGCTL_PROG " COMMAND --help' for a command's options.\n",
          out);
}

static const pgctl_command *find_command(const char *name)
{
    for (const pgctl_command *const *c = commands; *c; c++)
        if (strcmp((*c)->name, name) == 0)
            return *c;
    return NULL;
}

/*
 * The option of table named by arg ("--name" or "--name=value"), or NULL.
 * With allow_prefix, an unambiguous abbreviation also names it (as
 * getopt_long accepts).
 */
static const struct option *find_long_option(const struct option *table, const char *arg,
                                             int allow_prefix)
{
    if (!table || strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
        return NULL;
    const char *name = arg + 2;
    size_t len = strcspn(name, "=");
    const struct option *prefix_match = NULL;
    int prefix_matches = 0;
    for (; table->name; table++) {
        if (strncmp(table->name, name, len) != 0)
            continue;
        if (strlen(table->name) == len)
            return table;
        prefix_match = table;
        prefix_matches++;
    }
    return allow_prefix && prefix_matches == 1 ? prefix_match : NULL;
}

/* Does arg take the next argv element as its value? */
static int takes_separate_value(const struct option *opt, const char *arg)
{
    return opt && opt->has_arg == required_argument && !strchr(arg, '=');
}

static int is_help_flag(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

/* Does some option of table start with the name arg gives ("--na[=v]")? */
static int prefixes_any_option(const struct option *table, const char *arg)
{
    if (!table || strncmp(arg, "--", 2) != 0)
        return 0;
    size_t len = strcspn(arg + 2, "=");
    for (; table->name; table++)
        if (strncmp(table->name, arg + 2, len) == 0)
            return 1;
    return 0;
}

/* After the command a global option may be abbreviated only where the
 * abbreviation could name no option of the command. */
static const struct option *global_after_command(const split_argv *s, const char *arg)
{
    const struct option *opt = find_long_option(global_options, arg, 0);
    if (!opt && !prefixes_any_option(s->command->options, arg))
        opt = find_long_option(global_options, arg, 1);
    return opt && opt->val != 'h' ? opt : NULL;
}

/* Moves argv[*i] (and its value, when opt takes one) into part. */
static void take(char **part, int *n, const struct option *opt, int argc, char **argv, int *i)
{
    part[(*n)++] = argv[*i];
    if (takes_separate_value(opt, argv[*i]) && *i + 1 < argc)
        part[(*n)++] = argv[++*i];
}

static void take_global(split_argv *s, int argc, char **argv, int *i)
{
    const struct option *opt = s->command ? global_after_command(s, argv[*i])
                                          : find_long_option(global_options, argv[*i], 1);
    take(s->global, &s->n_global, opt, argc, argv, i);
}

static int split_arguments(int argc, char **argv, split_argv *s)
{
    int end_of_options = 0;
    s->global[s->n_global++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!s->command && (arg[0] != '-' || strcmp(arg, "-") == 0)) {
            s->command = find_command(arg);
            if (!s->command)
                return pgctl_usage_error(NULL, "unknown command '%s'", arg);
            s->command_argv[s->n_command++] = argv[i];
        } else if (!s->command) {
            take_global(s, argc, argv, &i);
        } else if (end_of_options) {
            s->command_argv[s->n_command++] = argv[i];
        } else if (strcmp(arg, "--") == 0) {
            end_of_options = 1;
            s->command_argv[s->n_command++] = argv[i];
        } else if (global_after_command(s, arg)) {
            take_global(s, argc, argv, &i);
        } else {
            s->command_help |= is_help_flag(arg);
            take(s->command_argv, &s->n_command, find_long_option(s->command->options, arg, 1),
                 argc, argv, &i);
        }
    }
    s->global[s->n_global] = NULL;
    s->command_argv[s->n_command] = NULL;
    return PGCTL_OK;
}

static int apply_global_option(global_settings *g, int c)
{
    if (c >= OPT_STATE_DIR && c < OPT_STATE_DIR + N_OVERRIDES) {
        value_list *list = &g->overrides[c - OPT_STATE_DIR];
        list->values[list->n++] = optarg;
        return PGCTL_OK;
    }
    switch (c) {
    case OPT_CONFIG: g->config_path = optarg; break;
    case 'h': g->help = 1; break;
    case OPT_VERSION: g->version = 1; break;
    default: return PGCTL_USAGE;
    }
    return PGCTL_OK;
}

static int parse_global_options(int argc, char **argv, global_settings *g)
{
    pgctl_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, "+:h", global_options, NULL)) != -1) {
        if (c == '?' || c == ':')
            return pgctl_option_error(NULL, c, argv);
        if (apply_global_option(g, c) != PGCTL_OK)
            return pgctl_usage_error(NULL, "unexpected option");
    }
    return pgctl_no_operands(NULL, argc, argv);
}

/* ------------------------------------------------------ configuration */

/*
 * Any configuration that cannot be used (unknown key, bad value, a file that is
 * missing, unsafe or unreadable) is the administrator's to fix: exit 2, as
 * pullgatectl(8) says; 3 stays for the record store and for bugs.
 */
static int config_error(const pg_error *err, const char *what)
{
    int status = pgctl_fail(err, what);
    return err->code == PG_ERR_NOMEM || err->code == PG_ERR_INTERNAL ? status : PGCTL_USAGE;
}

static int load_config_file(pg_config *cfg, const char *explicit_path)
{
    const char *path = explicit_path ? explicit_path : PGCTL_DEFAULT_CONFIG;
    struct stat st;
    if (!explicit_path && lstat(path, &st) != 0 && errno == ENOENT)
        return PGCTL_OK; /* no default file: built-in defaults */
    pg_error err;
    pg_error_clear(&err);
    if (pg_config_load_file(cfg, path, &err) != PG_OK)
        return config_error(&err, path);
    return PGCTL_OK;
}

static int apply_overrides(pg_config *cfg, const global_settings *g)
{
    pg_error err;
    pg_error_clear(&err);
    for (size_t i = 0; i < N_OVERRIDES; i++) {
        const value_list *list = &g->overrides[i];
        if (list->n == 0)
            continue;
        if (overrides[i].repeatable && pg_config_clear_list(cfg, overrides[i].key, &err) != PG_OK)
            return config_error(&err, overrides[i].option);
        for (size_t k = overrides[i].repeatable ? 0 : list->n - 1; k < list->n; k++)
            if (pg_config_set(cfg, overrides[i].key, list->values[k], &err) != PG_OK)
                return config_error(&err, overrides[i].option);
    }
    return PGCTL_OK;
}

static int any_override(const global_settings *g)
{
    for (size_t i = 0; i < N_OVERRIDES; i++)
        if (g->overrides[i].n)
            return 1;
    return 0;
}

static int load_config(const global_settings *g, pg_config **out)
{
    pg_error err;
    pg_error_clear(&err);
    pg_config *cfg = pg_config_new(&err);
    if (!cfg)
        return pgctl_fail(&err, "cannot create a configuration");
    int status = load_config_file(cfg, g->config_path);
    if (status == PGCTL_OK)
        status = apply_overrides(cfg, g);
    if (status != PGCTL_OK) {
        pg_config_free(cfg);
        return status;
    }
    *out = cfg;
    return PGCTL_OK;
}

/* ----------------------------------------------------------------- main */

static int run_command(const split_argv *s, const global_settings *g)
{
    const pgctl_command *command = s->command;
    /* doctor checks the files as the hook and pullgate-cri read them; wire, unwire and
     * config-rollback edit files: only --config (the file they name or edit) applies. */
    if (command->run_path) {
        if (any_override(g))
            return pgctl_usage_error(command->name, "only the global --config applies to %s%s",
                                     command->name, command == &pgctl_cmd_doctor
                                                        ? ": it checks the configuration file "
                                                          "as the hook reads it"
                                                        : "");
        return command->run_path(g->config_path, s->n_command, s->command_argv);
    }
    pg_config *cfg = NULL;
    int wants_config = command->uses_config && (!s->command_help || command->run == run_monitor);
    if (wants_config) {
        int status = load_config(g, &cfg);
        if (status != PGCTL_OK)
            return status;
    }
    int status = command->run(cfg, s->n_command, s->command_argv);
    pg_config_free(cfg);
    return status == PGCTL_HELPED ? PGCTL_OK : status;
}

/* Appends --help to the command's arguments (argv has a slot to spare:
 * the global --help is not among them). */
static void add_command_help(split_argv *s)
{
    static char help_flag[] = "--help";
    if (s->command_help)
        return;
    s->command_help = 1;
    s->command_argv[s->n_command++] = help_flag;
    s->command_argv[s->n_command] = NULL;
}

static int dispatch(int argc, char **argv, split_argv *s, global_settings *g)
{
    int status = split_arguments(argc, argv, s);
    if (status == PGCTL_OK)
        status = parse_global_options(s->n_global, s->global, g);
    if (status != PGCTL_OK)
        return status;
    if (g->help && !s->command) {
        print_usage(stdout);
        return PGCTL_OK;
    }
    if (g->version) {
        printf(PGCTL_PROG " %s (libpullgate %s)\n", PG_VERSION_STRING, pg_version());
        return PGCTL_OK;
    }
    if (!s->command)
        return pgctl_usage_error(NULL, "no command given");
    if (g->help) /* `pullgatectl --help COMMAND`: the command's help */
        add_command_help(s);
    return run_command(s, g);
}

static int finish_output(int status)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        pgctl_error("write error on standard output");
        return status == PGCTL_OK || status == PGCTL_DENY ? PGCTL_INTERNAL : status;
    }
    return status;
}

int main(int argc, char **argv)
{
    size_t slots = (size_t)argc + 1;
    split_argv s = {0};
    global_settings g = {0};
    s.global = calloc(slots, sizeof *s.global);
    s.command_argv = calloc(slots, sizeof *s.command_argv);
    const char **values = calloc(N_OVERRIDES * slots, sizeof *values);
    for (size_t i = 0; values && i < N_OVERRIDES; i++)
        g.overrides[i].values = values + i * slots;
    int status;
    if (!s.global || !s.command_argv || !values) {
        pgctl_error("out of memory");
        status = PGCTL_INTERNAL;
    } else {
        status = dispatch(argc, argv, &s, &g);
    }
    free(s.global);
    free(s.command_argv);
    free(values);
    return finish_output(status);
}
