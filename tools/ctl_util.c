/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by pullgatectl's commands: errors, exit statuses, input. */
#include "pgctl.h"
#include "internal.h"
#include "cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PGCTL_NOTIFY_TIMEOUT_MS 250

static void __attribute__((format(printf, 1, 0))) vreport(const char *fmt, va_list ap)
{
    fputs(PGCTL_PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void pgctl_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
}

/* Exit status for a pg_code: input problems 2, everything else 3. */
static int pgctl_status_for_code(int code)
{
    switch (code) {
    case PG_OK:
        return PGCTL_OK;
    case PG_ERR_INVALID:
    case PG_ERR_CONFIG:
    case PG_ERR_LIMIT:
    case PG_ERR_QUOTA:
    case PG_ERR_NOT_FOUND:
        return PGCTL_USAGE;
    default:
        return PGCTL_INTERNAL;
    }
}

int pgctl_fail(const pg_error *err, const char *context)
{
    const char *message = err->message[0] ? err->message : pg_code_name(err->code);
    if (context)
        pgctl_error("%s: %s", context, message);
    else
        pgctl_error("%s", message);
    int status = pgctl_status_for_code(err->code);
    return status == PGCTL_OK ? PGCTL_INTERNAL : status;
}

int pgctl_store_fail(const pg_error *err, const char *context)
{
    /* Only a malformed argument is the caller's fault; an oversized, unsafe or
     * unreadable file already in the store is a store error (docs/interfaces.md §6: 3). */
    int status = pgctl_fail(err, context);
    return err->code == PG_ERR_INVALID ? status : PGCTL_INTERNAL;
}

int pgctl_usage_error(const char *command, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
    if (command)
        fprintf(stderr, "Try '" PGCTL_PROG " %s --help'.\n", command);
    else
        fputs("Try '" PGCTL_PROG " --help'.\n", stderr);
    return PGCTL_USAGE;
}

void pgctl_getopt_reset(void)
{
    optind = 0; /* GNU: full re-initialisation */
    opterr = 0;
}

int pgctl_option_error(const char *command, int c, char **argv)
{
    const char *arg = optind > 0 ? argv[optind - 1] : "?";
    if (c == ':')
        return pgctl_usage_error(command, "option '%s' requires an argument", arg);
    if (optopt)
        return pgctl_usage_error(command, "unknown option '-%c'", optopt);
    return pgctl_usage_error(command, "unknown option '%s'", arg);
}

int pgctl_no_operands(const char *command, int argc, char **argv)
{
    if (optind < argc)
        return pgctl_usage_error(command, "unexpected argument '%s'", argv[optind]);
    return PGCTL_OK;
}

int pgctl_parse_options(int argc, char **argv, const struct option *options, pgctl_option_fn set,
                        void *ctx, const char *help)
{
    pgctl_getopt_reset();
    int c, asked = 0;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        int status = c == 'h' ? (asked = 1, PGCTL_OK) : c == '?' || c == ':' ? PGCTL_NOT_MINE
                                                                          : set(ctx, c, optarg);
        if (status == PGCTL_NOT_MINE)
            return pgctl_option_error(argv[0], c, argv);
        if (status != PGCTL_OK)
            return status;
    }
    int status = pgctl_no_operands(argv[0], argc, argv);
    if (status == PGCTL_OK && asked)
        return puts(help) >= 0 ? PGCTL_HELPED : PGCTL_INTERNAL;
    return status;
}

int pgctl_read_input(const char *path, size_t max, char **buf, size_t *len, pg_error *err)
{
    if (strcmp(path, "-") == 0)
        return pg_read_fd(STDIN_FILENO, max, buf, len, err);
    pg_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0 && errno == ENOENT)
        return pg_fail(err, PG_ERR_NOT_FOUND, "%s: no such file", path);
    if (fd < 0)
        return pg_fail(err, PG_ERR_INVALID, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0)
        return pg_fail_errno(err, errno, "stat %s", path);
    if (S_ISDIR(st.st_mode))
        return pg_fail(err, PG_ERR_INVALID, "%s: is a directory", path);
    int rc = pg_read_fd(fd, max, buf, len, err);
    if (rc == PG_ERR_LIMIT)
        return pg_fail(err, PG_ERR_LIMIT, "%s: larger than %zu bytes", path, max);
    return rc;
}

int pgctl_with_store(const pg_config *cfg, pgctl_store_fn fn, void *ctx)
{
    pg_error err;
    pg_error_clear(&err);
    pg_notifier *notifier = pg_notifier_new(pg_config_dbus(cfg), PGCTL_NOTIFY_TIMEOUT_MS, &err);
    pg_error_clear(&err);
    pg_store *store = pg_store_open(cfg, notifier, &err);
    int status = store ? fn(store, ctx) : pgctl_fail(&err, "cannot open the record store");
    pg_store_free(store); /* before the notifier it borrows */
    pg_notifier_free(notifier);
    return status;
}

pg_store *pgctl_store_open_reading(const pg_config *cfg, pg_error *err)
{
    /* As the hook (hooks/evaluate.c): pg_store_open() would create a missing stateDir,
     * which holds no records, so the read-only directories suffice then. */
    struct stat st;
    const char *state_dir = pg_config_state_dir(cfg);
    if (state_dir && lstat(state_dir, &st) != 0 && errno == ENOENT)
        return pg_store_open_readonly(cfg, err);
    return pg_store_open(cfg, NULL, err);
}

int pgctl_print_json(json_t *json, int indent)
{
    if (!json) {
        pgctl_error("out of memory");
        return PGCTL_INTERNAL;
    }
    size_t flags = JSON_ENCODE_ANY | (indent ? JSON_INDENT(2) : JSON_COMPACT);
    pg_autofree char *text = json_dumps(json, flags);
    json_decref(json);
    if (!text) {
        pgctl_error("cannot encode JSON");
        return PGCTL_INTERNAL;
    }
    if (puts(text) < 0) {
        pgctl_error("write error on standard output");
        return PGCTL_INTERNAL;
    }
    return PGCTL_OK;
}

int pgctl_is_hash(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return 0;
    return n == PG_HASH_HEX_LEN;
}

/* Splits "A/B/C" (in place) into three non-empty parts without further '/'. */
static int split_triple(char *s, char **a, char **b, char **c)
{
    char *slash1 = strchr(s, '/');
    char *slash2 = slash1 ? strchr(slash1 + 1, '/') : NULL;
    if (!slash2 || strchr(slash2 + 1, '/'))
        return -1;
    *slash1 = *slash2 = '\0';
    *a = s;
    *b = slash1 + 1;
    *c = slash2 + 1;
    return (**a && **b && **c) ? 0 : -1;
}

int pgctl_parse_secret(const char *cmd, char *arg, pg_secret *out)
{
    char *colon = strrchr(arg, ':');
    const char *hash = "";
    if (colon) {
        *colon = '\0';
        hash = colon + 1;
    }
    if (*hash && !pgctl_is_hash(hash))
        return pgctl_usage_error(cmd, "--secret: HASH must be 64 lowercase hex digits or empty, "
                                      "not \"%.80s\"", hash);
    char *ns, *name, *uid;
    if (split_triple(arg, &ns, &name, &uid) != 0)
        return pgctl_usage_error(cmd, "--secret: expected NS/NAME/UID:HASH");
    *out = (pg_secret){.namespace_ = ns, .name = name, .uid = uid, .credential_hash = hash};
    return PGCTL_OK;
}

int pgctl_parse_service_account(const char *cmd, char *arg, pg_service_account *out)
{
    char *ns, *name, *uid;
    if (split_triple(arg, &ns, &name, &uid) != 0)
        return pgctl_usage_error(cmd, "--service-account: expected NS/NAME/UID");
    *out = (pg_service_account){.namespace_ = ns, .name = name, .uid = uid};
    return PGCTL_OK;
}
