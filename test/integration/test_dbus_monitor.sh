#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# D-Bus end to end: a private dbus-daemon, `pullgatectl monitor` (JSON and
# human) subscribed to dev.pullgate.PullGate1, and the record commands whose
# store emits PullIntent / ImagePulled / PullFailed / RecordsPruned. Checks
# every signal and argument, that no credential hash is ever sent, clean exit
# on SIGTERM, exit 3 on an unreachable bus, and that a missing or hung bus
# never changes or noticeably delays a record command.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/common.sh
source "$here/lib/common.sh"
# shellcheck source=lib/dbus.sh
source "$here/lib/dbus.sh"

# Every section needs these; a missing one skips the whole test (exit 77, counted
# by scripts/test.sh) instead of letting a section vanish while the test passes.
command -v dbus-daemon >/dev/null 2>&1 || pg_skip "dbus-daemon not installed (package dbus)"
command -v dbus-send >/dev/null 2>&1 || pg_skip "dbus-send not installed (package dbus)"
command -v python3 >/dev/null 2>&1 || pg_skip "python3 not installed (the hung-bus listener)"
[[ -n "${PULLGATECTL:-}" && -x "${PULLGATECTL:-}" ]] ||
    pg_fail "pullgatectl not built (PULLGATECTL='${PULLGATECTL:-}')"

CTL="$PULLGATECTL"
WORK="$(pg_mktemp_dir dbus)"
STATE="$WORK/state"
CONFIG="$WORK/config.json"
printf '{"stateDir":"%s","readOnlyRecordDirs":[],"dbus":"none"}\n' "$STATE" >"$CONFIG"

IMAGE=registry.example.com/team-a/app:1.0
IMAGE2=registry.example.com/team-b/broken:2
REF=sha256:1111111111111111111111111111111111111111111111111111111111111111
REF_KEPT=sha256:3333333333333333333333333333333333333333333333333333333333333333
SECRET_UID=7c1f0000-0000-0000-0000-00000000000a
HASH_A=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
SA_UID=5a000000-0000-0000-0000-0000000000bb

# ------------------------------------------------------------ the bus
pg_dbus_daemon_start
ADDR=$PG_BUS_ADDR
pg_log "private bus at $ADDR"

ctl() { "$CTL" --config "$CONFIG" --state-dir "$STATE" --dbus "$ADDR" "$@"; }

# start_monitor NAME ARGS...: runs monitor in the background, output in
# $WORK/NAME.out / .err, pid in MONITOR_PID; waits for its "listening" line.
start_monitor() {
    local name="$1"
    shift
    "$CTL" --config "$CONFIG" --dbus "$ADDR" monitor "$@" \
        >"$WORK/$name.out" 2>"$WORK/$name.err" &
    MONITOR_PID=$!
    pg_on_exit "pg_kill_wait $MONITOR_PID"
    for _ in $(seq 1 100); do
        grep -q '^monitor: listening on ' "$WORK/$name.err" 2>/dev/null && return 0
        kill -0 "$MONITOR_PID" 2>/dev/null || break
        sleep 0.1
    done
    pg_fail "monitor $name did not start listening: $(cat "$WORK/$name.err")"
}

# wait_exit PID SECS: sets EXIT_STATUS to PID's exit status, or 124 if it is
# still running after SECS. (Not in $(...): only this shell can wait for PID.)
wait_exit() {
    local pid="$1" secs="$2" i
    EXIT_STATUS=124
    for ((i = 0; i < secs * 10; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            EXIT_STATUS=0
            wait "$pid" || EXIT_STATUS=$?
            return 0
        fi
        sleep 0.1
    done
}

# ------------------------------------------- signals from the record commands
pg_section "record commands emit, monitor prints"
start_monitor json --json --count 5
JSON_PID=$MONITOR_PID
start_monitor human --count 5
HUMAN_PID=$MONITOR_PID

pg_expect_ok "record-intent" ctl record-intent --image "$IMAGE"
pg_expect_ok "record-pulled with a secret" ctl record-pulled --image "$IMAGE" --image-ref "$REF" \
    --secret "team-a/pull-secret/$SECRET_UID:$HASH_A" \
    --service-account "team-a/default/$SA_UID"
pg_expect_ok "record-intent (second image)" ctl record-intent --image "$IMAGE2"
pg_expect_ok "record-failed" ctl record-failed --image "$IMAGE2"
printf '%s\n' "$REF_KEPT" >"$WORK/in-use"
pg_expect_ok "prune" ctl prune --in-use "$WORK/in-use"

wait_exit "$JSON_PID" 15; rc=$EXIT_STATUS
[[ "$rc" == 0 ]] && pg_check_ok "json monitor exits 0 after --count 5" ||
    pg_check_fail "json monitor exit status $rc: $(cat "$WORK/json.err")"
wait_exit "$HUMAN_PID" 15; rc=$EXIT_STATUS
[[ "$rc" == 0 ]] && pg_check_ok "human monitor exits 0 after --count 5" ||
    pg_check_fail "human monitor exit status $rc: $(cat "$WORK/human.err")"

TIME_RE='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z'
# jansson keeps insertion order and JSON_COMPACT has no spaces: compare the
# lines exactly once the time is checked and removed.
cat >"$WORK/json.want" <<EOF
{"signal":"PullIntent","image":"$IMAGE"}
{"signal":"ImagePulled","image":"$IMAGE","imageRef":"$REF","credentialKind":"secret"}
{"signal":"PullIntent","image":"$IMAGE2"}
{"signal":"PullFailed","image":"$IMAGE2"}
{"signal":"RecordsPruned","count":1}
EOF
if grep -qvE "^\{\"time\":\"$TIME_RE\"," "$WORK/json.out"; then
    pg_check_fail "a JSON line lacks a leading RFC 3339 time: $(cat "$WORK/json.out")"
else
    pg_check_ok "every JSON line starts with its time"
fi
sed -E "s/^\{\"time\":\"$TIME_RE\",/{/" "$WORK/json.out" >"$WORK/json.got"
if diff -u "$WORK/json.want" "$WORK/json.got" >&2; then
    pg_check_ok "JSON lines: every signal with the right arguments"
else
    pg_check_fail "JSON lines differ (see diff above)"
fi

cat >"$WORK/human.want" <<EOF
PullIntent image=$IMAGE
ImagePulled image=$IMAGE imageRef=$REF credentialKind=secret
PullIntent image=$IMAGE2
PullFailed image=$IMAGE2
RecordsPruned count=1
EOF
if grep -qvE "^$TIME_RE " "$WORK/human.out"; then
    pg_check_fail "a human line lacks a leading time: $(cat "$WORK/human.out")"
else
    pg_check_ok "every human line starts with its time"
fi
sed -E "s/^$TIME_RE //" "$WORK/human.out" >"$WORK/human.got"
if diff -u "$WORK/human.want" "$WORK/human.got" >&2; then
    pg_check_ok "human lines: every signal with the right arguments"
else
    pg_check_fail "human lines differ (see diff above)"
fi

# The only 64-hex runs allowed are the image digests we recorded.
leaks="$(cat "$WORK/json.out" "$WORK/human.out" | sed -e "s/${REF#sha256:}//g" |
    grep -oE '[0-9a-f]{64}' || true)"
if [[ -z "$leaks" ]] && ! grep -qF "$HASH_A" "$WORK/json.out" "$WORK/human.out"; then
    pg_check_ok "no credential hash in any signal"
else
    pg_check_fail "a 64-hex value other than the imageRef was sent: $leaks"
fi

# ------------------------------------------------- a container decision line
# The human format of ContainerDenied as documented, through a signal sent
# with dbus-send (the hook emits it; its own tests cover the hook).
pg_section "ContainerDenied / ContainerAllowed formats"
start_monitor human2 --count 2
H2_PID=$MONITOR_PID
start_monitor json2 --json --count 2
J2_PID=$MONITOR_PID
dbus-send --bus="$ADDR" --type=signal /dev/pullgate/PullGate1 \
    dev.pullgate.PullGate1.ContainerDenied string:c0ffee string:team-a \
    string:nginx:1.25 string:"$REF" string:no-record
dbus-send --bus="$ADDR" --type=signal /dev/pullgate/PullGate1 \
    dev.pullgate.PullGate1.ContainerAllowed string:beef string:team-b \
    string:"my image" string: string:secret-match
wait_exit "$H2_PID" 15
wait_exit "$J2_PID" 15
sed -E "s/^$TIME_RE //" "$WORK/human2.out" >"$WORK/human2.got"
cat >"$WORK/human2.want" <<EOF
ContainerDenied container=c0ffee namespace=team-a image=nginx:1.25 imageRef=$REF reason=no-record
ContainerAllowed container=beef namespace=team-b image="my image" imageRef="" reason=secret-match
EOF
if diff -u "$WORK/human2.want" "$WORK/human2.got" >&2; then
    pg_check_ok "container decision lines (human)"
else
    pg_check_fail "container decision lines (human) differ"
fi
sed -E "s/^\{\"time\":\"$TIME_RE\",/{/" "$WORK/json2.out" >"$WORK/json2.got"
cat >"$WORK/json2.want" <<EOF
{"signal":"ContainerDenied","containerId":"c0ffee","namespace":"team-a","image":"nginx:1.25","imageRef":"$REF","reason":"no-record"}
{"signal":"ContainerAllowed","containerId":"beef","namespace":"team-b","image":"my image","imageRef":"","reason":"secret-match"}
EOF
if diff -u "$WORK/json2.want" "$WORK/json2.got" >&2; then
    pg_check_ok "container decision lines (JSON)"
else
    pg_check_fail "container decision lines (JSON) differ"
fi

# --------------------------------------------------------- exits of monitor
pg_section "monitor exits"
start_monitor term --json
kill -TERM "$MONITOR_PID"
wait_exit "$MONITOR_PID" 10; rc=$EXIT_STATUS
[[ "$rc" == 0 ]] && pg_check_ok "SIGTERM exits 0" || pg_check_fail "SIGTERM: exit status $rc"
start_monitor int
kill -INT "$MONITOR_PID"
wait_exit "$MONITOR_PID" 10; rc=$EXIT_STATUS
[[ "$rc" == 0 ]] && pg_check_ok "SIGINT exits 0" || pg_check_fail "SIGINT: exit status $rc"

rc=0
"$CTL" --config "$CONFIG" --dbus "unix:path=$WORK/no-such-bus" monitor \
    >/dev/null 2>"$WORK/unreachable.err" || rc=$?
[[ "$rc" == 3 && -s "$WORK/unreachable.err" ]] &&
    pg_check_ok "unreachable bus: exit 3 with a message" ||
    pg_check_fail "unreachable bus: exit status $rc, stderr '$(cat "$WORK/unreachable.err")'"

# ------------------------------- a broken bus never changes a record command
pg_section "missing and hung buses"
# timed CMD...: runs CMD; TOOK gets its wall time in ms, LAST_STATUS its status.
timed() {
    local start end
    start="$(date +%s%N)"
    LAST_STATUS=0
    "$@" >/dev/null 2>&1 || LAST_STATUS=$?
    end="$(date +%s%N)"
    TOOK=$(((end - start) / 1000000))
}
timed "$CTL" --config "$CONFIG" --state-dir "$STATE" \
    --dbus "unix:path=$WORK/no-such-bus" record-intent --image "$IMAGE"
[[ "$LAST_STATUS" == 0 ]] && pg_check_ok "missing bus: record-intent succeeds (${TOOK} ms)" ||
    pg_check_fail "missing bus: record-intent exit status $LAST_STATUS"

# A listener that accepts the socket and never answers.
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(16)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)' "$WORK/hung-bus" &
HUNG_PID=$!
pg_on_exit "pg_kill_wait $HUNG_PID"
pg_wait_file "$WORK/hung-bus" 10 || pg_fail "hung listener did not start"
timed "$CTL" --config "$CONFIG" --state-dir "$STATE" \
    --dbus "unix:path=$WORK/hung-bus" record-intent --image "$IMAGE2"
# The notifier's bound is pullgatectl's (250 ms) per signal; allow
# generous slack for process start-up on a loaded CI machine.
if [[ "$LAST_STATUS" == 0 ]] && ((TOOK < 2000)); then
    pg_check_ok "hung bus: record-intent succeeds in ${TOOK} ms"
else
    pg_check_fail "hung bus: record-intent exit status $LAST_STATUS after ${TOOK} ms"
fi

pg_summary
