#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The start path (bench/README.md, "The start path"): what pullgate costs a container start on a
# real node, and what its image service costs per call, as same-run ratios. Needs root and what
# the integration tests need (containerd 1.6, runc, docker-registry, skopeo, umoci, busybox-static,
# python3-grpcio); gnuplot for the plot (`apt-get install gnuplot-nox`; without it, no PNG).
#
#   bench/start_path.sh [BUILD_DIR]        (default build-bench; bench/run.sh builds it)
#
# The node (test/integration/lib/cri_node.sh): containerd 1.6 with three runtime handlers on the
# same runc: `runc`, whose base_runtime_spec runs pullgate-hook (createRuntime, asking
# pullgate-cri's hook server), `plain` without any hook, and `noop` running bench's noop_hook at the
# same stage; pullgate-cri in front of it (image service only, the recommended split); a registry with htpasswd auth; the image pulled once through pullgate-cri
# with the pod's credentials (so the record is pullgate's own), then 0 / 999 / 99,999 synthetic
# records added beside it (gen_records). Policy AlwaysVerify: every start with pullgate is decided.
#
# Measured, per record count, all sides interleaved in one run:
#   1. start_bench.py: ImageStatus with pod annotations + CreateContainer + StartContainer, with
#      pullgate (image service through pullgate-cri, the pod on the hooked handler) against
#      without (all direct, the plain handler), and a third side on a handler running the no-op
#      hook (the floor any hook pays): serial, and START_PARALLEL at once;
#   2. grpc_unary_bench (C client): the kubelet's ImageStatus with pod annotations, direct to
#      containerd vs through grpc_relay (the bare relay, same gRPC core) vs pullgate-cri deciding
#      vs a pullgate-cri with criVerifyPulls false (the byte pump); and once, ListContainers
#      (a proxied unary call) direct vs relay vs pullgate-cri.
# Writes the table to START_OUT (default bench/start_results.md), the raw lines beside it
# (.txt), the plot to START_PLOT (default bench/start_path.png).
#
# Knobs: START_COUNTS ["1 1000 100000"], START_ROUNDS [100] serial starts per side,
# START_PARALLEL [16], START_BATCHES [10] parallel batches per side, UNARY_ROUNDS [2000],
# PULL_ROUNDS [10] PullImages per side at the first record count (the image removed before each:
# what a pull pays end to end, recorded by pullgate-cri vs direct; 0 skips), PROFILE [1]: at the
# first record count, proxy_profile.sh of pullgate-cri (ImageStatus decided, ListContainers), of
# its byte pump and of the relay (the same calls), PROFILE_CALLS [2000] calls each, into the .txt;
# TRACE_ROUNDS [30]: at the first record count, that many more serial rounds under hook_trace.sh
# (perf sched tracepoints): each hook process's exec -> exit inside the real start (0 skips).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
BUILD_DIR="$(cd "${1:-$REPO/build-bench}" && pwd)" || exit 2
START_COUNTS=${START_COUNTS:-"1 1000 100000"}
START_ROUNDS=${START_ROUNDS:-100}
START_PARALLEL=${START_PARALLEL:-16}
START_BATCHES=${START_BATCHES:-10}
UNARY_ROUNDS=${UNARY_ROUNDS:-2000}
PROFILE=${PROFILE:-1}
PROFILE_CALLS=${PROFILE_CALLS:-2000}
PULL_ROUNDS=${PULL_ROUNDS:-10}
TRACE_ROUNDS=${TRACE_ROUNDS:-30}
START_OUT=${START_OUT:-$HERE/start_results.md}
START_PLOT=${START_PLOT:-$HERE/start_path.png}

export PULLGATE_HOOK="$BUILD_DIR/hooks/pullgate-hook" PULLGATECTL="$BUILD_DIR/tools/pullgatectl"
export PULLGATE_CRI="$BUILD_DIR/cri/pullgate-cri" PG_SOURCE_DIR="$REPO"
BIN="$BUILD_DIR/bench"
for b in "$PULLGATE_HOOK" "$PULLGATECTL" "$PULLGATE_CRI" "$BIN/gen_records" "$BIN/grpc_relay" \
    "$BIN/grpc_unary_bench" "$BIN/noop_hook"; do
    [[ -x "$b" ]] || { echo "start_path.sh: $b missing (build it: bench/run.sh)" >&2; exit 2; }
done
# shellcheck source=test/integration/lib/registry.sh
source "$REPO/test/integration/lib/registry.sh"
# shellcheck source=test/integration/lib/podman.sh
source "$REPO/test/integration/lib/podman.sh" # pg_write_config, pg_cred_hash
# shellcheck source=test/integration/lib/cri_node.sh
source "$REPO/test/integration/lib/cri_node.sh"
pg_node_require

kv() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }

# ------------------------------------------------------------------ node
pg_section "registry with htpasswd auth, an image"
PASS="bench-pw-$RANDOM$RANDOM"
pg_registry_start tenant-a "$PASS"
LAYOUT="$(pg_mktemp_dir oci-layout)/layout"
pg_image_build "$LAYOUT" app "start-path"
pg_image_push "$LAYOUT" app team-a/app:1.0
IMG="$PG_REG_HOST/team-a/app:1.0"

pg_section "containerd 1.6 (handlers: runc + pullgate-hook, plain, noop hook), pullgate-cri"
STATE="$(pg_mktemp_dir state)"
chmod 0700 "$STATE"
CFG="$(pg_mktemp_dir cfg)/pullgate.json"
pg_write_config "$CFG" "$STATE" AlwaysVerify none "\"criMetricsListen\": \"127.0.0.1:$(pg_free_port)\""
pg_node_containerd_setup "$CFG" "$PG_REG_HOST"
# The same runc without the hook: the base spec minus its hooks, a handler of its own.
# And a third: the same stage running the no-op hook (what any createRuntime hook costs).
"$PG_PY" -c 'import json, sys
spec = json.load(open(sys.argv[1])); spec.pop("hooks", None); json.dump(spec, open(sys.argv[2], "w"))
spec["hooks"] = {"createRuntime": [{"path": sys.argv[4], "args": ["noop_hook"], "timeout": 10}]}
json.dump(spec, open(sys.argv[3], "w"))' \
    "$PG_CD_DIR/base-spec.json" "$PG_CD_DIR/plain-spec.json" "$PG_CD_DIR/noop-spec.json" \
    "$BIN/noop_hook" || pg_fail "plain and no-op specs"
for h in plain noop; do
    cat >>"$PG_CD_DIR/config.toml" <<EOF

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$h]
  runtime_type = "io.containerd.runc.v2"
  base_runtime_spec = "$PG_CD_DIR/$h-spec.json"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$h.options]
    BinaryName = "$(command -v runc)"
    Root = "$PG_CD_DIR/runc"
    SystemdCgroup = false
EOF
done
pg_node_containerd_start || pg_fail "containerd did not come up"
pg_node_proxy_start || pg_fail "pullgate-cri did not serve its socket"

UID_A="$(cat /proc/sys/kernel/random/uuid)"
HASH_A="$(pg_cred_hash tenant-a "$PASS")" || pg_fail "pullgatectl hash"
ANN="$("$PULLGATECTL" --config "$CFG" annotate --namespace team-a --image "$IMG" \
    --secret "team-a/regcred/$UID_A:$HASH_A")" || pg_fail "pullgatectl annotate"
pg_node_run_pod team-a "$ANN" || { pg_node_show_log; pg_fail "RunPodSandbox (hooked handler)"; }
POD_HOOK="$POD" POD_HOOK_CFG="$POD_CFG"
PLAIN_CFG="$PG_CD_DIR/pod-plain.json"
mkdir -p "$PG_CD_DIR/logs/plain"
POD_PLAIN="$(cri_direct run-pod --name pod-plain --namespace team-a --uid "$(cat /proc/sys/kernel/random/uuid)" \
    --log-dir "$PG_CD_DIR/logs/plain" --runtime-handler plain --save "$PLAIN_CFG" \
    --annotation "pullgate.dev/credentials=$ANN")" || { pg_node_show_log; pg_fail "RunPodSandbox (plain)"; }
PG_NODE_PODS+=("$POD_PLAIN")
NOOP_CFG="$PG_CD_DIR/pod-noop.json"
mkdir -p "$PG_CD_DIR/logs/noop"
POD_NOOP="$(cri_direct run-pod --name pod-noop --namespace team-a --uid "$(cat /proc/sys/kernel/random/uuid)" \
    --log-dir "$PG_CD_DIR/logs/noop" --runtime-handler noop --save "$NOOP_CFG" \
    --annotation "pullgate.dev/credentials=$ANN")" || { pg_node_show_log; pg_fail "RunPodSandbox (no-op hook)"; }
PG_NODE_PODS+=("$POD_NOOP")
export PG_CRI_PASS="$PASS"
cri pull --image "$IMG" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_HOOK_CFG" \
    >/dev/null || pg_fail "the pull through pullgate-cri"
unset PG_CRI_PASS
pg_log "pulled and recorded $IMG; pods $POD_HOOK (hook) and $POD_PLAIN (plain)"

# The bare relay, and a pullgate-cri with criVerifyPulls false (the byte pump), both in front of
# the same containerd.
RELAY_SOCK="$(pg_mktemp_dir relay)/relay.sock"
"$BIN/grpc_relay" "unix:$RELAY_SOCK" "unix:$PG_CD_SOCK" 2>"$PG_CD_DIR/relay.log" &
RELAY_PID=$! # stopped at exit (pg_on_exit)
export RELAY_PID
# shellcheck disable=SC2016
pg_on_exit 'pg_kill_wait "$RELAY_PID" 3'
PUMP_DIR="$(pg_mktemp_dir pump)"
chmod 0700 "$PUMP_DIR"
mkdir -m 0700 "$PUMP_DIR/state"
pg_write_config "$PUMP_DIR/pullgate.json" "$PUMP_DIR/state" AlwaysVerify none \
    "\"criVerifyPulls\": false, \"criMetricsListen\": \"127.0.0.1:$(pg_free_port)\""
"$PULLGATE_CRI" --config "$PUMP_DIR/pullgate.json" --listen "unix://$PUMP_DIR/cri.sock" \
    --runtime-endpoint "unix://$PG_CD_SOCK" --hook-socket none 2>"$PUMP_DIR/cri.log" &
PUMP_PID=$!
export PUMP_PID
# shellcheck disable=SC2016
pg_on_exit 'pg_kill_wait "$PUMP_PID" 10'
pg_wait_file "$RELAY_SOCK" 10 || pg_fail "grpc_relay: $(cat "$PG_CD_DIR/relay.log")"
pg_wait_file "$PUMP_DIR/cri.sock" 10 || pg_fail "pump pullgate-cri: $(tail -c 300 "$PUMP_DIR/cri.log")"

# The kubelet's ImageStatus request for the hooked pod, as bytes (the test client's proto).
REQ="$PG_CD_DIR/imagestatus.req"
"$PG_PY" - "$PG_CD_DIR/gen" "$IMG" "$POD_HOOK_CFG" "$REQ" <<'EOF' || pg_fail "ImageStatus request"
import json, os, struct, sys
gen, image, cfg, out = sys.argv[1:5]
sys.path.insert(0, os.path.join(os.environ["PG_SOURCE_DIR"], "test", "integration", "cri"))
import cri_client
pb, _ = cri_client.load_modules(gen)
spec = json.load(open(cfg))
msg = pb.ImageStatusRequest(image=cri_client.pod_image_spec(pb, image, spec)).SerializeToString()
open(out, "wb").write(struct.pack(">I", len(msg)) + msg)
EOF

RAW="${START_OUT%.md}.txt"
: >"$RAW"
declare -a ROWS=()
row() { ROWS+=("| $1 | $2 | $3 | $4 |"); }
unary() { # TITLE METHOD [REQUESTS] SIDE...   (with REQUESTS, an empty answer is a failure)
    local title="$1" method="$2" req="$3" out base relay line name
    shift 3
    out=$("$BIN/grpc_unary_bench" -n "$UNARY_ROUNDS" -m "$method" ${req:+-r "$req"} "$@") ||
        pg_fail "grpc_unary_bench $method"
    printf '%s %s\n' "# $title" "$(date -u +%H:%M:%S)" >>"$RAW"
    printf '%s\n' "$out" >>"$RAW"
    base=$(printf '%s\n' "$out" | head -1) relay=$(printf '%s\n' "$out" | grep '^relay ')
    row "$title: ${base%% *} (baseline)" "$(kv "$base" median_us) µs (p99 $(kv "$base" p99_us))" "1" "1"
    while read -r line; do
        name=${line%% *}
        [[ "$(kv "$line" fail)" == 0 && ( -z "$req" || "$(kv "$line" empty)" == 0 ) ]] ||
            pg_log "WARNING: $title, $name: fail=$(kv "$line" fail) empty=$(kv "$line" empty)"
        row "$title: $name" "$(kv "$line" median_us) µs (p99 $(kv "$line" p99_us)); $(ratio \
            "$(kv "$line" median_us)" "$(kv "$relay" median_us)")× the relay" \
            "$(ratio "$(kv "$line" median_us)" "$(kv "$base" median_us)")×" \
            "$(ratio "$(kv "$line" p99_us)" "$(kv "$base" p99_us)")×"
    done < <(printf '%s\n' "$out" | tail -n +2)
}

DAT="$PG_CD_DIR/start.dat"
: >"$DAT"
LOAD0="$(cut -d' ' -f1-3 /proc/loadavg)"
first=1
for n in $START_COUNTS; do
    pg_section "$n records"
    pg_node_proxy_kill TERM
    if ((n > 1)); then
        "$BIN/gen_records" "$STATE" $((n - 1)) || pg_fail "gen_records"
    fi
    pg_node_proxy_start || pg_fail "pullgate-cri did not come back"
    before=$(grep -c 'msg="hook decision"' "$PG_CD_DIR/pullgate-cri.log" || true)
    pulls=0
    ((first)) && pulls=$PULL_ROUNDS
    out=$(PG_CRI_PASS="$PASS" "$PG_PY" "$HERE/start_bench.py" --pulls "$pulls" --username tenant-a \
        --password-env PG_CRI_PASS --cd-sock "$PG_CD_SOCK" --proxy-sock "$PG_PROXY_SOCK" \
        --gen-dir "$PG_CD_DIR/gen" --image "$IMG" --pod "$POD_HOOK=$POD_HOOK_CFG" \
        --plain-pod "$POD_PLAIN=$PLAIN_CFG" --noop-pod "$POD_NOOP=$NOOP_CFG" --rounds "$START_ROUNDS" --parallel "$START_PARALLEL" \
        --batches "$START_BATCHES" --label "$n") || pg_fail "start_bench.py"
    decided=$(( $(grep -c 'msg="hook decision"' "$PG_CD_DIR/pullgate-cri.log" || true) - before ))
    printf '# start path, %s records, %s resident hook decisions, load %s\n%s\n' "$n" "$decided" \
        "$(cut -d' ' -f1-3 /proc/loadavg)" "$out" >>"$RAW"
    printf '%s\n' "$out" >&2
    pg_log "pullgate-cri's hook server decided $decided containers"
    sw=$(printf '%s\n' "$out" | grep 'side=with mode=serial') so=$(printf '%s\n' "$out" | grep 'side=without mode=serial')
    pw=$(printf '%s\n' "$out" | grep 'side=with mode=parallel') po=$(printf '%s\n' "$out" | grep 'side=without mode=parallel')
    rs=$(ratio "$(kv "$sw" median_ms)" "$(kv "$so" median_ms)")
    rp=$(ratio "$(kv "$pw" median_ms)" "$(kv "$po" median_ms)")
    ps=$(printf '%s\n' "$out" | grep '^paired side=with mode=serial') pp=$(printf '%s\n' "$out" | grep '^paired side=with mode=parallel')
    ns=$(printf '%s\n' "$out" | grep '^paired side=noop-hook mode=serial') np=$(printf '%s\n' "$out" | grep '^paired side=noop-hook mode=parallel')
    nw=$(printf '%s\n' "$out" | grep '^start side=noop-hook mode=serial') nwp=$(printf '%s\n' "$out" | grep '^start side=noop-hook mode=parallel')
    row "start, serial, $n records (fail $(kv "$sw" fail)/$(kv "$so" fail))" \
        "$(kv "$sw" median_ms) ms with, $(kv "$so" median_ms) ms without" "${rs}×" \
        "p90 $(ratio "$(kv "$sw" p90_ms)" "$(kv "$so" p90_ms)")×; paired: mean $(kv "$ps" mean_ratio)× ± $(kv "$ps" ci95_ratio) (95 %), median of round ratios $(kv "$ps" median_ratio)×"
    row "start, $START_PARALLEL in parallel, $n records: batch wall time" \
        "$(kv "$pw" median_ms) ms with, $(kv "$po" median_ms) ms without" "${rp}×" \
        "p90 $(ratio "$(kv "$pw" p90_ms)" "$(kv "$po" p90_ms)")×; paired: mean $(kv "$pp" mean_ratio)× ± $(kv "$pp" ci95_ratio)"
    row "(floor) start, serial, $n records, a no-op createRuntime hook instead (all direct)" \
        "$(kv "$nw" median_ms) ms, $(kv "$so" median_ms) ms without" "$(ratio "$(kv "$nw" median_ms)" "$(kv "$so" median_ms)")×" \
        "paired: mean $(kv "$ns" mean_ratio)× ± $(kv "$ns" ci95_ratio), median of round ratios $(kv "$ns" median_ratio)×"
    wn=$(printf '%s\n' "$out" | grep '^paired side=with-vs-noop-hook mode=serial')
    row "pullgate's own share: start with pullgate vs with a no-op hook, serial, $n records" "paired, $(kv "$wn" n) rounds" \
        "$(kv "$wn" median_ratio)× (median of round ratios)" "mean $(kv "$wn" mean_ratio)× ± $(kv "$wn" ci95_ratio) (95 %)"
    row "(floor) start, $START_PARALLEL in parallel, $n records, a no-op hook instead" \
        "$(kv "$nwp" median_ms) ms, $(kv "$po" median_ms) ms without" "$(ratio "$(kv "$nwp" median_ms)" "$(kv "$po" median_ms)")×" \
        "paired: mean $(kv "$np" mean_ratio)× ± $(kv "$np" ci95_ratio)"
    if ((pulls > 0)); then
        lw=$(printf '%s\n' "$out" | grep '^pull side=with ') lo=$(printf '%s\n' "$out" | grep '^pull side=without ')
        row "PullImage end to end (recorded through pullgate-cri vs direct), $pulls per side" \
            "$(kv "$lw" median_ms) ms with, $(kv "$lo" median_ms) ms without" \
            "$(ratio "$(kv "$lw" median_ms)" "$(kv "$lo" median_ms)")×" \
            "+$(awk -v a="$(kv "$lw" median_ms)" -v b="$(kv "$lo" median_ms)" 'BEGIN{printf "%.1f ms", a-b}')"
    fi
    printf '%s %s %s %s %s %s %s %s %s %s %s %s %s\n' "$n" "$rs" "$rp" "$(kv "$sw" median_ms)" "$(kv "$so" median_ms)" \
        "$(kv "$pw" median_ms)" "$(kv "$po" median_ms)" "$(kv "$ps" mean_ratio)" "$(kv "$ps" ci95_ratio)" \
        "$(kv "$pp" mean_ratio)" "$(kv "$pp" ci95_ratio)" "$(kv "$ns" mean_ratio)" "$(kv "$ns" ci95_ratio)" >>"$DAT"
    unary "ImageStatus with pod annotations, $n records" /runtime.v1.ImageService/ImageStatus "$REQ" \
        "direct=unix:$PG_CD_SOCK" "relay=unix:$RELAY_SOCK" "pullgate-cri=unix:$PG_PROXY_SOCK" \
        "pump=unix:$PUMP_DIR/cri.sock"
    if ((first)); then
        unary "ListContainers" /runtime.v1.RuntimeService/ListContainers "" \
            "direct=unix:$PG_CD_SOCK" "relay=unix:$RELAY_SOCK" "pullgate-cri=unix:$PG_PROXY_SOCK"
        if ((TRACE_ROUNDS > 0)); then
            pg_log "hook processes traced inside $TRACE_ROUNDS more serial rounds"
            tr=$(TRACE_DIRS="$BUILD_DIR/hooks $BIN" "$HERE/hook_trace.sh" "$PG_CD_DIR" -- "$PG_PY" \
                "$HERE/start_bench.py" --cd-sock "$PG_CD_SOCK" --proxy-sock "$PG_PROXY_SOCK" \
                --gen-dir "$PG_CD_DIR/gen" --image "$IMG" --pod "$POD_HOOK=$POD_HOOK_CFG" \
                --plain-pod "$POD_PLAIN=$PLAIN_CFG" --noop-pod "$POD_NOOP=$NOOP_CFG" \
                --rounds "$TRACE_ROUNDS" --warmup 1 --parallel 0 --label "$n") || pg_fail "traced rounds"
            printf '# hook processes inside the start (hook_trace.sh), %s records\n%s\n' "$n" "$tr" >>"$RAW"
            th=$(printf '%s\n' "$tr" | grep '^trace binary=pullgate-hook ') tn=$(printf '%s\n' "$tr" | grep '^trace binary=noop_hook ')
            row "inside the start: the hook process's exec → exit (perf sched), $(kv "$th" n) / $(kv "$tn" n) starts" \
                "pullgate-hook $(kv "$th" median_us) µs, noop_hook $(kv "$tn" median_us) µs" \
                "$(ratio "$(kv "$th" median_us)" "$(kv "$tn" median_us)")×" \
                "+$(awk -v a="$(kv "$th" median_us)" -v b="$(kv "$tn" median_us)" 'BEGIN{printf "%.0f µs", a-b}') (p90 $(kv "$th" p90_us) / $(kv "$tn" p90_us) µs)"
        fi
        if ((PROFILE)); then
            pg_log "profiles of pullgate-cri, its byte pump and the relay, $PROFILE_CALLS calls each"
            {
                echo "# proxy_profile.sh, $n records, load $(cut -d' ' -f1-3 /proc/loadavg)"
                "$HERE/proxy_profile.sh" "$BUILD_DIR" "$PG_PROXY_PID" "unix:$PG_PROXY_SOCK" \
                    /runtime.v1.ImageService/ImageStatus "$REQ" "$PROFILE_CALLS" "pullgate-cri ImageStatus"
                "$HERE/proxy_profile.sh" "$BUILD_DIR" "$PUMP_PID" "unix:$PUMP_DIR/cri.sock" \
                    /runtime.v1.ImageService/ImageStatus "$REQ" "$PROFILE_CALLS" "pump ImageStatus"
                "$HERE/proxy_profile.sh" "$BUILD_DIR" "$RELAY_PID" "unix:$RELAY_SOCK" \
                    /runtime.v1.ImageService/ImageStatus "$REQ" "$PROFILE_CALLS" "relay ImageStatus"
                "$HERE/proxy_profile.sh" "$BUILD_DIR" "$PG_PROXY_PID" "unix:$PG_PROXY_SOCK" \
                    /runtime.v1.RuntimeService/ListContainers - "$PROFILE_CALLS" "pullgate-cri ListContainers"
                "$HERE/proxy_profile.sh" "$BUILD_DIR" "$RELAY_PID" "unix:$RELAY_SOCK" \
                    /runtime.v1.RuntimeService/ListContainers - "$PROFILE_CALLS" "relay ListContainers"
            } >>"$RAW" 2>&1
        fi
        first=0
    fi
done
printf '# proxy memory after the run: %s\n' "$(grep -E 'VmRSS|VmHWM' /proc/"$PG_PROXY_PID"/status | tr -s ' \t' ' ' | tr '\n' ' ')" >>"$RAW"

{
    echo "Run $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)," \
        "commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown), containerd ${PG_CD_VERSION:-?}," \
        "load average $LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end."
    echo "Start: $START_ROUNDS serial starts per side, $START_BATCHES batches of $START_PARALLEL per side;" \
        "unary: $UNARY_ROUNDS rounds per side (C client). Ratio = median against the baseline of the same run."
    echo
    echo "| measurement | result | ratio (median) | ratio (p90 / p99) |"
    echo "|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
} >"$START_OUT"
cat "$START_OUT"

if command -v gnuplot >/dev/null; then
    gnuplot <<EOF || pg_log "WARNING: gnuplot failed"
set terminal pngcairo size 960,600 font ",10"
set output "$START_PLOT"
set title "Container start (ImageStatus + CreateContainer + StartContainer), containerd 1.6: with pullgate / without\n$(date -u +%Y-%m-%d), $(nproc) CPUs, load $LOAD0"
set logscale x
set xlabel "records in the state directory"
set ylabel "median time with pullgate / without"
set xrange [0.5:200000]
set yrange [*:*]
set offsets 0, 0, 0.05, 0.05
set grid
set key outside bottom center horizontal maxrows 3
f(x) = 1.02
set ylabel "time with pullgate / without"
plot "$DAT" using 1:8:9 with yerrorlines lw 2 pt 7 lc rgb "#1f77b4" title "serial: paired mean, 95 % interval", \
     "$DAT" using 1:2 with points pt 6 ps 1.5 lc rgb "#1f77b4" title "serial: ratio of medians", \
     "$DAT" using (\$1*1.15):10:11 with yerrorlines lw 2 pt 5 lc rgb "#ff7f0e" title "$START_PARALLEL in parallel (batch wall time): paired mean, 95 %", \
     "$DAT" using (\$1*1.15):3 with points pt 4 ps 1.5 lc rgb "#ff7f0e" title "$START_PARALLEL in parallel: ratio of medians", \
     "$DAT" using (\$1/1.15):12:13 with yerrorlines lw 1 dt 3 pt 2 lc rgb "#555555" title "serial, a no-op hook instead of pullgate (the floor of any hook)", \
     f(x) with lines dt 2 lc rgb "red" title "target 1.02x", 1 with lines lc rgb "gray" notitle
EOF
    [[ -s "$START_PLOT" ]] && pg_log "plot: $START_PLOT"
else
    pg_log "no gnuplot: no plot (apt-get install gnuplot-nox)"
fi
