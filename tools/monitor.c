/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgatectl monitor: prints the dev.pullgate.PullGate1 signals
 * (docs/interfaces.md §9) as they arrive, one line each, human-readable or JSON.
 */
#include "pgctl.h"
#include "dbus_names.h"
#include "dbus_shim.h" /* libdbus through dlopen: pullgatectl links no libdbus */
#include "internal.h"
#include "cleanup.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CMD "monitor"
#define MATCH_RULE "type='signal',interface='" PG_DBUS_INTERFACE "'"
#define AUTH_TIMEOUT_MS 5000 /* a bus that never answers is reported, not waited on */
#define POLL_MS 250          /* how often a pending SIGINT/SIGTERM is noticed */

enum { OPT_COUNT = 256 };

static const struct option options[] = {{"json", no_argument, NULL, 'j'},
                                        {"count", required_argument, NULL, OPT_COUNT},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};

typedef struct monitor_options {
    int json;
    unsigned long count; /* 0: until interrupted */
} monitor_options;

/* One signal of the interface: argument names as in docs/interfaces.md §9 (JSON); the human
 * format names them so too, but for containerId, which reads "container" (human_name()). */
typedef struct signal_spec {
    const char *member;
    const char *signature;
    const char *names[5];
} signal_spec;

static const signal_spec signal_specs[] = {
    {PG_SIGNAL_PULL_INTENT, "s", {"image"}},
    {PG_SIGNAL_IMAGE_PULLED, "sss", {"image", "imageRef", "credentialKind"}},
    {PG_SIGNAL_PULL_FAILED, "s", {"image"}},
    {PG_SIGNAL_CONTAINER_ALLOWED, "sssss",
     {"containerId", "namespace", "image", "imageRef", "reason"}},
    {PG_SIGNAL_CONTAINER_DENIED, "sssss",
     {"containerId", "namespace", "image", "imageRef", "reason"}},
    {PG_SIGNAL_RECORDS_PRUNED, "u", {"count"}},
    {PG_SIGNAL_PULL_REQUIRED, "sss", {"image", "namespace", "reason"}},
};

static const char *human_name(const char *name)
{
    return strcmp(name, "containerId") == 0 ? "container" : name;
}

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int signo)
{
    (void)signo;
    stop_requested = 1;
}

static const char help[] =
    "Usage: " PGCTL_PROG " monitor [--json] [--count N]\n"
    "\nPrints the pullgate D-Bus signals (interface " PG_DBUS_INTERFACE ") as they\n"
    "arrive on the configured bus (config key \"dbus\", or --dbus), one line each:\n"
    "  2026-11-21T12:00:00Z ContainerDenied container=ID namespace=NS image=IMAGE "
    "imageRef=REF reason=REASON\n"
    "With --json, one JSON object per line with the keys time, signal and the\n"
    "signal's arguments. --count N exits after N signals. SIGINT/SIGTERM exit 0;\n"
    "an unreachable bus exits 3.";

static int parse_count(const char *text, unsigned long *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end || errno || value == 0 || value > UINT_MAX)
        return pgctl_usage_error(CMD, "--count: \"%s\" is not a positive integer", text);
    *out = value;
    return PGCTL_OK;
}

static int set_option(void *ctx, int c, char *arg)
{
    monitor_options *o = ctx;
    switch (c) {
    case 'j': o->json = 1; return PGCTL_OK;
    case OPT_COUNT: return parse_count(arg, &o->count);
    default: return PGCTL_NOT_MINE;
    }
}

/* ------------------------------------------------------------ the bus */

/* The bus address named by the dbus config value (same rules as the
 * notifier); NULL after printing why. */
static const char *bus_address(const char *bus, int *status)
{
    const char *address = bus;
    if (strcmp(bus, "none") == 0) {
        pgctl_error(CMD ": D-Bus is disabled (dbus is \"none\"); use --dbus to pick a bus");
        *status = PGCTL_USAGE;
        return NULL;
    }
    if (strcmp(bus, "system") == 0) {
        address = getenv("DBUS_SYSTEM_BUS_ADDRESS");
        if (!address || !*address)
            address = PG_SYSTEM_BUS_DEFAULT;
    } else if (strcmp(bus, "session") == 0) {
        address = getenv("DBUS_SESSION_BUS_ADDRESS");
        if (!address || !*address) {
            pgctl_error(CMD ": session bus: DBUS_SESSION_BUS_ADDRESS is not set");
            *status = PGCTL_INTERNAL;
            return NULL;
        }
    }
    return address;
}

/* Authentication with a time limit: libdbus's registration would otherwise
 * wait forever on a bus that accepted the socket and never answers. */
static int wait_authenticated(DBusConnection *conn, int timeout_ms)
{
    int64_t deadline = pg_monotonic_ms() + timeout_ms;
    while (!dbus_connection_get_is_authenticated(conn)) {
        int64_t left = deadline - pg_monotonic_ms();
        if (left <= 0 || !dbus_connection_read_write(conn, (int)left))
            return -1;
    }
    return 0;
}

static void close_connection(DBusConnection *conn)
{
    dbus_connection_close(conn);
    dbus_connection_unref(conn);
}

/* Connects, registers and subscribes; NULL after printing why. */
static DBusConnection *subscribe(const char *address)
{
    pg_error err;
    pg_error_clear(&err);
    if (pg_dbus_load(&err) != PG_OK) {
        pgctl_error(CMD ": %s", err.message);
        return NULL;
    }
    DBusError derr;
    dbus_error_init(&derr);
    dbus_connection_set_change_sigpipe(FALSE); /* a closed stdout is handled below */
    DBusConnection *conn = dbus_connection_open_private(address, &derr);
    if (!conn) {
        pgctl_error(CMD ": cannot connect to the bus %s: %s", address, derr.message);
        dbus_error_free(&derr);
        return NULL;
    }
    dbus_connection_set_exit_on_disconnect(conn, FALSE);
    if (wait_authenticated(conn, AUTH_TIMEOUT_MS) < 0) {
        pgctl_error(CMD ": cannot connect to the bus %s: authentication failed or timed out",
                    address);
        close_connection(conn);
        return NULL;
    }
    if (dbus_bus_register(conn, &derr))
        dbus_bus_add_match(conn, MATCH_RULE, &derr);
    if (dbus_error_is_set(&derr)) {
        pgctl_error(CMD ": cannot subscribe on the bus %s: %s", address, derr.message);
        dbus_error_free(&derr);
        close_connection(conn);
        return NULL;
    }
    return conn;
}

/* ----------------------------------------------------------- printing */

/* A value is printed bare unless it would be ambiguous on one line. */
static int needs_quotes(const char *s)
{
    if (!*s)
        return 1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= ' ' || *p == 0x7f || *p == '"' || *p == '\\')
            return 1;
    return 0;
}

static void print_human_value(const char *s)
{
    if (!needs_quotes(s)) {
        fputs(s, stdout);
        return;
    }
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < ' ' || *p == 0x7f)
            printf("\\x%02x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static void print_human(const char *when, DBusMessage *msg, const signal_spec *spec)
{
    printf("%s %s", when, dbus_message_get_member(msg));
    DBusMessageIter it;
    int i = 0;
    if (spec && dbus_message_iter_init(msg, &it)) {
        do {
            printf(" %s=", human_name(spec->names[i]));
            if (dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_UINT32) {
                dbus_uint32_t value;
                dbus_message_iter_get_basic(&it, &value);
                printf("%lu", (unsigned long)value);
            } else {
                const char *value;
                dbus_message_iter_get_basic(&it, &value);
                print_human_value(value);
            }
            i++;
        } while (dbus_message_iter_next(&it));
    }
    putchar('\n');
}

/* Adds the message's arguments to obj under spec's names. */
static int add_json_args(json_t *obj, DBusMessage *msg, const signal_spec *spec)
{
    DBusMessageIter it;
    int i = 0;
    if (!spec || !dbus_message_iter_init(msg, &it))
        return 0;
    do {
        json_t *value;
        if (dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_UINT32) {
            dbus_uint32_t n;
            dbus_message_iter_get_basic(&it, &n);
            value = json_integer((json_int_t)n);
        } else {
            const char *s;
            dbus_message_iter_get_basic(&it, &s);
            value = json_string(s); /* D-Bus strings are valid UTF-8 */
        }
        if (json_object_set_new(obj, spec->names[i], value) != 0)
            return -1;
        i++;
    } while (dbus_message_iter_next(&it));
    return 0;
}

static int print_json(const char *when, DBusMessage *msg, const signal_spec *spec)
{
    pg_autojson json_t *obj = json_object();
    int failed = !obj || json_object_set_new(obj, "time", json_string(when)) != 0 ||
                 json_object_set_new(obj, "signal", json_string(dbus_message_get_member(msg))) !=
                     0 ||
                 add_json_args(obj, msg, spec) != 0;
    pg_autofree char *text = failed ? NULL : json_dumps(obj, JSON_COMPACT);
    if (!text) {
        pgctl_error(CMD ": out of memory");
        return -1;
    }
    puts(text);
    return 0;
}

static const signal_spec *find_spec(const char *member)
{
    for (size_t i = 0; i < sizeof signal_specs / sizeof signal_specs[0]; i++)
        if (strcmp(signal_specs[i].member, member) == 0)
            return &signal_specs[i];
    return NULL;
}

/* Prints one signal. 1 printed, 0 ignored, -1 fatal (status set). */
static int print_signal(DBusMessage *msg, const monitor_options *o, int *status)
{
    const char *member = dbus_message_get_member(msg);
    const signal_spec *spec = member ? find_spec(member) : NULL;
    if (!member)
        return 0;
    if (spec && !dbus_message_has_signature(msg, spec->signature)) {
        fprintf(stderr, PGCTL_PROG " " CMD ": ignoring %s with signature \"%s\"\n", member,
                dbus_message_get_signature(msg));
        return 0;
    }
    /* A signal this version does not know is shown by name only. */
    char when[32];
    pg_format_rfc3339(time(NULL), when);
    if (o->json ? print_json(when, msg, spec) < 0 : (print_human(when, msg, spec), 0)) {
        *status = PGCTL_INTERNAL;
        return -1;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        /* A reader that went away (| head) ends the monitor normally. */
        if (errno != EPIPE)
            pgctl_error(CMD ": writing to standard output: %s", strerror(errno));
        *status = errno == EPIPE ? PGCTL_OK : PGCTL_INTERNAL;
        return -1;
    }
    return 1;
}

static int is_our_signal(DBusMessage *msg)
{
    return dbus_message_get_type(msg) == DBUS_MESSAGE_TYPE_SIGNAL &&
           dbus_message_has_interface(msg, PG_DBUS_INTERFACE);
}

/* Reads and prints until stopped, --count is reached, or the bus goes. */
static int monitor_loop(DBusConnection *conn, const monitor_options *o)
{
    unsigned long printed = 0;
    int status = PGCTL_OK;
    while (!stop_requested && (o->count == 0 || printed < o->count)) {
        DBusMessage *msg = dbus_connection_pop_message(conn);
        if (!msg) {
            if (!dbus_connection_read_write(conn, POLL_MS)) {
                pgctl_error(CMD ": disconnected from the bus");
                return PGCTL_INTERNAL;
            }
            continue;
        }
        int rc = is_our_signal(msg) ? print_signal(msg, o, &status) : 0;
        dbus_message_unref(msg);
        if (rc < 0)
            return status;
        printed += (unsigned long)rc;
    }
    return PGCTL_OK;
}

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal; /* no SA_RESTART: poll(2) returns at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int pgctl_monitor(const pg_config *cfg, int argc, char **argv)
{
    monitor_options o = {0};
    int status = pgctl_parse_options(argc, argv, options, set_option, &o, help);
    if (status != PGCTL_OK)
        return status;
    if (!cfg) {
        pgctl_error(CMD ": no configuration");
        return PGCTL_INTERNAL;
    }
    const char *address = bus_address(pg_config_dbus(cfg), &status);
    if (!address)
        return status;
    catch_stop_signals(); /* before subscribing: a stop during setup still exits 0 */
    DBusConnection *conn = subscribe(address);
    if (!conn)
        return PGCTL_INTERNAL;
    fprintf(stderr, CMD ": listening on %s\n", address);
    status = monitor_loop(conn, &o);
    close_connection(conn);
    return status;
}
