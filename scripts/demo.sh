#!/usr/bin/env bash
# pullgate demo: the whole flow on one machine, narrated.
#
#   sudo bash scripts/demo.sh
#
# 1. installs what it needs (scripts/install-deps.sh) and builds pullgate into ./build-demo
# 2. starts a private D-Bus session bus and `pullgatectl monitor` on it
# 3. starts a private registry with authentication on 127.0.0.1 and pushes a private image
# 4. tenant A pulls the image with its credentials; the pull is recorded (as CRI-O + kubelet would)
# 5. tenant A's container starts (pullgate-hook allows it: its pod presents those credentials)
# 6. tenant B's containers are refused by the hook, with the reason in the runtime's error
# 7. prints the D-Bus events the monitor captured
#
# Podman + runc play CRI-O here (same hooks.d mechanism; the CRI-O annotations are passed
# explicitly). Nothing touches the host's podman store: everything lives in a temp dir that
# is removed at exit, with every process the demo started.
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
        -DPG_BUILD_TESTS=OFF >"$BUILD.cmake.log" 2>&1 &&
        cmake --build "$BUILD" -j"$(nproc)" --target pullgate-hook pullgatectl >>"$BUILD.cmake.log" 2>&1
} || { tail -n 30 "$BUILD.cmake.log" | indent; die "build failed (full log: $BUILD.cmake.log)"; }
rm -f "$BUILD.cmake.log"
PULLGATE_HOOK="$(find "$BUILD" -type f -name pullgate-hook -perm -u+x | head -n1)"
PULLGATECTL="$(find "$BUILD" -type f -name pullgatectl -perm -u+x | head -n1)"
[[ -x "$PULLGATE_HOOK" && -x "$PULLGATECTL" ]] || die "built binaries not found under $BUILD"
export PULLGATE_HOOK PULLGATECTL
say "hook:        $PULLGATE_HOOK"
say "pullgatectl: $PULLGATECTL"

# Test helpers: temp dir + cleanup stack, registry, isolated podman.
# shellcheck source=../test/integration/lib/registry.sh
source "$ROOT/test/integration/lib/registry.sh"
# shellcheck source=../test/integration/lib/podman.sh
source "$ROOT/test/integration/lib/podman.sh"
pg_skip() { die "cannot run here: $*"; } # the demo never "skips"
pg_log() { printf '   %s\n' "$*"; }

header "Private D-Bus bus + pullgatectl monitor"
pg_require_cmd dbus-daemon
BUS_SOCK="$PG_TMPDIR/bus"
dbus-daemon --session --nofork --nopidfile --address="unix:path=$BUS_SOCK" \
    >"$PG_TMPDIR/dbus.log" 2>&1 &
DBUS_PID=$!
pg_on_exit "pg_kill_wait $DBUS_PID 3"
pg_wait_file "$BUS_SOCK" 10 || { cat "$PG_TMPDIR/dbus.log" | indent; die "dbus-daemon did not start"; }
BUS_ADDR="unix:path=$BUS_SOCK"
say "bus: $BUS_ADDR (dbus-daemon pid $DBUS_PID)"

STATE="$PG_TMPDIR/state"
mkdir -m 0700 "$STATE"
CFG="$PG_TMPDIR/pullgate.json"
pg_write_config "$CFG" "$STATE" NeverVerifyPreloadedImages "$BUS_ADDR"
say "pullgate config ($CFG):"
indent <"$CFG"
if CHECK="$("$PULLGATECTL" --config "$CFG" check-config 2>&1)"; then
    say "pullgatectl check-config: valid"
else
    printf '%s\n' "$CHECK" | indent
    die "pullgatectl check-config rejected the demo config"
fi
PG_CTL_OPTS=(--config "$CFG")

MON_LOG="$PG_TMPDIR/monitor.log"
MON_KIND="pullgatectl monitor"
run_shown "$(basename "$PULLGATECTL") --config $CFG monitor &"
"$PULLGATECTL" --config "$CFG" monitor >"$MON_LOG" 2>&1 &
MON_PID=$!
sleep 1
if ! kill -0 "$MON_PID" 2>/dev/null; then
    wait "$MON_PID" 2>/dev/null
    say "pullgatectl monitor is not available in this build:"
    indent <"$MON_LOG"
    MON_KIND="dbus-monitor"
    say "falling back to dbus-monitor on the same bus"
    pg_require_cmd dbus-monitor
    dbus-monitor --address "$BUS_ADDR" "type='signal',interface='dev.pullgate.PullGate1'" \
        >"$MON_LOG" 2>&1 &
    MON_PID=$!
    sleep 0.5
fi
pg_on_exit "pg_kill_wait $MON_PID 3"
say "monitor: $MON_KIND (pid $MON_PID)"

header "Private registry with authentication"
PASS_A="tenant-a-$(head -c 9 /dev/urandom | base64 | tr -d '/+=')"
pg_registry_start tenant-a "$PASS_A"
say "docker-registry (distribution) on http://$PG_REG_HOST, htpasswd (bcrypt) user 'tenant-a'"
say "anonymous GET /v2/ -> HTTP $(curl -s -o /dev/null -w '%{http_code}' "http://$PG_REG_HOST/v2/")"
PG_LAYOUT="$PG_TMPDIR/oci-layout"
pg_image_build "$PG_LAYOUT" app "hello from the private image"
pg_image_push "$PG_LAYOUT" app team-a/app:1.0
IMAGE="$PG_REG_HOST/team-a/app:1.0"
say "private image: $IMAGE (busybox, built locally with umoci, pushed with skopeo)"

header "Tenant A pulls the image with its credentials (pull recorded)"
pg_podman_init
HOOKS_DIR="$(pg_podman_hooks_dir "$CFG")"
say "hooks.d for the runtime ($HOOKS_DIR/50-pullgate.json):"
indent <"$HOOKS_DIR/50-pullgate.json"
if pg_podman_pull --quiet --tls-verify=false "$IMAGE" >"$PG_TMPDIR/anon.out" 2>&1; then
    outcome_bad "anonymous pull should have been refused by the registry"
else
    say "anonymous pull refused by the registry: $(tail -n1 "$PG_TMPDIR/anon.out" | sed 's/.*: //')"
fi
UID_A="$(cat /proc/sys/kernel/random/uuid)"
run_shown "pullgatectl record-intent --image $IMAGE"
run_shown "podman pull --creds tenant-a:*** --tls-verify=false $IMAGE"
run_shown "pullgatectl record-pulled --image $IMAGE --image-ref <image ID> --secret team-a/regcred/$UID_A:<credential hash>"
pg_podman_pull_and_record "$STATE" "$IMAGE" team-a tenant-a "$PASS_A" regcred "$UID_A"
HASH_A="$PG_PULLED_HASH"
outcome_ok "tenant A pulled $IMAGE and the pull is recorded"
say "records (pullgatectl list):"
"$PULLGATECTL" --config "$CFG" list 2>&1 | indent

CREDS_A="$(pg_creds_json "$IMAGE" team-a regcred "$UID_A" "$HASH_A")"
HASH_B="$(pg_cred_hash tenant-b "tenant-b-password")"
CREDS_B="$(pg_creds_json "$IMAGE" team-b regcred "$(cat /proc/sys/kernel/random/uuid)" "$HASH_B")"

header "Tenant A starts a container from the image"
say "pod namespace team-a, annotation pullgate.dev/credentials:"
say "  $CREDS_A"
run_shown "podman run --hooks-dir $HOOKS_DIR --annotation io.kubernetes.pod.namespace=team-a --annotation pullgate.dev/credentials=... $IMAGE"
PG_HOOKS_DIR="$HOOKS_DIR"
if OUT="$(pg_podman_run_as_tenant team-a "$CREDS_A" "$IMAGE" 2>&1)" &&
    [[ "$OUT" == *"hello from the private image"* ]]; then
    printf '%s\n' "$OUT" | indent
    outcome_ok "tenant A's container ran (allowed by pullgate)"
else
    printf '%s\n' "$OUT" | indent
    outcome_bad "tenant A's container should have run"
fi

# tenant_b DESC CREDS
tenant_b() {
    local desc="$1" creds="$2" out
    say "$desc"
    if out="$(pg_podman_run_as_tenant team-b "$creds" "$IMAGE" echo "tenant B got in" 2>&1)"; then
        printf '%s\n' "$out" | indent
        outcome_bad "tenant B's container ($desc) should have been refused"
        return
    fi
    if [[ "$out" == *"pullgate: denied"* ]]; then
        printf '%s\n' "$out" | grep -o 'pullgate: denied.*' | head -n1 | fold -s -w 110 | indent
        outcome_ok "tenant B refused ($desc)"
    else
        printf '%s\n' "$out" | indent
        outcome_bad "tenant B failed, but not because of pullgate ($desc)"
    fi
}

header "Tenant B tries to use tenant A's private image"
say "the image is already on the node, so without pullgate any pod could run it."
tenant_b "pod in team-b with no credentials for the image" ""
tenant_b "pod in team-b with its own, different credentials" "$CREDS_B"
tenant_b "pod in team-b presenting tenant A's annotation (copied)" "$CREDS_A"

header "D-Bus events seen by $MON_KIND"
sleep 1
pg_kill_wait "$MON_PID" 3
if [[ -s "$MON_LOG" ]]; then
    indent <"$MON_LOG"
else
    say "(no events captured)"
fi
for sig in ContainerAllowed ContainerDenied; do
    if grep -q "$sig" "$MON_LOG"; then
        outcome_ok "D-Bus signal $sig observed"
    else
        outcome_bad "D-Bus signal $sig not observed"
    fi
done

header "Summary"
for o in "${OUTCOMES[@]}"; do printf '   %s\n' "$o"; done
printf '\n   finished in %d s; cleaning up (registry, bus, monitor, containers, temp files)\n' \
    "$((SECONDS - T_START))"
if ((FAILED > 0)); then
    printf '   %s%d expected outcome(s) did not happen%s\n' "$R" "$FAILED" "$N"
    exit 1
fi
printf '   %sall expected outcomes happened%s\n' "$G" "$N"
exit 0
