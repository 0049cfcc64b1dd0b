#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# End to end through containerd's CRI plugin (Debian's containerd 1.6 + runc), driven
# like a kubelet by a small Python CRI client:
#   containerd started by hand (own root, state, socket, config) with the hook in the
#   runc handler's base_runtime_spec and pod_annotations = ["pullgate.dev/credentials"];
#   private registry with authentication (plain http, loopback, hosts.toml);
#   CRI PullImage with AuthConfig, the pull recorded with pullgatectl;
#   tenant A's pod: CreateContainer + StartContainer succeed, the container prints its marker;
#   tenant B's pods (no annotation; tenant A's annotation copied): StartContainer fails with
#   "pullgate: denied" in the gRPC error.
# Env (from ctest): PULLGATE_HOOK, PULLGATECTL.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/registry.sh
source "$HERE/lib/registry.sh"
# shellcheck source=lib/podman.sh
source "$HERE/lib/podman.sh" # pg_write_config, pg_creds_json, pg_cred_hash, pg_image_name

T0=$SECONDS
PY=/usr/bin/python3
pg_require_root
pg_require_cmd containerd ctr containerd-shim-runc-v2 runc docker-registry htpasswd skopeo umoci
[[ -x $PY ]] || pg_skip "/usr/bin/python3 missing"
$PY -c 'import grpc, grpc_tools.protoc' 2>/dev/null ||
    pg_skip "python3-grpcio / python3-grpc-tools not installed for /usr/bin/python3"
pg_require_pullgate

CD_DIR="$(pg_mktemp_dir containerd)"
# containerd 1.6 puts shim sockets in /run/containerd/s whatever its state dir; remove
# that directory at the end if this test created it.
RUN_CD_EXISTED=0
[[ -e /run/containerd ]] && RUN_CD_EXISTED=1
CD_SOCK="$CD_DIR/containerd.sock"
CD_PID=""
declare -a CD_PODS=()
GEN="$CD_DIR/gen"

cri() { $PY "$HERE/cri/cri_client.py" --socket "$CD_SOCK" --gen-dir "$GEN" "$@"; }
ctr_() { ctr --address "$CD_SOCK" --namespace k8s.io "$@"; }

# Cleanup, registered before containerd starts; runs before the temp dir is removed.
cd_cleanup() {
    local p pid
    if [[ -n "$CD_PID" ]] && kill -0 "$CD_PID" 2>/dev/null; then
        for p in "${CD_PODS[@]}"; do
            timeout 30 "$PY" "$HERE/cri/cri_client.py" --socket "$CD_SOCK" --gen-dir "$GEN" \
                --timeout 20 stop-pod --id "$p" >/dev/null 2>&1
            timeout 30 "$PY" "$HERE/cri/cri_client.py" --socket "$CD_SOCK" --gen-dir "$GEN" \
                --timeout 20 remove-pod --id "$p" >/dev/null 2>&1
        done
    fi
    [[ -n "$CD_PID" ]] && pg_kill_wait "$CD_PID" 10
    # Shims we caused to start: they carry our private socket address on their command line.
    for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CD_SOCK" 2>/dev/null); do
        kill -KILL "$pid" 2>/dev/null
    done
    # Container processes left by killed shims (their cgroup/rootfs are under CD_DIR).
    awk -v p="$CD_DIR" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
        while read -r m; do umount -l "$m" 2>/dev/null; done
    if ((RUN_CD_EXISTED == 0)); then
        rmdir /run/containerd/s /run/containerd 2>/dev/null
    fi
    return 0
}

pg_section "registry with authentication + private images"
PASS_A="tenant-a-pw-$RANDOM$RANDOM"
pg_registry_start tenant-a "$PASS_A"
pg_registry_setup_images
# Sandbox ("pause") image: busybox sleeping until TERM, imported, never pulled.
pg_image_build "$PG_LAYOUT" pause "pause"
umoci config --image "$PG_LAYOUT:pause" --clear=config.cmd \
    --config.cmd /bin/sh --config.cmd -c \
    --config.cmd "trap 'exit 0' TERM INT; sleep 2147483647 & wait" >/dev/null || pg_fail "umoci config (pause)"
pg_image_archive "$PG_LAYOUT" pause "$CD_DIR/pause.tar" 1

pg_section "containerd 1.6 with pullgate in base_runtime_spec"
STATE="$(pg_mktemp_dir state)"
chmod 0700 "$STATE"
CFG="$CD_DIR/pullgate.json"
pg_write_config "$CFG" "$STATE" NeverVerifyPreloadedImages none
"$PULLGATECTL" --config "$CFG" check-config >/dev/null || pg_fail "pullgatectl check-config rejects $CFG"

mkdir -p "$CD_DIR"/{root,state,opt,logs,cni-bin,cni-conf} "$CD_DIR/certs.d/$PG_REG_HOST"
cat >"$CD_DIR/certs.d/$PG_REG_HOST/hosts.toml" <<EOF
server = "http://$PG_REG_HOST"

[host."http://$PG_REG_HOST"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
EOF
ctr oci spec >"$CD_DIR/base-spec.json" || pg_fail "ctr oci spec"
$PY - "$CD_DIR/base-spec.json" "$PULLGATE_HOOK" "$CFG" <<'EOF' || pg_fail "editing the base spec"
import json, sys
path, hook, cfg = sys.argv[1:4]
spec = json.load(open(path))
spec["process"].pop("rlimits", None)
spec.setdefault("hooks", {})["createRuntime"] = [{
    "path": hook, "args": ["pullgate-hook", "--stage", "createRuntime", "--config", cfg],
    "timeout": 10}]
json.dump(spec, open(path, "w"), indent=2)
EOF

SANDBOX_IMAGE="pullgate.test/pause:1"
cat >"$CD_DIR/config.toml" <<EOF
version = 2
root = "$CD_DIR/root"
state = "$CD_DIR/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$CD_SOCK"
[ttrpc]
  address = "$CD_SOCK.ttrpc"
[debug]
  level = "info"
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$CD_DIR/opt"
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = "$SANDBOX_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "${PG_CONTAINERD_SNAPSHOTTER:-overlayfs}"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      base_runtime_spec = "$CD_DIR/base-spec.json"
      pod_annotations = ["pullgate.dev/credentials"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$CD_DIR/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CD_DIR/cni-bin"
    conf_dir = "$CD_DIR/cni-conf"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$CD_DIR/certs.d"
EOF

pg_on_exit cd_cleanup
containerd --config "$CD_DIR/config.toml" >"$CD_DIR/containerd.log" 2>&1 &
CD_PID=$!
for _ in $(seq 1 150); do
    [[ -S "$CD_SOCK" ]] && cri version >/dev/null 2>&1 && break
    kill -0 "$CD_PID" 2>/dev/null || break
    sleep 0.2
done
if ! VERSION="$(cri version 2>&1)"; then
    tail -n 30 "$CD_DIR/containerd.log" | sed 's/^/  containerd | /' >&2
    printf '%s\n' "$VERSION" >&2
    pg_skip "containerd's CRI plugin did not come up on this machine (log above)"
fi
pg_log "containerd up (pid $CD_PID): $VERSION"
show_log() { tail -n 20 "$CD_DIR/containerd.log" | sed 's/^/  containerd | /' >&2; }

ctr_ images import --base-name pullgate.test/pause --digests "$CD_DIR/pause.tar" >&2 ||
    { show_log; pg_fail "ctr images import (sandbox image)"; }
IMAGES="$(ctr_ images ls -q)"
grep -qx "$SANDBOX_IMAGE" <<<"$IMAGES" ||
    { ctr_ images ls >&2; pg_fail "sandbox image not named $SANDBOX_IMAGE after import"; }

pg_section "pulls through CRI"
PG_OUT="$(cri pull --image "$PG_IMG_APP" 2>&1)" &&
    pg_check_fail "anonymous CRI pull of the private image succeeded" ||
    pg_check_ok "anonymous CRI pull of the private image is refused by the registry"
"$PULLGATECTL" --state-dir "$STATE" record-intent --image "$PG_IMG_APP" || pg_fail "record-intent"
export PG_CRI_PASS="$PASS_A"
APP_REF="$(cri pull --image "$PG_IMG_APP" --username tenant-a --password-env PG_CRI_PASS)" ||
    { show_log; pg_fail "CRI PullImage with AuthConfig failed"; }
unset PG_CRI_PASS
pg_log "PullImage -> image_ref $APP_REF"
# The name the hook sees in io.kubernetes.cri.image-name: containerd 1.6 stores a normalized
# reference; for a registry-qualified name that is the name itself.
IMAGE_AS_SEEN="$PG_IMG_APP"
UID_A="$(cat /proc/sys/kernel/random/uuid)"
HASH_A="$(pg_cred_hash tenant-a "$PASS_A")" || pg_fail "pullgatectl hash"
"$PULLGATECTL" --state-dir "$STATE" record-pulled --image "$IMAGE_AS_SEEN" --image-ref "$APP_REF" \
    --secret "team-a/regcred/$UID_A:$HASH_A" || pg_fail "record-pulled"
CREDS_A="$(pg_creds_json "$IMAGE_AS_SEEN" team-a regcred "$UID_A" "$HASH_A")"

# run_pod TENANT_NS CREDS -> POD id in $POD, config in $POD_CFG
run_pod() {
    local ns="$1" creds="$2" name="pod-$1-$RANDOM"
    local -a ann=()
    [[ -n "$creds" ]] && ann=(--annotation "pullgate.dev/credentials=$creds")
    POD_CFG="$CD_DIR/$name.json"
    mkdir -p "$CD_DIR/logs/$name"
    POD="$(cri run-pod --name "$name" --namespace "$ns" --uid "$(cat /proc/sys/kernel/random/uuid)" \
        --log-dir "$CD_DIR/logs/$name" --save "$POD_CFG" "${ann[@]}")" ||
        { show_log; pg_fail "RunPodSandbox ($ns) failed"; }
    CD_PODS+=("$POD")
    POD_LOGDIR="$CD_DIR/logs/$name"
}

# create_and_start DESC -> sets CID; returns StartContainer's status; output in $PG_OUT
create_and_start() {
    local marker="$1"
    CID=""
    CID="$(cri create --pod "$POD" --pod-config "$POD_CFG" --name app --image "$PG_IMG_APP" \
        --log-path app.log -- /bin/sh -c "echo $marker")" ||
        { show_log; pg_check_fail "CreateContainer failed"; return 2; }
    PG_OUT="$(cri start --id "$CID" 2>&1)"
}

pg_section "tenant A: authorized"
run_pod team-a "$CREDS_A"
MARK="tenant-a-ran-$RANDOM"
if create_and_start "$MARK"; then
    pg_check_ok "tenant A: StartContainer succeeds"
    EXIT="$(cri wait --id "$CID" --wait-timeout 30)" || pg_check_fail "tenant A's container did not exit"
    [[ "${EXIT:-x}" == 0 ]] && pg_check_ok "tenant A's container exited 0" ||
        pg_check_fail "tenant A's container exit code ${EXIT:-?}"
    pg_wait_file "$POD_LOGDIR/app.log" 5
    pg_expect_contains "tenant A's container printed its marker" \
        "$(cat "$POD_LOGDIR/app.log" 2>/dev/null)" "$MARK"
else
    pg_check_fail "tenant A: StartContainer failed"
    printf '%s\n' "$PG_OUT" | sed 's/^/       | /' >&2
    show_log
fi

expect_start_denied() {
    local desc="$1"
    if create_and_start "SHOULD-NOT-RUN"; then
        pg_check_fail "$desc: StartContainer succeeded"
        return
    fi
    [[ -n "${CID:-}" ]] || return
    pg_check_ok "$desc: StartContainer fails"
    pg_expect_contains "$desc: gRPC error carries the hook's reason" "$PG_OUT" "pullgate: denied"
    printf '%s\n' "$PG_OUT" | grep -o 'pullgate: denied.*' | head -n1 | sed 's/^/       reason: /' >&2
    if [[ -f "$POD_LOGDIR/app.log" ]] && grep -q SHOULD-NOT-RUN "$POD_LOGDIR/app.log"; then
        pg_check_fail "$desc: the container process ran"
    fi
}

pg_section "tenant B: unauthorized"
run_pod team-b ""
expect_start_denied "tenant B without a credentials annotation"
run_pod team-b "$CREDS_A"
expect_start_denied "tenant B with tenant A's annotation copied"
HASH_WRONG="$(pg_cred_hash tenant-a "wrong-$RANDOM")"
run_pod team-b "$(pg_creds_json "$IMAGE_AS_SEEN" team-b regcred "$(cat /proc/sys/kernel/random/uuid)" "$HASH_WRONG")"
expect_start_denied "tenant B with wrong credentials"

pg_section "cleanup"
for p in "${CD_PODS[@]}"; do
    cri stop-pod --id "$p" >/dev/null 2>&1 || pg_check_fail "StopPodSandbox $p"
    cri remove-pod --id "$p" >/dev/null 2>&1 || pg_check_fail "RemovePodSandbox $p"
done
CD_PODS=()

pg_log "elapsed: $((SECONDS - T0)) s"
pg_summary
