#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgate-cri is transparent (cri/README.md): against a fake runtime made with
# Python gRPC generic handlers (cri_proxy_transparency.py), every observation
# through the proxy equals the direct one — unary bytes, metadata both ways,
# server/client/bidi streaming, error status and message, trailers-only
# answers, unknown methods, the 16 MiB bound; a client that waits for the
# runtime's headers before its first message gets them (no deadlock); a
# stream's messages spaced in time each arrive promptly; a deadline is honoured and ends
# the runtime's call; the runtime down gives UNAVAILABLE; a restarted runtime
# is found again without restarting the proxy; SIGTERM lets an in-flight call
# finish, refuses new ones and exits 0. The socket is 0600 in a 0700 directory.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"

PY=/usr/bin/python3
HERE="$(cd "$(dirname "$0")" && pwd)"
CRI="${PULLGATE_CRI:-${PG_BUILD_DIR:-$PG_SOURCE_DIR/build}/cri/pullgate-cri}"
[[ -x "$CRI" ]] || pg_skip "pullgate-cri not built ($CRI)"
[[ -x $PY ]] || pg_skip "no $PY"
$PY -c 'import grpc' 2>/dev/null || pg_skip "python3-grpcio not installed"

T="$(pg_mktemp_dir cri)"
RT_SOCK="$T/rt.sock"
EVENTS="$T/events"
PROXY_SOCK="$T/run/cri.sock"
: >"$EVENTS"
mkdir -p "$T/state"
cat >"$T/config.json" <<EOF
{"stateDir":"$T/state","readOnlyRecordDirs":[],"dbus":"none","logLevel":"debug"}
EOF
chmod 0600 "$T/config.json"

RT_PID=""
start_runtime() {
    $PY "$HERE/cri_proxy_transparency.py" serve "$RT_SOCK" "$EVENTS" &
    RT_PID=$!
    pg_wait_file "$RT_SOCK" 10 || pg_fail "fake runtime did not start"
}
stop_runtime() {
    pg_kill_wait "$RT_PID" 5
    RT_PID=""
    rm -f "$RT_SOCK"
}
pg_on_exit 'pg_kill_wait "$RT_PID" 5'

start_runtime
"$CRI" --config "$T/config.json" --listen "unix://$PROXY_SOCK" \
    --runtime-endpoint "unix://$RT_SOCK" --hook-socket none 2>"$T/proxy.log" &
PROXY_PID=$!
pg_on_exit 'pg_kill_wait "$PROXY_PID" 15'
pg_wait_file "$PROXY_SOCK" 10 || { cat "$T/proxy.log" >&2; pg_fail "pullgate-cri did not start"; }

pg_section "socket permissions"
mode_sock=$(stat -c %a "$PROXY_SOCK")
mode_dir=$(stat -c %a "$(dirname "$PROXY_SOCK")")
[[ $mode_sock == 600 ]] && pg_check_ok "socket is 0600" || pg_check_fail "socket mode $mode_sock"
[[ $mode_dir == 700 ]] && pg_check_ok "socket directory is 0700" || pg_check_fail "dir mode $mode_dir"

pg_section "same answers direct and through the proxy"
pg_expect_ok "transparency" $PY "$HERE/cri_proxy_transparency.py" compare "$RT_SOCK" "$PROXY_SOCK"
printf '%s\n' "$PG_OUT" | sed 's/^/       /' >&2

pg_section "sends are coalesced, never held back"
pg_expect_ok "headers before the first message" \
    $PY "$HERE/cri_proxy_transparency.py" headers-first "$RT_SOCK" "$PROXY_SOCK"
printf '%s\n' "$PG_OUT" | sed 's/^/       /' >&2
pg_expect_ok "spaced stream messages arrive promptly" \
    $PY "$HERE/cri_proxy_transparency.py" spaced "$RT_SOCK" "$PROXY_SOCK"
printf '%s\n' "$PG_OUT" | sed 's/^/       /' >&2

pg_section "deadline"
pg_expect_ok "deadline" $PY "$HERE/cri_proxy_transparency.py" deadline "$PROXY_SOCK" "$EVENTS"
printf '%s\n' "$PG_OUT" | sed 's/^/       /' >&2

pg_section "runtime down, then back"
stop_runtime
pg_expect_ok "runtime down" $PY "$HERE/cri_proxy_transparency.py" unavailable "$PROXY_SOCK"
printf '%s\n' "$PG_OUT" | sed 's/^/       /' >&2
start_runtime
pg_expect_ok "runtime back" $PY "$HERE/cri_proxy_transparency.py" recovers "$PROXY_SOCK" 10
printf '%s\n' "$PG_OUT" | sed 's/^/       /' >&2
kill -0 "$PROXY_PID" 2>/dev/null && pg_check_ok "the proxy was never restarted" ||
    pg_check_fail "the proxy died"

pg_section "SIGTERM drains"
pg_expect_ok "drain" $PY "$HERE/cri_proxy_transparency.py" drain "$PROXY_SOCK" "$PROXY_PID"
printf '%s\n' "$PG_OUT" | sed 's/^/       /' >&2
rc=0
for _ in $(seq 1 150); do kill -0 "$PROXY_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$PROXY_PID" 2>/dev/null; then
    pg_check_fail "pullgate-cri still running 15 s after SIGTERM"
else
    wait "$PROXY_PID"; rc=$?
    [[ $rc == 0 ]] && pg_check_ok "exit status 0 after SIGTERM" || pg_check_fail "exit status $rc"
fi
PROXY_PID=""
if grep -qiE 'password|s3cret' "$T/proxy.log"; then pg_check_fail "log mentions credentials"; fi
if ((PG_FAILURES > 0)); then sed 's/^/  proxy: /' "$T/proxy.log" | tail -40 >&2; fi
pg_summary
