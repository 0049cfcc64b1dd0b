/* SPDX-License-Identifier: Apache-2.0 */
/*
 * D-Bus notifier: emits the signals of docs/interfaces.md §9 on a private
 * libdbus connection, best effort and HARD bounded in time: the hook must never
 * be delayed noticeably by a bus that is missing, refuses, or accepts and then
 * never answers. How each step is bounded, the back-off and the reconnect, and
 * libdbus's global state: docs/dbus.md, "Time bound and connection handling".
 * Each notifier has its own private connection and a mutex serialising its use.
 */
#include "cleanup.h"
#include "dbus_names.h"
#include "dbus_shim.h" /* libdbus through dlopen: see dbus_shim.h */

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PG_NOTIFIER_TIMEOUT_MAX 600000 /* 10 minutes: anything larger is a mistake */
#define PG_NOTIFIER_ERROR_MAX 512
#define PG_NOTIFIER_RETRY_FIRST_MS 1000 /* back-off after the first failure */
#define PG_NOTIFIER_RETRY_MAX_MS 30000  /* ... doubling up to this while the bus stays down */
#define PG_NOTIFIER_ERRORS_KEPT 16      /* distinct error texts kept (see intern_error) */
#define PG_SIGNAL_ARGS_MAX 5

typedef enum notifier_state {
    NOTIFIER_OFF,       /* bus "none": signals are dropped silently */
    NOTIFIER_DEAD,      /* unusable for good (no libdbus, bad address): signals dropped */
    NOTIFIER_IDLE,      /* not connected: the next signal connects */
    NOTIFIER_CONNECTED, /* registered on the bus */
    NOTIFIER_DOWN       /* an attempt failed: signals dropped until retry_at_ms, then IDLE */
} notifier_state;

struct pg_notifier {
    pthread_mutex_t lock; /* serialises everything below */
    notifier_state state;
    char *address; /* resolved D-Bus address (possibly several entries) */
    int timeout_ms;
    DBusConnection *conn; /* private connection, NULL until connected */
    bool dbus_loaded;     /* libdbus is loaded (set at creation, then immutable) */
    int64_t retry_at_ms;  /* NOTIFIER_DOWN: monotonic time of the next attempt */
    int backoff_ms;       /* wait after the next failure */
    /* Error texts are immutable once recorded, so the pointer that
     * pg_notifier_last_error() returns stays valid (until free) while other
     * threads keep emitting; last_error points into errors[] or at a
     * string constant. */
    char *errors[PG_NOTIFIER_ERRORS_KEPT];
    size_t n_errors;
    const char *last_error;
};

/* -------------------------------------------------------------- time */

/* Milliseconds until deadline, never negative. */
static int ms_left(int64_t deadline)
{
    int64_t left = deadline - pg_monotonic_ms();
    return left > 0 ? (int)left : 0;
}

/* ------------------------------------------------------------ errors */

/* Makes text the last error. A notifier retries for the life of a daemon,
 * so texts repeat: each distinct one is stored once, and a bounded number are
 * kept (a bus failing in more than PG_NOTIFIER_ERRORS_KEPT distinct ways gets
 * a generic text rather than unbounded memory). */
static void intern_error(pg_notifier *n, const char *text)
{
    for (size_t i = 0; i < n->n_errors; i++) {
        if (strcmp(n->errors[i], text) == 0) {
            n->last_error = n->errors[i];
            return;
        }
    }
    if (n->n_errors == PG_NOTIFIER_ERRORS_KEPT) {
        n->last_error = "D-Bus: delivery failed (too many distinct errors to keep the text)";
        return;
    }
    char *copy = strdup(text);
    if (!copy) {
        n->last_error = "D-Bus: delivery failed (out of memory recording why)";
        return;
    }
    n->errors[n->n_errors++] = copy;
    n->last_error = copy;
}

static void vset_error(pg_notifier *n, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void vset_error(pg_notifier *n, const char *fmt, va_list ap)
{
    char text[PG_NOTIFIER_ERROR_MAX];
    vsnprintf(text, sizeof text, fmt, ap);
    /* One line: libdbus messages or addresses must not split a log line. */
    for (char *p = text; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    intern_error(n, text);
}

static void set_error(pg_notifier *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_error(pg_notifier *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset_error(n, fmt, ap);
    va_end(ap);
}

static void drop_connection(pg_notifier *n)
{
    if (n->conn) {
        /* A private connection must be closed before its last unref; closing
         * discards unsent data and never blocks. */
        dbus_connection_close(n->conn);
        dbus_connection_unref(n->conn);
        n->conn = NULL;
    }
}

/* Records why this attempt failed, closes the connection, and drops signals
 * until the back-off period has passed; each failure in a row doubles the
 * period (capped), so a bus that stays down or hung costs one bounded attempt
 * per period and nothing in between. */
static void mark_down(pg_notifier *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void mark_down(pg_notifier *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset_error(n, fmt, ap);
    va_end(ap);
    drop_connection(n);
    n->state = NOTIFIER_DOWN;
    n->retry_at_ms = pg_monotonic_ms() + n->backoff_ms;
    n->backoff_ms = n->backoff_ms >= PG_NOTIFIER_RETRY_MAX_MS / 2 ? PG_NOTIFIER_RETRY_MAX_MS
                                                                  : n->backoff_ms * 2;
}

/* ------------------------------------------------- address resolution */

/* "system" / "session" / an address -> the address to use, or NULL with
 * the error recorded (session bus without DBUS_SESSION_BUS_ADDRESS). */
static char *resolve_bus_address(pg_notifier *n, const char *bus)
{
    if (strcmp(bus, "system") == 0) {
        /* secure_getenv: like libdbus, ignore the environment when setuid. */
        const char *env = secure_getenv("DBUS_SYSTEM_BUS_ADDRESS");
        return pg_strdup(env && *env ? env : PG_SYSTEM_BUS_DEFAULT);
    }
    if (strcmp(bus, "session") == 0) {
        const char *env = secure_getenv("DBUS_SESSION_BUS_ADDRESS");
        if (!env || !*env) {
            /* Never autolaunch a session bus from a hook. */
            set_error(n, "session bus: DBUS_SESSION_BUS_ADDRESS is not set");
            return NULL;
        }
        return pg_strdup(env);
    }
    return pg_strdup(bus);
}

/* Checks the syntax of a whole address with libdbus's own parser. */
static int address_is_valid(pg_notifier *n, const char *address)
{
    DBusError derr;
    DBusAddressEntry **entries = NULL;
    int count = 0;
    dbus_error_init(&derr);
    if (!dbus_parse_address(address, &entries, &count, &derr)) {
        set_error(n, "invalid D-Bus address \"%s\": %s", address,
                  derr.message ? derr.message : "parse error");
        dbus_error_free(&derr);
        return 0;
    }
    dbus_address_entries_free(entries);
    return count > 0;
}

/* --------------------------------------------- bounded connect probe */

/* Non-blocking connect(2) of a fresh socket, waiting at most until
 * deadline. Returns 0 or an errno value. */
static int connect_before(int family, const struct sockaddr *sa, socklen_t len, int64_t deadline)
{
    pg_autoclose int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    if (connect(fd, sa, len) == 0)
        return 0;
    int rc = errno;
    if (rc != EINPROGRESS)
        return rc;
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    int ready;
    do
        ready = poll(&pfd, 1, ms_left(deadline));
    while (ready < 0 && errno == EINTR && ms_left(deadline) > 0);
    socklen_t rlen = sizeof rc;
    if (ready <= 0)
        return ETIMEDOUT;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &rlen) < 0)
        return errno;
    return rc;
}

/* Probes unix:path=... / unix:abstract=... Returns 0 or an errno value. */
static int probe_unix(const char *path, int abstract, int64_t deadline)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    size_t room = sizeof sun.sun_path - (abstract ? 1 : 0);
    if (len == 0 || len >= room)
        return ENAMETOOLONG;
    /* Abstract names start with a NUL and are not NUL-terminated. */
    memcpy(sun.sun_path + (abstract ? 1 : 0), path, len);
    /* + 1: the leading NUL of an abstract name, or the terminating NUL of a path. */
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    return connect_before(AF_UNIX, (const struct sockaddr *)&sun, salen, deadline);
}

/* Probes tcp:host=...,port=...[,family=ipv4|ipv6]. Name resolution cannot
 * be bounded, so only numeric hosts and "localhost" (resolved from the hosts
 * file in every sane nsswitch setup) are accepted. */
static int probe_tcp(const char *host, const char *port, const char *family, int64_t deadline,
                     const char **why)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG};
    if (family && strcmp(family, "ipv4") == 0)
        hints.ai_family = AF_INET;
    else if (family && strcmp(family, "ipv6") == 0)
        hints.ai_family = AF_INET6;
    if (!host || !*host)
        host = "localhost";
    if (!port) {
        *why = "tcp address without port";
        return EINVAL;
    }
    if (strcmp(host, "localhost") != 0)
        hints.ai_flags |= AI_NUMERICHOST;
    struct addrinfo *list = NULL;
    if (getaddrinfo(host, port, &hints, &list) != 0) {
        *why = "tcp host must be numeric or localhost (name resolution cannot be time-bounded)";
        return EINVAL;
    }
    int rc = ECONNREFUSED;
    for (struct addrinfo *ai = list; ai && ms_left(deadline) > 0; ai = ai->ai_next) {
        rc = connect_before(ai->ai_family, ai->ai_addr, ai->ai_addrlen, deadline);
        if (rc == 0)
            break;
    }
    freeaddrinfo(list);
    return rc;
}

/* Probes one parsed address entry: PG_OK when libdbus may connect to it
 * without blocking, otherwise why not. */
static int probe_entry(DBusAddressEntry *entry, int64_t deadline, pg_error *why)
{
    const char *method = dbus_address_entry_get_method(entry);
    const char *reason = NULL;
    int rc;
    if (strcmp(method, "unix") == 0) {
        const char *path = dbus_address_entry_get_value(entry, "path");
        const char *abstract = dbus_address_entry_get_value(entry, "abstract");
        if (!path && !abstract)
            return pg_fail(why, PG_ERR_INVALID, "unix address without path= or abstract=");
        rc = path ? probe_unix(path, 0, deadline) : probe_unix(abstract, 1, deadline);
    } else if (strcmp(method, "tcp") == 0) {
        rc = probe_tcp(dbus_address_entry_get_value(entry, "host"),
                       dbus_address_entry_get_value(entry, "port"),
                       dbus_address_entry_get_value(entry, "family"), deadline, &reason);
    } else {
        return pg_fail(why, PG_ERR_INVALID,
                       "transport \"%s\" is not supported (its connect cannot be time-bounded)",
                       method);
    }
    if (rc == 0)
        return PG_OK;
    if (reason)
        return pg_fail(why, PG_ERR_INVALID, "%s", reason);
    if (rc == EAGAIN)
        return pg_fail(why, PG_ERR_IO, "bus is not accepting connections (listen backlog full)");
    return pg_fail(why, PG_ERR_IO, "cannot connect: %s", strerror(rc));
}

/* Copies the first entry of address (entries are separated by ';', which
 * never appears unescaped inside a value) that answers the probe. */
static char *pick_reachable_entry(pg_notifier *n, int64_t deadline)
{
    pg_error why = {PG_ERR_INVALID, "empty address"};
    const char *p = n->address;
    while (*p && ms_left(deadline) > 0) {
        size_t len = strcspn(p, ";");
        pg_autofree char *one = strndup(p, len);
        if (!one) {
            mark_down(n, "out of memory");
            return NULL;
        }
        DBusError derr;
        DBusAddressEntry **entries = NULL;
        int count = 0;
        dbus_error_init(&derr);
        if (len > 0 && dbus_parse_address(one, &entries, &count, &derr)) {
            int ok = count == 1 && probe_entry(entries[0], deadline, &why) == PG_OK;
            dbus_address_entries_free(entries);
            if (ok)
                return pg_steal(&one);
        }
        dbus_error_free(&derr);
        p += len + (p[len] == ';');
    }
    if (ms_left(deadline) == 0)
        pg_fail(&why, PG_ERR_TIMEOUT, "timed out connecting");
    mark_down(n, "D-Bus %s: %s", n->address, why.message);
    return NULL;
}

/* ------------------------------------------------- connect + register */

/* Discards messages the bus sent us (NameAcquired, stray calls): we never
 * dispatch, and they must not pile up in a long-lived process. */
static void discard_incoming(DBusConnection *conn)
{
    DBusMessage *msg;
    while ((msg = dbus_connection_pop_message(conn)) != NULL)
        dbus_message_unref(msg);
}

/* One read/write round, never past the deadline; -1 with n down on a timeout
 * (while `doing`) or when the round fails (`failed`). */
static int io_before(pg_notifier *n, int64_t deadline, const char *doing, const char *failed)
{
    int wait_ms = ms_left(deadline);
    if (wait_ms == 0)
        mark_down(n, "D-Bus %s: timed out %s", n->address, doing);
    else if (!dbus_connection_read_write(n->conn, wait_ms))
        mark_down(n, "D-Bus %s: %s", n->address, failed);
    else
        return 0;
    return -1;
}

/* Writes the outgoing queue, never past the deadline. (Not
 * dbus_connection_flush(): it waits without a time limit.) */
static int flush_before(pg_notifier *n, int64_t deadline)
{
    while (dbus_connection_has_messages_to_send(n->conn))
        if (io_before(n, deadline, "writing to the bus", "disconnected") < 0)
            return -1;
    if (!dbus_connection_get_is_connected(n->conn)) {
        mark_down(n, "D-Bus %s: disconnected", n->address);
        return -1;
    }
    return 0;
}

/* Runs the SASL exchange until the deadline. This must finish before any
 * message is queued: libdbus flushes the queue without a time limit before
 * it waits for a reply, and an unauthenticated queue never drains. */
static int authenticate_before(pg_notifier *n, int64_t deadline)
{
    while (!dbus_connection_get_is_authenticated(n->conn))
        if (io_before(n, deadline, "authenticating", "authentication failed") < 0)
            return -1;
    return 0;
}

/* Takes the reply to `serial` off the incoming queue, waiting until the
 * deadline; other messages are discarded. NULL with n dead on failure. */
static DBusMessage *reply_before(pg_notifier *n, dbus_uint32_t serial, int64_t deadline)
{
    for (;;) {
        DBusMessage *msg;
        while ((msg = dbus_connection_pop_message(n->conn)) != NULL) {
            if (dbus_message_get_reply_serial(msg) == serial)
                return msg;
            dbus_message_unref(msg);
        }
        if (io_before(n, deadline, "waiting for the bus", "disconnected") < 0)
            return NULL;
    }
}

/* Hello: the bus assigns our unique name. Driven by hand rather than with
 * dbus_bus_register() (25 s default timeout) or
 * dbus_connection_send_with_reply_and_block() (unbounded flush). */
static int register_on_bus(pg_notifier *n, int64_t deadline)
{
    DBusMessage *hello = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS,
                                                      DBUS_INTERFACE_DBUS, "Hello");
    dbus_uint32_t serial = 0;
    int queued = hello && dbus_connection_send(n->conn, hello, &serial);
    if (hello)
        dbus_message_unref(hello);
    if (!queued) {
        mark_down(n, "out of memory");
        return -1;
    }
    if (flush_before(n, deadline) < 0)
        return -1;
    DBusMessage *reply = reply_before(n, serial, deadline);
    if (!reply)
        return -1;
    DBusError derr;
    dbus_error_init(&derr);
    const char *unique = NULL;
    int ok = !dbus_set_error_from_message(&derr, reply) &&
             dbus_message_get_args(reply, &derr, DBUS_TYPE_STRING, &unique, DBUS_TYPE_INVALID) &&
             dbus_bus_set_unique_name(n->conn, unique);
    if (!ok)
        mark_down(n, "D-Bus %s: registration failed: %s", n->address,
                  dbus_error_is_set(&derr) ? derr.message : "out of memory");
    dbus_error_free(&derr);
    dbus_message_unref(reply);
    return ok ? 0 : -1;
}

/* libdbus's flag is process-wide; set it once, not racing other threads. */
static void keep_sigpipe_disposition(void)
{
    dbus_connection_set_change_sigpipe(FALSE);
}

static int connect_bus(pg_notifier *n, int64_t deadline)
{
    pg_autofree char *entry = pick_reachable_entry(n, deadline);
    if (!entry)
        return -1;
    /* Keep libdbus from setting SIGPIPE to SIG_IGN in the host process. */
    static pthread_once_t sigpipe_once = PTHREAD_ONCE_INIT;
    pthread_once(&sigpipe_once, keep_sigpipe_disposition);
    DBusError derr;
    dbus_error_init(&derr);
    n->conn = dbus_connection_open_private(entry, &derr);
    if (!n->conn) {
        mark_down(n, "D-Bus %s: %s", n->address,
                  dbus_error_is_set(&derr) ? derr.message : "cannot open connection");
        dbus_error_free(&derr);
        return -1;
    }
    /* Losing the bus must never terminate the host (libdbus calls _exit()
     * on disconnect for connections made by dbus_bus_get()). */
    dbus_connection_set_exit_on_disconnect(n->conn, FALSE);
    if (authenticate_before(n, deadline) < 0 || register_on_bus(n, deadline) < 0)
        return -1;
    n->state = NOTIFIER_CONNECTED;
    n->backoff_ms = PG_NOTIFIER_RETRY_FIRST_MS; /* the bus works: the next outage starts short */
    return 0;
}

/* ------------------------------------------------------------ sending */

/* Reads what the bus sent, without waiting. A bus that went away since the
 * last signal (restart, crash) shows up here as end-of-file: the connection is
 * dropped without a back-off (it worked until now), so this signal goes out
 * on a fresh one instead of being lost on the dead one. */
static void drop_if_disconnected(pg_notifier *n)
{
    (void)dbus_connection_read_write(n->conn, 0);
    discard_incoming(n->conn);
    if (!dbus_connection_get_is_connected(n->conn)) {
        set_error(n, "D-Bus %s: disconnected", n->address);
        drop_connection(n);
        n->state = NOTIFIER_IDLE;
    }
}

static int emit_locked(pg_notifier *n, DBusMessage *msg, int64_t deadline)
{
    if (n->state == NOTIFIER_DOWN) {
        if (pg_monotonic_ms() < n->retry_at_ms)
            return -1; /* backing off: drop at once */
        n->state = NOTIFIER_IDLE;
    }
    if (n->state == NOTIFIER_CONNECTED)
        drop_if_disconnected(n);
    if (n->state == NOTIFIER_IDLE && connect_bus(n, deadline) < 0)
        return -1;
    if (n->state != NOTIFIER_CONNECTED)
        return -1;
    if (!dbus_connection_send(n->conn, msg, NULL)) {
        mark_down(n, "D-Bus %s: out of memory queueing a signal", n->address);
        return -1;
    }
    int rc = flush_before(n, deadline);
    if (rc == 0)
        discard_incoming(n->conn);
    return rc;
}

/* Locks n, giving up at the deadline: a thread must not wait on another
 * thread's slow bus for longer than its own bound. */
static int lock_before(pg_notifier *n, int64_t deadline)
{
    struct timespec abs;
    clock_gettime(CLOCK_REALTIME, &abs);
    int64_t ns = abs.tv_nsec + (int64_t)ms_left(deadline) * 1000000;
    abs.tv_sec += (time_t)(ns / 1000000000);
    abs.tv_nsec = (long)(ns % 1000000000);
    return pthread_mutex_timedlock(&n->lock, &abs) == 0 ? 0 : -1;
}

static void emit(pg_notifier *n, DBusMessage *msg, int64_t deadline)
{
    if (lock_before(n, deadline) < 0)
        return; /* another thread held the notifier past our bound: drop */
    /* Waiting for the lock used up our time: drop this signal, but do not
     * blame the bus for it (no error, no back-off). */
    if (n->state != NOTIFIER_OFF && n->state != NOTIFIER_DEAD && ms_left(deadline) > 0)
        emit_locked(n, msg, deadline);
    pthread_mutex_unlock(&n->lock);
}

/* ------------------------------------------------ message construction */

/* A copy of s that libdbus accepts: NULL becomes "", each byte of an
 * invalid UTF-8 sequence becomes '?'. (libdbus aborts the process on an
 * invalid string argument, and image names come from untrusted input.) */
static char *dbus_safe_string(const char *s)
{
    if (!s)
        s = "";
    char *out = strdup(s);
    if (!out)
        return NULL;
    unsigned char *p = (unsigned char *)out;
    while (*p) {
        size_t len = pg_utf8_valid_len(p);
        if (len == 0)
            *p++ = '?';
        else
            p += len;
    }
    /* Older libdbus also refuses Unicode noncharacters: if this one still
     * does not accept the text, fall back to plain ASCII. */
    if (!dbus_validate_utf8(out, NULL))
        for (p = (unsigned char *)out; *p; p++)
            if (*p >= 0x80)
                *p = '?';
    return out;
}

/* Builds member(s, s, ...) with strings made safe. NULL on out of memory. */
static DBusMessage *new_string_signal(const char *member, const char *const *args, size_t n_args)
{
    DBusMessage *msg = dbus_message_new_signal(PG_DBUS_PATH, PG_DBUS_INTERFACE, member);
    if (!msg)
        return NULL;
    DBusMessageIter iter;
    dbus_message_iter_init_append(msg, &iter);
    for (size_t i = 0; i < n_args; i++) {
        pg_autofree char *safe = dbus_safe_string(args[i]);
        if (!safe || !dbus_message_iter_append_basic(&iter, DBUS_TYPE_STRING, &safe)) {
            dbus_message_unref(msg);
            return NULL;
        }
    }
    return msg;
}

/* Emits member with string arguments, or one uint32 (args NULL); the path of every
 * signal. */
static void notify(pg_notifier *n, const char *member, const char *const *args, size_t n_args,
                   dbus_uint32_t value)
{
    if (!n || !n->dbus_loaded)
        return; /* bus "none", or no libdbus: nothing to build a message with */
    int64_t deadline = pg_monotonic_ms() + n->timeout_ms;
    DBusMessage *msg = args ? new_string_signal(member, args, n_args)
                            : dbus_message_new_signal(PG_DBUS_PATH, PG_DBUS_INTERFACE, member);
    if (msg && (args || dbus_message_append_args(msg, DBUS_TYPE_UINT32, &value, DBUS_TYPE_INVALID)))
        emit(n, msg, deadline);
    if (msg) /* else out of memory: best effort, nothing to report to */
        dbus_message_unref(msg);
}

/* ------------------------------------------------------------ public */

PG_API pg_notifier *pg_notifier_new(const char *bus, int timeout_ms, pg_error *err)
{
    if (!bus || !*bus || timeout_ms <= 0 || timeout_ms > PG_NOTIFIER_TIMEOUT_MAX) {
        pg_fail(err, PG_ERR_INVALID, "notifier: bus must be named and timeout in 1..%d ms",
                PG_NOTIFIER_TIMEOUT_MAX);
        return NULL;
    }
    pg_notifier *n = calloc(1, sizeof *n);
    if (!n || pthread_mutex_init(&n->lock, NULL) != 0) {
        free(n);
        pg_fail(err, PG_ERR_NOMEM, "notifier: out of memory");
        return NULL;
    }
    n->timeout_ms = timeout_ms;
    n->backoff_ms = PG_NOTIFIER_RETRY_FIRST_MS;
    if (strcmp(bus, "none") == 0) {
        n->state = NOTIFIER_OFF;
        return n;
    }
    pg_error load_err = {0};
    if (pg_dbus_load(&load_err) != PG_OK) {
        /* No libdbus on this host: a notifier that drops signals, as for an unusable bus. */
        set_error(n, "%s", load_err.message);
        n->state = NOTIFIER_DEAD;
        return n;
    }
    n->dbus_loaded = true;
    n->address = resolve_bus_address(n, bus);
    if (!n->address && !n->last_error) {
        pg_notifier_free(n);
        pg_fail(err, PG_ERR_NOMEM, "notifier: out of memory");
        return NULL;
    }
    /* Unusable addresses make a notifier that drops signals, not an error:
     * emitting must never change the caller's outcome. */
    n->state = n->address && address_is_valid(n, n->address) ? NOTIFIER_IDLE : NOTIFIER_DEAD;
    return n;
}

PG_API void pg_notifier_free(pg_notifier *n)
{
    if (!n)
        return;
    drop_connection(n);
    free(n->address);
    for (size_t i = 0; i < n->n_errors; i++)
        free(n->errors[i]);
    pthread_mutex_destroy(&n->lock);
    free(n);
}

PG_API const char *pg_notifier_last_error(const pg_notifier *n)
{
    if (!n)
        return NULL;
    /* The mutex is not part of the notifier's logical value. */
    pthread_mutex_t *lock = (pthread_mutex_t *)&n->lock;
    pthread_mutex_lock(lock);
    const char *msg = n->last_error;
    pthread_mutex_unlock(lock);
    return msg;
}

PG_API void pg_notify_pull_intent(pg_notifier *n, const char *image)
{
    const char *args[] = {image};
    notify(n, PG_SIGNAL_PULL_INTENT, args, 1, 0);
}

PG_API void pg_notify_image_pulled(pg_notifier *n, const char *image, const char *image_ref,
                                   const char *credential_kind)
{
    const char *args[] = {image, image_ref, credential_kind};
    notify(n, PG_SIGNAL_IMAGE_PULLED, args, 3, 0);
}

PG_API void pg_notify_pull_failed(pg_notifier *n, const char *image)
{
    const char *args[] = {image};
    notify(n, PG_SIGNAL_PULL_FAILED, args, 1, 0);
}

PG_API void pg_notify_container(pg_notifier *n, int allowed, const char *container_id,
                                const char *namespace_, const char *image, const char *image_ref,
                                const char *reason)
{
    const char *args[PG_SIGNAL_ARGS_MAX] = {container_id, namespace_, image, image_ref, reason};
    notify(n, allowed ? PG_SIGNAL_CONTAINER_ALLOWED : PG_SIGNAL_CONTAINER_DENIED, args, 5, 0);
}

void pg_notify_pull_required(pg_notifier *n, const char *image, const char *namespace_,
                             const char *reason)
{
    const char *args[PG_SIGNAL_ARGS_MAX] = {image, namespace_, reason};
    notify(n, PG_SIGNAL_PULL_REQUIRED, args, 3, 0);
}

PG_API void pg_notify_records_pruned(pg_notifier *n, uint32_t count)
{
    notify(n, PG_SIGNAL_RECORDS_PRUNED, NULL, 0, count);
}
