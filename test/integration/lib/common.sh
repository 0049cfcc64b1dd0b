# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Helpers sourced by pullgate's integration tests and scripts/demo.sh.
#
#   pg_skip "reason"          print the reason and exit 77 (ctest SKIP_RETURN_CODE)
#   pg_fail "reason"          print the reason and exit 1
#   pg_log / pg_section       progress output on stderr
#   pg_mktemp_dir             a temp dir under $PG_TMPDIR (removed at exit)
#   pg_on_exit "cmd"          push a cleanup command; run in reverse order at exit
#   pg_free_port              print a free TCP port on 127.0.0.1
#   pg_wait_port PORT [SECS]  wait until 127.0.0.1:PORT accepts connections
#   pg_wait_file PATH [SECS]  wait until PATH exists
#   pg_wait_grep FILE TEXT [SECS]  wait until FILE contains TEXT (a log line written after an answer)
#   pg_kill_wait PID [SECS]   TERM, wait, then KILL a process we started
#   pg_require_root / pg_require_cmd CMD...
#   pg_expect_ok / pg_expect_fail  assertions that keep a tally (see pg_summary)

if [[ -n "${PG_COMMON_SH_LOADED:-}" ]]; then return 0; fi
PG_COMMON_SH_LOADED=1

PG_LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PG_INTEGRATION_DIR="$(cd "$PG_LIB_DIR/.." && pwd)"
: "${PG_SOURCE_DIR:=$(cd "$PG_INTEGRATION_DIR/../.." && pwd)}"

PG_FAILURES=0
PG_CHECKS=0
declare -a PG_CLEANUPS=()

pg_log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
pg_section() { printf '\n===== %s =====\n' "$*" >&2; }

pg_skip() {
    printf 'SKIP: %s\n' "$*"
    printf 'SKIP: %s\n' "$*" >&2
    exit 77
}

pg_fail() {
    printf 'FAIL: %s\n' "$*" >&2
    exit 1
}

# pg_on_exit CMD: register CMD (a string evaluated at exit). Cleanups run in
# reverse order of registration (a stack), each one even if an earlier one failed.
pg_on_exit() { PG_CLEANUPS+=("$1"); }

pg__run_cleanups() {
    local rc=$? i
    # Finish cleaning up even if interrupted again (ctest, Ctrl-C twice).
    trap - EXIT
    trap '' INT TERM HUP
    set +e
    for ((i = ${#PG_CLEANUPS[@]} - 1; i >= 0; i--)); do
        eval "${PG_CLEANUPS[i]}" >/dev/null 2>&1 </dev/null
    done
    PG_CLEANUPS=()
    exit "$rc"
}
trap pg__run_cleanups EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Base temp dir for this run; everything else lives below it. Removed last.
pg__init_tmp() {
    if [[ -z "${PG_TMPDIR:-}" ]]; then
        PG_TMPDIR="$(mktemp -d "${TMPDIR:-/tmp}/pullgate-it.XXXXXX")" || pg_fail "mktemp failed"
        chmod 0755 "$PG_TMPDIR"
        # Overlay/vfs stores may leave read-only dirs or mounts: be thorough.
        pg_on_exit "pg__rm_tmp '$PG_TMPDIR'"
    fi
}
pg__rm_tmp() {
    local d="$1"
    [[ -n "$d" && -d "$d" ]] || return 0
    # Unmount anything still mounted below the temp dir (deepest first).
    if [[ -r /proc/self/mountinfo ]]; then
        awk -v p="$d" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
            while read -r m; do umount -l "$m" 2>/dev/null; done
    fi
    chmod -R u+rwX "$d" 2>/dev/null
    rm -rf "$d" 2>/dev/null || true
}
pg__init_tmp

pg_mktemp_dir() {
    mktemp -d "$PG_TMPDIR/${1:-d}.XXXXXX"
}

pg_require_root() {
    [[ "$(id -u)" == 0 ]] || pg_skip "needs root (runs real container runtimes)"
}

pg_require_cmd() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || pg_skip "required command '$c' not installed"
    done
}

# pg_require_pullgate: the binaries under test must exist.
pg_require_pullgate() {
    [[ -n "${PULLGATE_HOOK:-}" && -x "$PULLGATE_HOOK" ]] ||
        pg_skip "pullgate-hook not built (PULLGATE_HOOK='${PULLGATE_HOOK:-}')"
    [[ -n "${PULLGATECTL:-}" && -x "$PULLGATECTL" ]] ||
        pg_skip "pullgatectl not built (PULLGATECTL='${PULLGATECTL:-}')"
}

# Print a free TCP port on 127.0.0.1 (bind to port 0, let the kernel choose).
pg_free_port() {
    local p
    if command -v /usr/bin/python3 >/dev/null 2>&1; then
        /usr/bin/python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
        return
    fi
    for _ in $(seq 1 50); do
        p=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# pg_wait_port PORT [SECS]: wait until something listens on 127.0.0.1:PORT.
pg_wait_port() {
    local port="$1" secs="${2:-30}" i
    for ((i = 0; i < secs * 10; i++)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# pg_wait_file PATH [SECS]
pg_wait_file() {
    local f="$1" secs="${2:-30}" i
    for ((i = 0; i < secs * 10; i++)); do
        [[ -e "$f" ]] && return 0
        sleep 0.1
    done
    return 1
}

# pg_kill_wait PID [SECS]: stop one process we started, by its id.
pg_kill_wait() {
    local pid="$1" secs="${2:-10}" i
    [[ -n "$pid" ]] || return 0
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
    kill -TERM "$pid" 2>/dev/null
    # kill -0 is a builtin: polling every 20 ms costs nothing and ends each stop ~40 ms sooner
    # on average (dozens of stops per CI run).
    for ((i = 0; i < secs * 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.02
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 0
}

# pg_hide_host_containers_cache CMD ARGS...: run CMD with a private tmpfs over the host's
# /var/lib/containers. As root, skopeo and `podman pull` (4.3) write a blob-info cache to
# /var/lib/containers/cache whatever --root says, and no option moves it; a private mount
# namespace keeps the host's directory untouched. Falls back to running CMD directly.
pg_hide_host_containers_cache() {
    local hide=/var/lib/containers
    [[ -d $hide ]] || hide=/var/lib
    if [[ "$(id -u)" == 0 ]] && command -v unshare >/dev/null 2>&1 &&
        unshare --mount --propagation private true 2>/dev/null; then
        unshare --mount --propagation private -- \
            sh -c 'mount -t tmpfs pg-private "$1" && shift && exec "$@"' sh "$hide" "$@"
    else
        "$@"
    fi
}

# Assertions. pg_expect_ok DESC CMD...: CMD must succeed. pg_expect_fail DESC CMD...: must fail.
# Output of CMD is kept in $PG_OUT (stdout+stderr).
PG_OUT=""
pg_expect_ok() {
    local desc="$1"; shift
    PG_CHECKS=$((PG_CHECKS + 1))
    if PG_OUT="$("$@" 2>&1)"; then
        pg_log "ok   - $desc"
        return 0
    fi
    PG_FAILURES=$((PG_FAILURES + 1))
    pg_log "FAIL - $desc (expected success)"
    printf '%s\n' "$PG_OUT" | sed 's/^/       | /' >&2
    return 1
}
pg_expect_fail() {
    local desc="$1"; shift
    PG_CHECKS=$((PG_CHECKS + 1))
    if PG_OUT="$("$@" 2>&1)"; then
        PG_FAILURES=$((PG_FAILURES + 1))
        pg_log "FAIL - $desc (expected failure, command succeeded)"
        printf '%s\n' "$PG_OUT" | sed 's/^/       | /' >&2
        return 1
    fi
    pg_log "ok   - $desc"
    return 0
}
# pg_expect_contains DESC HAYSTACK NEEDLE
pg_expect_contains() {
    PG_CHECKS=$((PG_CHECKS + 1))
    if [[ "$2" == *"$3"* ]]; then
        pg_log "ok   - $1"
        return 0
    fi
    PG_FAILURES=$((PG_FAILURES + 1))
    pg_log "FAIL - $1: output does not contain '$3'"
    printf '%s\n' "$2" | sed 's/^/       | /' >&2
    return 1
}
# pg_expect_file_contains DESC FILE NEEDLE [SECS]: FILE must come to contain NEEDLE within SECS
# (default 30). For what another process writes asynchronously (a daemon's log line, a metric
# file): never grep such a file once right after the action.
pg_expect_file_contains() {
    local desc="$1" file="$2" needle="$3" secs="${4:-30}" i
    PG_CHECKS=$((PG_CHECKS + 1))
    for ((i = 0; i < secs * 10; i++)); do
        if [[ -r "$file" ]] && grep -qF -- "$needle" "$file"; then
            pg_log "ok   - $desc"
            return 0
        fi
        sleep 0.1
    done
    PG_FAILURES=$((PG_FAILURES + 1))
    pg_log "FAIL - $desc: $file does not contain '$needle' after ${secs}s"
    tail -n 20 "$file" 2>/dev/null | sed 's/^/       | /' >&2
    return 1
}
# pg_wait_grep FILE NEEDLE [SECS]: wait until FILE contains NEEDLE (fixed string); 1 on timeout.
pg_wait_grep() {
    local file="$1" needle="$2" secs="${3:-30}" i
    for ((i = 0; i < secs * 10; i++)); do
        [[ -r "$file" ]] && grep -qF -- "$needle" "$file" && return 0
        sleep 0.1
    done
    return 1
}
# pg_grep_count FILE NEEDLE: how many lines of FILE hold NEEDLE (fixed string); 0 when none.
pg_grep_count() { grep -cF -- "$2" "$1" 2>/dev/null || true; }
# pg_wait_grep_more FILE NEEDLE BEFORE [SECS]: wait until more than BEFORE lines of FILE hold
# NEEDLE, for a line an action logs again (count before the action, wait after it).
pg_wait_grep_more() {
    local file="$1" needle="$2" before="$3" secs="${4:-30}" i
    for ((i = 0; i < secs * 10; i++)); do
        (($(pg_grep_count "$file" "$needle") > before)) && return 0
        sleep 0.1
    done
    return 1
}
# pg_wait_locked FILE [SECS]: wait until another process holds flock(FILE) (started in the
# background just before); 1 on timeout.
pg_wait_locked() {
    local file="$1" secs="${2:-30}" i
    for ((i = 0; i < secs * 10; i++)); do
        flock -n "$file" true 2>/dev/null || return 0
        sleep 0.1
    done
    return 1
}
pg_check_fail() {
    PG_CHECKS=$((PG_CHECKS + 1))
    PG_FAILURES=$((PG_FAILURES + 1))
    pg_log "FAIL - $*"
}
pg_check_ok() {
    PG_CHECKS=$((PG_CHECKS + 1))
    pg_log "ok   - $*"
}

# pg_summary: print the tally; return non-zero if any check failed.
pg_summary() {
    if ((PG_FAILURES > 0)); then
        printf '%d of %d checks FAILED\n' "$PG_FAILURES" "$PG_CHECKS" >&2
        return 1
    fi
    printf 'all %d checks passed\n' "$PG_CHECKS" >&2
    return 0
}
