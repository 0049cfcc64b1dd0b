# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# A node in a temp dir, for tests and scripts/demo.sh: Debian's containerd 1.6 (CRI plugin,
# runc) with pullgate-hook in the runc handler's base_runtime_spec, pullgate-cri in front
# of it, a private D-Bus bus with `pullgatectl monitor --json`, and a Python CRI client
# standing in for the kubelet (cri/cri_client.py).
#
#   pg_node_dbus_start                 private dbus-daemon; sets PG_BUS_ADDR
#   pg_node_monitor_start FILE         pullgatectl --config $PG_NODE_CFG monitor --json > FILE
#   pg_node_containerd_setup CFG HOST...   containerd config in PG_CD_DIR: hook + CFG in the base
#                                      spec, pod_annotations = ["pullgate.dev/credentials"],
#                                      plain-http hosts.toml for each registry HOST, sandbox image
#   pg_node_containerd_start           start (or restart) containerd; waits for its CRI
#                                      (PG_NODE_AS_SERVICE=1: as init's child, like a service)
#   pg_node_containerd_kill            SIGKILL containerd (shims and containers keep running)
#   pg_node_proxy_start                start pullgate-cri ($PULLGATE_CRI) --config $PG_NODE_CFG
#                                      --listen unix://$PG_PROXY_SOCK --runtime-endpoint unix://$PG_CD_SOCK
#                                      --hook-socket $PG_HOOK_SOCK (the hook in the base spec asks
#                                      it: --daemon-socket; set by pg_node_containerd_setup)
#   pg_node_proxy_kill [SIGNAL]        stop it (default TERM, waits)
#   cri ARGS... / cri_direct ARGS...   cri_client.py through the proxy / to containerd directly
#   pg_node_run_pod NS [ANNOTATION]    RunPodSandbox; sets POD, POD_CFG, POD_LOGDIR
#   mapping_of REF IMAGE_NAME / secrets_of REF IMAGE_NAME   a record's mapping, its secrets
#   create_and_start IMAGE MARKER / expect_runs DESC IMAGE / expect_denied DESC IMAGE
#                                      a container in $POD through the proxy, and the checks
#
# Requires lib/common.sh and lib/registry.sh (pg_image_build, pg_image_archive).
# shellcheck disable=SC2034  # PG_* variables are read by the sourcing scripts

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=dbus.sh
source "$(dirname "${BASH_SOURCE[0]}")/dbus.sh"

PG_PY=/usr/bin/python3
PG_CD_DIR=""
PG_CD_SOCK=""
PG_CD_PID=""
PG_PROXY_PID=""
PG_PROXY_SOCK=""
PG_HOOK_SOCK=""
PG_BUS_PID=""
PG_MON_PID=""
PG_NODE_CFG=""
PG_RUN_CD_EXISTED=0
declare -a PG_NODE_PODS=()

cri() { "$PG_PY" "$PG_INTEGRATION_DIR/cri/cri_client.py" --socket "$PG_PROXY_SOCK" --gen-dir "$PG_CD_DIR/gen" "$@"; }
cri_direct() { "$PG_PY" "$PG_INTEGRATION_DIR/cri/cri_client.py" --socket "$PG_CD_SOCK" --gen-dir "$PG_CD_DIR/gen" "$@"; }

pg_node_require() {
    pg_require_root
    pg_require_cmd containerd ctr containerd-shim-runc-v2 runc docker-registry htpasswd skopeo umoci dbus-daemon
    [[ -x $PG_PY ]] || pg_skip "/usr/bin/python3 missing"
    $PG_PY -c 'import grpc, grpc_tools.protoc, google.protobuf.json_format' 2>/dev/null ||
        pg_skip "python3-grpcio / python3-grpc-tools not installed for /usr/bin/python3"
}

pg_node_dbus_start() {
    pg_dbus_daemon_start # lib/dbus.sh: sets PG_BUS_ADDR and PG_BUS_PID, stopped at exit
}

# pg_node_monitor_start FILE: every pullgate signal on the private bus, one JSON line each.
pg_node_monitor_start() {
    "$PULLGATECTL" --config "$PG_NODE_CFG" monitor --json >"$1" 2>"$1.err" &
    PG_MON_PID=$!
    # shellcheck disable=SC2016  # expanded at exit: the pid of the time
    pg_on_exit 'pg_kill_wait "$PG_MON_PID" 3'
    sleep 0.5
    kill -0 "$PG_MON_PID" 2>/dev/null || pg_fail "pullgatectl monitor exited: $(cat "$1.err")"
}

pg__node_cleanup() {
    local p pid
    if [[ -n "$PG_CD_PID" ]] && kill -0 "$PG_CD_PID" 2>/dev/null; then
        for p in "${PG_NODE_PODS[@]}"; do
            timeout 30 "$PG_PY" "$PG_INTEGRATION_DIR/cri/cri_client.py" --socket "$PG_CD_SOCK" \
                --gen-dir "$PG_CD_DIR/gen" --timeout 20 stop-pod --id "$p" >/dev/null 2>&1
            timeout 30 "$PG_PY" "$PG_INTEGRATION_DIR/cri/cri_client.py" --socket "$PG_CD_SOCK" \
                --gen-dir "$PG_CD_DIR/gen" --timeout 20 remove-pod --id "$p" >/dev/null 2>&1
        done
    fi
    [[ -n "$PG_PROXY_PID" ]] && pg_kill_wait "$PG_PROXY_PID" 12
    [[ -n "$PG_CD_PID" ]] && pg_kill_wait "$PG_CD_PID" 10
    # Shims this node started: they carry its private socket address on their command line.
    for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $PG_CD_SOCK" 2>/dev/null); do
        kill -KILL "$pid" 2>/dev/null
    done
    awk -v p="$PG_CD_DIR" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
        while read -r m; do umount -l "$m" 2>/dev/null; done
    # containerd 1.6 puts shim sockets in /run/containerd/s whatever its state dir.
    if ((PG_RUN_CD_EXISTED == 0)); then
        rmdir /run/containerd/s /run/containerd 2>/dev/null
    fi
    return 0
}

# pg_node_containerd_setup PULLGATE_CONFIG REGISTRY_HOST...
pg_node_containerd_setup() {
    local cfg="$1" host
    shift
    PG_NODE_CFG="$cfg"
    PG_CD_DIR="$(pg_mktemp_dir containerd)"
    PG_CD_SOCK="$PG_CD_DIR/containerd.sock"
    [[ -e /run/containerd ]] && PG_RUN_CD_EXISTED=1
    mkdir -p "$PG_CD_DIR"/{root,state,opt,logs,cni-bin,cni-conf,certs.d,gen}
    for host in "$@"; do
        mkdir -p "$PG_CD_DIR/certs.d/$host"
        cat >"$PG_CD_DIR/certs.d/$host/hosts.toml" <<EOF
server = "http://$host"

[host."http://$host"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
EOF
    done
    ctr oci spec >"$PG_CD_DIR/base-spec.json" || pg_fail "ctr oci spec"
    [[ -n "$PG_HOOK_SOCK" ]] || PG_HOOK_SOCK="$(pg_mktemp_dir hook-run)/hook.sock"
    "$PG_PY" - "$PG_CD_DIR/base-spec.json" "$PULLGATE_HOOK" "$cfg" "$PG_HOOK_SOCK" <<'EOF' || pg_fail "editing the base spec"
import json, sys
path, hook, cfg, hook_sock = sys.argv[1:5]
spec = json.load(open(path))
spec["process"].pop("rlimits", None)  # ctr's spec forces RLIMIT_NOFILE 1024
spec.setdefault("hooks", {})["createRuntime"] = [{
    "path": hook, "args": ["pullgate-hook", "--stage", "createRuntime", "--config", cfg,
                           "--daemon-socket", hook_sock],
    "timeout": 10}]
json.dump(spec, open(path, "w"), indent=2)
EOF
    PG_SANDBOX_IMAGE="pullgate.test/pause:1"
    cat >"$PG_CD_DIR/config.toml" <<EOF
version = 2
root = "$PG_CD_DIR/root"
state = "$PG_CD_DIR/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$PG_CD_SOCK"
[ttrpc]
  address = "$PG_CD_SOCK.ttrpc"
[debug]
  level = "info"
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$PG_CD_DIR/opt"
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = "$PG_SANDBOX_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "${PG_CONTAINERD_SNAPSHOTTER:-overlayfs}"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      base_runtime_spec = "$PG_CD_DIR/base-spec.json"
      pod_annotations = ["pullgate.dev/credentials"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$PG_CD_DIR/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$PG_CD_DIR/cni-bin"
    conf_dir = "$PG_CD_DIR/cni-conf"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$PG_CD_DIR/certs.d"
EOF
    # Sandbox ("pause") image: busybox sleeping until TERM, imported, never pulled.
    local layout
    layout="$(pg_mktemp_dir pause-layout)/layout"
    pg_image_build "$layout" pause "pause"
    umoci config --image "$layout:pause" --clear=config.cmd \
        --config.cmd /bin/sh --config.cmd -c \
        --config.cmd "trap 'exit 0' TERM INT; sleep 2147483647 & wait" >/dev/null ||
        pg_fail "umoci config (pause)"
    pg_image_archive "$layout" pause "$PG_CD_DIR/pause.tar" 1
    pg_on_exit pg__node_cleanup
}

pg_node_show_log() { tail -n "${1:-20}" "$PG_CD_DIR/containerd.log" | sed 's/^/  containerd | /' >&2; }

pg_node_containerd_start() {
    local out
    if [[ "${PG_NODE_AS_SERVICE:-0}" == 1 ]]; then
        # The node's service: its parent is init, as systemd's containerd's is (double fork);
        # what pullgate-wire, doctor and pullgate-still-wired take among several containerds.
        PG_CD_PID="$( (setsid containerd --config "$PG_CD_DIR/config.toml" \
            >>"$PG_CD_DIR/containerd.log" 2>&1 </dev/null & echo $!) )"
    else
        containerd --config "$PG_CD_DIR/config.toml" >>"$PG_CD_DIR/containerd.log" 2>&1 &
        PG_CD_PID=$!
    fi
    # The first answer is kept: a second client's start (a Python gRPC client, ~0.3 s) only
    # when none came, for its message.
    out=""
    for _ in $(seq 1 150); do
        [[ -S "$PG_CD_SOCK" ]] && out="$(cri_direct --timeout 2 version 2>/dev/null)" && break
        out=""
        kill -0 "$PG_CD_PID" 2>/dev/null || break
        sleep 0.2
    done
    if [[ -z "$out" ]] && ! out="$(cri_direct --timeout 5 version 2>&1)"; then
        pg_node_show_log 30
        printf '%s\n' "$out" >&2
        return 1
    fi
    PG_CD_VERSION="$out"
    if ! ctr --address "$PG_CD_SOCK" --namespace k8s.io images ls -q | grep -qx "$PG_SANDBOX_IMAGE"; then
        ctr --address "$PG_CD_SOCK" --namespace k8s.io images import --base-name pullgate.test/pause \
            --digests "$PG_CD_DIR/pause.tar" >/dev/null ||
            { pg_node_show_log; pg_fail "ctr images import (sandbox image)"; }
    fi
    return 0
}

pg_node_containerd_kill() {
    kill -KILL "$PG_CD_PID" 2>/dev/null
    wait "$PG_CD_PID" 2>/dev/null
    PG_CD_PID=""
}

pg_node_proxy_start() {
    [[ -n "$PG_PROXY_SOCK" ]] || PG_PROXY_SOCK="$(pg_mktemp_dir cri-run)/cri.sock"
    "$PULLGATE_CRI" --config "$PG_NODE_CFG" --listen "unix://$PG_PROXY_SOCK" \
        --runtime-endpoint "unix://$PG_CD_SOCK" --hook-socket "${PG_HOOK_SOCK:-none}" \
        >>"$PG_CD_DIR/pullgate-cri.log" 2>&1 &
    PG_PROXY_PID=$!
    for _ in $(seq 1 100); do
        [[ -S "$PG_PROXY_SOCK" ]] && cri --timeout 2 version >/dev/null 2>&1 && return 0
        kill -0 "$PG_PROXY_PID" 2>/dev/null || break
        sleep 0.1
    done
    sed 's/^/  pullgate-cri | /' "$PG_CD_DIR/pullgate-cri.log" | tail -n 20 >&2
    return 1
}

pg_node_proxy_kill() {
    local sig="${1:-TERM}"
    [[ -n "$PG_PROXY_PID" ]] || return 0
    if [[ "$sig" == TERM ]]; then
        pg_kill_wait "$PG_PROXY_PID" 12
    else
        kill "-$sig" "$PG_PROXY_PID" 2>/dev/null
        wait "$PG_PROXY_PID" 2>/dev/null
    fi
    PG_PROXY_PID=""
}

# pg_node_run_pod NS [CREDENTIALS_ANNOTATION]: through the proxy, as the kubelet does.
pg_node_run_pod() {
    local ns="$1" creds="${2:-}" name="pod-$1-$RANDOM"
    local -a ann=()
    [[ -n "$creds" ]] && ann=(--annotation "pullgate.dev/credentials=$creds")
    POD_CFG="$PG_CD_DIR/$name.json"
    POD_LOGDIR="$PG_CD_DIR/logs/$name"
    mkdir -p "$POD_LOGDIR"
    POD="$(cri run-pod --name "$name" --namespace "$ns" --uid "$(cat /proc/sys/kernel/random/uuid)" \
        --log-dir "$POD_LOGDIR" --save "$POD_CFG" "${ann[@]}")" || return 1
    PG_NODE_PODS+=("$POD")
}

# mapping_of REF IMAGE_NAME: the record's credential mapping for IMAGE_NAME, as compact JSON.
mapping_of() {
    "$PULLGATECTL" --config "$PG_NODE_CFG" show --image-ref "$1" --json 2>/dev/null | "$PG_PY" -c '
import json, sys
try:
    rec = json.load(sys.stdin)
except ValueError:
    rec = {}
print(json.dumps(rec.get("credentialMapping", {}).get(sys.argv[1]), sort_keys=True))' "$2"
}
# secrets_of REF IMAGE_NAME: "ns/name/uid:hash" per recorded secret, sorted, space separated.
secrets_of() {
    mapping_of "$1" "$2" | "$PG_PY" -c '
import json, sys
m = json.load(sys.stdin) or {}
print(" ".join(sorted("%s/%s/%s:%s" % (s["namespace"], s["name"], s["uid"], s["credentialHash"])
                      for s in m.get("kubernetesSecrets", []))))'
}
# create_and_start IMAGE MARKER: CreateContainer + StartContainer through the proxy in $POD;
# sets CID, StartContainer's output in PG_OUT; returns StartContainer's status.
create_and_start() {
    CTR_NAME="app-$RANDOM"
    CID=""
    CID="$(cri create --pod "$POD" --pod-config "$POD_CFG" --name "$CTR_NAME" --image "$1" \
        --log-path "$CTR_NAME.log" -- /bin/sh -c "echo $2")" ||
        { pg_node_show_log; pg_check_fail "CreateContainer failed"; return 2; }
    PG_OUT="$(cri start --id "$CID" 2>&1)"
}
expect_runs() { # DESC IMAGE
    local desc="$1" mark="ran-$RANDOM$RANDOM" exit_code
    if create_and_start "$2" "$mark"; then
        exit_code="$(cri wait --id "$CID" --wait-timeout 30)"
        # containerd's shim writes the log asynchronously: wait for the marker, with a deadline.
        if [[ "$exit_code" == 0 ]] && pg_wait_grep "$POD_LOGDIR/$CTR_NAME.log" "$mark" 30; then
            pg_check_ok "$desc: the container started and ran"
        else
            pg_check_fail "$desc: exit code '${exit_code:-?}', marker missing from its log"
        fi
    else
        pg_check_fail "$desc: StartContainer failed"
        printf '%s\n' "$PG_OUT" | sed 's/^/       | /' >&2
    fi
}
expect_denied() { # DESC IMAGE
    local desc="$1"
    if create_and_start "$2" SHOULD-NOT-RUN; then
        pg_check_fail "$desc: StartContainer succeeded"
        return
    fi
    [[ -n "${CID:-}" ]] || return
    pg_expect_contains "$desc: StartContainer's gRPC error carries 'pullgate: denied'" \
        "$PG_OUT" "pullgate: denied"
    printf '%s\n' "$PG_OUT" | grep -o 'pullgate: denied.*' | head -n1 | cut -c1-200 |
        sed 's/^/       reason: /' >&2
    if grep -q SHOULD-NOT-RUN "$POD_LOGDIR/$CTR_NAME.log" 2>/dev/null; then
        pg_check_fail "$desc: the container process ran"
    fi
}
