#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgate-cri's resident hook server: the hook as deployed against a no-op hook, where the
# daemon's time goes per decision, and its memory and decision latency at scale
# (bench/README.md, "The hook at the exec floor" and "Scale"). Needs root (the hook server
# answers uid 0 only); strace and perf for the profile parts (skipped without them).
#
#   bench/resident_bench.sh [BUILD_DIR]    (default build-bench; bench/run.sh builds it)
#
# 1. exec_bench: noop_hook vs pullgate-hook answered by pullgate-cri (10k records, CRI-O's 7 KiB
#    config.json, the allow path), interleaved: ratio and fixed cost (median difference), and
#    paired per round (paired_stats.py: the median per-round ratio and difference, 95 % intervals);
# 2. strace -c of every pullgate-cri thread over PROFILE_RUNS hook runs: syscalls per request;
# 3. perf record (cpu-clock) of pullgate-cri over PROFILE_RUNS hook runs, and its CPU time per
#    decision (/proc/PID/stat): the top symbols, by DSO and by function;
# 4. hook_decide_bench: three pullgate-cri, each its own store, asked in turn request by request
#    over the hook socket: 1,000 records / 1 image (the baseline), 100,000 records / 1 image,
#    100,000 records / SCALE_IMAGES images; p50/p99 and each daemon's VmRSS/VmHWM before and after.
# Raw output and the profiles go to RESIDENT_OUT (default bench/resident_results.txt).
#
# With noop_hook_static built (a static pullgate-hook, PG_HOOK_STATIC_PIE), 1 also sets both
# hooks against it: hook_static_ratio, hook_base_static_ratio.
# BASE_BUILD=DIR (a build of another commit, e.g. the previous release's, with the same targets)
# adds that commit's pullgate-hook + pullgate-cri as a third side of 1 ("hook_base", interleaved
# with the others), its CPU per decision and syscalls beside these in 2, and its three daemons
# beside these in 4 ("base_base", "hot_base", "wide_base"): before and after in one run.
#
# 5. sizing (SIZING_IMAGES > 0): three pullgate-cri on the SCALE_RECORDS store, each with other
#    cache bounds (small: 512 records / 8 MiB / 8,192 absences; the defaults; large: 16,384 /
#    256 MiB / 524,288), asked SIZING_CALLS times over SIZING_IMAGES images: VmRSS/VmHWM, p50/p99.
#
# Knobs: HOOK_RUNS [1000], PROFILE_RUNS [300], SCALE_RECORDS [100000], SCALE_IMAGES [5000],
# SCALE_CALLS [20000], SIZING_IMAGES [20000; 0: skip], SIZING_CALLS [40000],
# BENCH_WORK (scratch, default a new /tmp/pullgate-resident.*).
set -eu # not pipefail: the reports are cut with head
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
BUILD_DIR=$(cd "${1:-$repo/build-bench}" && pwd)
HOOK_RUNS=${HOOK_RUNS:-1000}
PROFILE_RUNS=${PROFILE_RUNS:-300}
SCALE_RECORDS=${SCALE_RECORDS:-100000}
SCALE_IMAGES=${SCALE_IMAGES:-5000}
SCALE_CALLS=${SCALE_CALLS:-20000}
SIZING_IMAGES=${SIZING_IMAGES:-20000}
SIZING_CALLS=${SIZING_CALLS:-40000}
OUT=${RESIDENT_OUT:-$here/resident_results.txt}
bin=$BUILD_DIR/bench hook=$BUILD_DIR/hooks/pullgate-hook cri=$BUILD_DIR/cri/pullgate-cri
BASE_BUILD=${BASE_BUILD:-}
[ -z "$BASE_BUILD" ] || BASE_BUILD=$(cd "$BASE_BUILD" && pwd)

log() { printf '== %s\n' "$*" >&2; }
kv() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
say() { printf '%s\n' "$*" | tee -a "$OUT"; }

if [ -n "${BENCH_WORK:-}" ]; then work=$BENCH_WORK; mkdir -p "$work"; else
    work=$(mktemp -d /tmp/pullgate-resident.XXXXXX); fi
chmod 0700 "$work"
cri_pids=()
stop_all() {
    local p
    for p in "${cri_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    cri_pids=()
}
if [ -n "${BENCH_WORK:-}" ]; then trap stop_all EXIT; else trap 'stop_all; rm -rf "$work"' EXIT; fi

store_for() { # N: a store of N synthetic records, made once
    local dir=$work/store-$1
    [ -d "$dir/pulled" ] || { log "generating $1 records"; "$bin/gen_records" "$dir" "$1"; }
    printf '%s\n' "$dir"
}
# start_cri NAME STORE [CRI [MEMBERS]]: pullgate-cri (or CRI) with its hook server on
# $work/NAME/hook.sock, MEMBERS (",\"key\":value...") added to its configuration; sets cri_pid, cfg.
start_cri() {
    local d=$work/$1 k daemon=${3:-$cri}
    mkdir -p "$d"; chmod 0700 "$d"
    cfg=$d/pullgate.json
    printf '{"stateDir":"%s","readOnlyRecordDirs":[],"dbus":"none","logLevel":"info","criMetricsListen":"none"%s}\n' \
        "$2" "${4:-}" >"$cfg"
    local t0; t0=$(date +%s%N)
    "$daemon" --config "$cfg" --listen "unix://$d/cri.sock" --runtime-endpoint "unix://$d/no-runtime.sock" \
        --hook-socket "$d/hook.sock" 2>"$d/cri.log" &
    cri_pid=$!
    cri_pids+=("$cri_pid")
    for ((k = 0; k < 400; k++)); do
        grep -q 'hook server listening' "$d/cri.log" 2>/dev/null && break
        sleep 0.05
    done
    log "$1: pullgate-cri serving after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}
cpu_us() { awk '{ printf "%d", ($14 + $15) * 1000000 / '"$(getconf CLK_TCK)"' }' "/proc/$1/stat"; }
mem() { grep -E '^(VmRSS|VmHWM)' "/proc/$1/status" | awk '{ printf "%s %d KiB ", $1, $2 }'; }

: >"$OUT"
say "# resident_bench.sh, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown), load $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$BASE_BUILD" ] || say "# base: $BASE_BUILD, commit $(git -C "$BASE_BUILD" rev-parse --short HEAD 2>/dev/null || echo unknown)"

# ------------------------------------------------------------ bundle for the exec'd hook
store=$(store_for 10000)
i=$(( 10000 / 2 + 7 ))
hd=$work/hook
mkdir -p "$hd/bundle"
"$here/crio_config.sh" "$("$bin/gen_records" --print-image $i)" "$("$bin/gen_records" --print-ref $i)" \
    "$("$bin/gen_records" --print-ns $i)" "$("$bin/gen_records" --print-annotation $i)" >"$hd/bundle/config.json"
printf '{"ociVersion":"1.0.2","id":"0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0","status":"created","pid":4242,"bundle":"%s","annotations":{"io.container.manager":"cri-o"}}' \
    "$hd/bundle" >"$hd/state.json"
start_cri hookd "$store"
hook_pid=$cri_pid hook_cfg=$cfg
hook_cmd=("$hook" --config "$hook_cfg" --daemon-socket "$work/hookd/hook.sock")
sides=(noop -- "$bin/noop_hook" :: hook -- "${hook_cmd[@]}")
# A static pullgate-hook (PG_HOOK_STATIC_PIE) is also set against a static no-op hook.
[ ! -x "$bin/noop_hook_static" ] || sides+=(:: noop_static -- "$bin/noop_hook_static")
if [ -n "$BASE_BUILD" ]; then
    start_cri hookd_base "$store" "$BASE_BUILD/cri/pullgate-cri"
    base_pid=$cri_pid
    base_cmd=("$BASE_BUILD/hooks/pullgate-hook" --config "$cfg" --daemon-socket "$work/hookd_base/hook.sock")
    sides+=(:: hook_base -- "${base_cmd[@]}")
fi

# ------------------------------------------------------------ 1. ratio and fixed cost
log "1. exec_bench, $HOOK_RUNS runs per side: no-op hook vs pullgate-hook + resident pullgate-cri"
out=$("$bin/exec_bench" -n "$HOOK_RUNS" -w 20 -s "$hd/state.json" -o "$hd/run" -r "$hd/raw" "${sides[@]}")
say "$out"
# Paired per round (exec_bench rotates the order each round): what a load burst does to both
# sides of a round cancels out of their ratio; the medians alone keep it.
for pair in hook/noop hook_base/noop hook/noop_static hook_base/noop_static hook/hook_base; do
    a=${pair%/*} b=${pair#*/}
    [ -f "$hd/raw.$a.us" ] && [ -f "$hd/raw.$b.us" ] || continue
    say "$(/usr/bin/python3 "$here/paired_stats.py" "$hd/raw.$a.us" "$hd/raw.$b.us" "$pair")"
done
for floor in noop noop_static; do
    n=$(printf '%s\n' "$out" | grep "^$floor ") || continue
    vs=${floor#noop}
    for side in hook hook_base; do
        h=$(printf '%s\n' "$out" | grep "^$side ") || continue
        suffix=${side#hook}$vs
        say "hook${suffix}_ratio median=$(ratio "$(kv "$h" median_us)" "$(kv "$n" median_us)") p90=$(ratio "$(kv "$h" p90_us)" "$(kv "$n" p90_us)") min=$(ratio "$(kv "$h" min_us)" "$(kv "$n" min_us)")"
        say "hook${suffix}_fixed_cost median_ms=$(awk -v a="$(kv "$h" median_us)" -v b="$(kv "$n" median_us)" 'BEGIN{printf "%.3f", (a-b)/1000}') min_ms=$(awk -v a="$(kv "$h" min_us)" -v b="$(kv "$n" min_us)" 'BEGIN{printf "%.3f", (a-b)/1000}')"
    done
done

# daemon_profile NAME PID CMD...: its CPU per decision (unprofiled), then strace -c of its threads.
daemon_profile() {
    local name=$1 pid=$2 c0 c1 t st
    shift 2
    c0=$(cpu_us "$pid")
    "$bin/exec_bench" -n "$PROFILE_RUNS" -w 0 -s "$hd/state.json" -o "$hd/cpu" hook -- "$@" >/dev/null
    c1=$(cpu_us "$pid")
    say "${name}_daemon_cpu_per_decision_us=$(( (c1 - c0) / PROFILE_RUNS )) (user+system of pullgate-cri over $PROFILE_RUNS hook runs, clock tick $(getconf CLK_TCK)/s)"
    if ! command -v strace >/dev/null; then
        say "# strace not installed: syscall counts skipped"
        return
    fi
    log "2. strace -c of pullgate-cri ($name) over $PROFILE_RUNS hook runs"
    local tids=()
    for t in /proc/"$pid"/task/*; do tids+=(-p "${t##*/}"); done
    strace -c -o "$hd/strace-$name.txt" "${tids[@]}" 2>/dev/null &
    st=$!
    sleep 1
    "$bin/exec_bench" -n "$PROFILE_RUNS" -w 0 -s "$hd/state.json" -o "$hd/strace" hook -- "$@" >/dev/null
    sleep 0.5
    kill -INT "$st"; wait "$st" || true
    say "# strace -c, all pullgate-cri ($name) threads, $PROFILE_RUNS hook requests (calls / $PROFILE_RUNS = per request):"
    awk -v n="$PROFILE_RUNS" '/^ *[0-9]/ && NF >= 5 { printf "  %-20s %8.2f per request\n", $NF, $4 / n }' \
        "$hd/strace-$name.txt" | tee -a "$OUT"
}

# ------------------------------------------------------------ 2. CPU and syscalls per request
daemon_profile hook "$hook_pid" "${hook_cmd[@]}"
[ -z "$BASE_BUILD" ] || daemon_profile hook_base "$base_pid" "${base_cmd[@]}"

# ------------------------------------------------------------ 3. perf profile
if command -v perf >/dev/null; then
    log "3. perf record of pullgate-cri over $PROFILE_RUNS hook runs"
    perf record -q -e cpu-clock -F 10000 --call-graph dwarf,16384 -p "$hook_pid" -o "$hd/perf.data" 2>"$hd/perf.err" &
    pf=$!
    sleep 1
    "$bin/exec_bench" -n "$PROFILE_RUNS" -w 0 -s "$hd/state.json" -o "$hd/perf" hook -- "${hook_cmd[@]}" >/dev/null
    kill -INT "$pf"; wait "$pf" || true
    if [ -s "$hd/perf.data" ]; then
        say "# perf: pullgate-cri's CPU samples while deciding $PROFILE_RUNS hook requests, by DSO"
        perf report -i "$hd/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -12 | tee -a "$OUT"
        say "# by symbol (self)"
        perf report -i "$hd/perf.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -40 | tee -a "$OUT"
        say "# by symbol (children: inclusive), the decision's parts"
        perf report -i "$hd/perf.data" --children --sort sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -50 | tee -a "$OUT"
    else
        say "# perf record failed: $(head -c 300 "$hd/perf.err")"
    fi
else
    say "# perf not installed: profile skipped"
fi
say "hook_daemon_memory $(mem "$hook_pid")"
stop_all

# ------------------------------------------------------------ 4. scale
log "4. scale: $SCALE_RECORDS records / $SCALE_IMAGES images, against 1,000 records / 1 image"
small=$(store_for 1000)
big=$(store_for "$SCALE_RECORDS")
"$here/crio_config.sh" @IMAGE@ @REF@ @NS@ @CREDS@ >"$work/template.json"
declare -A pid_of cfg_of
scale_sides=(base hot wide)
[ -z "$BASE_BUILD" ] || scale_sides+=(base_base hot_base wide_base)
args=()
for side in "${scale_sides[@]}"; do
    s=$big; [ "${side%_base}" = base ] && s=$small
    daemon=$cri; [ "$side" = "${side%_base}" ] || daemon=$BASE_BUILD/cri/pullgate-cri
    start_cri "scale-$side" "$s" "$daemon"
    pid_of[$side]=$cri_pid cfg_of[$side]=$cfg
    say "scale_memory_at_start side=$side $(mem "$cri_pid")"
    case $side in
    base*) args+=("$side,$work/scale-$side/hook.sock,$cfg,1000,1") ;;
    hot*) args+=("$side,$work/scale-$side/hook.sock,$cfg,$SCALE_RECORDS,1") ;;
    wide*) args+=("$side,$work/scale-$side/hook.sock,$cfg,$SCALE_RECORDS,$SCALE_IMAGES") ;;
    esac
done
mkdir -p "$work/bundles"
out=$("$bin/hook_decide_bench" -t "$work/template.json" -d "$work/bundles" -n "$SCALE_CALLS" "${args[@]}")
say "$out"
for side in "${scale_sides[@]}"; do
    say "scale_memory_after side=$side $(mem "${pid_of[$side]}")"
done
for suffix in "" _base; do
    b=$(printf '%s\n' "$out" | grep "^base$suffix ") || continue
    w=$(printf '%s\n' "$out" | grep "^wide$suffix ") t=$(printf '%s\n' "$out" | grep "^hot$suffix ")
    say "scale_ratio$suffix wide/base median=$(ratio "$(kv "$w" median_us)" "$(kv "$b" median_us)") p99=$(ratio "$(kv "$w" p99_us)" "$(kv "$b" p99_us)"); hot/base median=$(ratio "$(kv "$t" median_us)" "$(kv "$b" median_us)") p99=$(ratio "$(kv "$t" p99_us)" "$(kv "$b" p99_us)")"
done
stop_all

# ------------------------------------------------------------ 5. sizing
if [ "$SIZING_IMAGES" -gt 0 ]; then
    log "5. sizing: $SIZING_IMAGES images of $SCALE_RECORDS records under three cache bounds"
    declare -A bounds=(
        [small]=',"criRecordCacheEntries":512,"criRecordCacheMiB":8,"criAbsenceCacheEntries":8192'
        [default]=''
        [large]=',"criRecordCacheEntries":16384,"criRecordCacheMiB":256,"criAbsenceCacheEntries":524288')
    args=()
    for side in small default large; do
        start_cri "size-$side" "$big" "$cri" "${bounds[$side]}"
        pid_of[$side]=$cri_pid
        say "sizing_memory_at_start side=$side $(mem "$cri_pid")"
        args+=("$side,$work/size-$side/hook.sock,$cfg,$SCALE_RECORDS,$SIZING_IMAGES")
    done
    out=$("$bin/hook_decide_bench" -t "$work/template.json" -d "$work/bundles" -n "$SIZING_CALLS" "${args[@]}")
    say "$out"
    for side in small default large; do
        say "sizing_memory_after side=$side $(mem "${pid_of[$side]}")"
    done
    stop_all
fi
say "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
