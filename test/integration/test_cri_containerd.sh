#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgate-cri end to end, with the real things (docs/kubelet-setup.md):
#   Python CRI client (the kubelet's stand-in) -> pullgate-cri -> containerd 1.6 (Debian, own
#   root/state/socket in a temp dir) -> runc -> pullgate-hook (base_runtime_spec,
#   pod_annotations = ["pullgate.dev/credentials"]); a private registry with htpasswd auth
#   (two users) and a second registry without auth; records in a temp stateDir; D-Bus on a
#   private dbus-daemon, watched by `pullgatectl monitor --json`. Policy AlwaysVerify: every
#   container below runs only because of a record pullgate-cri wrote; nothing is recorded by hand.
# Cases: wrong password -> runtime's error, no record, PullFailed; team-a's pull -> its secret
# with the kubelet hash, ImagePulled; team-a runs, team-b is denied ("pullgate: denied" in
# StartContainer's gRPC error); team-b's own pull -> both secrets kept; a pull without auth
# from the open registry -> nodePodsAccessible, any namespace runs it; transparency (listing
# and status calls equal to the runtime's, unknown method, deadline); resilience (containerd
# killed -> UNAVAILABLE, restarted -> works again with the same proxy; proxy SIGKILLed during
# a pull -> the intent stays, nothing half-written, a restarted proxy records again).
# Env (from ctest): PULLGATE_HOOK, PULLGATECTL, PG_BUILD_DIR; PULLGATE_CRI overrides the binary.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/registry.sh
source "$HERE/lib/registry.sh"
# shellcheck source=lib/podman.sh
source "$HERE/lib/podman.sh" # pg_write_config, pg_cred_hash, pg_image_name
# shellcheck source=lib/cri_node.sh
source "$HERE/lib/cri_node.sh"

T0=$SECONDS
: "${PULLGATE_CRI:=${PG_BUILD_DIR:-}/cri/pullgate-cri}"
if [[ ! -x "$PULLGATE_CRI" ]]; then
    cache="${PG_BUILD_DIR:-}/CMakeCache.txt"
    if [[ -f "$cache" ]] && grep -q '^PG_BUILD_CRI:BOOL=OFF' "$cache"; then
        pg_skip "pullgate-cri not built (PG_BUILD_CRI=OFF)"
    fi
    if [[ ! -f "$PG_SOURCE_DIR/cri/CMakeLists.txt" ]]; then
        pg_skip "pullgate-cri not in this tree (no cri/CMakeLists.txt)"
    fi
    pg_fail "pullgate-cri should have been built but is missing: '$PULLGATE_CRI'"
fi
pg_node_require
pg_require_pullgate

# ---------------------------------------------------------------- helpers
sha256_hex() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
intent_file() { printf '%s/pulling/sha256-%s' "$STATE" "$(sha256_hex "$1")"; }
pulled_file() { printf '%s/pulled/sha256-%s' "$STATE" "$(sha256_hex "$1")"; }
ctl() { "$PULLGATECTL" --config "$CFG" "$@"; }

# signal_seen SIGNAL KEY=VALUE...: the monitor printed SIGNAL with these arguments.
signal_seen() {
    local sig="$1"
    shift
    for _ in $(seq 1 200); do
        "$PG_PY" - "$MON_LOG" "$sig" "$@" <<'EOF' && return 0
import json, sys
log, sig, want = sys.argv[1], sys.argv[2], dict(a.split("=", 1) for a in sys.argv[3:])
for line in open(log):
    try:
        ev = json.loads(line)
    except ValueError:
        continue
    if ev.get("signal") == sig and all(ev.get(k) == v for k, v in want.items()):
        sys.exit(0)
sys.exit(1)
EOF
        sleep 0.1
    done
    return 1
}
expect_signal() { # DESC SIGNAL KEY=VALUE...
    local desc="$1"
    shift
    if signal_seen "$@"; then pg_check_ok "$desc"; else
        pg_check_fail "$desc: no $* in the monitor's output"
        sed 's/^/       | /' "$MON_LOG" >&2
    fi
}
less_than() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
no_tmp_files() { [[ -z "$(find "$STATE" -name '*.tmp*' 2>/dev/null)" ]]; }

# ------------------------------------------------------------ registries
pg_section "registries: one with htpasswd auth (two users), one without auth"
PASS_A="tenant-a-pw-$RANDOM$RANDOM"
PASS_B="tenant-b-pw-$RANDOM$RANDOM"
PG_REG_EXTRA_USERS=("tenant-b:$PASS_B")
pg_registry_start tenant-a "$PASS_A"
LAYOUT="$(pg_mktemp_dir oci-layout)/layout"
pg_image_build "$LAYOUT" app "app-marker"
pg_image_build "$LAYOUT" slow "slow-marker"
pg_image_build "$LAYOUT" tool "tool-marker"
pg_image_push "$LAYOUT" app team-a/app:1.0
pg_image_push "$LAYOUT" slow team-a/slow:1.0
IMG_APP="$PG_REG_HOST/team-a/app:1.0"
IMG_SLOW="$PG_REG_HOST/team-a/slow:1.0"
pg_registry_start_open
pg_image_push_open "$LAYOUT" tool public/tool:1.0
IMG_TOOL="$PG_OPEN_REG_HOST/public/tool:1.0"
NAME_APP="$(pg_image_name "$IMG_APP")"
NAME_TOOL="$(pg_image_name "$IMG_TOOL")"

# ------------------------------------------------------------------ node
pg_section "node: dbus, containerd 1.6 + hook, pullgate-cri, monitor"
pg_node_dbus_start
STATE="$(pg_mktemp_dir state)"
chmod 0700 "$STATE"
CFG="$(pg_mktemp_dir cfg)/pullgate.json"
pg_write_config "$CFG" "$STATE" AlwaysVerify "$PG_BUS_ADDR"
ctl check-config >/dev/null || pg_fail "pullgatectl check-config rejects $CFG"
pg_node_containerd_setup "$CFG" "$PG_REG_HOST" "$PG_OPEN_REG_HOST"
pg_node_containerd_start || pg_skip "containerd's CRI plugin did not come up on this machine (log above)"
pg_log "containerd up (pid $PG_CD_PID): $PG_CD_VERSION"
pg_node_proxy_start || pg_fail "pullgate-cri did not serve its socket"
pg_log "pullgate-cri up (pid $PG_PROXY_PID) on $PG_PROXY_SOCK"
MODE="$(stat -c %a "$PG_PROXY_SOCK")"
[[ "$MODE" == 600 ]] && pg_check_ok "proxy socket is 0600" || pg_check_fail "proxy socket mode $MODE"
MON_LOG="$PG_CD_DIR/monitor.jsonl"
pg_node_monitor_start "$MON_LOG"

UID_A="$(cat /proc/sys/kernel/random/uuid)"
UID_B="$(cat /proc/sys/kernel/random/uuid)"
HASH_A="$(pg_cred_hash tenant-a "$PASS_A")" || pg_fail "pullgatectl hash"
HASH_B="$(pg_cred_hash tenant-b "$PASS_B")" || pg_fail "pullgatectl hash"
# An oracle independent of libpullgate: for ASCII credentials without characters Go escapes,
# Go's json.Marshal of {username,password} is Python's compact json.dumps (same field order).
HASH_A_ORACLE="$("$PG_PY" -c 'import hashlib, json, sys
print(hashlib.sha256(json.dumps({"username": sys.argv[1], "password": sys.argv[2]},
                                separators=(",", ":")).encode()).hexdigest())' tenant-a "$PASS_A")"
[[ "$HASH_A" == "$HASH_A_ORACLE" ]] || pg_fail "pullgatectl hash $HASH_A != kubelet hash $HASH_A_ORACLE"
# The annotations a webhook would write (pullgatectl annotate builds the same value).
ANN_A="$(ctl annotate --namespace team-a --image "$IMG_APP" --secret "team-a/regcred/$UID_A:$HASH_A")" ||
    pg_fail "pullgatectl annotate (team-a)"
ANN_B="$(ctl annotate --namespace team-b --image "$IMG_APP" --secret "team-b/regcred/$UID_B:$HASH_B")" ||
    pg_fail "pullgatectl annotate (team-b)"

# ---------------------------------------------------------- wrong password
pg_section "team-a pulls with a wrong password"
pg_node_run_pod team-a "$ANN_A" || { pg_node_show_log; pg_fail "RunPodSandbox (team-a)"; }
POD_A="$POD" POD_A_CFG="$POD_CFG" POD_A_LOGDIR="$POD_LOGDIR"
export PG_CRI_PASS="wrong-$RANDOM"
OUT_PROXY="$(cri pull --image "$IMG_APP" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_A_CFG" 2>&1)" &&
    pg_check_fail "a pull with a wrong password succeeded through the proxy" ||
    pg_check_ok "a pull with a wrong password fails through the proxy"
OUT_DIRECT="$(cri_direct pull --image "$IMG_APP" --username tenant-a --password-env PG_CRI_PASS 2>&1)"
unset PG_CRI_PASS
code_of() { sed -n 's/^rpc error: code = \([A-Z_]*\) .*/\1/p' <<<"$1" | head -n1; }
[[ -n "$(code_of "$OUT_PROXY")" && "$(code_of "$OUT_PROXY")" == "$(code_of "$OUT_DIRECT")" ]] &&
    pg_check_ok "the same status code as containerd's own answer ($(code_of "$OUT_DIRECT"))" ||
    pg_check_fail "status differs: proxy '$OUT_PROXY' direct '$OUT_DIRECT'"
pg_expect_contains "the runtime's error reaches the client" "$OUT_PROXY" "401 Unauthorized"
[[ "$OUT_PROXY" == "$OUT_DIRECT" ]] && pg_check_ok "the same status message as containerd's own answer" ||
    pg_check_fail "messages differ: proxy '$OUT_PROXY' direct '$OUT_DIRECT'"
[[ -z "$(ls -A "$STATE/pulled" 2>/dev/null)" ]] && pg_check_ok "no pulled record after the failed pull" ||
    pg_check_fail "pulled/ is not empty after a failed pull: $(ls "$STATE/pulled")"
expect_signal "PullFailed signal" PullFailed "image=$IMG_APP"

# ---------------------------------------------------------- team-a's pull
pg_section "team-a pulls with its secret"
export PG_CRI_PASS="$PASS_A"
REF_APP="$(cri pull --image "$IMG_APP" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_A_CFG")" ||
    { pg_node_show_log; pg_fail "PullImage with team-a's credentials failed"; }
unset PG_CRI_PASS
pg_log "PullImage -> image_ref $REF_APP"
DIRECT_ID="$(cri_direct image-status --image "$IMG_APP" | "$PG_PY" -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
[[ "$REF_APP" == "$DIRECT_ID" ]] && pg_check_ok "image_ref is containerd's image ID" ||
    pg_check_fail "image_ref $REF_APP, containerd's ImageStatus id $DIRECT_ID"
[[ -f "$(pulled_file "$REF_APP")" ]] && pg_check_ok "pulled record on disk when PullImage answered" ||
    pg_check_fail "no pulled record $(pulled_file "$REF_APP")"
GOT="$(secrets_of "$REF_APP" "$NAME_APP")"
[[ "$GOT" == "team-a/regcred/$UID_A:$HASH_A" ]] &&
    pg_check_ok "the record holds team-a's secret with the kubelet hash ($HASH_A)" ||
    pg_check_fail "recorded secrets '$GOT', expected team-a/regcred/$UID_A:$HASH_A"
expect_signal "PullIntent signal" PullIntent "image=$IMG_APP"
expect_signal "ImagePulled signal" ImagePulled "image=$IMG_APP" "imageRef=$REF_APP"
if grep -q "$HASH_A\|$PASS_A" "$MON_LOG" "$PG_CD_DIR/pullgate-cri.log"; then
    pg_check_fail "a credential hash or password appears on D-Bus or in the proxy's log"
else
    pg_check_ok "no password or hash on D-Bus or in the proxy's log"
fi

pg_section "team-a's container runs; team-b's are denied"
POD="$POD_A" POD_CFG="$POD_A_CFG" POD_LOGDIR="$POD_A_LOGDIR"
expect_runs "team-a with its annotation" "$IMG_APP"
CID_A="$CID"
# containerd names no image ID; the hook names the one pullgate-cri indexed.
expect_signal "ContainerAllowed signal" ContainerAllowed "namespace=team-a" "imageRef=$REF_APP"
pg_node_run_pod team-b "" || pg_fail "RunPodSandbox (team-b)"
expect_denied "team-b without credentials" "$IMG_APP"
expect_signal "ContainerDenied signal" ContainerDenied "namespace=team-b" "imageRef=$REF_APP"
pg_node_run_pod team-b "$ANN_A" || pg_fail "RunPodSandbox (team-b, copied annotation)"
expect_denied "team-b presenting team-a's annotation" "$IMG_APP"
# The hook in containerd's base spec is the thin client: pullgate-cri decided (its log says so).
# The server logs a decision after it replied: poll the log with a deadline.
for ((i = 0; i < 300; i++)); do
    N_HOOK="$(grep -c 'msg="hook decision" container=.* allowed="false"' "$PG_CD_DIR/pullgate-cri.log" || true)"
    N_ALLOW="$(grep -c 'msg="hook decision" container=.* allowed="true"' "$PG_CD_DIR/pullgate-cri.log" || true)"
    ((N_HOOK >= 2 && N_ALLOW >= 1)) && break
    sleep 0.1
done
((N_HOOK >= 2 && N_ALLOW >= 1)) &&
    pg_check_ok "pullgate-cri's hook server decided ($N_ALLOW allowed, $N_HOOK denied)" ||
    pg_check_fail "pullgate-cri's hook server decided $N_ALLOW allowed / $N_HOOK denied (expected the resident path)"

# ------------------------------------------------- a second tenant's pull
pg_section "team-b pulls the same image with its own credentials"
pg_node_run_pod team-b "$ANN_B" || pg_fail "RunPodSandbox (team-b)"
POD_B="$POD" POD_B_CFG="$POD_CFG" POD_B_LOGDIR="$POD_LOGDIR"
export PG_CRI_PASS="$PASS_B"
REF_B="$(cri pull --image "$IMG_APP" --username tenant-b --password-env PG_CRI_PASS --pod-config "$POD_B_CFG")" ||
    pg_fail "PullImage with team-b's credentials failed"
unset PG_CRI_PASS
[[ "$REF_B" == "$REF_APP" ]] || pg_check_fail "the same image answered another ref: $REF_B"
GOT="$(secrets_of "$REF_APP" "$NAME_APP")"
WANT="$(printf '%s\n' "team-a/regcred/$UID_A:$HASH_A" "team-b/regcred/$UID_B:$HASH_B" | sort | xargs)"
[[ "$GOT" == "$WANT" ]] && pg_check_ok "both tenants' secrets are kept" ||
    pg_check_fail "recorded secrets '$GOT', expected '$WANT'"
POD="$POD_B" POD_CFG="$POD_B_CFG" POD_LOGDIR="$POD_B_LOGDIR"
expect_runs "team-b with its own annotation, after its own pull" "$IMG_APP"
pg_node_run_pod team-c "" || pg_fail "RunPodSandbox (team-c)"
expect_denied "team-c, which never pulled" "$IMG_APP"

# the `auth` field (base64 user:pass) is the same credential as username/password
export PG_CRI_AUTH
PG_CRI_AUTH="$(printf '%s' "tenant-a:$PASS_A" | base64 -w0)"
if cri pull --image "$IMG_APP" --auth-env PG_CRI_AUTH --pod-config "$POD_A_CFG" >/dev/null; then
    GOT="$(secrets_of "$REF_APP" "$NAME_APP")"
    [[ "$GOT" == "$WANT" ]] && pg_check_ok "a pull with AuthConfig.auth maps to team-a's same secret" ||
        pg_check_fail "after an auth-field pull: '$GOT'"
else
    pg_check_fail "PullImage with AuthConfig.auth failed"
fi
unset PG_CRI_AUTH

# ------------------------------------------------------- no credentials
pg_section "a pull without auth from a registry without auth"
REF_TOOL="$(cri pull --image "$IMG_TOOL" --pod-config "$POD_A_CFG")" || pg_fail "anonymous PullImage failed"
M="$(mapping_of "$REF_TOOL" "$NAME_TOOL")"
[[ "$M" == *'"nodePodsAccessible": true'* && "$M" != *kubernetesSecrets\":\ \[\{* ]] &&
    pg_check_ok "recorded nodePodsAccessible: $M" || pg_check_fail "mapping for $NAME_TOOL: $M"
expect_signal "ImagePulled signal (no credentials)" ImagePulled "image=$IMG_TOOL" "imageRef=$REF_TOOL"
POD="$POD_B" POD_CFG="$POD_B_CFG" POD_LOGDIR="$POD_B_LOGDIR"
expect_runs "team-b runs the node-accessible image" "$IMG_TOOL"
pg_node_run_pod team-c "" || pg_fail "RunPodSandbox (team-c)"
expect_runs "team-c (no annotation) runs the node-accessible image" "$IMG_TOOL"

# ---------------------------------------------------------- transparency
pg_section "transparency: the proxy's answers equal containerd's"
if OUT="$("$PG_PY" "$HERE/cri/cri_transparency.py" --direct "$PG_CD_SOCK" --proxy "$PG_PROXY_SOCK" \
    --gen-dir "$PG_CD_DIR/gen" --container "$CID_A" --image "$IMG_APP" 2>&1)"; then
    pg_check_ok "ListImages, ListContainers, ListPodSandbox, ImageStatus, ContainerStatus, Version, unknown method"
else
    pg_check_fail "transparency"
fi
printf '%s\n' "$OUT" | sed 's/^/       /' >&2
D="$(cri_direct --timeout 5 call --method /runtime.v1.RuntimeService/NoSuchMethod)"
P="$(cri --timeout 5 call --method /runtime.v1.RuntimeService/NoSuchMethod)"
[[ "${D%% *}" == "${P%% *}" ]] && pg_check_ok "unknown method: ${P%% *} like the runtime" ||
    pg_check_fail "unknown method: direct ${D%% *}, proxy ${P%% *}"

pg_section "a deadline is honoured (the registry is paused, the pull cannot finish)"
kill -STOP "$PG_REG_PID"
export PG_CRI_PASS="$PASS_A"
T1=$(date +%s.%N)
OUT="$(cri --timeout 3 pull --image "$IMG_SLOW" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_A_CFG" 2>&1)"
T2=$(date +%s.%N)
ELAPSED="$(awk -v a="$T1" -v b="$T2" 'BEGIN { printf "%.2f", b - a }')"
[[ "$OUT" == *DEADLINE_EXCEEDED* ]] && less_than "$ELAPSED" 6 &&
    pg_check_ok "3 s deadline: DEADLINE_EXCEEDED after ${ELAPSED} s" ||
    pg_check_fail "3 s deadline: '$OUT' after ${ELAPSED} s"

# ------------------------------------------------------------ resilience
pg_section "resilience: pullgate-cri SIGKILLed during a pull"
cri --timeout 60 pull --image "$IMG_SLOW" --username tenant-a --password-env PG_CRI_PASS \
    --pod-config "$POD_A_CFG" >"$PG_CD_DIR/killed-pull.out" 2>&1 &
PULL_PID=$!
if pg_wait_file "$(intent_file "$IMG_SLOW")" 10; then
    pg_check_ok "the intent is on disk while the pull runs"
else
    pg_check_fail "no intent $(intent_file "$IMG_SLOW") during the pull"
fi
sleep 0.5
pg_node_proxy_kill KILL
wait "$PULL_PID"
pg_expect_contains "the client's pull fails when the proxy dies" "$(cat "$PG_CD_DIR/killed-pull.out")" "UNAVAILABLE"
[[ -f "$(intent_file "$IMG_SLOW")" ]] && pg_check_ok "the intent remains after the crash (the image stays verified)" ||
    pg_check_fail "the intent is gone after the crash"
no_tmp_files && pg_check_ok "no temporary file left in the state directory" ||
    pg_check_fail "temporary files left: $(find "$STATE" -name '*.tmp*')"
if LIST="$(ctl list --json 2>&1)" && N="$("$PG_PY" -c 'import json,sys; print(len(json.load(sys.stdin)))' <<<"$LIST")"; then
    [[ "$N" == 2 ]] && pg_check_ok "pullgatectl list: the 2 records, readable" ||
        pg_check_fail "pullgatectl list shows $N records"
else
    pg_check_fail "pullgatectl list fails after the crash: $LIST"
fi
kill -CONT "$PG_REG_PID"
pg_node_proxy_start || pg_fail "pullgate-cri did not restart"
# team-a's annotation has no entry for this image: the proxy cannot name the secret, so it
# records the hash under the pod's namespace (fail closed), never nodePodsAccessible, and
# binds the pull to the pod that made it.
POD_A_UID="$("$PG_PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["uid"])' "$POD_A_CFG")"
if REF_SLOW="$(cri pull --image "$IMG_SLOW" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_A_CFG")"; then
    M="$(mapping_of "$REF_SLOW" "$(pg_image_name "$IMG_SLOW")")"
    GOT="$(secrets_of "$REF_SLOW" "$(pg_image_name "$IMG_SLOW")")"
    if [[ "$GOT" == "team-a/pullgate:pod-$POD_A_UID/: team-a/pullgate:unverified-"*":$HASH_A" &&
        "$GOT" != *"team-a/regcred/"* && "$M" != *nodePodsAccessible* ]]; then
        pg_check_ok "after the restart the pull is recorded; no annotation entry -> team-a + hash only ($GOT)"
    else
        pg_check_fail "after the restart: recorded $M"
    fi
else
    pg_check_fail "PullImage through the restarted proxy failed"
fi
unset PG_CRI_PASS

pg_section "resilience: containerd killed and restarted under the same proxy"
PROXY_PID_BEFORE="$PG_PROXY_PID"
pg_node_containerd_kill
OUT="$(cri --timeout 5 call --method /runtime.v1.RuntimeService/Version)"
CODE="${OUT%% *}" SECS="${OUT##* }"
[[ "$CODE" == UNAVAILABLE ]] && less_than "$SECS" 5 &&
    pg_check_ok "runtime down: UNAVAILABLE after $SECS s (deadline 5 s)" ||
    pg_check_fail "runtime down: '$OUT' (expected UNAVAILABLE within 5 s)"
pg_node_containerd_start || pg_fail "containerd did not restart"
T1=$SECONDS
OK=0
for _ in $(seq 1 60); do
    if cri --timeout 5 version >/dev/null 2>&1; then OK=1; break; fi
    sleep 0.5
done
if ((OK)) && [[ "$PG_PROXY_PID" == "$PROXY_PID_BEFORE" ]] && kill -0 "$PG_PROXY_PID"; then
    pg_check_ok "runtime back: calls through the same proxy work again ($((SECONDS - T1)) s after the restart)"
else
    pg_check_fail "runtime back, but the proxy does not answer"
fi
pg_expect_ok "ListContainers through the proxy after the restart" \
    "$PG_PY" "$HERE/cri/cri_transparency.py" --direct "$PG_CD_SOCK" --proxy "$PG_PROXY_SOCK" \
    --gen-dir "$PG_CD_DIR/gen"

pg_section "cleanup"
for p in "${PG_NODE_PODS[@]}"; do
    cri stop-pod --id "$p" >/dev/null 2>&1 || pg_check_fail "StopPodSandbox $p"
    cri remove-pod --id "$p" >/dev/null 2>&1 || pg_check_fail "RemovePodSandbox $p"
done
PG_NODE_PODS=()
# SIGTERM drains and exits 0; a sanitizer build (PULLGATE_CRI from an ASan build) reports here.
kill -TERM "$PG_PROXY_PID"
wait "$PG_PROXY_PID"
RC=$?
PG_PROXY_PID=""
[[ "$RC" == 0 ]] && pg_check_ok "pullgate-cri exits 0 on SIGTERM" || pg_check_fail "pullgate-cri exit status $RC on SIGTERM"
if grep -q 'Sanitizer' "$PG_CD_DIR/pullgate-cri.log"; then
    pg_check_fail "sanitizer report in pullgate-cri's log"
    grep -A20 'Sanitizer' "$PG_CD_DIR/pullgate-cri.log" | head -n 40 | sed 's/^/       | /' >&2
fi
pg_log "elapsed: $((SECONDS - T0)) s"
pg_summary
