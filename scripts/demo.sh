#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgate demo: the real node flow on one machine, narrated. No pull is recorded by hand.
#
#   sudo bash scripts/demo.sh
#
#   Python CRI client (the kubelet's stand-in) ──▶ pullgate-cri ──▶ containerd 1.6 ──▶ runc ──▶ pullgate-hook
#
# 1. installs what it needs (scripts/install-deps.sh) and builds pullgate into ./build-demo
# 2. starts a private D-Bus bus and `pullgatectl monitor` on it
# 3. starts a private registry with authentication on 127.0.0.1 and pushes a private image
# 4. starts containerd (own root, state and socket in a temp dir) with pullgate-hook in its
#    runc handler's base_runtime_spec, and pullgate-cri in front of it
# 5. tenant A's pod (keyed credentials annotation made by `pullgatectl annotate`, as the
#    webhook would) pulls the image with A's secret, one with an email, through pullgate-cri,
#    which records the pull for that secret (found by the hash without the email)
# 6. tenant A's container starts; tenant B's containers are refused by the hook, with the
#    reason in StartContainer's gRPC error
# 7. a secret added after admission: recorded for its pod's namespace only
# 8. never forwarded unrecorded: with the record store's lock held the pull is refused
# 9. prints the D-Bus pull and decision events the monitor saw
#
# Everything lives in a temp dir removed at exit, with every process the demo started.
# Exit status: 0 when every expected outcome happened, 1 otherwise (2: setup failed).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-demo"
T_START=$SECONDS

if [[ -t 1 ]]; then
    B=$'\e[1m' G=$'\e[32m' R=$'\e[31m' Y=$'\e[33m' C=$'\e[36m' N=$'\e[0m'
else
    B="" G="" R="" Y="" C="" N=""
fi
STEP=0
header() {
    STEP=$((STEP + 1))
    printf '\n%s== %d. %s ==%s\n' "$B$C" "$STEP" "$*" "$N"
}
say() { printf '   %s\n' "$*"; }
run_shown() { printf '   %s$ %s%s\n' "$Y" "$*" "$N"; }
indent() { sed 's/^/     | /'; }
declare -a OUTCOMES=()
FAILED=0
outcome_ok() { OUTCOMES+=("${G}PASS${N}  $*"); printf '   %s✔ %s%s\n' "$G" "$*" "$N"; }
outcome_bad() { OUTCOMES+=("${R}FAIL${N}  $*"); FAILED=$((FAILED + 1)); printf '   %s✘ %s%s\n' "$R" "$*" "$N"; }
die() { printf '%sdemo: %s%s\n' "$R" "$*" "$N" >&2; exit 2; }

if [[ "$(id -u)" != 0 ]]; then
    die "run as root (it installs packages and runs containers): sudo bash scripts/demo.sh"
fi

header "Dependencies"
bash "$ROOT/scripts/install-deps.sh" 2>&1 | indent
[[ ${PIPESTATUS[0]} == 0 ]] || die "scripts/install-deps.sh failed"

header "Build pullgate (cmake, ./build-demo)"
{
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPG_BUILD_BENCH=OFF \
        -DPG_BUILD_TESTS=OFF -DPG_BUILD_CRI=ON >"$BUILD.cmake.log" 2>&1 &&
        cmake --build "$BUILD" -j"$(nproc)" --target pullgate-hook pullgate-hook-local pullgatectl pullgate-cri \
            >>"$BUILD.cmake.log" 2>&1
} || { tail -n 30 "$BUILD.cmake.log" | indent; die "build failed (full log: $BUILD.cmake.log)"; }
rm -f "$BUILD.cmake.log"
T_BUILT=$SECONDS
PULLGATE_HOOK="$BUILD/hooks/pullgate-hook"
PULLGATECTL="$BUILD/tools/pullgatectl"
PULLGATE_CRI="$BUILD/cri/pullgate-cri"
for b in "$PULLGATE_HOOK" "$BUILD/hooks/pullgate-hook-local" "$PULLGATECTL" "$PULLGATE_CRI"; do
    [[ -x "$b" ]] || die "built binary not found: $b"
done
export PULLGATE_HOOK PULLGATECTL PULLGATE_CRI
say "hook:         $PULLGATE_HOOK"
say "pullgatectl:  $PULLGATECTL"
say "pullgate-cri: $PULLGATE_CRI"

# Helpers shared with the tests: temp dir + cleanup stack, registry, containerd node.
# shellcheck source=../test/integration/lib/registry.sh
source "$ROOT/test/integration/lib/registry.sh"
# shellcheck source=../test/integration/lib/podman.sh
source "$ROOT/test/integration/lib/podman.sh" # pg_write_config, pg_cred_hash
# shellcheck source=../test/integration/lib/cri_node.sh
source "$ROOT/test/integration/lib/cri_node.sh"
pg_skip() { die "cannot run here: $*"; } # the demo never "skips"
pg_log() { printf '   %s\n' "$*"; }
pg_node_require

header "Private D-Bus bus + pullgatectl monitor"
pg_node_dbus_start
say "bus: $PG_BUS_ADDR (dbus-daemon pid $PG_BUS_PID)"
STATE="$PG_TMPDIR/state"
mkdir -m 0700 "$STATE"
CFG="$PG_TMPDIR/pullgate.json"
KEY="$PG_TMPDIR/hmac.key"
head -c 48 /dev/urandom >"$KEY" && chmod 0600 "$KEY"
METRICS="127.0.0.1:$(pg_free_port)" # pullgate-cri's GET /metrics (docs/metrics.md)
pg_write_config "$CFG" "$STATE" NeverVerifyPreloadedImages "$PG_BUS_ADDR" \
    "\"hmacKeyFile\": \"$KEY\", \"criMetricsListen\": \"$METRICS\""
chmod 0600 "$CFG"
say "pullgate config ($CFG), read by the hook, pullgate-cri and pullgatectl alike:"
indent <"$CFG"
CHECK="$("$PULLGATECTL" --config "$CFG" check-config 2>&1)" ||
    { printf '%s\n' "$CHECK" | indent; die "pullgatectl check-config rejected the demo config"; }
MON_LOG="$PG_TMPDIR/monitor.log"
run_shown "pullgatectl --config $CFG monitor &"
"$PULLGATECTL" --config "$CFG" monitor >"$MON_LOG" 2>&1 &
MON_PID=$!
pg_on_exit 'pg_kill_wait "$MON_PID" 3'
sleep 0.5
kill -0 "$MON_PID" 2>/dev/null || { indent <"$MON_LOG"; die "pullgatectl monitor did not start"; }

header "Private registry with authentication"
PASS_A="tenant-a-$(head -c 9 /dev/urandom | base64 | tr -d '/+=')"
PASS_C="tenant-c-$(head -c 9 /dev/urandom | base64 | tr -d '/+=')"
PG_REG_EXTRA_USERS=("tenant-c:$PASS_C")
pg_registry_start tenant-a "$PASS_A"
say "docker-registry (distribution) on http://$PG_REG_HOST, htpasswd (bcrypt) user 'tenant-a'"
say "anonymous GET /v2/ -> HTTP $(curl -s -o /dev/null -w '%{http_code}' "http://$PG_REG_HOST/v2/")"
PG_LAYOUT="$PG_TMPDIR/oci-layout"
pg_image_build "$PG_LAYOUT" app "hello from the private image"
pg_image_push "$PG_LAYOUT" app team-a/app:1.0
IMAGE="$PG_REG_HOST/team-a/app:1.0"
say "private image: $IMAGE (busybox, built locally with umoci, pushed with skopeo)"

header "The node: containerd + pullgate-hook, pullgate-cri in front"
pg_node_containerd_setup "$CFG" "$PG_REG_HOST"
pg_node_containerd_start || die "containerd's CRI plugin did not come up (log above)"
say "containerd: $PG_CD_VERSION, socket $PG_CD_SOCK"
say "its runc handler runs the hook (base_runtime_spec) and passes the pod's credentials annotation:"
grep -E 'base_runtime_spec|pod_annotations' "$PG_CD_DIR/config.toml" | sed 's/^ *//' | indent
"$PG_PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["hooks"]))' \
    "$PG_CD_DIR/base-spec.json" | indent
run_shown "pullgate-cri --config $CFG --listen unix://<tmp>/cri.sock --runtime-endpoint unix://$PG_CD_SOCK --hook-socket $PG_HOOK_SOCK &"
pg_node_proxy_start || die "pullgate-cri did not serve its socket"
say "pullgate-cri (pid $PG_PROXY_PID) serves CRI on $PG_PROXY_SOCK; the kubelet stand-in talks only to it"
say "and decides for the hook on $PG_HOOK_SOCK (the hook's --daemon-socket): the hook execs no libcrypto"
run_shown "cri_client.py --socket <pullgate-cri> version"
cri version | indent

# keyed_annotation NS NAME USER PASS [EMAIL]: the value the webhook writes (hashes sealed, MAC).
keyed_annotation() {
    local h a
    h="$(printf %s "$4" | "$PULLGATECTL" hash --username "$3" --password-stdin ${5:+--email "$5"})" || return 1
    a="$(printf %s "$4" | "$PULLGATECTL" hash --username "$3" --password-stdin)" || return 1
    "$PULLGATECTL" --config "$CFG" annotate --namespace "$1" --image "$IMAGE" \
        --secret "$1/$2/$(cat /proc/sys/kernel/random/uuid):$h:$a" --hmac-key-file "$KEY"
}

header "Tenant A's pod pulls the image with its secret (recorded by pullgate-cri)"
say "tenant A's secret carries an email (kubectl create secret docker-registry --docker-email=...):"
say "the kubelet's credential hash covers it, the CRI's AuthConfig does not carry it."
run_shown "pullgatectl annotate --namespace team-a --image $IMAGE --secret team-a/regcred/<uid>:<hash>:<hash without email> --hmac-key-file $KEY"
ANN_A="$(keyed_annotation team-a regcred tenant-a "$PASS_A" a@team-a.example)" || die "pullgatectl annotate"
HASH_A="$(printf %s "$PASS_A" | "$PULLGATECTL" hash --username tenant-a --password-stdin --email a@team-a.example)"
say "the annotation the webhook writes on tenant A's pods (pullgate.dev/credentials; the hashes are"
say "sealed under the node key, nothing in it can be checked against a guessed password):"
printf '%s\n' "$ANN_A" | fold -w 110 | indent
pg_node_run_pod team-a "$ANN_A" || { pg_node_show_log; die "RunPodSandbox (team-a)"; }
POD_A="$POD" POD_A_CFG="$POD_CFG" POD_A_LOGDIR="$POD_LOGDIR"
say "RunPodSandbox team-a -> ${POD_A:0:12}"
run_shown "cri_client.py pull --image $IMAGE   # anonymous"
if OUT="$(cri pull --image "$IMAGE" --pod-config "$POD_A_CFG" 2>&1)"; then
    outcome_bad "anonymous pull should have been refused by the registry"
else
    say "refused by the registry: $(printf '%s' "$OUT" | grep -o '401 Unauthorized' | head -n1)"
fi
run_shown "cri_client.py pull --image $IMAGE --username tenant-a --password *** --pod-config <team-a pod>"
export PG_CRI_PASS="$PASS_A"
if REF="$(cri pull --image "$IMAGE" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_A_CFG" 2>"$PG_TMPDIR/pull.err")"; then
    say "PullImage -> $REF"
else
    indent <"$PG_TMPDIR/pull.err"
    die "tenant A's pull failed"
fi
unset PG_CRI_PASS
run_shown "pullgatectl show --image-ref $REF"
if SHOW="$("$PULLGATECTL" --config "$CFG" show --image-ref "$REF" --json 2>&1)"; then
    "$PG_PY" -c 'import json, sys
rec = json.load(sys.stdin); rec.pop("dir", None); print(json.dumps(rec, indent=2))' <<<"$SHOW" | indent
    if [[ "$SHOW" == *"\"namespace\": \"team-a\""* && "$SHOW" == *"$HASH_A"* && "$SHOW" == *"\"name\": \"regcred\""* &&
        "$SHOW" != *nodePodsAccessible* ]]; then
        outcome_ok "pullgate-cri recorded the pull for tenant A's secret (the kubelet's hash, with the email), not node-wide"
    else
        outcome_bad "the record does not name tenant A's secret"
    fi
else
    printf '%s\n' "$SHOW" | indent
    outcome_bad "no pulled record for $REF"
fi

# start_container DESC -> CID; StartContainer's output in $OUT; its status returned
start_container() {
    local name="app-$RANDOM"
    CTR_LOG="$POD_LOGDIR/$name.log"
    CID="$(cri create --pod "$POD" --pod-config "$POD_CFG" --name "$name" --image "$IMAGE" \
        --log-path "$name.log" -- /bin/sh -c "$1")" || { OUT="CreateContainer failed"; return 2; }
    OUT="$(cri start --id "$CID" 2>&1)"
}

header "Tenant A starts a container from the image"
POD="$POD_A" POD_CFG="$POD_A_CFG" POD_LOGDIR="$POD_A_LOGDIR"
run_shown "CreateContainer + StartContainer (pod team-a, image $IMAGE)"
if start_container 'cat /etc/pg-marker' && [[ "$(cri wait --id "$CID" --wait-timeout 30)" == 0 ]] &&
    pg_wait_file "$CTR_LOG" 5 && grep -q "hello from the private image" "$CTR_LOG"; then
    sed -E 's/^[^ ]+ [^ ]+ [^ ]+ //' "$CTR_LOG" | indent
    outcome_ok "tenant A's container ran (allowed by pullgate-hook)"
else
    printf '%s\n' "$OUT" | indent
    outcome_bad "tenant A's container should have run"
fi

# tenant_b DESC ANNOTATION
tenant_b() {
    local desc="$1"
    say "$desc"
    pg_node_run_pod team-b "$2" || { outcome_bad "RunPodSandbox (team-b) failed"; return; }
    if start_container 'echo tenant B got in'; then
        outcome_bad "tenant B's container ($desc) should have been refused"
        return
    fi
    if [[ "$OUT" == *"pullgate: denied"* ]]; then
        printf '%s\n' "$OUT" | grep -o 'pullgate: denied.*' | head -n1 | fold -s -w 110 | indent
        outcome_ok "tenant B refused ($desc)"
    else
        printf '%s\n' "$OUT" | indent
        outcome_bad "tenant B failed, but not because of pullgate ($desc)"
    fi
}

header "Tenant B tries to use tenant A's private image"
say "the image is already on the node, so without pullgate any pod could run it (IfNotPresent)."
ANN_B="$(keyed_annotation team-b regcred tenant-b "tenant-b-password")" || die "pullgatectl annotate"
tenant_b "pod in team-b with no credentials for the image" ""
tenant_b "pod in team-b with its own, different credentials" "$ANN_B"
tenant_b "pod in team-b presenting tenant A's annotation (copied)" "$ANN_A"

header "A secret added after admission: recorded for its namespace only"
say "team-c's pod was admitted when its annotation listed an older secret; the kubelet pulls with"
say "tenant-c's credentials from a secret added since. pullgate-cri cannot name that secret: it binds"
say "the pull to team-c (a placeholder only team-c can match), never to the whole node."
pg_node_run_pod team-c "$(keyed_annotation team-c old-cred tenant-c rotated-away)" || die "RunPodSandbox (team-c)"
export PG_CRI_PASS="$PASS_C"
run_shown "cri_client.py pull --image $IMAGE --username tenant-c --password *** --pod-config <team-c pod>"
cri pull --image "$IMAGE" --username tenant-c --password-env PG_CRI_PASS --pod-config "$POD_CFG" >/dev/null ||
    die "tenant C's pull failed"
unset PG_CRI_PASS
"$PULLGATECTL" --config "$CFG" show --image-ref "$REF" --json | "$PG_PY" -c 'import json, sys
for m in json.load(sys.stdin)["credentialMapping"].values():
    for s in m.get("kubernetesSecrets", []):
        print("secret %s/%s uid=%r hash=%s..." % (s["namespace"], s["name"], s["uid"], s["credentialHash"][:12]))
    print("nodePodsAccessible:", m.get("nodePodsAccessible", False))' | indent
pg_node_run_pod team-c "$(keyed_annotation team-c new-cred tenant-c "$PASS_C")" || die "RunPodSandbox (team-c)"
if start_container 'echo tenant C runs' && [[ "$(cri wait --id "$CID" --wait-timeout 30)" == 0 ]]; then
    outcome_ok "a later team-c pod presenting the new secret runs"
else
    printf '%s\n' "$OUT" | indent
    outcome_bad "team-c's pod with the new secret should have run"
fi
pg_node_run_pod team-d "$(keyed_annotation team-d same-cred tenant-c "$PASS_C")" || die "RunPodSandbox (team-d)"
if start_container 'echo tenant D got in'; then
    outcome_bad "team-d presenting the same credentials should have been refused"
else
    printf '%s\n' "$OUT" | grep -o 'pullgate: denied.*' | head -n1 | fold -s -w 110 | indent
    outcome_ok "team-d, presenting the same credentials in its own namespace, refused"
fi

header "Never forwarded unrecorded"
say "another process holds the record store's lock (a long prune, a hung writer): pullgate-cri cannot"
say "write the pull's intent, so the pull never reaches containerd; the kubelet retries with back-off."
flock "$STATE/.pullgate.lock" sleep 4 &
LOCK_PID=$!
pg_on_exit 'pg_kill_wait "$LOCK_PID" 2'
sleep 0.3
POD="$POD_A" POD_CFG="$POD_A_CFG" POD_LOGDIR="$POD_A_LOGDIR"
export PG_CRI_PASS="$PASS_A"
run_shown "cri_client.py pull --image $IMAGE --username tenant-a ...   # the store's lock held"
if OUT="$(cri pull --image "$IMAGE" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_A_CFG" 2>&1)"; then
    outcome_bad "the pull should have been refused while its intent could not be written"
else
    printf '%s\n' "$OUT" | fold -s -w 110 | indent
    [[ "$OUT" == *"UNAVAILABLE"*"pullgate: the record store did not take the pull intent in time"* ]] &&
        outcome_ok "refused with UNAVAILABLE, never forwarded unrecorded" ||
        outcome_bad "refused, but not by pullgate-cri's rule"
fi
wait "$LOCK_PID" 2>/dev/null
run_shown "cri_client.py pull ...   # the kubelet's retry, the lock free again"
cri pull --image "$IMAGE" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_A_CFG" >/dev/null &&
    outcome_ok "the retry is recorded" || outcome_bad "the retry failed"
unset PG_CRI_PASS

header "Who decided: pullgate-cri's resident hook server"
say "the hook asked pullgate-cri (pullgate-hook-local decides only when the daemon cannot):"
grep 'msg="hook decision"' "$PG_CD_DIR/pullgate-cri.log" | cut -c1-200 | indent
if grep -q 'msg="hook decision" .*allowed="true"' "$PG_CD_DIR/pullgate-cri.log" &&
    grep -q 'msg="hook decision" .*allowed="false"' "$PG_CD_DIR/pullgate-cri.log"; then
    outcome_ok "the allow and the denials were decided by the resident pullgate-cri"
else
    outcome_bad "pullgate-cri's log shows no resident decision (the hook fell back)"
fi

header "D-Bus events seen by pullgatectl monitor"
sleep 1
pg_kill_wait "$MON_PID" 3
if [[ -s "$MON_LOG" ]]; then
    cut -c1-200 "$MON_LOG" | indent
else
    say "(no events captured)"
fi
for sig in PullIntent ImagePulled PullFailed ContainerAllowed ContainerDenied; do
    if grep -q "$sig" "$MON_LOG"; then
        outcome_ok "D-Bus signal $sig observed"
    else
        outcome_bad "D-Bus signal $sig not observed"
    fi
done

header "What Prometheus sees: pullgate-cri's /metrics"
run_shown "curl -s http://$METRICS/metrics"
if curl -sf "http://$METRICS/metrics" >"$PG_TMPDIR/cri.metrics"; then
    grep -E '^pullgate_(build_info|cri_ondisk_|cri_pulls_recorded_total|cri_pulls_refused_total|cri_hook_decisions_total)' \
        "$PG_TMPDIR/cri.metrics" | grep -v ' 0$' | indent
    grep -q '^pullgate_cri_hook_decisions_total{result="deny"' "$PG_TMPDIR/cri.metrics" &&
        grep -q '^pullgate_cri_pulls_recorded_total{credentials="secret"} [1-9]' "$PG_TMPDIR/cri.metrics" &&
        outcome_ok "the metrics count the recorded pulls and the denials (alerts: packaging/kubernetes/prometheus-rules.yaml)" ||
        outcome_bad "the metrics do not show the pulls and decisions above"
else
    outcome_bad "pullgate-cri does not serve /metrics on $METRICS"
fi

header "Summary"
for o in "${OUTCOMES[@]}"; do printf '   %s\n' "$o"; done
printf '\n   finished in %d s (%d s after the build); cleaning up (pods, pullgate-cri, containerd, registry, bus, temp files)\n' \
    "$((SECONDS - T_START))" "$((SECONDS - T_BUILT))"
if ((FAILED > 0)); then
    printf '   %s%d expected outcome(s) did not happen%s\n' "$R" "$FAILED" "$N"
    exit 1
fi
printf '   %sall expected outcomes happened%s\n' "$G" "$N"
exit 0
