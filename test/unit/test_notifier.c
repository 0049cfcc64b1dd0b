/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The D-Bus notifier against a private dbus-daemon (every signal and
 * argument, lazy connection, threads, bus going away) and against buses that
 * are missing, refuse, or accept the socket and never answer: those must cost
 * at most timeout_ms (+ slack for scheduling) and leave last_error set. The
 * same notifier delivers again after the bus is restarted or resumes (the
 * back-off of docs/dbus.md), including while several threads emit.
 */
#include "pullgate/pullgate.h"
#include "testutil.h"

#include <check.h>
#include <dbus/dbus.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IFACE "dev.pullgate.PullGate1"
#define OBJ_PATH "/dev/pullgate/PullGate1"
#define MATCH_RULE "type='signal',interface='" IFACE "'"
#define TIMEOUT_MS 300
/* Behaviour bounds, not benchmarks: they tell "bounded by the timeout" from "waits on libdbus's
 * own 25 s default", and "no attempt" from "an attempt on a hung bus" (which costs the whole
 * TIMEOUT_MS), with room for a loaded 2-core machine under the sanitizers (a run failed once
 * with 200 and 50 while three builds and a benchmark shared the CPUs). */
#define SLACK_MS 700
#define INSTANT_MS 150

/* ------------------------------------------------------------ helpers */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static pg_notifier *notifier_or_fail(const char *bus, int timeout_ms)
{
    pg_error err = {0};
    pg_notifier *n = pg_notifier_new(bus, timeout_ms, &err);
    ck_assert_msg(n != NULL, "pg_notifier_new(%s): %s", bus, err.message);
    return n;
}

/* Elapsed time of one ContainerDenied emission. */
static double timed_emit(pg_notifier *n)
{
    double start = now_ms();
    pg_notify_container(n, 0, "c0ffee", "team-a", "nginx:1.25", "sha256:abc", "no-record");
    return now_ms() - start;
}

/* The first emission on an unreachable bus is bounded, leaves an error, and
 * later emissions are instant. */
static void assert_bounded_failure(pg_notifier *n, const char *error_part)
{
    double first = timed_emit(n);
    ck_assert_msg(first <= TIMEOUT_MS + SLACK_MS, "first emission took %.1f ms", first);
    const char *msg = pg_notifier_last_error(n);
    ck_assert_msg(msg != NULL, "no last_error after a failed emission");
    ck_assert_msg(strstr(msg, error_part) != NULL, "last_error \"%s\" lacks \"%s\"", msg,
                  error_part);
    double second = timed_emit(n);
    ck_assert_msg(second <= INSTANT_MS, "dead notifier took %.1f ms", second);
    pg_notify_records_pruned(n, 1);
    pg_notify_pull_intent(n, "x");
    fprintf(stderr, "  bounded failure: %.1f ms then %.1f ms (%s)\n", first, second, msg);
}

/* ------------------------------------------------------ a private bus */

typedef struct test_bus {
    pid_t pid;
    char *dir;
    char *address;
} test_bus;

#define BUS_CONFIG_FMT \
    "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n" \
    " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n" \
    "<busconfig>\n" \
    "  <type>session</type>\n" \
    "  <listen>unix:path=%s/bus</listen>\n" \
    "  <auth>EXTERNAL</auth>\n" \
    "  <policy context=\"default\">\n" \
    "    <allow send_destination=\"*\" eavesdrop=\"true\"/>\n" \
    "    <allow eavesdrop=\"true\"/>\n" \
    "    <allow own=\"*\"/>\n" \
    "  </policy>\n" \
    "</busconfig>\n"

static int have_dbus_daemon(void)
{
    return system("command -v dbus-daemon >/dev/null 2>&1") == 0;
}

/* Reads the address dbus-daemon prints once it listens (10 s at most). */
static char *read_address(int fd)
{
    char buf[1024];
    size_t len = 0;
    double deadline = now_ms() + 10000;
    while (len < sizeof buf - 1 && now_ms() < deadline) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
        if (memchr(buf, '\n', len))
            break;
    }
    buf[len] = '\0';
    char *nl = strchr(buf, '\n');
    if (!nl)
        return NULL;
    *nl = '\0';
    return strdup(buf);
}

/* Starts dbus-daemon on bus->dir/bus (config already written). */
static void bus_spawn(test_bus *bus)
{
    char *config = tu_sprintf("%s/bus.conf", bus->dir);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    bus->pid = fork();
    ck_assert_int_ge(bus->pid, 0);
    if (bus->pid == 0) {
        /* The daemon must not outlive the test, whatever happens to it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(fds[0]);
        char *cfg_arg = tu_sprintf("--config-file=%s", config);
        char *fd_arg = tu_sprintf("--print-address=%d", fds[1]);
        execlp("dbus-daemon", "dbus-daemon", cfg_arg, "--nofork", fd_arg, (char *)NULL);
        _exit(127);
    }
    free(config);
    close(fds[1]);
    free(bus->address);
    bus->address = read_address(fds[0]);
    close(fds[0]);
    ck_assert_msg(bus->address != NULL, "dbus-daemon did not print its address");
}

static void bus_start(test_bus *bus)
{
    bus->dir = tu_mkdtemp();
    char *config = tu_sprintf("%s/bus.conf", bus->dir);
    char *text = tu_sprintf(BUS_CONFIG_FMT, bus->dir);
    tu_write_file(config, text, -1, 0600);
    free(text);
    free(config);
    bus_spawn(bus);
}

/* The daemon dies at once (no clean shutdown); its socket file stays. */
static void bus_kill(test_bus *bus)
{
    kill(bus->pid, SIGKILL);
    waitpid(bus->pid, NULL, 0);
    bus->pid = 0;
}

/* The bus's address without its guid=: a new daemon at the same path has
 * another guid, and libdbus refuses a server whose guid differs from the
 * address's. (Configured addresses, like the system bus's, carry none.) */
static char *bus_stable_address(const test_bus *bus)
{
    return tu_sprintf("unix:path=%s/bus", bus->dir);
}

static void bus_stop(test_bus *bus)
{
    if (bus->pid > 0) {
        kill(bus->pid, SIGTERM);
        waitpid(bus->pid, NULL, 0);
        bus->pid = 0;
    }
    tu_rmrf(bus->dir);
    free(bus->dir);
    free(bus->address);
    bus->dir = bus->address = NULL;
}

/* One daemon for the "bus" test case; started and stopped in the parent
 * (unchecked fixture), so it is stopped even when a test fails. */
static test_bus shared_bus;

static void shared_bus_setup(void)
{
    bus_start(&shared_bus);
}

static void shared_bus_teardown(void)
{
    bus_stop(&shared_bus);
}

/* ------------------------------------------------------- the listener */

static DBusConnection *listener_open(const char *address)
{
    DBusError derr;
    dbus_error_init(&derr);
    DBusConnection *c = dbus_connection_open_private(address, &derr);
    ck_assert_msg(c != NULL, "listener: %s", derr.message);
    dbus_connection_set_exit_on_disconnect(c, FALSE);
    ck_assert_msg(dbus_bus_register(c, &derr), "listener Hello: %s", derr.message);
    dbus_bus_add_match(c, MATCH_RULE, &derr); /* waits for the bus's reply */
    ck_assert_msg(!dbus_error_is_set(&derr), "AddMatch: %s", derr.message);
    return c;
}

static void listener_close(DBusConnection *c)
{
    dbus_connection_close(c);
    dbus_connection_unref(c);
}

/* Next signal of our interface, or NULL after timeout_ms. */
static DBusMessage *listener_next(DBusConnection *c, int timeout_ms)
{
    double deadline = now_ms() + timeout_ms;
    for (;;) {
        DBusMessage *msg;
        while ((msg = dbus_connection_pop_message(c)) != NULL) {
            if (dbus_message_get_type(msg) == DBUS_MESSAGE_TYPE_SIGNAL &&
                dbus_message_has_interface(msg, IFACE))
                return msg;
            dbus_message_unref(msg);
        }
        if (now_ms() >= deadline || !dbus_connection_read_write(c, 50))
            return NULL;
    }
}

/* Asserts msg is member(s...) on our path with exactly these strings. */
static void assert_string_signal(DBusMessage *msg, const char *member, const char *const *want,
                                 int n_want)
{
    ck_assert_ptr_nonnull(msg);
    ck_assert_str_eq(dbus_message_get_member(msg), member);
    ck_assert_str_eq(dbus_message_get_path(msg), OBJ_PATH);
    ck_assert_str_eq(dbus_message_get_interface(msg), IFACE);
    ck_assert_ptr_null(dbus_message_get_destination(msg)); /* a broadcast */
    const char *sender = dbus_message_get_sender(msg);
    ck_assert_msg(sender && sender[0] == ':', "sender is a unique name");
    DBusMessageIter it;
    int n = 0;
    if (dbus_message_iter_init(msg, &it)) {
        do {
            ck_assert_int_lt(n, n_want);
            ck_assert_int_eq(dbus_message_iter_get_arg_type(&it), DBUS_TYPE_STRING);
            const char *value = NULL;
            dbus_message_iter_get_basic(&it, &value);
            ck_assert_str_eq(value, want[n]);
            n++;
        } while (dbus_message_iter_next(&it));
    }
    ck_assert_int_eq(n, n_want);
    dbus_message_unref(msg);
}

static void assert_pruned_signal(DBusMessage *msg, uint32_t want)
{
    ck_assert_ptr_nonnull(msg);
    ck_assert_str_eq(dbus_message_get_member(msg), "RecordsPruned");
    ck_assert_str_eq(dbus_message_get_signature(msg), "u");
    dbus_uint32_t count = 0;
    ck_assert(dbus_message_get_args(msg, NULL, DBUS_TYPE_UINT32, &count, DBUS_TYPE_INVALID));
    ck_assert_uint_eq(count, want);
    dbus_message_unref(msg);
}

/* Number of connections on the bus (ListNames unique names). */
static int bus_connection_count(DBusConnection *c)
{
    DBusMessage *call = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS,
                                                     DBUS_INTERFACE_DBUS, "ListNames");
    ck_assert_ptr_nonnull(call);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(c, call, 5000, NULL);
    dbus_message_unref(call);
    ck_assert_ptr_nonnull(reply);
    char **names = NULL;
    int n_names = 0, unique = 0;
    ck_assert(dbus_message_get_args(reply, NULL, DBUS_TYPE_ARRAY, DBUS_TYPE_STRING, &names,
                                    &n_names, DBUS_TYPE_INVALID));
    for (int i = 0; i < n_names; i++)
        unique += names[i][0] == ':';
    dbus_free_string_array(names);
    dbus_message_unref(reply);
    return unique;
}

/* ----------------------------------------------------- tests: real bus */

START_TEST(every_signal_and_argument)
{
    DBusConnection *listener = listener_open(shared_bus.address);
    pg_notifier *n = notifier_or_fail(shared_bus.address, 2000);

    pg_notify_pull_intent(n, "docker.io/library/nginx:1.25");
    pg_notify_image_pulled(n, "docker.io/library/nginx:1.25", "sha256:1111", "secret");
    pg_notify_pull_failed(n, "quay.io/team/app:2");
    pg_notify_container(n, 1, "ctr-allowed", "team-a", "nginx:1.25", "sha256:1111",
                        "secret-match");
    pg_notify_container(n, 0, "ctr-denied", "team-b", "quay.io/team/app:2", "",
                        "credentials-mismatch");
    pg_notify_records_pruned(n, 42);
    ck_assert_ptr_null(pg_notifier_last_error(n));

    const char *intent[] = {"docker.io/library/nginx:1.25"};
    assert_string_signal(listener_next(listener, 5000), "PullIntent", intent, 1);
    const char *pulled[] = {"docker.io/library/nginx:1.25", "sha256:1111", "secret"};
    assert_string_signal(listener_next(listener, 5000), "ImagePulled", pulled, 3);
    const char *failed[] = {"quay.io/team/app:2"};
    assert_string_signal(listener_next(listener, 5000), "PullFailed", failed, 1);
    const char *allowed[] = {"ctr-allowed", "team-a", "nginx:1.25", "sha256:1111",
                             "secret-match"};
    assert_string_signal(listener_next(listener, 5000), "ContainerAllowed", allowed, 5);
    const char *denied[] = {"ctr-denied", "team-b", "quay.io/team/app:2", "",
                            "credentials-mismatch"};
    assert_string_signal(listener_next(listener, 5000), "ContainerDenied", denied, 5);
    assert_pruned_signal(listener_next(listener, 5000), 42);
    ck_assert_ptr_null(listener_next(listener, 200)); /* nothing else */

    pg_notifier_free(n);
    listener_close(listener);
}
END_TEST

START_TEST(connects_lazily_on_first_signal)
{
    DBusConnection *listener = listener_open(shared_bus.address);
    int before = bus_connection_count(listener);
    pg_notifier *n = notifier_or_fail(shared_bus.address, 2000);
    ck_assert_int_eq(bus_connection_count(listener), before); /* new() connects nothing */
    pg_notify_records_pruned(n, 0);
    ck_assert_int_eq(bus_connection_count(listener), before + 1);
    assert_pruned_signal(listener_next(listener, 5000), 0);
    pg_notifier_free(n);
    listener_close(listener);
}
END_TEST

START_TEST(invalid_utf8_and_null_are_made_safe)
{
    DBusConnection *listener = listener_open(shared_bus.address);
    pg_notifier *n = notifier_or_fail(shared_bus.address, 2000);
    /* libdbus aborts the process on invalid UTF-8: the notifier must not pass
     * it through (image names come from untrusted pod specs). */
    pg_notify_image_pulled(n, "bad\xff\xfe-image", NULL, "caf\xc3\xa9 \xed\xa0\x80");
    ck_assert_ptr_null(pg_notifier_last_error(n));
    const char *want[] = {"bad?" "?-image", "", "caf\xc3\xa9 ?" "??"};
    assert_string_signal(listener_next(listener, 5000), "ImagePulled", want, 3);
    /* Noncharacters: valid UTF-8 that some libdbus versions refuse. Sent as
     * is or as '?', but sent, and the process survives. */
    pg_notify_pull_failed(n, "x\xef\xbf\xbf\xef\xb7\x90y");
    ck_assert_ptr_null(pg_notifier_last_error(n));
    DBusMessage *msg = listener_next(listener, 5000);
    ck_assert_ptr_nonnull(msg);
    ck_assert_str_eq(dbus_message_get_member(msg), "PullFailed");
    dbus_message_unref(msg);
    pg_notifier_free(n);
    listener_close(listener);
}
END_TEST

#define THREADS 4
#define PER_THREAD 25

static void *emit_many(void *arg)
{
    pg_notifier *n = arg;
    for (int i = 0; i < PER_THREAD; i++)
        pg_notify_records_pruned(n, (uint32_t)i);
    return NULL;
}

START_TEST(threads_share_one_notifier)
{
    DBusConnection *listener = listener_open(shared_bus.address);
    pg_notifier *n = notifier_or_fail(shared_bus.address, 5000);
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, emit_many, n), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    ck_assert_ptr_null(pg_notifier_last_error(n));
    int seen[PER_THREAD] = {0};
    for (int i = 0; i < THREADS * PER_THREAD; i++) {
        DBusMessage *msg = listener_next(listener, 5000);
        ck_assert_msg(msg != NULL, "signal %d of %d missing", i, THREADS * PER_THREAD);
        dbus_uint32_t count = 0;
        ck_assert(dbus_message_get_args(msg, NULL, DBUS_TYPE_UINT32, &count, DBUS_TYPE_INVALID));
        ck_assert_uint_lt(count, PER_THREAD);
        seen[count]++;
        dbus_message_unref(msg);
    }
    for (int i = 0; i < PER_THREAD; i++)
        ck_assert_int_eq(seen[i], THREADS);
    pg_notifier_free(n);
    listener_close(listener);
}
END_TEST

START_TEST(bus_going_away_is_bounded)
{
    test_bus bus = {0};
    bus_start(&bus);
    pg_notifier *n = notifier_or_fail(bus.address, TIMEOUT_MS);
    pg_notify_pull_intent(n, "nginx");
    ck_assert_ptr_null(pg_notifier_last_error(n));
    kill(bus.pid, SIGKILL);
    waitpid(bus.pid, NULL, 0);
    bus.pid = 0;
    /* The old connection is found at end-of-file and a new one is refused. */
    assert_bounded_failure(n, "refused");
    pg_notifier_free(n);
    bus_stop(&bus);
}
END_TEST

START_TEST(stopped_daemon_is_bounded)
{
    /* The realistic hang: dbus-daemon alive but not scheduled (SIGSTOP). */
    test_bus bus = {0};
    bus_start(&bus);
    pg_notifier *connected = notifier_or_fail(bus.address, TIMEOUT_MS);
    pg_notify_pull_intent(connected, "nginx");
    ck_assert_ptr_null(pg_notifier_last_error(connected));
    kill(bus.pid, SIGSTOP);

    pg_notifier *fresh = notifier_or_fail(bus.address, TIMEOUT_MS);
    assert_bounded_failure(fresh, "timed out");
    pg_notifier_free(fresh);

    /* A signal larger than the socket buffer (~200-400 KiB here) cannot be
     * written: the flush gives up at the deadline. Not much larger: building
     * the message counts against the same deadline, and on a loaded machine
     * an 8 MiB one used it all up before the write began (the signal is then
     * dropped without blaming the bus, and no error is recorded). */
    size_t big = 2u << 20;
    char *image = malloc(big + 1);
    ck_assert_ptr_nonnull(image);
    memset(image, 'a', big);
    image[big] = '\0';
    double start = now_ms();
    pg_notify_pull_intent(connected, image);
    double took = now_ms() - start;
    free(image);
    ck_assert_msg(took <= TIMEOUT_MS + SLACK_MS, "blocked write took %.1f ms", took);
    fprintf(stderr, "  blocked write: %.1f ms\n", took);
    ck_assert_ptr_nonnull(pg_notifier_last_error(connected));
    assert_bounded_failure(connected, "timed out");
    pg_notifier_free(connected);

    kill(bus.pid, SIGCONT);
    bus_stop(&bus);
}
END_TEST

/* ------------------------------------- tests: reconnecting (daemons) */

/* Emits PullIntent(image) and returns how long it took. */
static double timed_intent(pg_notifier *n, const char *image)
{
    double start = now_ms();
    pg_notify_pull_intent(n, image);
    return now_ms() - start;
}

static void assert_intent(DBusConnection *listener, const char *image)
{
    const char *want[] = {image};
    assert_string_signal(listener_next(listener, 5000), "PullIntent", want, 1);
}

static void sleep_until(double when_ms)
{
    double left;
    while ((left = when_ms - now_ms()) > 0)
        (void)poll(NULL, 0, (int)left + 1);
}

#define FIRST_BACKOFF_MS 1000 /* the notifier's first back-off (docs/dbus.md) */

START_TEST(reconnects_after_bus_restart)
{
    test_bus bus = {0};
    bus_start(&bus);
    char *address = bus_stable_address(&bus);
    DBusConnection *listener = listener_open(bus.address);
    pg_notifier *n = notifier_or_fail(address, TIMEOUT_MS);
    pg_notify_pull_intent(n, "before");
    assert_intent(listener, "before");
    listener_close(listener);

    /* Restart between two signals: the next one finds the old connection at
     * end-of-file and goes out on a new one, at once. */
    bus_kill(&bus);
    bus_spawn(&bus);
    listener = listener_open(bus.address);
    double took = timed_intent(n, "after-restart");
    ck_assert_msg(took <= TIMEOUT_MS + SLACK_MS, "reconnect took %.1f ms", took);
    assert_intent(listener, "after-restart");
    listener_close(listener);
    fprintf(stderr, "  restart between signals: delivered, %.1f ms\n", took);

    /* Outage while signals are emitted: bounded and dropped, then back-off. */
    bus_kill(&bus);
    double dropped = timed_intent(n, "during-outage");
    double failed_at = now_ms();
    ck_assert_msg(dropped <= TIMEOUT_MS + SLACK_MS, "emission on a dead bus took %.1f ms", dropped);
    const char *error = pg_notifier_last_error(n);
    ck_assert_msg(error && strstr(error, "refused"), "last_error: %s", error ? error : "NULL");
    double instant = timed_intent(n, "in-backoff-1");
    ck_assert_msg(instant <= INSTANT_MS, "emission during back-off took %.1f ms", instant);

    bus_spawn(&bus);
    listener = listener_open(bus.address);
    if (now_ms() < failed_at + FIRST_BACKOFF_MS - 300) {
        /* Still backing off: dropped at once, even though the bus is back. */
        instant = timed_intent(n, "in-backoff-2");
        ck_assert_msg(instant <= INSTANT_MS, "emission during back-off took %.1f ms", instant);
    }
    sleep_until(failed_at + FIRST_BACKOFF_MS + 100);
    took = timed_intent(n, "after-backoff");
    ck_assert_msg(took <= TIMEOUT_MS + SLACK_MS, "reconnect took %.1f ms", took);
    /* The same notifier delivers again; nothing dropped comes late. */
    assert_intent(listener, "after-backoff");
    ck_assert_ptr_null(listener_next(listener, 200));
    /* The error text read earlier is still valid (texts are immutable). */
    ck_assert_ptr_nonnull(strstr(error, "refused"));
    fprintf(stderr, "  outage: %.1f ms to drop, then delivered after the back-off (%.1f ms)\n",
            dropped, took);

    listener_close(listener);
    pg_notifier_free(n);
    free(address);
    bus_stop(&bus);
}
END_TEST

START_TEST(hung_bus_is_retried_bounded_then_recovers)
{
    test_bus bus = {0};
    bus_start(&bus);
    char *address = bus_stable_address(&bus);
    DBusConnection *listener = listener_open(bus.address);
    pg_notifier *n = notifier_or_fail(address, TIMEOUT_MS);
    pg_notify_pull_intent(n, "before");
    assert_intent(listener, "before");

    /* Hang the bus; a signal larger than the socket buffer cannot be written
     * and times out. 2 MiB, not more, as in stopped_daemon_is_bounded: on a
     * loaded machine building an 8 MiB message used the whole deadline before
     * the write began, and the signal was dropped without an error. */
    kill(bus.pid, SIGSTOP);
    size_t big = 2u << 20;
    char *image = malloc(big + 1);
    ck_assert_ptr_nonnull(image);
    memset(image, 'a', big);
    image[big] = '\0';
    double took = timed_intent(n, image);
    double failed_at = now_ms();
    free(image);
    ck_assert_msg(took <= TIMEOUT_MS + SLACK_MS, "blocked write took %.1f ms", took);
    ck_assert_ptr_nonnull(pg_notifier_last_error(n));

    /* While it stays hung: every emission bounded, and exactly one of them
     * (the retry after the first back-off) pays the timeout; the next retry
     * is two back-off periods later. */
    int slow = 0, calls = 0;
    double worst = 0;
    while (now_ms() < failed_at + FIRST_BACKOFF_MS + 1500) {
        double t = timed_intent(n, "while-hung");
        calls++;
        worst = t > worst ? t : worst;
        slow += t >= TIMEOUT_MS - 30; /* an attempt on a hung bus costs the whole timeout */
        sleep_until(now_ms() + 20);
    }
    ck_assert_msg(worst <= TIMEOUT_MS + SLACK_MS, "an emission took %.1f ms", worst);
    ck_assert_msg(slow == 1, "%d of %d emissions paid for a hung bus (want exactly 1)", slow,
                  calls);
    const char *error = pg_notifier_last_error(n);
    ck_assert_msg(error && strstr(error, "timed out"), "last_error: %s", error ? error : "NULL");
    fprintf(stderr, "  hung bus: %d emissions in 2.5 s, 1 attempt (worst %.1f ms)\n", calls, worst);

    /* The bus comes back: after the (doubled) back-off, delivered again. */
    kill(bus.pid, SIGCONT);
    double deadline = now_ms() + 2 * FIRST_BACKOFF_MS + 2000;
    int delivered = 0;
    while (!delivered && now_ms() < deadline) {
        pg_notify_pull_intent(n, "recovered");
        DBusMessage *msg = listener_next(listener, 100);
        if (msg) {
            assert_string_signal(msg, "PullIntent", (const char *[]){"recovered"}, 1);
            delivered = 1;
        }
    }
    ck_assert_msg(delivered, "no signal delivered after the bus resumed");

    listener_close(listener);
    pg_notifier_free(n);
    free(address);
    bus_stop(&bus);
}
END_TEST

typedef struct restart_worker {
    pg_notifier *n;
    double until_ms;
    double worst_ms;
    int calls;
} restart_worker;

/* Emits until until_ms, recording the slowest call; reads last_error as a
 * logging thread would while the others keep emitting. */
static void *emit_through_restart(void *arg)
{
    restart_worker *w = arg;
    while (now_ms() < w->until_ms) {
        double start = now_ms();
        pg_notify_records_pruned(w->n, (uint32_t)w->calls);
        double took = now_ms() - start;
        w->worst_ms = took > w->worst_ms ? took : w->worst_ms;
        w->calls++;
        const char *error = pg_notifier_last_error(w->n);
        if (error)
            ck_assert_int_gt((int)strlen(error), 0);
        sleep_until(now_ms() + 5);
    }
    return NULL;
}

START_TEST(threads_emit_through_a_restart)
{
    test_bus bus = {0};
    bus_start(&bus);
    char *address = bus_stable_address(&bus);
    pg_notifier *n = notifier_or_fail(address, TIMEOUT_MS);
    restart_worker workers[THREADS];
    pthread_t threads[THREADS];
    double until = now_ms() + 1500;
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (restart_worker){.n = n, .until_ms = until};
        ck_assert_int_eq(pthread_create(&threads[i], NULL, emit_through_restart, &workers[i]), 0);
    }
    sleep_until(now_ms() + 300);
    bus_kill(&bus);
    sleep_until(now_ms() + 300);
    bus_spawn(&bus);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        ck_assert_msg(workers[i].worst_ms <= TIMEOUT_MS + SLACK_MS,
                      "thread %d: an emission took %.1f ms", i, workers[i].worst_ms);
        ck_assert_int_gt(workers[i].calls, 10);
    }
    /* The same notifier delivers again once its back-off has passed. */
    DBusConnection *listener = listener_open(bus.address);
    double deadline = now_ms() + 2 * FIRST_BACKOFF_MS + 2000;
    DBusMessage *msg = NULL;
    while (!msg && now_ms() < deadline) {
        pg_notify_records_pruned(n, 7);
        msg = listener_next(listener, 100);
    }
    assert_pruned_signal(msg, 7);
    listener_close(listener);
    pg_notifier_free(n);
    free(address);
    bus_stop(&bus);
}
END_TEST

/* --------------------------------------- tests: buses that do not work */

START_TEST(none_drops_silently)
{
    pg_notifier *n = notifier_or_fail("none", TIMEOUT_MS);
    double took = timed_emit(n);
    pg_notify_pull_intent(n, "nginx");
    pg_notify_image_pulled(n, "nginx", "sha256:1", "secret");
    pg_notify_pull_failed(n, "nginx");
    pg_notify_records_pruned(n, 3);
    ck_assert_msg(took <= INSTANT_MS, "took %.1f ms", took);
    ck_assert_ptr_null(pg_notifier_last_error(n));
    pg_notifier_free(n);
}
END_TEST

START_TEST(missing_socket_is_bounded)
{
    char *dir = tu_mkdtemp();
    char *address = tu_sprintf("unix:path=%s/no-such-bus", dir);
    pg_notifier *n = notifier_or_fail(address, TIMEOUT_MS);
    ck_assert_ptr_null(pg_notifier_last_error(n)); /* nothing tried yet */
    assert_bounded_failure(n, "No such file");
    pg_notifier_free(n);
    free(address);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(refusing_socket_is_bounded)
{
    /* A socket file whose listener is gone: connect(2) is refused. */
    char *dir = tu_mkdtemp();
    char *path = tu_sprintf("%s/dead-bus", dir);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof sun), 0);
    close(fd); /* never listened */
    char *address = tu_sprintf("unix:path=%s", path);
    pg_notifier *n = notifier_or_fail(address, TIMEOUT_MS);
    assert_bounded_failure(n, "refused");
    pg_notifier_free(n);
    free(address);
    free(path);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* A Unix listener at dir/name; backlog as given. */
static int unix_listener(const char *path, int backlog)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof sun), 0);
    ck_assert_int_eq(listen(fd, backlog), 0);
    return fd;
}

START_TEST(listener_that_never_accepts_is_bounded)
{
    char *dir = tu_mkdtemp();
    char *path = tu_sprintf("%s/hung-bus", dir);
    int fd = unix_listener(path, 16); /* connect(2) succeeds, nobody ever answers */
    char *address = tu_sprintf("unix:path=%s", path);
    pg_notifier *n = notifier_or_fail(address, TIMEOUT_MS);
    assert_bounded_failure(n, "timed out");
    pg_notifier_free(n);
    close(fd);
    free(address);
    free(path);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(peer_that_accepts_and_never_reads_is_bounded)
{
    char *dir = tu_mkdtemp();
    char *path = tu_sprintf("%s/hung-bus", dir);
    int fd = unix_listener(path, 16);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (;;)
            (void)accept(fd, NULL, NULL); /* keep every connection open, silent */
    }
    close(fd);
    char *address = tu_sprintf("unix:path=%s", path);
    pg_notifier *n = notifier_or_fail(address, TIMEOUT_MS);
    assert_bounded_failure(n, "timed out");
    pg_notifier_free(n);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    free(address);
    free(path);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(full_backlog_is_bounded)
{
    /* libdbus's own connect(2) is blocking and would wait forever here. */
    char *dir = tu_mkdtemp();
    char *path = tu_sprintf("%s/full-bus", dir);
    int fd = unix_listener(path, 0);
    int fillers[64], n_fillers = 0;
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
    while (n_fillers < 64) {
        int c = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (connect(c, (struct sockaddr *)&sun, sizeof sun) < 0) {
            close(c);
            break;
        }
        fillers[n_fillers++] = c;
    }
    ck_assert_int_lt(n_fillers, 64);
    char *address = tu_sprintf("unix:path=%s", path);
    pg_notifier *n = notifier_or_fail(address, TIMEOUT_MS);
    assert_bounded_failure(n, "backlog");
    pg_notifier_free(n);
    for (int i = 0; i < n_fillers; i++)
        close(fillers[i]);
    close(fd);
    free(address);
    free(path);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(tcp_listener_that_never_accepts_is_bounded)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    ck_assert_int_eq(listen(fd, 16), 0);
    socklen_t len = sizeof sin;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    char *address = tu_sprintf("tcp:host=127.0.0.1,port=%u", (unsigned)ntohs(sin.sin_port));
    pg_notifier *n = notifier_or_fail(address, TIMEOUT_MS);
    assert_bounded_failure(n, "timed out");
    pg_notifier_free(n);
    close(fd);
    free(address);
}
END_TEST

START_TEST(tcp_host_needing_dns_is_refused)
{
    pg_notifier *n = notifier_or_fail("tcp:host=bus.example.invalid,port=5555", TIMEOUT_MS);
    assert_bounded_failure(n, "numeric");
    pg_notifier_free(n);
}
END_TEST

START_TEST(unboundable_transports_are_refused)
{
    pg_notifier *n = notifier_or_fail("autolaunch:", TIMEOUT_MS);
    assert_bounded_failure(n, "not supported");
    pg_notifier_free(n);
    n = notifier_or_fail("unixexec:path=/bin/true", TIMEOUT_MS);
    assert_bounded_failure(n, "not supported");
    pg_notifier_free(n);
}
END_TEST

START_TEST(malformed_address_gives_dead_notifier)
{
    pg_notifier *n = notifier_or_fail("not an address", TIMEOUT_MS);
    ck_assert_ptr_nonnull(pg_notifier_last_error(n));
    ck_assert_msg(timed_emit(n) <= INSTANT_MS, "dead notifier is instant");
    pg_notifier_free(n);
}
END_TEST

START_TEST(session_without_address_gives_dead_notifier)
{
    unsetenv("DBUS_SESSION_BUS_ADDRESS"); /* each test runs in its own process */
    pg_notifier *n = notifier_or_fail("session", TIMEOUT_MS);
    const char *msg = pg_notifier_last_error(n);
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "DBUS_SESSION_BUS_ADDRESS"));
    ck_assert_msg(timed_emit(n) <= INSTANT_MS, "dead notifier is instant");
    pg_notifier_free(n);
}
END_TEST

START_TEST(system_bus_address_from_environment)
{
    char *dir = tu_mkdtemp();
    char *address = tu_sprintf("unix:path=%s/system_bus_socket", dir);
    setenv("DBUS_SYSTEM_BUS_ADDRESS", address, 1);
    pg_notifier *n = notifier_or_fail("system", TIMEOUT_MS);
    assert_bounded_failure(n, dir); /* it tried exactly that address */
    pg_notifier_free(n);
    free(address);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

START_TEST(bad_arguments)
{
    pg_error err = {0};
    ck_assert_ptr_null(pg_notifier_new(NULL, TIMEOUT_MS, &err));
    ck_assert_int_eq(err.code, PG_ERR_INVALID);
    pg_error_clear(&err);
    ck_assert_ptr_null(pg_notifier_new("none", 0, &err));
    ck_assert_int_eq(err.code, PG_ERR_INVALID);
    ck_assert_ptr_null(pg_notifier_new("", TIMEOUT_MS, NULL));
    /* A NULL notifier is accepted everywhere. */
    pg_notify_pull_intent(NULL, "x");
    pg_notify_image_pulled(NULL, "x", "y", "z");
    pg_notify_pull_failed(NULL, "x");
    pg_notify_container(NULL, 1, "a", "b", "c", "d", "e");
    pg_notify_records_pruned(NULL, 1);
    ck_assert_ptr_null(pg_notifier_last_error(NULL));
    pg_notifier_free(NULL);
}
END_TEST

/* ---------------------------------------------------------------- main */

static Suite *notifier_suite(void)
{
    Suite *s = suite_create("notifier");
    TCase *offline = tcase_create("unreachable");
    tcase_add_test(offline, none_drops_silently);
    tcase_add_test(offline, missing_socket_is_bounded);
    tcase_add_test(offline, refusing_socket_is_bounded);
    tcase_add_test(offline, listener_that_never_accepts_is_bounded);
    tcase_add_test(offline, peer_that_accepts_and_never_reads_is_bounded);
    tcase_add_test(offline, full_backlog_is_bounded);
    tcase_add_test(offline, tcp_listener_that_never_accepts_is_bounded);
    tcase_add_test(offline, tcp_host_needing_dns_is_refused);
    tcase_add_test(offline, unboundable_transports_are_refused);
    tcase_add_test(offline, malformed_address_gives_dead_notifier);
    tcase_add_test(offline, session_without_address_gives_dead_notifier);
    tcase_add_test(offline, system_bus_address_from_environment);
    tcase_add_test(offline, bad_arguments);
    suite_add_tcase(s, offline);

    if (have_dbus_daemon()) {
        TCase *online = tcase_create("bus");
        tcase_add_unchecked_fixture(online, shared_bus_setup, shared_bus_teardown);
        tcase_set_timeout(online, 60);
        tcase_add_test(online, every_signal_and_argument);
        tcase_add_test(online, connects_lazily_on_first_signal);
        tcase_add_test(online, invalid_utf8_and_null_are_made_safe);
        tcase_add_test(online, threads_share_one_notifier);
        tcase_add_test(online, bus_going_away_is_bounded);
        tcase_add_test(online, stopped_daemon_is_bounded);
        tcase_add_test(online, reconnects_after_bus_restart);
        tcase_add_test(online, hung_bus_is_retried_bounded_then_recovers);
        tcase_add_test(online, threads_emit_through_a_restart);
        suite_add_tcase(s, online);
    } else {
        fprintf(stderr, "test_notifier: dbus-daemon not installed, bus tests skipped\n");
    }
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(notifier_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
