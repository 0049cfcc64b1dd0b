#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# proxy_profile.sh BUILD_DIR PID TARGET METHOD REQUESTS|- CALLS NAME
#
# Where a gRPC relay's time goes per call (bench/README.md, "Where the time goes"): while
# grpc_unary_bench sends CALLS calls of METHOD (request bytes from REQUESTS, or empty with -) to
# TARGET, served by process PID (pullgate-cri or grpc_relay):
#   - its CPU time per call (/proc/PID/stat) and context switches per call (every thread's
#     voluntary + involuntary switches, /proc/PID/task/*/status);
#   - strace -c of every thread: syscalls per call, and which files 50 calls touch (per call);
#   - perf record (cpu-clock, DWARF call graphs): the CPU by thread, by DSO, by function (self)
#     and inclusively (children), so the decision, the pump and gRPC's own work separate.
# Prints a report on stdout, each line prefixed with NAME. strace/perf parts are skipped when the
# tools are missing. Started by start_path.sh (PROFILE=1); runs on its own against any relay.
set -u
BUILD_DIR=$1 PID=$2 TARGET=$3 METHOD=$4 REQ=$5 CALLS=$6 NAME=$7
bench=$BUILD_DIR/bench/grpc_unary_bench
tmp=$(mktemp -d /tmp/pullgate-proxy-profile.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
req=()
[ "$REQ" != - ] && req=(-r "$REQ")
say() { printf '%s: %s\n' "$NAME" "$*"; }
run_calls() { "$bench" -n "$CALLS" -w 0 -m "$METHOD" "${req[@]}" "side=$TARGET"; }
cpu_us() { awk '{ printf "%d", ($14 + $15) * 1000000 / '"$(getconf CLK_TCK)"' }' "/proc/$PID/stat"; }
switches() { cat /proc/"$PID"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { s += $2 } END { print s }'; }

"$bench" -n 200 -w 0 -m "$METHOD" "${req[@]}" "side=$TARGET" >/dev/null # warm
c0=$(cpu_us) s0=$(switches)
line=$(run_calls)
c1=$(cpu_us) s1=$(switches)
say "$line"
say "cpu_per_call_us=$(( (c1 - c0) / CALLS )) context_switches_per_call=$(awk -v a="$s0" -v b="$s1" -v n="$CALLS" 'BEGIN { printf "%.2f", (b - a) / n }') threads=$(ls /proc/"$PID"/task | wc -l)"

if command -v strace >/dev/null; then
    tids=()
    for t in /proc/"$PID"/task/*; do tids+=(-p "${t##*/}"); done
    strace -c -o "$tmp/strace.txt" "${tids[@]}" 2>/dev/null &
    st=$!
    sleep 1
    run_calls >/dev/null
    sleep 0.3
    kill -INT "$st"
    wait "$st"
    awk -v n="$CALLS" -v name="$NAME" '/^ *[0-9]/ && NF >= 5 { printf "%s: strace %-18s %7.2f per call\n", name, $NF, $4 / n }' "$tmp/strace.txt"
fi

# Which files a call touches: the file syscalls of 50 calls, names with hex runs folded, per call.
if command -v strace >/dev/null; then
    tids=()
    for t in /proc/"$PID"/task/*; do tids+=(-p "${t##*/}"); done
    strace -q -e trace=openat,newfstatat,statx,readlinkat,getdents64 -o "$tmp/files.txt" "${tids[@]}" 2>/dev/null &
    st=$!
    sleep 1
    "$bench" -n 50 -w 0 -m "$METHOD" "${req[@]}" "side=$TARGET" >/dev/null
    sleep 0.3
    kill -INT "$st"
    wait "$st"
    # Each directory descriptor named by its directory (the last two path components).
    fdmap=""
    for fd in $(grep -oE '^[0-9]+ +[a-z0-9]+\([0-9]+,' "$tmp/files.txt" | grep -oE '\([0-9]+,' | tr -d '(,' | sort -u); do
        d=$(readlink "/proc/$PID/fd/$fd" 2>/dev/null) || continue
        fdmap="$fdmap s#\\(${fd}, #(${fd}=.../$(basename "$(dirname "$d")")/$(basename "$d"), #;"
    done
    sed -E 's/^[0-9]+ +//; s/[0-9a-f]{16,}/<hex>/g; s/0x[0-9a-f]+/<ptr>/g; s/= [0-9]+$/= <n>/; s/\{st_mode=[^}]*\}/{...}/' "$tmp/files.txt" |
        sed -E "$fdmap"' s#"/tmp/([^"]*/)?([^/"]+/[^/"]+)"#".../\2"#g' |
        sort | uniq -c | sort -rn | awk -v name="$NAME" '{ n = $1; $1 = ""; printf "%s: files %6.2f per call:%s\n", name, n / 50, $0 }' | head -25
fi

if command -v perf >/dev/null; then
    perf record -q -e cpu-clock -F 5000 --call-graph dwarf,16384 -p "$PID" -o "$tmp/perf.data" 2>"$tmp/perf.err" &
    pf=$!
    sleep 1
    run_calls >/dev/null
    kill -INT "$pf"
    wait "$pf"
    if [ -s "$tmp/perf.data" ]; then
        r() { perf report -i "$tmp/perf.data" --stdio -g none "$@" 2>/dev/null | grep -E '^ +[0-9]'; }
        r --no-children --sort pid,comm | head -8 | sed "s/^/$NAME: by thread /"
        r --no-children --sort dso | head -10 | sed "s/^/$NAME: by DSO /"
        r --no-children --sort dso,sym | head -25 | sed "s/^/$NAME: self /"
        r --children --sort sym | head -60 | sed "s/^/$NAME: inclusive /"
    else
        say "perf record failed: $(head -c 200 "$tmp/perf.err")"
    fi
fi
