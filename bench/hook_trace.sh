#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# [TRACE_DIRS="DIR..."] hook_trace.sh WORKDIR -- COMMAND ARGS...
#
# How long each hook process lives inside a real start (bench/README.md, "The start path"): runs
# COMMAND under `perf record -a` of the sched_process_exec / sched_process_exit tracepoints and
# prints, per hook binary that was exec'd (any path ending in pullgate-hook, pullgate-hook-local or
# noop_hook; only those in TRACE_DIRS when it is set: the trace sees the whole machine, and other
# sessions may run hooks too), the exec -> exit times:
#   trace binary=NAME n=N median_us=.. p90_us=.. min_us=..
# The same method as run.sh's podman trace: the hook's own time inside runc, under the node's
# real contention, which exec_bench's loop cannot show. Prints nothing without perf.
set -u
work=$1
shift
[ "${1:-}" = -- ] && shift
command -v perf >/dev/null || { "$@"; exit $?; }
perf record -q -a -e sched:sched_process_exec -e sched:sched_process_exit -o "$work/sched.data" \
    2>"$work/perf.err" &
pf=$!
sleep 1 # recording before the first start
"$@"
rc=$?
kill -INT "$pf" 2>/dev/null
wait "$pf"
[ -s "$work/sched.data" ] || { echo "hook_trace: perf failed: $(head -c 200 "$work/perf.err")" >&2; exit "$rc"; }
perf script -i "$work/sched.data" -F pid,time,event,trace 2>/dev/null | awk -v dirs="${TRACE_DIRS:-}" '
    BEGIN { nd = split(dirs, want, " ") }
    { t = $2; sub(":", "", t); t *= 1e6 }
    /sched_process_exec/ {
        f = ""
        for (i = 1; i <= NF; i++) if ($i ~ /^filename=/) f = substr($i, 10)
        n = split(f, parts, "/"); b = parts[n]; d = substr(f, 1, length(f) - length(b) - 1)
        ok = nd == 0
        for (k = 1; k <= nd; k++) if (d == want[k]) ok = 1
        if (ok && (b == "pullgate-hook" || b == "pullgate-hook-local" || b == "noop_hook")) { start[$1] = t; name[$1] = b }
    }
    /sched_process_exit/ && ($1 in start) { print name[$1], t - start[$1]; delete start[$1] }' |
    sort -k1,1 -k2,2n | awk '
    function flush() { if (n) printf "trace binary=%s n=%d median_us=%.0f p90_us=%.0f min_us=%.0f\n", cur, n, v[int((n + 1) / 2)], v[int(n * 0.9 + 0.999)], v[1] }
    $1 != cur { flush(); cur = $1; n = 0 }
    { v[++n] = $2 }
    END { flush() }'
exit "$rc"
