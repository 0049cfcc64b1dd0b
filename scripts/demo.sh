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
# 5. the kubelet stand-in follows EnsureImageExists (ImageStatus with the pod's annotations,
#    PullImage only when told "not present"). Tenant A's pod (keyed credentials annotation
#    made by `pullgatectl annotate`, as the webhook would) pulls with A's secret, one with an
#    email; pullgate-cri records the pull for that secret; A's container runs
# 6. tenant B, with its own valid credentials (a second registry user), is told "not
#    present" (a verification pull), pulls, the registry lets it in, B runs
# 7. tenant C with a wrong password, and a pod with no credentials: told "not present", the
#    registry refuses (ErrImagePull), nothing starts, the image stays
# 8. a container created without the pull path (and one presenting a copied annotation) is
#    still refused by the hook
# 9. never forwarded unrecorded: with the record store's lock held the pull is refused
# 10. prints the D-Bus pull and decision events the monitor saw
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
PASS_B="tenant-b-$(head -c 9 /dev/urandom | base64 | tr -d '/+=')"
PG_REG_EXTRA_USERS=("tenant-b:$PASS_B")
pg_registry_start tenant-a "$PASS_A"
say "docker-registry (distribution) on http://$PG_REG_HOST, htpasswd (bcrypt) users 'tenant-a', 'tenant-b'"
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

# kubelet DESC USER PASS [POLICY]: the kubelet stand-in's EnsureImageExists for $IMAGE in
# the current pod ($POD_CFG): ImageStatus with the pod's annotations, then PullImage with the
# pod's credentials only when told "not present". Sets KUBELET (its JSON) and OUTCOME.
kubelet() {
    local -a auth=()
    [[ -n "$2" ]] && auth=(--username "$2" --password-env PG_CRI_PASS)
    run_shown "kubelet: EnsureImageExists $IMAGE (${4:-IfNotPresent}) for $1"
    KUBELET="$(PG_CRI_PASS="$3" cri ensure-image --image "$IMAGE" --pod-config "$POD_CFG" \
        --policy "${4:-IfNotPresent}" "${auth[@]}")"
    OUTCOME="$("$PG_PY" -c 'import json,sys; print(json.load(sys.stdin)["outcome"])' <<<"$KUBELET")"
    "$PG_PY" -c 'import json, sys
k = json.load(sys.stdin)
print("ImageStatus (with the pod'"'"'s annotations) -> %s" % k["imageStatus"])
if k["outcome"] == "pulled": print("PullImage (the pod'"'"'s own credentials) -> %s" % k["imageRef"])
elif k["outcome"] == "ErrImagePull": print("PullImage -> ...%s" % k.get("error", "")[-120:])
elif k["outcome"] == "ErrImageNeverPull": print("imagePullPolicy Never: no pull")
print("kubelet: %s" % {"present": "image present, no pull", "pulled": "pulled",
      "ErrImagePull": "ErrImagePull: the pod does not start",
      "ErrImageNeverPull": "ErrImageNeverPull"}[k["outcome"]])' <<<"$KUBELET" | indent
}
secrets_now() { # the record's secrets for the image, one line each
    "$PULLGATECTL" --config "$CFG" show --image-ref "$REF" --json | "$PG_PY" -c 'import json, sys
for m in json.load(sys.stdin)["credentialMapping"].values():
    for s in m.get("kubernetesSecrets", []):
        print("secret %s/%s hash=%s..." % (s["namespace"], s["name"], s["credentialHash"][:12]))
    print("nodePodsAccessible:", m.get("nodePodsAccessible", False))'
}

# start_container CMD -> CID; StartContainer's output in $OUT; its status returned
start_container() {
    local name="app-$RANDOM"
    CTR_LOG="$POD_LOGDIR/$name.log"
    CID="$(cri create --pod "$POD" --pod-config "$POD_CFG" --name "$name" --image "$IMAGE" \
        --log-path "$name.log" -- /bin/sh -c "$1")" || { OUT="CreateContainer failed"; return 2; }
    OUT="$(cri start --id "$CID" 2>&1)"
}
# expect_run DESC: a container of the current pod runs and prints the image's marker.
expect_run() {
    if start_container 'cat /etc/pg-marker' && [[ "$(cri wait --id "$CID" --wait-timeout 30)" == 0 ]] &&
        pg_wait_file "$CTR_LOG" 5 && grep -q "hello from the private image" "$CTR_LOG"; then
        sed -E 's/^[^ ]+ [^ ]+ [^ ]+ //' "$CTR_LOG" | indent
        outcome_ok "$1"
    else
        printf '%s\n' "$OUT" | indent
        outcome_bad "$1: it should have run"
    fi
}
# expect_refused DESC [TEXT]: a container created in the current pod anyway is refused by the
# hook (and the denial says TEXT).
expect_refused() {
    if start_container 'echo got in'; then
        outcome_bad "$1: it should have been refused"
    elif [[ "$OUT" == *"pullgate: denied"*"${2:-}"* ]]; then
        printf '%s\n' "$OUT" | grep -o 'pullgate: denied.*' | head -n1 | fold -s -w 110 | indent
        outcome_ok "$1"
    else
        printf '%s\n' "$OUT" | indent
        outcome_bad "$1: failed, but not because of pullgate"
    fi
}

header "Tenant A: the kubelet pulls with A's secret; pullgate-cri records it"
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
kubelet "tenant A's pod" tenant-a "$PASS_A"
[[ "$OUTCOME" == pulled ]] || die "tenant A's pull failed: $KUBELET"
REF="$("$PG_PY" -c 'import json,sys; print(json.load(sys.stdin)["imageRef"])' <<<"$KUBELET")"
run_shown "pullgatectl show --image-ref $REF"
SHOW="$("$PULLGATECTL" --config "$CFG" show --image-ref "$REF" --json 2>&1)"
secrets_now | indent
if [[ "$SHOW" == *"\"namespace\": \"team-a\""* && "$SHOW" == *"$HASH_A"* && "$SHOW" != *nodePodsAccessible* ]]; then
    outcome_ok "pullgate-cri recorded the pull for tenant A's secret (the kubelet's hash, with the email), not node-wide"
else
    outcome_bad "the record does not name tenant A's secret"
fi
expect_run "tenant A's container ran (allowed by pullgate-hook)"
pg_node_run_pod team-a "$ANN_A" || die "RunPodSandbox (team-a)"
kubelet "tenant A's next pod" tenant-a "$PASS_A"
[[ "$OUTCOME" == present ]] && outcome_ok "tenant A's next pod: \"present\", no pull" ||
    outcome_bad "tenant A's next pod should have heard \"present\" ($OUTCOME)"

header "Tenant B, with its own valid credentials: a verification pull (KEP-2535)"
say "the image is on the node. A kubelet without its own KEP-2535 check would hear \"present\","
say "skip the pull, and the hook would refuse B for good. pullgate-cri answers B's ImageStatus"
say "\"not present\": the kubelet pulls with B's own secret and the registry decides."
pg_node_run_pod team-b "$(keyed_annotation team-b regcred tenant-b "$PASS_B")" || die "RunPodSandbox (team-b)"
kubelet "tenant B's pod" tenant-b "$PASS_B"
if [[ "$OUTCOME" == pulled ]] && grep -q "$IMAGE" <<<"$(grep 'image not present for this pod' "$PG_CD_DIR/pullgate-cri.log")"; then
    grep 'image not present for this pod' "$PG_CD_DIR/pullgate-cri.log" | head -n1 | cut -c1-220 | indent
    outcome_ok "tenant B was told \"not present\" and pulled; the registry let it in"
else
    outcome_bad "tenant B should have been asked to pull ($OUTCOME)"
fi
secrets_now | indent
[[ "$(secrets_now | grep -c '^secret')" == 2 ]] && outcome_ok "the record keeps both tenants' secrets" ||
    outcome_bad "the record should list both tenants' secrets"
expect_run "tenant B's container ran"

header "Tenant C, with a wrong password, and a pod with no credentials: the registry refuses"
pg_node_run_pod team-c "$(keyed_annotation team-c regcred tenant-b "not-the-password")" || die "RunPodSandbox (team-c)"
kubelet "tenant C's pod (tenant-b's name, a wrong password)" tenant-b "not-the-password"
[[ "$OUTCOME" == ErrImagePull ]] && outcome_ok "tenant C: ErrImagePull (the registry refused), nothing starts" ||
    outcome_bad "tenant C should have got ErrImagePull ($OUTCOME)"
POD_C="$POD" POD_C_CFG="$POD_CFG" POD_C_LOGDIR="$POD_LOGDIR"
pg_node_run_pod team-d "" || die "RunPodSandbox (team-d)"
kubelet "a pod with no credentials" "" ""
[[ "$OUTCOME" == ErrImagePull ]] && outcome_ok "no credentials: ErrImagePull, nothing starts" ||
    outcome_bad "the pod without credentials should have got ErrImagePull ($OUTCOME)"
[[ "$(secrets_now | grep -c '^secret')" == 2 ]] && outcome_ok "no record gained an entry" ||
    outcome_bad "a refused pull changed the record"
cri_direct image-status --image "$IMAGE" >/dev/null && outcome_ok "the image stays on the node" ||
    outcome_bad "the image left the node"

header "A container created without the kubelet's pull path"
say "someone with CRI access creates tenant C's container anyway: the hook still decides."
POD="$POD_C" POD_CFG="$POD_C_CFG" POD_LOGDIR="$POD_C_LOGDIR"
expect_refused "refused by pullgate-hook, the denial says what cures it" "cured by a pull with the pod's own credentials"
pg_node_run_pod team-b "$ANN_A" || die "RunPodSandbox (team-b, copied annotation)"
expect_refused "a team-b pod presenting tenant A's annotation (copied) is refused"

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
for sig in PullIntent ImagePulled PullFailed PullRequired ContainerAllowed ContainerDenied; do
    if grep -q "$sig" "$MON_LOG"; then
        outcome_ok "D-Bus signal $sig observed"
    else
        outcome_bad "D-Bus signal $sig not observed"
    fi
done

header "What Prometheus sees: pullgate-cri's /metrics"
run_shown "curl -s http://$METRICS/metrics"
if curl -sf "http://$METRICS/metrics" >"$PG_TMPDIR/cri.metrics"; then
    grep -E '^pullgate_(build_info|cri_ondisk_|cri_pulls_recorded_total|cri_pulls_refused_total|cri_hook_decisions_total|cri_image_verifications_total)' \
        "$PG_TMPDIR/cri.metrics" | grep -v ' 0$' | indent
    grep -q '^pullgate_cri_hook_decisions_total{result="deny"' "$PG_TMPDIR/cri.metrics" &&
        grep -q '^pullgate_cri_pulls_recorded_total{credentials="secret"} [1-9]' "$PG_TMPDIR/cri.metrics" &&
        grep -q '^pullgate_cri_image_verifications_total{result="must-pull"} [1-9]' "$PG_TMPDIR/cri.metrics" &&
        outcome_ok "the metrics count the recorded pulls, the verification pulls and the denials (alerts: packaging/kubernetes/prometheus-rules.yaml)" ||
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
