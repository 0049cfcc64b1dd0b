#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgate-cri fails closed (docs/interfaces.md §10, issue 18): no PullImage reaches the
# runtime unless its intent is durable; an intent goes only when the runtime reports the
# image absent after a failed pull, or the pulled record is durable; anything the proxy
# cannot decode or record is refused, never forwarded. A fake image service
# (cri_pull_recording.py) stands in for the runtime and notes, for every pull that reaches
# it, whether the intent was on disk: "intent-missing" anywhere is a failure. Cases:
# unusable credentials (over-long, NUL, tokens, empty) refused and no empty-credential hash
# anywhere; the wire variants (a non-minimal varint tag, a group, two request messages)
# refused, a method path without the leading '/' recorded like the canonical one; a runtime
# that stores the image and answers UNAVAILABLE keeps the intent; 100 concurrent stalled
# pulls and a tenant's pull behind them: forwarded with an intent or refused; the store's
# lock held for 10 s during 400 pulls while `pullgatectl verify` checks that no image the
# runtime holds is open to a foreign namespace; the proxy's memory holds no password or
# auth bytes after 20 pulls; prune from the configured runtime only (an empty or failed
# listing deletes nothing; another tool's empty store is never asked).
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"

PY=/usr/bin/python3
HERE="$(cd "$(dirname "$0")" && pwd)"
CRI="${PULLGATE_CRI:-${PG_BUILD_DIR:-$PG_SOURCE_DIR/build}/cri/pullgate-cri}"
CTL="${PULLGATECTL:-${PG_BUILD_DIR:-$PG_SOURCE_DIR/build}/tools/pullgatectl}"
[[ -x "$CRI" ]] || pg_skip "pullgate-cri not built ($CRI)"
[[ -x "$CTL" ]] || pg_skip "pullgatectl not built ($CTL)"
$PY -c 'import grpc, grpc_tools' 2>/dev/null || pg_skip "python3-grpcio / python3-grpc-tools missing"
command -v flock >/dev/null || pg_skip "flock(1) missing"
pg_require_root # the memory scan reads /proc/PID/mem of the proxy
export PG_SOURCE_DIR
T0=$SECONDS

T="$(pg_mktemp_dir crifc)"
STATE="$T/state"
RT_SOCK="$T/rt.sock"
PROXY_SOCK="$T/run/cri.sock"
EVENTS="$T/events"
: >"$EVENTS"
mkdir -p "$STATE" && chmod 0700 "$STATE"
# The default policy (NeverVerifyPreloadedImages): an image pulled without a trace on
# disk would be allowed to every pod. No hook socket, no D-Bus.
cat >"$T/config.json" <<EOF
{"stateDir":"$STATE","readOnlyRecordDirs":[],"dbus":"none","nodeCredentialFiles":[],
 "criPruneInterval":"0s","runtime":"cri-o"}
EOF
chmod 0600 "$T/config.json"
ctl() { "$CTL" --config "$T/config.json" "$@"; }
fc() { $PY "$HERE/cri_fail_closed.py" "$@"; }
image_id() { $PY "$HERE/cri_pull_recording.py" image-id "$1"; }
intent_of() { printf '%s/pulling/sha256-%s' "$STATE" "$(printf %s "$1" | sha256sum | cut -d' ' -f1)"; }
reached_runtime() { grep -q "^pull $1 " "$EVENTS"; }
no_intent_missing() {
    if grep -q 'intent-missing' "$EVENTS"; then
        pg_check_fail "$1: a pull reached the runtime without its intent on disk: $(grep -m3 intent-missing "$EVENTS" | xargs)"
    else
        pg_check_ok "$1: every pull that reached the runtime had its intent on disk"
    fi
}

$PY "$HERE/cri_pull_recording.py" serve "$RT_SOCK" "$STATE" "$EVENTS" &
RT_PID=$!
pg_on_exit 'pg_kill_wait "$RT_PID" 5'
pg_wait_file "$RT_SOCK" 15 || pg_fail "fake runtime did not start"
# The config names CRI-O: its namespaced auth is off here (its own section turns it on).
mkdir -p "$T/crio.conf.d"
printf '[crio.image]\nnamespaced_auth_dir = ""\n' >"$T/crio.conf"
start_proxy() {
    "$CRI" --config "$T/config.json" --listen "unix://$PROXY_SOCK" \
        --runtime-endpoint "unix://$RT_SOCK" --hook-socket none \
        --crio-config "$T/crio.conf" --crio-config-dir "$T/crio.conf.d" 2>>"$T/proxy.log" &
    PROXY_PID=$!
    pg_wait_file "$PROXY_SOCK" 10 || { cat "$T/proxy.log" >&2; pg_fail "pullgate-cri did not start"; }
}
start_proxy
pg_on_exit 'pg_kill_wait "$PROXY_PID" 15'
E0=44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a

# ------------------------------------------------------------ credentials
pg_section "credentials that cannot be attributed are refused"
LONG_PASS=$(head -c 70000 /dev/zero | tr '\0' p)
refused_creds() { # DESC IMAGE AUTH... (cri_pull_recording.py pull's USER PASS AUTH)
    local desc="$1" image="$2" out
    shift 2
    out=$($PY "$HERE/cri_pull_recording.py" pull "$PROXY_SOCK" v1 "$image" team-a - "$@")
    pg_expect_contains "$desc: refused" "$out" "INVALID_ARGUMENT pullgate: the pull's credentials cannot be used"
    reached_runtime "$image" && pg_check_fail "$desc: the runtime got the pull" ||
        pg_check_ok "$desc: never forwarded"
}
refused_creds "a 70 kB password" registry.example.com/team-a/long:1 alice "$LONG_PASS" ""
refused_creds "auth of ':' (empty credentials)" registry.example.com/team-a/empty:1 "" "" "Og=="
refused_creds "auth that is not base64" registry.example.com/team-a/b64:1 "" "" "!!!"
refused_creds "auth and a username" registry.example.com/team-a/both:1 alice x "YWxpY2U6eA=="
# A NUL inside the password, and an identity token: raw messages.
NUL_REQ=$(HERE="$HERE" $PY - <<'EOF'
import binascii, os, sys
sys.path.insert(0, os.environ["HERE"])
import cri_pull_recording as f
r = f.pb.PullImageRequest(image=f.pb.ImageSpec(image=b"registry.example.com/team-a/nul:1"))
r.auth.username = b"alice"; r.auth.password = b"s3c\0ret"
print(binascii.hexlify(r.SerializeToString()).decode())
r = f.pb.PullImageRequest(image=f.pb.ImageSpec(image=b"registry.example.com/team-a/token:1"))
r.auth.identity_token = b"eyJhbGciOi"
print(binascii.hexlify(r.SerializeToString()).decode())
EOF
)
OUT=$(fc raw "$PROXY_SOCK" /runtime.v1.ImageService/PullImage "$(sed -n 1p <<<"$NUL_REQ")")
pg_expect_contains "a NUL in the password: refused" "$OUT" "INVALID_ARGUMENT pullgate: the pull's credentials cannot be used"
OUT=$(fc raw "$PROXY_SOCK" /runtime.v1.ImageService/PullImage "$(sed -n 2p <<<"$NUL_REQ")")
pg_expect_contains "an identity token only: refused" "$OUT" "INVALID_ARGUMENT"
reached_runtime registry.example.com/team-a/nul:1 || reached_runtime registry.example.com/team-a/token:1 &&
    pg_check_fail "a refused pull reached the runtime" || pg_check_ok "neither reached the runtime"

# ------------------------------------------------------------ the wire
pg_section "wire variants: what protobuf-c cannot read is refused; a path without '/' is a pull"
wire_req() { fc request "registry.example.com/team-a/$1:1.0" team-a "" ""; }
# The request with its first tag (0x0a) as a six-byte varint (8a 80 80 80 80 00), as Go
# decodes it; and with a group (field 15: 7b ... 7c) appended. One image per case.
REQ_HEX=$(wire_req wire-tag)
OUT=$(fc raw "$PROXY_SOCK" /runtime.v1.ImageService/PullImage "8a8080808000${REQ_HEX:2}")
pg_expect_contains "non-minimal varint tag: refused" "$OUT" "INVALID_ARGUMENT pullgate: PullImage request not understood"
OUT=$(fc raw "$PROXY_SOCK" /runtime.v1.ImageService/PullImage "$(wire_req wire-group)7b7c")
pg_expect_contains "a group field: refused" "$OUT" "INVALID_ARGUMENT pullgate: PullImage request not understood"
REQ_HEX=$(wire_req wire-two)
OUT=$(fc raw "$PROXY_SOCK" /runtime.v1.ImageService/PullImage "$REQ_HEX" "$REQ_HEX")
pg_expect_contains "two request messages on one call: refused" "$OUT" "INVALID_ARGUMENT pullgate: PullImage takes exactly one request message"
reached_runtime registry.example.com/team-a/wire-tag:1.0 || reached_runtime registry.example.com/team-a/wire-group:1.0 ||
    reached_runtime registry.example.com/team-a/wire-two:1.0 &&
    pg_check_fail "a refused wire variant reached the runtime" || pg_check_ok "no refused variant reached the runtime"
IMG_WIRE=registry.example.com/team-a/wire:1.0
OUT=$(fc raw "$PROXY_SOCK" runtime.v1.ImageService/PullImage "$(wire_req wire)")
[[ $OUT == OK ]] && pg_check_ok "method without '/': answered" || pg_check_fail "method without '/': $OUT"
pg_expect_ok "method without '/': recorded like the canonical one" ctl show --image-ref "$(image_id "$IMG_WIRE")"
grep -qx "pull $IMG_WIRE intent-present" "$EVENTS" && pg_check_ok "its intent was on disk when it was forwarded" ||
    pg_check_fail "the runtime got $IMG_WIRE without its intent: $(grep "pull $IMG_WIRE " "$EVENTS" | xargs)"

# ------------------------------------------------------------ failures
pg_section "a runtime that stores the image, then answers UNAVAILABLE"
FLAKY=registry.example.com/team-a/flaky:1.0
OUT=$($PY "$HERE/cri_pull_recording.py" pull "$PROXY_SOCK" v1 "$FLAKY" team-a - "" "" "")
pg_expect_contains "the runtime's error is answered unchanged" "$OUT" "UNAVAILABLE connection reset after the pull"
[[ -e $(intent_of "$FLAKY") ]] && pg_check_ok "the intent stays (ImageStatus says the image is there)" ||
    pg_check_fail "the intent was released although the runtime holds the image"
pg_expect_fail "the image is not allowed to a foreign namespace" \
    ctl verify --image "$FLAKY" --image-ref "$(image_id "$FLAKY")" --namespace team-z --credentials '{}'

# ------------------------------------------------------------ concurrency
pg_section "100 concurrent stalled pulls, then a tenant's pull"
rm -f "$T/release"
fc burst "$PROXY_SOCK" 100 registry.example.com/team-s/stall team-s "" "" 0.5 >"$T/stall.out" &
BURST_PID=$!
# Every slot taken (64 at the runtime), then the rest wait 2 s and are refused: wait for the 64
# at the runtime and the first refusal in pullgate-cri's log (deadlines, not a fixed time).
for _ in $(seq 1 300); do
    (($(grep -c '^pull registry.example.com/team-s/stall' "$EVENTS") >= 64)) &&
        grep -q 'msg="pull refused".*team-s/stall.*RESOURCE_EXHAUSTED' "$T/proxy.log" && break
    sleep 0.1
done
OUT=$($PY "$HERE/cri_pull_recording.py" pull "$PROXY_SOCK" v1 registry.example.com/team-t/app:1.0 team-t - "" "" "")
case $OUT in
"RESOURCE_EXHAUSTED pullgate: too many image pulls in flight"*) pg_check_ok "the tenant's pull is refused while the slots are full: $OUT" ;;
OK\ *) pg_expect_ok "the tenant's pull is recorded" ctl show --image-ref "${OUT#OK }" ;;
*) pg_check_fail "the tenant's pull: $OUT" ;;
esac
touch "$T/release"
wait "$BURST_PID"
N_OK=$(grep -c ' OK ' "$T/stall.out")
N_REFUSED=$(grep -c 'RESOURCE_EXHAUSTED pullgate: too many image pulls in flight' "$T/stall.out")
((N_OK + N_REFUSED == 100 && N_OK > 0 && N_REFUSED > 0)) &&
    pg_check_ok "100 stalled pulls: $N_OK recorded, $N_REFUSED refused (RESOURCE_EXHAUSTED)" ||
    pg_check_fail "100 stalled pulls: $N_OK OK, $N_REFUSED refused: $(grep -v ' OK ' "$T/stall.out" | head -3 | xargs)"
BAD=0
while read -r image code ref; do
    if [[ $code == OK ]]; then
        ctl show --image-ref "$ref" >/dev/null 2>&1 || { BAD=1; pg_log "no record for $image"; }
    elif reached_runtime "$image"; then
        BAD=1 && pg_log "refused $image reached the runtime"
    fi
done <"$T/stall.out"
((BAD == 0)) && pg_check_ok "every answered pull is recorded; no refused pull reached the runtime" ||
    pg_check_fail "a stalled pull was forwarded unrecorded"
no_intent_missing "stalled pulls"

pg_section "the store's lock held for 10 s during 400 pulls"
touch "$STATE/.pullgate.lock" && chmod 0600 "$STATE/.pullgate.lock"
flock "$STATE/.pullgate.lock" sleep 10 &
LOCK_PID=$!
pg_on_exit 'pg_kill_wait "$LOCK_PID" 2'
pg_wait_locked "$STATE/.pullgate.lock" 30 || pg_fail "flock did not take the store's lock"
fc watch "$STATE" "$CTL" "$T/config.json" "$EVENTS" 13 registry.example.com/team-l/ >"$T/watch.out" &
WATCH_PID=$!
fc burst "$PROXY_SOCK" 400 registry.example.com/team-l/app team-l alice "lock-pass-$RANDOM" 12 >"$T/lock.out"
wait "$LOCK_PID" 2>/dev/null
wait "$WATCH_PID"
N_OK=$(grep -c ' OK ' "$T/lock.out")
N_UNAV=$(grep -c 'UNAVAILABLE pullgate: the record store did not take the pull intent in time' "$T/lock.out")
N_EXH=$(grep -c 'RESOURCE_EXHAUSTED pullgate: ' "$T/lock.out")
((N_OK + N_UNAV + N_EXH == 400 && N_UNAV > 0)) &&
    pg_check_ok "400 pulls: $N_OK recorded after the lock went, $N_UNAV refused (UNAVAILABLE), $N_EXH refused (RESOURCE_EXHAUSTED)" ||
    pg_check_fail "400 pulls: OK $N_OK, UNAVAILABLE $N_UNAV, RESOURCE_EXHAUSTED $N_EXH: $(grep -v -e ' OK ' -e 'pullgate: ' "$T/lock.out" | head -3 | xargs)"
BAD=0
for _ in $(seq 1 300); do [[ -z "$(ls -A "$STATE/pulling" 2>/dev/null | grep -v stall)" ]] && break; sleep 0.1; done
pulled_file() { printf '%s/pulled/sha256-%s' "$STATE" "$(printf %s "$1" | sha256sum | cut -d' ' -f1)"; }
while read -r image code ref; do
    if [[ $code == OK ]]; then
        [[ -f $(pulled_file "$ref") ]] || { BAD=1; pg_log "no record for $image"; }
    else
        reached_runtime "$image" && { BAD=1; pg_log "refused $image reached the runtime"; }
        [[ -e $(intent_of "$image") ]] && { BAD=1; pg_log "refused $image left its intent"; }
    fi
done <"$T/lock.out"
((BAD == 0)) && pg_check_ok "each pull recorded, or refused without reaching the runtime (no intent left)" ||
    pg_check_fail "a pull was neither recorded nor cleanly refused"
no_intent_missing "400 pulls under a held lock"
if grep -q '^ALLOWED' "$T/watch.out"; then
    pg_check_fail "an image the runtime holds was allowed to a foreign namespace: $(head -3 "$T/watch.out" | xargs)"
else
    pg_check_ok "pullgatectl verify, continuously: no image the runtime holds looked preloaded ($(tail -1 "$T/watch.out"))"
fi

# ------------------------------------------------------------ memory
pg_section "no password or auth bytes in the proxy's memory after 20 pulls"
NEEDLES=()
for i in $(seq 1 20); do
    pw="mem-scan-secret-$i-$RANDOM$RANDOM-x"
    if ((i % 2)); then
        $PY "$HERE/cri_pull_recording.py" pull "$PROXY_SOCK" v1 "registry.example.com/team-m/app$i:1.0" team-m - "user$i" "$pw" "" >/dev/null
        NEEDLES+=("$pw")
    else
        b64=$(printf '%s' "user$i:$pw" | base64 -w0)
        $PY "$HERE/cri_pull_recording.py" pull "$PROXY_SOCK" v1 "registry.example.com/team-m/app$i:1.0" team-m - "" "" "$b64" >/dev/null
        NEEDLES+=("$pw" "$b64")
    fi
done
# The buffers are overwritten once the calls are done, on the daemon's threads: scan until
# clean, with a deadline, never once after a fixed sleep.
for _ in $(seq 1 20); do
    SCAN=$(fc memscan "$PROXY_PID" "${NEEDLES[@]}")
    [[ $SCAN == clean ]] && break
    sleep 0.5
done
[[ $SCAN == clean ]] && pg_check_ok "no copy of the 20 passwords or 10 auth fields in pullgate-cri's memory" ||
    pg_check_fail "credential bytes found in memory: $(head -5 <<<"$SCAN" | xargs)"

pg_section "no empty-credential hash anywhere"
if grep -rqs "$E0" "$STATE"; then pg_check_fail "the empty-credential hash is in $(grep -rls "$E0" "$STATE" | head -3 | xargs)"
else pg_check_ok "no record, index or intent holds sha256({})"; fi

# ------------------------------------------------------------ CRI-O's namespaced auth
pg_section "CRI-O's namespaced auth: a pull without credentials is bound to its namespace"
# The runtime answers Version as CRI-O 1.35 (the config says cri-o too); its configuration
# names namespaced_auth_dir, read by pullgate-cri at every such pull.
printf 'cri-o\n' >"$T/runtime-name"
printf '[crio.image]\nnamespaced_auth_dir = "/etc/crio/auth"\n' >"$T/crio.conf.d/10-auth.conf"
show_json() { ctl show --image-ref "$1" --json | $PY -c 'import json, sys; print(json.dumps(json.load(sys.stdin), separators=(",", ":")))'; }
NS_IMG=registry.example.com/team-n/private:1.0
OUT=$($PY "$HERE/cri_pull_recording.py" pull "$PROXY_SOCK" v1 "$NS_IMG" team-n - "" "" "")
pg_expect_contains "pulled without credentials for team-n" "$OUT" "OK "
pg_expect_ok "recorded" show_json "${OUT#OK }"
pg_expect_contains "for team-n: its namespace marker" "$PG_OUT" '"namespace":"team-n","name":"pullgate:runtime-namespace-auth"'
[[ $PG_OUT != *'"nodePodsAccessible":true'* ]] && pg_check_ok "not node-accessible" ||
    pg_check_fail "a pull the runtime may have made with team-n's credentials is node-accessible"
sa() { printf '{"registry.example.com/team-n/private":{"kubernetesServiceAccounts":[{"namespace":"%s","name":"default","uid":"sa-%s"}]}}' "$1" "$1"; }
pg_expect_ok "a pod of team-n (its service account) runs it" \
    ctl --policy AlwaysVerify verify --image "$NS_IMG" --image-ref "${OUT#OK }" --namespace team-n --credentials "$(sa team-n)"
pg_expect_fail "a pod of team-o does not" \
    ctl --policy AlwaysVerify verify --image "$NS_IMG" --image-ref "${OUT#OK }" --namespace team-o --credentials "$(sa team-o)"
pg_expect_fail "nor the default policy's other namespace without credentials" \
    ctl verify --image "$NS_IMG" --image-ref "${OUT#OK }" --namespace team-o --credentials '{}'
grep -q 'runtime-namespace' "$T/proxy.log" && pg_check_ok "logged with why (credentials=runtime-namespace)" ||
    pg_check_fail "no pull log line naming the source"
OUT=$($PY "$HERE/cri_pull_recording.py" pull "$PROXY_SOCK" v1 registry.example.com/public/nons:1.0 - - "" "" "")
pg_expect_ok "no namespace in the request (CRI-O consults no namespace's file): recorded" show_json "${OUT#OK }"
pg_expect_contains "node-accessible" "$PG_OUT" '"nodePodsAccessible":true'
printf '[crio.image]\nnamespaced_auth_dir = ""\n' >"$T/crio.conf.d/10-auth.conf"
OUT=$($PY "$HERE/cri_pull_recording.py" pull "$PROXY_SOCK" v1 registry.example.com/public/off:1.0 team-n - "" "" "")
pg_expect_ok "turned off in CRI-O's files: recorded" show_json "${OUT#OK }"
pg_expect_contains "node-accessible again (read at the next pull)" "$PG_OUT" '"nodePodsAccessible":true'
printf '[crio.image\n' >"$T/crio.conf.d/10-auth.conf"
OUT=$($PY "$HERE/cri_pull_recording.py" pull "$PROXY_SOCK" v1 registry.example.com/public/broken:1.0 team-n - "" "" "")
pg_expect_ok "CRI-O's files unreadable: recorded" show_json "${OUT#OK }"
[[ $PG_OUT != *'"nodePodsAccessible":true'* ]] && pg_check_ok "fails closed: bound to team-n" ||
    pg_check_fail "an unreadable CRI-O configuration made the pull node-accessible"
rm -f "$T/crio.conf.d/10-auth.conf" "$T/runtime-name"

# ------------------------------------------------------------ prune
pg_section "prune from the configured runtime only"
$PY "$HERE/cri_fail_closed.py" age-records "$STATE" 7200
N_BEFORE=$(ls "$STATE/pulled" | wc -l)
KEEP_REF=$(image_id registry.example.com/team-a/wire:1.0)
printf 'empty\n' >"$T/list-mode"
pg_expect_fail "the runtime lists no image: --prune refuses" "$CRI" --prune --config "$T/config.json" --runtime-endpoint "unix://$RT_SOCK"
pg_expect_contains "and says why" "$PG_OUT" "lists no image"
printf 'fail\n' >"$T/list-mode"
pg_expect_fail "the runtime's listing fails: --prune refuses" "$CRI" --prune --config "$T/config.json" --runtime-endpoint "unix://$RT_SOCK"
# The packaged pullgate-prune with another tool's empty store on PATH (the old script's
# podman, crictl and ctr): they are never asked.
mkdir -p "$T/bin"
for tool in podman crictl ctr; do printf '#!/bin/sh\necho "$0 $*" >>%s/tools-asked\nexit 0\n' "$T" >"$T/bin/$tool"; chmod +x "$T/bin/$tool"; done
printf 'empty\n' >"$T/list-mode"
pg_expect_fail "pullgate-prune with podman/crictl/ctr on PATH and an empty runtime: refuses" \
    env PATH="$T/bin:$PATH" PULLGATE_CRI="$CRI" PULLGATE_CONFIG="$T/config.json" \
    sh "$PG_SOURCE_DIR/packaging/systemd/pullgate-prune"
[[ ! -e $T/tools-asked ]] && pg_check_ok "no other tool was asked for the image list" ||
    pg_check_fail "pullgate-prune asked $(cat "$T/tools-asked")"
N_AFTER=$(ls "$STATE/pulled" | wc -l)
((N_AFTER == N_BEFORE)) && pg_check_ok "no record deleted ($N_AFTER records)" || pg_check_fail "$N_BEFORE records before, $N_AFTER after"

# The daemon serves runtime B ($RT_SOCK, given on its command line as a drop-in would), the
# configuration names runtime A, which holds another image: the timer's prune must not
# delete B's live records (each would make its image look preloaded to every namespace).
pg_section "prune asks the daemon's own runtime"
TA="$(pg_mktemp_dir rt-a)"
mkdir -p "$TA/state" && : >"$TA/events"
$PY "$HERE/cri_pull_recording.py" serve "$TA/rt.sock" "$TA/state" "$TA/events" &
RTA_PID=$!
pg_on_exit 'pg_kill_wait "$RTA_PID" 5'
pg_wait_file "$TA/rt.sock" 15 || pg_fail "runtime A did not start"
$PY "$HERE/cri_pull_recording.py" pull "$TA/rt.sock" v1 registry.example.com/other/only-on-a:1.0 \
    team-o - "" "" "" >/dev/null || pg_fail "pull on runtime A"
$PY - "$T/config.json" "unix://$TA/rt.sock" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["criRuntimeEndpoint"] = sys.argv[2]
json.dump(c, open(sys.argv[1], "w"))
EOF
printf 'normal\n' >"$T/list-mode"
N_BEFORE=$(ls "$STATE/pulled" | wc -l)
pg_expect_fail "daemon serving B, config naming A: the timer's prune refuses" \
    env PATH="$T/bin:$PATH" PULLGATE_CRI="$CRI" PULLGATE_CONFIG="$T/config.json" \
    sh "$PG_SOURCE_DIR/packaging/systemd/pullgate-prune"
pg_expect_contains "it names the daemon's runtime" "$PG_OUT" "made against unix://$RT_SOCK"
pg_expect_contains "and the one it would have listed" "$PG_OUT" "would list unix://$TA/rt.sock"
pg_expect_fail "--runtime-endpoint naming A: refused too" \
    "$CRI" --prune --config "$T/config.json" --runtime-endpoint "unix://$TA/rt.sock"
N_AFTER=$(ls "$STATE/pulled" | wc -l)
((N_AFTER == N_BEFORE)) && pg_check_ok "no record deleted ($N_AFTER records)" ||
    pg_check_fail "$N_BEFORE records before, $N_AFTER after the prune against runtime A"
pg_expect_ok "a live record of runtime B is kept" ctl show --image-ref "$KEEP_REF"
grep -q '^list' "$TA/events" && pg_check_fail "runtime A was asked for its images" ||
    pg_check_ok "runtime A was never asked for its images"
pg_kill_wait "$RTA_PID" 5

printf '%s\n' registry.example.com/team-m/app1:1.0 registry.example.com/team-m/app2:1.0 >"$T/forget"
# The configured runtime in the config file (criRuntimeEndpoint), as the packaged unit runs it.
$PY - "$T/config.json" "unix://$RT_SOCK" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["criRuntimeEndpoint"] = sys.argv[2]
json.dump(c, open(sys.argv[1], "w"))
EOF
pg_expect_ok "pullgate-prune against the configured runtime" \
    env PATH="$T/bin:$PATH" PULLGATE_CRI="$CRI" PULLGATE_CONFIG="$T/config.json" \
    sh "$PG_SOURCE_DIR/packaging/systemd/pullgate-prune"
pg_expect_contains "it reports the two forgotten images pruned" "$PG_OUT" "pruned 2 records"
pg_expect_fail "a forgotten image's record is deleted" ctl show --image-ref "$(image_id registry.example.com/team-m/app1:1.0)"
pg_expect_ok "a listed image's record is kept" ctl show --image-ref "$KEEP_REF"
printf '%s\n' registry.example.com/team-m/app3:1.0 >"$T/forget"
printf 'empty\n' >"$T/list-mode"
N_LOGGED=$(pg_grep_count "$T/proxy.log" 'prune skipped')
kill -USR1 "$PROXY_PID"
pg_wait_grep_more "$T/proxy.log" 'prune skipped' "$N_LOGGED" 30 || pg_check_fail "the daemon's prune did not run"
pg_expect_ok "the daemon's own prune (SIGUSR1), empty listing: the record stays" ctl show --image-ref "$(image_id registry.example.com/team-m/app3:1.0)"
printf 'normal\n' >"$T/list-mode"
N_LOGGED=$(pg_grep_count "$T/proxy.log" 'msg="records pruned"')
kill -USR1 "$PROXY_PID"
pg_wait_grep_more "$T/proxy.log" 'msg="records pruned"' "$N_LOGGED" 30 || pg_check_fail "the daemon's prune did not run"
pg_expect_fail "the daemon's own prune on its runtime channel deletes the forgotten image's record" \
    ctl show --image-ref "$(image_id registry.example.com/team-m/app3:1.0)"

if grep -q 'Sanitizer' "$T/proxy.log"; then pg_check_fail "sanitizer report: $(grep -m1 -A5 Sanitizer "$T/proxy.log" | xargs)"; fi
if ((PG_FAILURES > 0)); then sed 's/^/  proxy: /' "$T/proxy.log" | grep -v 'msg="pull"' | tail -30 >&2; fi
pg_log "elapsed: $((SECONDS - T0)) s"
pg_summary
