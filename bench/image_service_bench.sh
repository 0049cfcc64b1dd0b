#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The image service against a bare relay (bench/README.md, "The image service against a bare
# relay"), alone and quickly (~2 min; start_path.sh measures the same rows inside its much longer
# run): containerd 1.6, a registry with htpasswd auth, one image pulled and recorded through
# pullgate-cri with a pod's credentials, then, in one grpc_unary_bench run per call (every side in
# turn, the order rotating):
#   direct        containerd itself
#   relay         bench/grpc_relay (the bare relay on the same gRPC core: the floor)
#   pullgate-cri  this build, deciding (criVerifyPulls, policy AlwaysVerify; the allow path)
#   pump          this build with criVerifyPulls false (ImageStatus relayed undecided: the unary
#                 relay since phase 2b, the byte pump before)
#   base, base-pump   the same two from BASE_BUILD (another build directory), when given: the
#                 before/after of a change measured in the same run, binaries alternating
#   relay-*       RELAY_VARIANTS: space-separated "NAME=ARGS" items, grpc_relay started with ARGS
#                 (commas for spaces) before its two addresses, each one more side (at most 8 in
#                 all), e.g. "relay-bytes=-b relay-poll=-e,GRPC_POLL_STRATEGY=poll"
# Calls: the kubelet's ImageStatus with every pod annotation (~1 KiB) and ListContainers.
#
#   bench/image_service_bench.sh [BUILD_DIR]      (default build-bench)
#
# Needs root and what the integration tests need (containerd 1.6, runc, docker-registry, skopeo,
# umoci, python3-grpcio). Knobs: UNARY_ROUNDS [2000], RECORDS [1] (records in the state directory:
# the pulled one plus gen_records' synthetic ones), BASE_BUILD, RELAY_VARIANTS, PROFILE [0]: 1 runs
# proxy_profile.sh on pullgate-cri (both calls), the pump and the relay (ImageStatus) too,
# PROFILE_CALLS [2000], ROUNDS_REPEAT [1]: the unary runs repeated (each a line set of its own),
# OUT [bench/image_service_results.txt]: raw lines, appended.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
BUILD_DIR="$(cd "${1:-$REPO/build-bench}" && pwd)" || exit 2
UNARY_ROUNDS=${UNARY_ROUNDS:-2000}
RECORDS=${RECORDS:-1}
BASE_BUILD=${BASE_BUILD:-}
RELAY_VARIANTS=${RELAY_VARIANTS:-}
PROFILE=${PROFILE:-0}
PROFILE_CALLS=${PROFILE_CALLS:-2000}
ROUNDS_REPEAT=${ROUNDS_REPEAT:-1}
OUT=${OUT:-$HERE/image_service_results.txt}

export PULLGATE_HOOK="$BUILD_DIR/hooks/pullgate-hook" PULLGATECTL="$BUILD_DIR/tools/pullgatectl"
export PULLGATE_CRI="$BUILD_DIR/cri/pullgate-cri" PG_SOURCE_DIR="$REPO"
BIN="$BUILD_DIR/bench"
for b in "$PULLGATECTL" "$PULLGATE_CRI" "$BIN/gen_records" "$BIN/grpc_relay" "$BIN/grpc_unary_bench"; do
    [[ -x "$b" ]] || { echo "image_service_bench.sh: $b missing" >&2; exit 2; }
done
if [[ -n "$BASE_BUILD" ]]; then
    BASE_BUILD="$(cd "$BASE_BUILD" && pwd)" || exit 2
    [[ -x "$BASE_BUILD/cri/pullgate-cri" ]] || { echo "image_service_bench.sh: $BASE_BUILD/cri/pullgate-cri missing" >&2; exit 2; }
fi
# shellcheck source=test/integration/lib/registry.sh
source "$REPO/test/integration/lib/registry.sh"
# shellcheck source=test/integration/lib/podman.sh
source "$REPO/test/integration/lib/podman.sh" # pg_write_config, pg_cred_hash
# shellcheck source=test/integration/lib/cri_node.sh
source "$REPO/test/integration/lib/cri_node.sh"
pg_node_require

pg_section "registry with htpasswd auth, an image, containerd 1.6, pullgate-cri"
PASS="bench-pw-$RANDOM$RANDOM"
pg_registry_start tenant-a "$PASS"
LAYOUT="$(pg_mktemp_dir oci-layout)/layout"
pg_image_build "$LAYOUT" app "image-service"
pg_image_push "$LAYOUT" app team-a/app:1.0
IMG="$PG_REG_HOST/team-a/app:1.0"
STATE="$(pg_mktemp_dir state)"
chmod 0700 "$STATE"
CFG="$(pg_mktemp_dir cfg)/pullgate.json"
pg_write_config "$CFG" "$STATE" AlwaysVerify none "\"criMetricsListen\": \"127.0.0.1:$(pg_free_port)\""
pg_node_containerd_setup "$CFG" "$PG_REG_HOST"
pg_node_containerd_start || pg_fail "containerd did not come up"
PG_HOOK_SOCK=none
pg_node_proxy_start || pg_fail "pullgate-cri did not serve its socket"

# The pod: its spec as cri_client.py's run-pod saves it (no sandbox is run: ImageStatus and the
# pull's sandbox_config need only its metadata and annotations).
UID_A="$(cat /proc/sys/kernel/random/uuid)"
HASH_A="$(pg_cred_hash tenant-a "$PASS")" || pg_fail "pullgatectl hash"
ANN="$("$PULLGATECTL" --config "$CFG" annotate --namespace team-a --image "$IMG" \
    --secret "team-a/regcred/$UID_A:$HASH_A")" || pg_fail "pullgatectl annotate"
POD_CFG="$PG_CD_DIR/pod.json"
"$PG_PY" - "$POD_CFG" "$(cat /proc/sys/kernel/random/uuid)" "$ANN" <<'EOF' || pg_fail "pod spec"
import json, sys, time
out, uid, ann = sys.argv[1:4]
seen = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".%09dZ" % (time.time_ns() % 1000000000)
json.dump({"name": "pod-a", "namespace": "team-a", "uid": uid, "log_dir": "",
           "annotations": {"kubernetes.io/config.source": "api", "kubernetes.io/config.seen": seen,
                           "pullgate.dev/credentials": ann}}, open(out, "w"))
EOF
export PG_CRI_PASS="$PASS"
cri pull --image "$IMG" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_CFG" \
    >/dev/null || pg_fail "the pull through pullgate-cri"
unset PG_CRI_PASS
if ((RECORDS > 1)); then
    pg_node_proxy_kill TERM
    "$BIN/gen_records" "$STATE" $((RECORDS - 1)) || pg_fail "gen_records"
    pg_node_proxy_start || pg_fail "pullgate-cri did not come back"
fi

REQ="$PG_CD_DIR/imagestatus.req"
"$PG_PY" - "$PG_CD_DIR/gen" "$IMG" "$POD_CFG" "$REQ" <<'EOF' || pg_fail "ImageStatus request"
import json, os, struct, sys
gen, image, cfg, out = sys.argv[1:5]
sys.path.insert(0, os.path.join(os.environ["PG_SOURCE_DIR"], "test", "integration", "cri"))
import cri_client
pb, _ = cri_client.load_modules(gen)
msg = pb.ImageStatusRequest(image=cri_client.pod_image_spec(pb, image, json.load(open(cfg)))).SerializeToString()
open(out, "wb").write(struct.pack(">I", len(msg)) + msg)
EOF

# ------------------------------------------------------------------ the other sides
declare -a SIDES=("direct=unix:$PG_CD_SOCK")
declare -a PIDS=()
declare -A PID_OF=()
# shellcheck disable=SC2016
pg_on_exit 'for p in "${PIDS[@]}"; do pg_kill_wait "$p" 10; done'
start_relay() { # NAME ARGS...
    local name="$1" sock
    shift
    sock="$(pg_mktemp_dir "$name")/relay.sock"
    "$BIN/grpc_relay" "$@" "unix:$sock" "unix:$PG_CD_SOCK" 2>"$PG_CD_DIR/$name.log" &
    PIDS+=($!)
    PID_OF[$name]=$!
    pg_wait_file "$sock" 10 || pg_fail "$name: $(cat "$PG_CD_DIR/$name.log")"
    SIDES+=("$name=unix:$sock")
}
start_cri() { # NAME BINARY VERIFY(true|false)
    local name="$1" bin="$2" verify="$3" dir cfg
    dir="$(pg_mktemp_dir "$name")"
    chmod 0700 "$dir"
    cfg="$dir/pullgate.json"
    if [[ "$verify" == true ]]; then # the same store as pullgate-cri's, its own metrics port
        pg_write_config "$cfg" "$STATE" AlwaysVerify none "\"criMetricsListen\": \"127.0.0.1:$(pg_free_port)\""
    else
        mkdir -m 0700 "$dir/state"
        pg_write_config "$cfg" "$dir/state" AlwaysVerify none \
            "\"criVerifyPulls\": false, \"criMetricsListen\": \"127.0.0.1:$(pg_free_port)\""
    fi
    "$bin" --config "$cfg" --listen "unix://$dir/cri.sock" --runtime-endpoint "unix://$PG_CD_SOCK" \
        --hook-socket none 2>"$dir/cri.log" &
    PIDS+=($!)
    PID_OF[$name]=$!
    pg_wait_file "$dir/cri.sock" 10 || pg_fail "$name: $(tail -c 300 "$dir/cri.log")"
    SIDES+=("$name=unix:$dir/cri.sock")
}
start_relay relay
SIDES+=("pullgate-cri=unix:$PG_PROXY_SOCK")
PID_OF[pullgate-cri]=$PG_PROXY_PID
start_cri pump "$PULLGATE_CRI" false
if [[ -n "$BASE_BUILD" ]]; then
    start_cri base "$BASE_BUILD/cri/pullgate-cri" true
    start_cri base-pump "$BASE_BUILD/cri/pullgate-cri" false
fi
for v in $RELAY_VARIANTS; do
    a=${v#*=}
    v="${v%%=*}=${a//,/ }"
    # shellcheck disable=SC2086  # the variant's arguments are words
    start_relay "${v%%=*}" ${v#*=}
done
sleep 0.5

{
    echo "# image_service_bench.sh $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r)," \
        "commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)${BASE_BUILD:+, base $(git -C "$BASE_BUILD/.." rev-parse --short HEAD 2>/dev/null || echo "$BASE_BUILD")}," \
        "records $RECORDS, load $(cut -d' ' -f1-3 /proc/loadavg)"
    for ((k = 0; k < ROUNDS_REPEAT; k++)); do
        echo "## ImageStatus with pod annotations, $UNARY_ROUNDS rounds, load $(cut -d' ' -f1-3 /proc/loadavg)"
        "$BIN/grpc_unary_bench" -n "$UNARY_ROUNDS" -m /runtime.v1.ImageService/ImageStatus -r "$REQ" "${SIDES[@]}" ||
            pg_fail "grpc_unary_bench ImageStatus"
        echo "## ListContainers, $UNARY_ROUNDS rounds, load $(cut -d' ' -f1-3 /proc/loadavg)"
        "$BIN/grpc_unary_bench" -n "$UNARY_ROUNDS" -m /runtime.v1.RuntimeService/ListContainers "${SIDES[@]}" ||
            pg_fail "grpc_unary_bench ListContainers"
    done
} | tee -a "$OUT"
if ((PROFILE)); then
    {
        profile() { "$HERE/proxy_profile.sh" "$BUILD_DIR" "${PID_OF[$1]}" "$2" "$3" "$4" "$PROFILE_CALLS" "$1 ${3##*/}"; }
        sock_of() { local s; for s in "${SIDES[@]}"; do [[ "${s%%=*}" == "$1" ]] && echo "${s#*=}"; done; }
        echo "# proxy_profile.sh, load $(cut -d' ' -f1-3 /proc/loadavg)"
        profile pullgate-cri "$(sock_of pullgate-cri)" /runtime.v1.ImageService/ImageStatus "$REQ"
        [[ -n "$BASE_BUILD" ]] && profile base "$(sock_of base)" /runtime.v1.ImageService/ImageStatus "$REQ"
        profile pump "$(sock_of pump)" /runtime.v1.ImageService/ImageStatus "$REQ"
        profile relay "$(sock_of relay)" /runtime.v1.ImageService/ImageStatus "$REQ"
        profile pullgate-cri "$(sock_of pullgate-cri)" /runtime.v1.RuntimeService/ListContainers -
        profile relay "$(sock_of relay)" /runtime.v1.RuntimeService/ListContainers -
    } 2>&1 | tee -a "$OUT"
fi
for s in "${!PID_OF[@]}"; do
    printf '# %s memory: %s\n' "$s" "$(grep -E 'VmRSS|VmHWM' /proc/"${PID_OF[$s]}"/status 2>/dev/null | tr -s ' \t' ' ' | tr '\n' ' ')"
done | tee -a "$OUT"
