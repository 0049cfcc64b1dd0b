#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgate-cri records pulls with the kubelet's credential semantics, without
# containerd: a fake image service (cri_pull_recording.py, Python gRPC) stands
# in for the runtime and notes whether the intent was on disk when the pull
# reached it. Checked: intent before forwarding; the pulled record on disk when
# the answer arrives, with the pod's secret found by the kubelet hash; a second
# tenant's credentials merged, not replacing; no auth -> nodePodsAccessible;
# credentials the proxy cannot attribute -> hash only, never node-accessible;
# a failed pull answered unchanged, intent released (the runtime reports the image
# absent), nothing recorded; a held store lock refuses the pull;
# runtime.v1alpha2 pulls recorded; ImageStatus identities indexed; and the
# decision on the result (team-a allowed, team-c denied).
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"

PY=/usr/bin/python3
HERE="$(cd "$(dirname "$0")" && pwd)"
CRI="${PULLGATE_CRI:-${PG_BUILD_DIR:-$PG_SOURCE_DIR/build}/cri/pullgate-cri}"
CTL="${PULLGATECTL:-${PG_BUILD_DIR:-$PG_SOURCE_DIR/build}/tools/pullgatectl}"
[[ -x "$CRI" ]] || pg_skip "pullgate-cri not built ($CRI)"
[[ -x "$CTL" ]] || pg_skip "pullgatectl not built ($CTL)"
$PY -c 'import grpc, grpc_tools' 2>/dev/null || pg_skip "python3-grpcio / python3-grpc-tools missing"
export PG_SOURCE_DIR

T="$(pg_mktemp_dir crirec)"
STATE="$T/state"
RT_SOCK="$T/rt.sock"
PROXY_SOCK="$T/run/cri.sock"
EVENTS="$T/events"
: >"$EVENTS"
mkdir -p "$STATE" && chmod 0700 "$STATE"
cat >"$T/config.json" <<EOF
{"stateDir":"$STATE","readOnlyRecordDirs":[],"dbus":"none","policy":"AlwaysVerify"}
EOF
chmod 0600 "$T/config.json"
ctl() { "$CTL" --config "$T/config.json" "$@"; }
drive() { $PY "$HERE/cri_pull_recording.py" "$@"; }
# The pulled record of REF as compact JSON with sorted keys (secrets read
# credentialHash, name, namespace, uid).
show() { ctl show --image-ref "$1" --json |
    $PY -c 'import json, sys; print(json.dumps(json.load(sys.stdin), separators=(",", ":"), sort_keys=True))'; }

# Started directly (not through the shell function) so RT_PID is python's own pid.
$PY "$HERE/cri_pull_recording.py" serve "$RT_SOCK" "$STATE" "$EVENTS" &
RT_PID=$!
pg_on_exit 'pg_kill_wait "$RT_PID" 5'
pg_wait_file "$RT_SOCK" 15 || pg_fail "fake runtime did not start"
"$CRI" --config "$T/config.json" --listen "unix://$PROXY_SOCK" \
    --runtime-endpoint "unix://$RT_SOCK" --hook-socket none 2>"$T/proxy.log" &
PROXY_PID=$!
pg_on_exit 'pg_kill_wait "$PROXY_PID" 15'
pg_wait_file "$PROXY_SOCK" 10 || { cat "$T/proxy.log" >&2; pg_fail "pullgate-cri did not start"; }

HASH_A=$(printf %s 's3cret' | ctl hash --username alice --password-stdin) || pg_fail "hash"
HASH_B=$(printf %s 'hunter2' | ctl hash --username bob --password-stdin) || pg_fail "hash"
APP=registry.example.com/team-a/app
annotation() { # NS NAME UID HASH [IMAGE_NAME]
    printf '{"%s":{"kubernetesSecrets":[{"namespace":"%s","name":"%s","uid":"%s","credentialHash":"%s"}],"kubernetesServiceAccounts":[{"namespace":"%s","name":"default","uid":"sa-%s"}]}}' \
        "${5:-$APP}" "$1" "$2" "$3" "$4" "$1" "$1"
}
ANN_A=$(annotation team-a regcred uid-a "$HASH_A")
ANN_B=$(annotation team-b bobcred uid-b "$HASH_B")
expect_ok_pull() { # DESC ARGS... ; sets REF
    local out
    out=$(drive pull "$PROXY_SOCK" "$@")
    if [[ $out == OK\ * ]]; then REF=${out#OK }; pg_check_ok "$DESC: $out"; else REF=""; pg_check_fail "$DESC: $out"; fi
}

pg_section "tenant A pulls with its secret"
DESC="pull team-a"; expect_ok_pull v1 "$APP:1.0" team-a "$ANN_A" alice s3cret ""
[[ $REF == "$(drive image-id "$APP:1.0")" ]] && pg_check_ok "image_ref answered unchanged" ||
    pg_check_fail "image_ref $REF"
grep -qx "pull $APP:1.0 intent-present" "$EVENTS" && pg_check_ok "intent on disk before the pull was forwarded" ||
    pg_check_fail "intent not on disk when the runtime got the pull: $(cat "$EVENTS")"
pg_expect_ok "pulled record on disk when the answer arrived" show "$REF"
pg_expect_contains "team-a's secret and kubelet hash recorded" "$PG_OUT" "{\"credentialHash\":\"$HASH_A\",\"name\":\"regcred\",\"namespace\":\"team-a\",\"uid\":\"uid-a\"}"

pg_section "tenant B pulls the same image with other credentials"
DESC="pull team-b"; expect_ok_pull v1 "$APP:1.0" team-b "$ANN_B" bob hunter2 ""
pg_expect_ok "record" show "$REF"
pg_expect_contains "team-a's secret kept" "$PG_OUT" "\"credentialHash\":\"$HASH_A\""
pg_expect_contains "team-b's secret added" "$PG_OUT" "{\"credentialHash\":\"$HASH_B\",\"name\":\"bobcred\",\"namespace\":\"team-b\",\"uid\":\"uid-b\"}"
pg_expect_ok "team-a may run it" ctl verify --image "$APP:1.0" --image-ref "$REF" --namespace team-a --credentials "$ANN_A"
pg_expect_fail "team-c may not" ctl verify --image "$APP:1.0" --image-ref "$REF" --namespace team-c --credentials '{}'
pg_expect_contains "deny reason" "$PG_OUT" "deny"

pg_section "identities from ImageStatus indexed"
grep -q "status $REF" "$EVENTS" && pg_check_ok "ImageStatus asked for the image_ref" || pg_check_fail "no ImageStatus"
DIGEST_ALIAS="$APP@sha256:$(printf %s "$REF" | sha256sum | cut -d' ' -f1)"
INDEX="$STATE/pullgate-images/sha256-$(printf %s "$DIGEST_ALIAS" | sha256sum | cut -d' ' -f1)"
if [[ -f $INDEX ]] && grep -q "$REF" "$INDEX"; then pg_check_ok "repo digest indexed to the image_ref"
else pg_check_fail "no index entry for $DIGEST_ALIAS"; fi

pg_section "no credentials: nodePodsAccessible"
DESC="pull without auth"; expect_ok_pull v1 registry.example.com/public/tool:2.0 team-a "$ANN_A" "" "" ""
pg_expect_ok "record" show "$REF"
pg_expect_contains "node accessible" "$PG_OUT" '"nodePodsAccessible":true'

pg_section "credentials in the auth field, no annotation: hash only"
AUTH=$(printf %s 'alice:s3cret' | base64)
DESC="pull auth-only"; expect_ok_pull v1 registry.example.com/team-a/unannotated:1.0 team-a - "" "" "$AUTH"
pg_expect_ok "record" show "$REF"
pg_expect_contains "hash only under the pod's namespace" "$PG_OUT" "{\"credentialHash\":\"$HASH_A\",\"name\":\"pullgate:unverified-$HASH_A\",\"namespace\":\"team-a\",\"uid\":\"\"}"
if [[ $PG_OUT == *nodePodsAccessible\":true* ]]; then pg_check_fail "unverified pull made node-accessible"; fi

pg_section "a failed pull"
DENIED=registry.example.com/team-a/denied:1.0
OUT=$(drive pull "$PROXY_SOCK" v1 "$DENIED" team-a "$ANN_A" alice wrong "")
pg_expect_contains "runtime's error forwarded" "$OUT" 'UNKNOWN failed to pull and unpack image "registry.example.com/team-a/denied:1.0": 401 Unauthorized'
pg_expect_fail "no record" ctl show --image-ref "$(drive image-id "$DENIED")"
grep -qx "pull $DENIED intent-present" "$EVENTS" && pg_check_ok "intent was written" || pg_check_fail "no intent"
[[ ! -e "$STATE/pulling/sha256-$(printf %s "$DENIED" | sha256sum | cut -d' ' -f1)" ]] &&
    pg_check_ok "intent released after the failure" || pg_check_fail "intent left behind"

pg_section "runtime.v1alpha2"
DESC="pull v1alpha2"; expect_ok_pull v1alpha2 registry.example.com/team-a/legacy:3.0 team-a \
    "$(annotation team-a regcred uid-a "$HASH_A" registry.example.com/team-a/legacy)" alice s3cret ""
pg_expect_ok "v1alpha2 pull recorded" show "$REF"
pg_expect_contains "with team-a's secret" "$PG_OUT" "\"name\":\"regcred\""

pg_section "a held store lock: the pull is refused, never forwarded unrecorded"
command -v flock >/dev/null || pg_skip "flock(1) missing"
touch "$STATE/.pullgate.lock" && chmod 0600 "$STATE/.pullgate.lock"
flock "$STATE/.pullgate.lock" sleep 5 &
LOCK_PID=$!
pg_on_exit 'pg_kill_wait "$LOCK_PID" 2'
pg_wait_locked "$STATE/.pullgate.lock" 30 || pg_fail "flock did not take the store's lock"
LOCKED=registry.example.com/team-a/locked:1.0
t0=$(date +%s%N)
OUT=$(drive pull "$PROXY_SOCK" v1 "$LOCKED" team-a "$(annotation team-a regcred uid-a "$HASH_A" registry.example.com/team-a/locked)" alice s3cret "")
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
pg_expect_contains "refused while the intent cannot be written ($ms ms)" "$OUT" \
    "UNAVAILABLE pullgate: the record store did not take the pull intent in time"
grep -q "pull $LOCKED" "$EVENTS" && pg_check_fail "the runtime got the pull" ||
    pg_check_ok "the runtime never got the pull"
wait "$LOCK_PID" 2>/dev/null
INTENT_LOCKED="$STATE/pulling/sha256-$(printf %s "$LOCKED" | sha256sum | cut -d' ' -f1)"
for _ in $(seq 1 300); do [[ -e $INTENT_LOCKED ]] || break; sleep 0.1; done
[[ ! -e $INTENT_LOCKED ]] && pg_check_ok "once the lock is free the late intent is released again" ||
    pg_check_fail "the refused pull's intent stayed"
DESC="the kubelet's retry"
expect_ok_pull v1 "$LOCKED" team-a "$(annotation team-a regcred uid-a "$HASH_A" registry.example.com/team-a/locked)" alice s3cret ""
pg_expect_ok "recorded" show "$REF"
pg_expect_contains "with team-a's secret" "$PG_OUT" "\"name\":\"regcred\""

pg_section "proxy killed during a pull"
SLOW=registry.example.com/team-a/slow:1.0
drive pull "$PROXY_SOCK" v1 "$SLOW" team-a "$ANN_A" alice s3cret "" >"$T/slow.out" 2>&1 &
PULL_PID=$!
for _ in $(seq 1 300); do grep -q "pull $SLOW" "$EVENTS" && break; sleep 0.1; done
kill -KILL "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null; PROXY_PID=""
wait "$PULL_PID"
pg_expect_contains "the kubelet sees the call fail" "$(cat "$T/slow.out")" "UNAVAILABLE"
[[ -f "$STATE/pulling/sha256-$(printf %s "$SLOW" | sha256sum | cut -d' ' -f1)" ]] &&
    pg_check_ok "the intent stays (the image is verified, not preloaded)" || pg_check_fail "intent lost"
if ls "$STATE"/*/*.tmp >/dev/null 2>&1; then pg_check_fail "temporary files left: $(ls "$STATE"/*/*.tmp)"
else pg_check_ok "nothing half-written"; fi

if grep -qE 's3cret|hunter2|YWxpY2U6czNjcmV0' "$T/proxy.log"; then pg_check_fail "the log shows credentials"
else pg_check_ok "no credentials in the log"; fi
grep -q 'msg="pull" .*outcome="recorded"' "$T/proxy.log" && pg_check_ok "pulls logged" || pg_check_fail "no pull log"
if ((PG_FAILURES > 0)); then sed 's/^/  proxy: /' "$T/proxy.log" | tail -30 >&2; fi
pg_summary
