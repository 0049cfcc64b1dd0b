#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# pullgate benchmarks: builds (Release, build-bench/), runs every benchmark,
# prints a Markdown table and writes it to bench/results.md. Benchmarks
# report; they never fail (exit status is 0 unless the build or a driver
# breaks). See bench/README.md.
#
# Knobs (environment):
#   HOOK_RUNS=300        exec runs per command for the hook end-to-end bench
#   HOOK_COUNTS="10000 100000"  record counts on disk for the hook bench
#   DECIDE_CALLS=20000   pg_decide calls per measurement
#   SCALE_COUNTS="1000 10000 100000"  decision/prune scaling points
#   WRITE_CALLS=100      durable writes per side
#   PODMAN_RUNS=40       podman runs per side (0 skips; skipped without podman/runc)
#   PODMAN_TRACE_RUNS=10 podman runs per side traced with perf sched events, to time
#                        the hook inside podman (0 or no perf skips)
#   BIG_SECRETS=1000     secrets in the one-big-record bench
#   RODIR_COUNTS="100000"  kubelet-directory sizes for the read-only names cache bench
#                        ("" skips; "100000 200000" is the issue's pair)
#   PRUNE_RECORDS=10000  records prune walks while intents are timed (0 skips)
#   ROUNDS_CALLS=100     PullImages recorded per side in the fsync-rounds bench (0 skips)
#   RESIDENT=1           resident_bench.sh: the resident hook's ratio, fixed cost, syscalls and
#                        profile per decision, pullgate-cri at 100k records / 5,000 images (0 skips)
#   START_PATH=0         1 runs start_path.sh too: container starts on a real containerd 1.6 with and
#                        without pullgate, the image service's unary ratios (~10 min; root, containerd)
#   BENCH_WORK=DIR       scratch directory (default: a new /tmp/pullgate-bench.XXXX, removed)
#   BUILD_DIR=DIR        build directory (default: <repo>/build-bench)
#   SKIP_BUILD=1         use an existing build
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$repo/build-bench}
HOOK_RUNS=${HOOK_RUNS:-300}
HOOK_COUNTS=${HOOK_COUNTS:-"10000 100000"}
DECIDE_CALLS=${DECIDE_CALLS:-20000}
SCALE_COUNTS=${SCALE_COUNTS:-"1000 10000 100000"}
WRITE_CALLS=${WRITE_CALLS:-100}
PODMAN_RUNS=${PODMAN_RUNS:-40}
PODMAN_TRACE_RUNS=${PODMAN_TRACE_RUNS:-10}
BIG_SECRETS=${BIG_SECRETS:-1000}
RODIR_COUNTS=${RODIR_COUNTS-100000}
PRUNE_RECORDS=${PRUNE_RECORDS:-10000}
ROUNDS_CALLS=${ROUNDS_CALLS:-100}
JOBS=${JOBS:-2}

log() { printf '== %s\n' "$*" >&2; }

if [ "${SKIP_BUILD:-0}" = 0 ]; then  # SKIP_BUILD unset, empty or 0 builds; 1 reuses
    log "building (Release) in $BUILD_DIR"
    cmake -S "$repo" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPG_BUILD_TESTS=OFF \
        -DPG_BUILD_BENCH=ON >/dev/null
    cmake --build "$BUILD_DIR" -j"$JOBS" --target pullgate-hook pullgate-hook-local pullgate-cri \
        pg_noop_hook pg_exec_bench pg_gen_records pg_decide_bench pg_write_bench \
        pg_record_cache_bench pg_prune_bench pg_pull_rounds_bench pg_hook_local_nospool \
        pullgatectl pg_grpc_relay pg_grpc_unary_bench pg_hook_decide_bench >/dev/null
fi
bin=$BUILD_DIR/bench
hook=$BUILD_DIR/hooks/pullgate-hook             # the thin client the runtimes run
hook_local=$BUILD_DIR/hooks/pullgate-hook-local # decides in its own process (the fallback)
cri=$BUILD_DIR/cri/pullgate-cri                 # holds the resident hook server

if [ -n "${BENCH_WORK:-}" ]; then
    work=$BENCH_WORK
    mkdir -p "$work"
else
    work=$(mktemp -d /tmp/pullgate-bench.XXXXXX)
    trap 'rm -rf "$work"' EXIT
fi
chmod 0700 "$work"

# key=value extraction from a driver's output line: kv "$line" key
kv() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
# met VALUE OP LIMIT -> yes/no
met() { awk -v v="$1" -v l="$3" -v op="$2" 'BEGIN { if (v == "n/a" || v == "") { print "n/a"; exit }
        ok = (op == "le") ? (v <= l) : (v >= l); print ok ? "yes" : "no" }'; }

rows=()
row() { rows+=("| $1 | $2 | $3 | $4 | $5 | $6 |"); }

# Records are generated once per count and reused.
store_for() {
    local n=$1 dir=$work/store-$1
    if [ ! -d "$dir/pulled" ]; then
        log "generating $n records"
        "$bin/gen_records" "$dir" "$n"
    fi
    printf '%s\n' "$dir"
}

# A bundle + OCI state + hook config for record I of a store.
setup_hook() {
    local n=$1 store=$2 dir=$work/hook-$1 i=$(( $1 / 2 + 7 ))
    mkdir -p "$dir/bundle"
    "$here/crio_config.sh" "$("$bin/gen_records" --print-image $i)" \
        "$("$bin/gen_records" --print-ref $i)" "$("$bin/gen_records" --print-ns $i)" \
        "$("$bin/gen_records" --print-annotation $i)" >"$dir/bundle/config.json"
    printf '{"ociVersion":"1.0.2","id":"0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0","status":"created","pid":4242,"bundle":"%s","annotations":{"io.container.manager":"cri-o"}}' \
        "$dir/bundle" >"$dir/state.json"
    printf '{"stateDir":"%s","readOnlyRecordDirs":[],"dbus":"none","logLevel":"info","criMetricsListen":"none"}\n' \
        "$store" >"$dir/pullgate.json"
    # The same node with pullgate-cri's /metrics on (a second config file: the hook
    # server decides only for the file its daemon loaded).
    printf '{"stateDir":"%s","readOnlyRecordDirs":[],"dbus":"none","logLevel":"info","criMetricsListen":"127.0.0.1:%s"}\n' \
        "$store" "$(free_port)" >"$dir/pullgate-scraped.json"
    printf '%s\n' "$dir"
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# scrape_every_second CFG: GET /metrics of the pullgate-cri serving CFG's criMetricsListen, once a
# second, as Prometheus does, until killed (sets scraper_pid).
scraper_pid=""
scrape_every_second() {
    local addr; addr=$(sed -n 's/.*"criMetricsListen":"\([^"]*\)".*/\1/p' "$1")
    ( while :; do curl -s -o /dev/null "http://$addr/metrics" || true; sleep 1; done ) &
    scraper_pid=$!
}

# pullgate-cri with its hook server on DIR/hook.sock for config CFG (the
# runtime endpoint names nothing: the proxy connects lazily, the hook server
# needs no runtime). Adds its pid to cri_pids; stop_cri stops them all.
cri_pids=()
start_cri() {
    local dir=$1 cfg=$2 k
    mkdir -p "$dir"
    chmod 0700 "$dir"
    "$cri" --config "$cfg" --listen "unix://$dir/cri.sock" --runtime-endpoint "unix://$dir/no-runtime.sock" \
        --hook-socket "$dir/hook.sock" 2>"$dir/cri.log" &
    cri_pids+=($!)
    for ((k = 0; k < 100; k++)); do
        grep -q 'hook server listening' "$dir/cri.log" 2>/dev/null && return 0
        sleep 0.05
    done
    log "WARNING: pullgate-cri's hook server did not start: $(tail -c 400 "$dir/cri.log")"
}
stop_cri() {
    local p
    if [ -n "$scraper_pid" ]; then kill "$scraper_pid" 2>/dev/null || true; wait "$scraper_pid" 2>/dev/null || true; fi
    scraper_pid=""
    for p in "${cri_pids[@]}"; do
        kill -TERM "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    cri_pids=()
}
if [ -n "${BENCH_WORK:-}" ]; then trap 'stop_cri' EXIT; else trap 'stop_cri; rm -rf "$work"' EXIT; fi

# ---------------------------------------------------------------- 1 + 5
# Four sides interleaved in one exec_bench run: the no-op floor; pullgate-hook
# (thin) with pullgate-cri resident holding the same config (the node's path);
# pullgate-hook-local (what each run cost before, and the fallback's decision), and the same
# without the local decisions spool (bench-only build);
# the thin hook with no daemon (the fallback path end to end: exec + exec).
rss_hook="" rss_noop="" rss_local=""
declare -A eb_hook eb_noop
eb_side() { # NAME LABEL N OUT
    local line noop; line=$(printf '%s\n' "$4" | grep "^$1 ") noop=$(printf '%s\n' "$4" | grep '^noop ')
    if [ "$(kv "$line" fail)" != 0 ]; then
        log "WARNING: $1 denied: $(head -c 400 "$hd/run.$1.err")"
    fi
    local r; r=$(ratio "$(kv "$line" median_us)" "$(kv "$noop" median_us)")
    local goal="(info)" verdict="—"
    [ "$1" = hook ] && goal="≤ 1.5×" verdict=$(met "$r" le 1.5)
    row "$2, $3 records: median" "$(kv "$line" median_us) µs" \
        "no-op exec $(kv "$noop" median_us) µs" "${r}×" "$goal" "$verdict"
    r=$(ratio "$(kv "$line" p90_us)" "$(kv "$noop" p90_us)")
    row "$2, $3 records: p90" "$(kv "$line" p90_us) µs" \
        "no-op exec $(kv "$noop" p90_us) µs" "${r}×" "(info)" "—"
}
for n in $HOOK_COUNTS; do
    store=$(store_for "$n")
    hd=$(setup_hook "$n" "$store")
    start_cri "$hd/cri" "$hd/pullgate.json"
    start_cri "$hd/cri-scraped" "$hd/pullgate-scraped.json"
    scrape_every_second "$hd/pullgate-scraped.json"
    log "hook end-to-end, $n records, $HOOK_RUNS runs each (thin+daemon, the same with /metrics scraped every second, local, fallback, no-op floor; interleaved)"
    out=$("$bin/exec_bench" -n "$HOOK_RUNS" -w 20 -s "$hd/state.json" -o "$hd/run" \
        noop -- "$bin/noop_hook" \
        :: hook -- "$hook" --config "$hd/pullgate.json" --daemon-socket "$hd/cri/hook.sock" \
        :: scraped -- "$hook" --config "$hd/pullgate-scraped.json" --daemon-socket "$hd/cri-scraped/hook.sock" \
        :: local -- "$hook_local" --config "$hd/pullgate.json" \
        :: nospool -- "$bin/hook_local_nospool" --config "$hd/pullgate.json" \
        :: fallback -- "$hook" --config "$hd/pullgate.json" --daemon-socket "$hd/no-daemon/hook.sock")
    stop_cri
    printf '%s\n' "$out" >"$hd/exec_bench.out"
    decided=$(grep -c 'msg="hook decision"' "$hd/cri/cri.log" || true)
    [ "$decided" -ge "$HOOK_RUNS" ] || log "WARNING: pullgate-cri decided $decided of $HOOK_RUNS thin-hook runs"
    hk=$(printf '%s\n' "$out" | grep '^hook ') noop=$(printf '%s\n' "$out" | grep '^noop ')
    lc=$(printf '%s\n' "$out" | grep '^local ')
    eb_hook[$n]=$(kv "$hk" median_us) eb_noop[$n]=$(kv "$noop" median_us)
    eb_side hook "hook end-to-end (pullgate-hook, pullgate-cri resident)" "$n" "$out"
    # Issue 21: a Prometheus scraping pullgate-cri every second costs the hook nothing measurable.
    sc=$(printf '%s\n' "$out" | grep '^scraped ')
    r=$(ratio "$(kv "$sc" median_us)" "$(kv "$hk" median_us)")
    row "hook end-to-end with pullgate-cri's /metrics scraped every second, $n records: median" \
        "$(kv "$sc" median_us) µs" "not scraped $(kv "$hk" median_us) µs" "${r}×" "≤ 1.05× (no measurable time)" \
        "$(met "$r" le 1.05)"
    eb_side local "pullgate-hook-local (decides in-process)" "$n" "$out"
    # Issue 30: the local decisions spool (one appended line per decision) costs ~nothing.
    ns=$(printf '%s\n' "$out" | grep '^nospool ')
    r=$(ratio "$(kv "$lc" median_us)" "$(kv "$ns" median_us)")
    row "pullgate-hook-local with its decision spooled for the metrics, $n records: median" \
        "$(kv "$lc" median_us) µs" "without the spool $(kv "$ns" median_us) µs" "${r}×" \
        "≤ 1.05× (one appended line)" "$(met "$r" le 1.05)"
    eb_side fallback "pullgate-hook, no daemon (fallback: exec of the local hook)" "$n" "$out"
    rss_hook=$(kv "$hk" maxrss_kib) rss_noop=$(kv "$noop" maxrss_kib) rss_local=$(kv "$lc" maxrss_kib)
done

# ---------------------------------------------------------------- 2 + 6
declare -A dec_p50 dec_p99 prune_us
for n in $SCALE_COUNTS; do
    store=$(store_for "$n")
    log "pg_decide, $n records, $DECIDE_CALLS calls"
    line=$("$bin/decide_bench" decide "$store" "$n" "$DECIDE_CALLS" | grep '^decide_')
    dec_p50[$n]=$(kv "$line" p50_us) dec_p99[$n]=$(kv "$line" p99_us)
    log "prune scan, $n records"
    line=$("$bin/decide_bench" prune "$store" "$n" | grep '^prune_')
    prune_us[$n]=$(kv "$line" us_per_record)
done
first=${SCALE_COUNTS%% *} last=${SCALE_COUNTS##* }
r=$(ratio "${dec_p50[$last]}" 15)
row "pg_decide, $last records: p50" "${dec_p50[$last]} µs" "kubelet ~15 µs (cached)" "${r}×" "(info)" "—"
r=$(ratio "${dec_p99[$last]}" 66)
row "pg_decide, $last records: p99" "${dec_p99[$last]} µs" "kubelet ~66 µs (from disk)" "${r}×" \
    "p99 ≤ 20 µs" "$(met "${dec_p99[$last]}" le 20)"
# A long-lived host with the record cache (plugin/store/record_cache.c), interleaved
# with a parse per lookup and a fixed loop as long as a cached lookup (noise).
store=$(store_for "$last")
log "record cache, $last records, $DECIDE_CALLS lookups per side"
out=$("$bin/record_cache_bench" "$store" "$last" "$DECIDE_CALLS")
rc_parse=$(printf '%s\n' "$out" | grep '^lookup_parse_') rc_cache=$(printf '%s\n' "$out" | grep '^lookup_cache_')
rc_noise=$(printf '%s\n' "$out" | grep '^noise_')
r=$(ratio "$(kv "$rc_cache" p50_us)" "$(kv "$rc_parse" p50_us)")
row "decision lookup with the record cache, $last records: p50" "$(kv "$rc_cache" p50_us) µs" \
    "parse per lookup $(kv "$rc_parse" p50_us) µs" "${r}×" "(info)" "—"
r=$(ratio "$(kv "$rc_cache" p99_us)" "$(kv "$rc_parse" p99_us)")
row "decision lookup with the record cache, $last records: p99" "$(kv "$rc_cache" p99_us) µs" \
    "parse per lookup $(kv "$rc_parse" p99_us) µs" "${r}×" "p99 ≤ 20 µs" "$(met "$(kv "$rc_cache" p99_us)" le 20)"
r=$(ratio "$(kv "$rc_cache" p99_us)" "$(kv "$rc_noise" p99_us)")
row "record cache p99 vs machine noise (fixed loop of the same p50)" "$(kv "$rc_cache" p99_us) µs" \
    "fixed loop p50 $(kv "$rc_noise" p50_us) µs, p99 $(kv "$rc_noise" p99_us) µs" "${r}×" "(info: ≈ 1× = noise-bound)" "—"
# Whole pg_decide in a long-lived host: a store with pg_store_enable_cache
# against a plain one, the same requests, alternating per call.
log "pg_decide with the record cache, $last records, $DECIDE_CALLS calls per side"
out=$("$bin/decide_bench" cached "$store" "$last" "$DECIDE_CALLS")
dc_parse=$(printf '%s\n' "$out" | grep '^decide_parse_') dc_cache=$(printf '%s\n' "$out" | grep '^decide_cached_')
r=$(ratio "$(kv "$dc_cache" p50_us)" "$(kv "$dc_parse" p50_us)")
row "pg_decide, long-lived host with the record cache, $last records: p50" "$(kv "$dc_cache" p50_us) µs" \
    "parse per decision $(kv "$dc_parse" p50_us) µs" "${r}×" "(info)" "—"
r=$(ratio "$(kv "$dc_cache" p99_us)" "$(kv "$dc_parse" p99_us)")
row "pg_decide, long-lived host with the record cache, $last records: p99" "$(kv "$dc_cache" p99_us) µs" \
    "parse per decision $(kv "$dc_parse" p99_us) µs" "${r}×" "p99 ≤ 20 µs" "$(met "$(kv "$dc_cache" p99_us)" le 20)"
for n in $SCALE_COUNTS; do
    [ "$n" = "$first" ] && continue
    r=$(ratio "${dec_p50[$n]}" "${dec_p50[$first]}")
    row "scaling: pg_decide p50, $n vs $first records" "${dec_p50[$n]} µs" "${dec_p50[$first]} µs" \
        "${r}×" "≈ 1× (O(1) lookup)" "$(met "$r" le 1.5)"
done
for n in $SCALE_COUNTS; do
    [ "$n" = "$first" ] && continue
    r=$(ratio "${prune_us[$n]}" "${prune_us[$first]}")
    row "scaling: prune µs/record, $n vs $first records" "${prune_us[$n]} µs/rec" \
        "${prune_us[$first]} µs/rec" "${r}×" "≈ 1× (linear)" "$(met "$r" le 1.5)"
done

log "one record holding $BIG_SECRETS secrets"
big=$work/store-big
[ -d "$big/pulled" ] || "$bin/gen_records" "$big" 1 "$BIG_SECRETS"
line=$("$bin/decide_bench" one "$big" "$BIG_SECRETS" 2000 | grep '^one_record')
small=$work/store-1
[ -d "$small/pulled" ] || "$bin/gen_records" "$small" 1 0
line1=$("$bin/decide_bench" one "$small" 0 2000 | grep '^one_record')
r=$(ratio "$(kv "$line" p50_us)" "$(kv "$line1" p50_us)")
row "pg_decide, one record with $BIG_SECRETS+1 secrets (kubelet-written, no index): p50" "$(kv "$line" p50_us) µs" \
    "1-secret record $(kv "$line1" p50_us) µs" "${r}×" "(info)" "—"
# The same record written by pg_store_record_pulled, so it has its credential
# index (plugin/store/store_credidx.c); decided with and without it (moved aside),
# alternating blocks; the hook's path (no in-process cache).
log "one record holding $BIG_SECRETS secrets, with and without its credential index"
rm -rf "$work/store-big-idx" "$work/store-1-idx"
out=$("$bin/decide_bench" big "$work/store-big-idx" "$BIG_SECRETS" 2000)
bi=$(printf '%s\n' "$out" | grep '^big_index_') bn=$(printf '%s\n' "$out" | grep '^big_noindex_')
out=$("$bin/decide_bench" big "$work/store-1-idx" 0 2000)
b1=$(printf '%s\n' "$out" | grep '^big_index_')
r=$(ratio "$(kv "$bi" p50_us)" "$(kv "$bn" p50_us)")
row "pg_decide, one record with $BIG_SECRETS+1 secrets, credential index: p50" "$(kv "$bi" p50_us) µs" \
    "same record without its index $(kv "$bn" p50_us) µs" "${r}×" "p50 ≤ 200 µs" "$(met "$(kv "$bi" p50_us)" le 200)"
r=$(ratio "$(kv "$bi" p50_us)" "$(kv "$b1" p50_us)")
row "pg_decide, $BIG_SECRETS+1-secret record with index vs a 1-secret record: p50" "$(kv "$bi" p50_us) µs" \
    "1-secret record $(kv "$b1" p50_us) µs" "${r}×" "(info)" "—"

# ---------------------------------------------------------------- 3
log "durable writes, $WRITE_CALLS per side"
out=$("$bin/write_bench" "$work/write" "$WRITE_CALLS")
printf '%s\n' "$out" >"$work/write_bench.out"
lib=$(printf '%s\n' "$out" | grep '^lib ') raw1=$(printf '%s\n' "$out" | grep '^raw1 ')
raw2=$(printf '%s\n' "$out" | grep '^raw2 ') raw4s=$(printf '%s\n' "$out" | grep '^raw4s ')
# Issue 14's baseline for a new image: two files in two directories, each durable on its own.
r=$(ratio "$(kv "$lib" per_s)" "$(kv "$raw2" per_s)")
row "durable record write, new image (pg_store_record_pulled) vs raw record + index (2 files)" \
    "$(kv "$lib" per_s)/s" "raw ×2 files $(kv "$raw2" per_s)/s" "${r}×" "≥ 0.8×" "$(met "$r" ge 0.8)"
rp=$(printf '%s\n' "$out" | grep '^lib_repull ') raw1r=$(printf '%s\n' "$out" | grep '^raw1r ')
r=$(ratio "$(kv "$rp" per_s)" "$(kv "$raw1r" per_s)")
row "durable record write, re-pull (index unchanged)" "$(kv "$rp" per_s)/s" \
    "raw, replacing one file $(kv "$raw1r" per_s)/s" "${r}×" "≥ 0.8×" "$(met "$r" ge 0.8)"
r=$(ratio "$(kv "$lib" per_s)" "$(kv "$raw1" per_s)")
row "durable record write, new image vs raw one file" "$(kv "$lib" per_s)/s" \
    "raw write+fsync+rename+dir fsync $(kv "$raw1" per_s)/s" "${r}×" "(info)" "—"
r=$(ratio "$(kv "$lib" per_s)" "$(kv "$raw4s" per_s)")
row "durable record write, new image vs its own protocol by hand (4 files, 3 rounds)" \
    "$(kv "$lib" per_s)/s" "raw4s $(kv "$raw4s" per_s)/s" "${r}×" "(info)" "—"

# ---------------------------------------------------------------- 4
# podman parses --annotation as CSV: quote the whole value, double its quotes.
csvq() { local q='"'; printf '"%s"' "${1//$q/$q$q}"; }
# The hook's own exec -> exit time inside podman (sched tracepoints, all CPUs),
# against the same binaries under exec_bench: bench/README.md, "The podman gap".
podman_trace() {
    local pd=$1; local -n P_=$2 run_=$3
    if [ "$PODMAN_TRACE_RUNS" = 0 ] || ! command -v perf >/dev/null; then return; fi
    log "podman run traced (perf sched events), $PODMAN_TRACE_RUNS runs per hook"
    perf record -q -a -e sched:sched_process_exec -e sched:sched_process_exit -o "$pd/sched.data" \
        2>"$pd/perf.err" &
    local perf_pid=$! k
    sleep 1 # perf is recording before the first run
    for ((k = 0; k < PODMAN_TRACE_RUNS; k++)); do
        "${P_[@]}" --hooks-dir "$pd/hooks" "${run_[@]}" >/dev/null
        "${P_[@]}" --hooks-dir "$pd/noophooks" "${run_[@]}" >/dev/null
    done
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" || true
    if [ ! -s "$pd/sched.data" ]; then
        log "podman trace skipped: $(head -c 200 "$pd/perf.err")"
        return 0
    fi
    # exec -> exit per process, median per binary (µs)
    perf script -i "$pd/sched.data" -F pid,time,event,trace 2>/dev/null | awk -v hook="$hook" -v noop="$bin/noop_hook" '
        { t = $2; sub(":", "", t); t *= 1e6 }
        /sched_process_exec/ { f = ""; for (i = 1; i <= NF; i++) if ($i ~ /^filename=/) f = substr($i, 10)
                               if (f == hook || f == noop) { start[$1] = t; name[$1] = (f == hook) ? "hook" : "noop" } }
        /sched_process_exit/ && ($1 in start) { print name[$1], t - start[$1]; delete start[$1] }' >"$pd/inpodman.txt"
    local ih in_; ih=$(awk '$1 == "hook" {print $2}' "$pd/inpodman.txt" | sort -n | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}')
    in_=$(awk '$1 == "noop" {print $2}' "$pd/inpodman.txt" | sort -n | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}')
    [ -n "$ih" ] && [ -n "$in_" ] || return 0
    local eb="n/a"
    [ -n "${eb_hook[10000]:-}" ] && eb=$(awk -v a="${eb_hook[10000]}" -v b="${eb_noop[10000]}" 'BEGIN{printf "+%.0f µs", a-b}')
    row "inside podman: hook exec→exit median (traced)" "$(awk -v v="$ih" 'BEGIN{printf "%.0f µs", v}')" \
        "no-op hook $(awk -v v="$in_" 'BEGIN{printf "%.0f µs", v}')" "+$(awk -v a="$ih" -v b="$in_" 'BEGIN{printf "%.0f µs", a-b}')" \
        "(info: exec_bench, 10k: $eb)" "—"
}

podman_row() {
    if [ "$PODMAN_RUNS" = 0 ] || ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
        row "podman run, with vs without the hook" "skipped" "—" "—" "≤ 1.02×" "n/a"
        return
    fi
    local pd=$work/podman n=10000 i
    mkdir -p "$pd/rootfs/bin" "$pd/hooks" "$pd/nohooks"
    cp /bin/busybox "$pd/rootfs/bin/" 2>/dev/null || { row "podman run" "skipped (no /bin/busybox)" "—" "—" "≤ 1.02×" "n/a"; return; }
    ln -sf busybox "$pd/rootfs/bin/true"
    local P=(podman --root "$pd/root" --runroot "$pd/runroot" --runtime runc --cgroup-manager cgroupfs)
    tar -C "$pd/rootfs" -cf "$pd/bb.tar" .
    "${P[@]}" import "$pd/bb.tar" localhost/pullgate-bench-bb:latest >/dev/null 2>&1
    local store; store=$(store_for $n)
    i=$(( n / 2 + 7 ))
    printf '{"stateDir":"%s","readOnlyRecordDirs":[],"dbus":"none"}\n' "$store" >"$pd/pullgate.json"
    # The thin hook, answered by a resident pullgate-cri holding the same config (a node's setup).
    start_cri "$pd/cri" "$pd/pullgate.json"
    printf '{"version":"1.0.0","hook":{"path":"%s","args":["pullgate-hook","--config","%s","--daemon-socket","%s"]},"when":{"always":true},"stages":["prestart"]}\n' \
        "$hook" "$pd/pullgate.json" "$pd/cri/hook.sock" >"$pd/hooks/pullgate.json"
    # Third side: the same hooks.d machinery running the no-op hook (the floor of any hook).
    mkdir -p "$pd/noophooks"
    printf '{"version":"1.0.0","hook":{"path":"%s","args":["noop_hook"]},"when":{"always":true},"stages":["prestart"]}\n' \
        "$bin/noop_hook" >"$pd/noophooks/noop.json"
    # The container carries CRI-O's annotations, so the hook takes the full decision path.
    local ann=(--annotation io.container.manager=cri-o
        --annotation io.kubernetes.cri-o.ContainerType=container
        --annotation io.kubernetes.pod.namespace="$("$bin/gen_records" --print-ns $i)"
        --annotation io.kubernetes.cri-o.ImageName="$("$bin/gen_records" --print-image $i)"
        --annotation io.kubernetes.cri-o.ImageRef="$("$bin/gen_records" --print-ref $i)"
        --annotation "$(csvq "pullgate.dev/credentials=$("$bin/gen_records" --print-annotation $i)")")
    local run=(run --rm --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --network none
        "${ann[@]}" localhost/pullgate-bench-bb:latest /bin/true)
    # Warm up both paths; a failing hook makes podman fail (checked here).
    "${P[@]}" --hooks-dir "$pd/nohooks" "${run[@]}" >/dev/null
    if ! "${P[@]}" --hooks-dir "$pd/hooks" "${run[@]}" >/dev/null 2>"$pd/hook.err"; then
        log "WARNING: podman with the hook failed: $(head -c 400 "$pd/hook.err")"
        row "podman run, with vs without the hook" "failed" "—" "—" "≤ 1.02×" "n/a"
        stop_cri
        return
    fi
    log "podman run, $PODMAN_RUNS runs per side, interleaved"
    : >"$pd/with.txt"; : >"$pd/without.txt"; : >"$pd/noop.txt"
    for ((k = 0; k < PODMAN_RUNS; k++)); do
        for side in without with noop; do
            local hd=$pd/nohooks; [ $side = with ] && hd=$pd/hooks; [ $side = noop ] && hd=$pd/noophooks
            local t0 t1; t0=$(date +%s%N)
            "${P[@]}" --hooks-dir "$hd" "${run[@]}" >/dev/null
            t1=$(date +%s%N)
            echo $(( (t1 - t0) / 1000 )) >>"$pd/$side.txt"
        done
    done
    med() { sort -n "$1" | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
    local w wo wn; w=$(med "$pd/with.txt") wo=$(med "$pd/without.txt") wn=$(med "$pd/noop.txt")
    local r; r=$(ratio "$w" "$wo")
    row "podman run, with vs without the hook: median" "$(awk -v v="$w" 'BEGIN{printf "%.1f ms", v/1000}')" \
        "$(awk -v v="$wo" 'BEGIN{printf "without hook %.1f ms", v/1000}')" "${r}×" "≤ 1.02×" "$(met "$r" le 1.02)"
    r=$(ratio "$w" "$wn")
    row "podman run, pullgate-hook vs no-op hook: median" "$(awk -v v="$w" 'BEGIN{printf "%.1f ms", v/1000}')" \
        "$(awk -v v="$wn" 'BEGIN{printf "no-op hook %.1f ms", v/1000}')" "${r}×" "(info: hooks.d floor)" "—"
    podman_trace "$pd" P run
    stop_cri
    "${P[@]}" rmi -f localhost/pullgate-bench-bb:latest >/dev/null 2>&1 || true
    "${P[@]}" system reset -f >/dev/null 2>&1 || true
}
podman_row

# ---------------------------------------------------------------- 5
if [ -n "$rss_hook" ]; then
    d=$(( rss_hook - rss_noop ))
    row "hook peak RSS (ru_maxrss, pullgate-hook with the daemon)" "$rss_hook KiB" "no-op $rss_noop KiB" \
        "+$d KiB ($(ratio "$rss_hook" "$rss_noop")×)" "≤ 4 MiB above the floor" "$(met "$d" le 4096)"
    d=$(( rss_local - rss_noop ))
    row "pullgate-hook-local peak RSS (ru_maxrss)" "$rss_local KiB" "no-op $rss_noop KiB" \
        "+$d KiB ($(ratio "$rss_local" "$rss_noop")×)" "(info)" "—"
fi
row "hook binary sizes" "pullgate-hook $(( $(stat -c %s "$hook") / 1024 )) KiB" \
    "pullgate-hook-local $(( $(stat -c %s "$hook_local") / 1024 )) KiB" "—" "(info)" "—"

# Shared libraries the hook maps on every container start (info).
if command -v ldd >/dev/null; then
    libs=$(ldd "$hook" | grep -c '=>' || true)
    row "hook: shared libraries loaded at exec" "$libs ($(ldd "$hook" | awk '/=>/ {print $1}' | sed 's/\.so.*//' | tr '\n' ' ' | sed 's/ $//'))" \
        "no-op $(ldd "$bin/noop_hook" | grep -c '=>' || true)" "—" "(info)" "—"
fi

# ---------------------------------------------------------------- 9
# The store at scale and under load (bench/README.md, "The store at scale").
if [ -n "$RODIR_COUNTS" ]; then
    log "read-only kubelet directory: $RODIR_COUNTS records"
    out=$(BENCH_WORK=$work/rodir "$here/rodir_bench.sh" "$BUILD_DIR" "$RODIR_COUNTS" "$HOOK_RUNS")
    printf '%s\n' "$out" >"$work/rodir_bench.out"
    empty=$(printf '%s\n' "$out" | grep '^empty ')
    for n in $RODIR_COUNTS; do
        line=$(printf '%s\n' "$out" | grep "^r$n ")
        row "fresh-process preloaded decision (pullgatectl verify), kubelet dir of $n records: median" \
            "$(kv "$line" median_us) µs" "empty kubelet dir $(kv "$empty" median_us) µs" \
            "$(kv "$line" ratio)×" "≤ 1.5×" "$(met "$(kv "$line" ratio)" le 1.5)"
        b=$(printf '%s\n' "$out" | grep "^build records=$n ")
        row "names cache of $n kubelet records: first build (a prune)" "$(kv "$b" prune_ms) ms" \
            "$(kv "$b" cache_bytes) bytes" "—" "(info)" "—"
    done
fi
if [ "$PRUNE_RECORDS" != 0 ]; then
    log "prune of $PRUNE_RECORDS records against concurrent intents"
    out=$("$bin/prune_bench" "$work/prune" "$PRUNE_RECORDS")
    printf '%s\n' "$out" >"$work/prune_bench.out"
    idle=$(printf '%s\n' "$out" | grep '^prune_idle ')
    for c in rebuild steady delete; do
        line=$(printf '%s\n' "$out" | grep "^prune_$c ")
        row "intent max wait while prune ($c) walks $PRUNE_RECORDS records" \
            "$(kv "$line" intent_max_ms) ms (p99 $(kv "$line" intent_p99_ms))" \
            "no prune: max $(kv "$idle" intent_max_ms) ms" \
            "$(ratio "$(kv "$line" intent_max_ms)" "$(kv "$idle" intent_max_ms)")×" "≤ 250 ms" \
            "$(met "$(kv "$line" intent_max_ms)" le 250)"
    done
fi
if [ "$ROUNDS_CALLS" != 0 ]; then
    log "PullImage recording, aliases separate vs in the record's batch"
    out=$("$bin/pull_rounds_bench" "$work/rounds" "$ROUNDS_CALLS")
    printf '%s\n' "$out" >"$work/pull_rounds_bench.out"
    sep=$(printf '%s\n' "$out" | grep '^pull_separate ') comb=$(printf '%s\n' "$out" | grep '^pull_combined ')
    r=$(ratio "$(kv "$comb" mean_us)" "$(kv "$sep" mean_us)")
    row "PullImage recorded: intent + record with aliases (5 fsync rounds) vs separate aliases (7)" \
        "$(kv "$comb" mean_us) µs" "$(kv "$sep" mean_us) µs" "${r}×" "(info: 5/7 = 0.71× if fsync-bound)" "—"
fi

# ---------------------------------------------------------------- 10
# Issue 32: the resident hook as deployed, where the daemon's time goes, and scale.
if [ "${RESIDENT:-1}" != 0 ]; then
    log "resident hook: ratio, fixed cost, syscalls, profile; pullgate-cri at scale"
    RESIDENT_OUT=$work/resident.txt BENCH_WORK=$work/resident SIZING_IMAGES=${SIZING_IMAGES:-0} \
        "$here/resident_bench.sh" "$BUILD_DIR" >/dev/null
    rs=$(cat "$work/resident.txt")
    hr=$(printf '%s\n' "$rs" | grep '^hook_ratio ') hf=$(printf '%s\n' "$rs" | grep '^hook_fixed_cost ')
    h=$(printf '%s\n' "$rs" | grep '^hook ') n=$(printf '%s\n' "$rs" | grep '^noop ')
    row "resident hook (pullgate-hook + pullgate-cri, 10k records) vs no-op hook: median" \
        "$(kv "$h" median_us) µs" "no-op $(kv "$n" median_us) µs" "$(kv "$hr" median)×" "≤ 1.15×" \
        "$(met "$(kv "$hr" median)" le 1.15)"
    row "resident hook: fixed cost (median − no-op median)" "$(kv "$hf" median_ms) ms" \
        "min − min $(kv "$hf" min_ms) ms" "—" "≤ 0.3 ms" "$(met "$(kv "$hf" median_ms)" le 0.3)"
    row "pullgate-cri per hook decision: CPU, syscalls" \
        "$(printf '%s\n' "$rs" | sed -n 's/^hook_daemon_cpu_per_decision_us=\([0-9]*\).*/\1/p') µs CPU" \
        "$(printf '%s\n' "$rs" | awk '$1 == "total" { print $2; exit }') syscalls (strace -c)" "—" "(info)" "—"
    ps=$(printf '%s\n' "$rs" | grep '^paired hook/noop_static ') || true
    [ -z "$ps" ] || row "resident hook (static PIE) vs a static no-op hook, paired per round" \
        "$(printf '%s\n' "$ps" | sed 's/.*ratio=\([^ ]*\).*/\1/')×" \
        "$(printf '%s\n' "$ps" | sed 's/.*diff_ms=\([^ ]*\).*/\1/') ms more" "—" "(info)" "—"
    sb=$(printf '%s\n' "$rs" | grep '^base ') sw=$(printf '%s\n' "$rs" | grep '^wide ')
    scale="${SCALE_RECORDS:-100000} records / ${SCALE_IMAGES:-5000} images"
    row "resident decision over the hook socket, $scale: p99" "$(kv "$sw" p99_us) µs" \
        "1k records / 1 image $(kv "$sb" p99_us) µs" "$(ratio "$(kv "$sw" p99_us)" "$(kv "$sb" p99_us)")×" "(info)" "—"
    row "resident decision, $scale: p50" "$(kv "$sw" median_us) µs" \
        "1k records / 1 image $(kv "$sb" median_us) µs" "$(ratio "$(kv "$sw" median_us)" "$(kv "$sb" median_us)")×" "(info)" "—"
    mw=$(printf '%s\n' "$rs" | grep '^scale_memory_after side=wide') mb=$(printf '%s\n' "$rs" | grep '^scale_memory_after side=base')
    row "pullgate-cri VmHWM after $scale" "$(printf '%s\n' "$mw" | awk '{print $4}') KiB" \
        "1k / 1 image $(printf '%s\n' "$mb" | awk '{print $4}') KiB" "—" "(info)" "—"
    cp "$work/resident.txt" "$here/resident_results.txt"
fi

# ---------------------------------------------------------------- 11
# Issue 32: the start path on a real containerd (its own table, below the main one).
start_md=""
if [ "${START_PATH:-0}" != 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v containerd >/dev/null; then
        log "start path on containerd 1.6 (start_path.sh), several minutes"
        if START_OUT=$work/start.md "$here/start_path.sh" "$BUILD_DIR" >"$work/start_path.log" 2>&1; then
            start_md=$work/start.md
            cp "$work/start.md" "$here/start_results.md"
            cp "$work/start.txt" "$here/start_results.txt"
        else
            log "WARNING: start_path.sh failed: $(tail -c 600 "$work/start_path.log")"
        fi
    else
        log "start path skipped: needs root and containerd"
    fi
fi

# ---------------------------------------------------------------- table
{
    echo "Run $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown), load average $(cut -d' ' -f1-3 /proc/loadavg)."
    echo
    echo "| benchmark | result | baseline | ratio | target | met |"
    echo "|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    if [ -n "$start_md" ]; then
        echo
        echo "### The start path (start_path.sh; plot: start_path.png)"
        echo
        cat "$start_md"
    fi
} >"$work/results.md"
cat "$work/results.md"
cp "$work/results.md" "$here/results.md"
