#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/rodir_bench.sh BIN_DIR [COUNTS] [RUNS]
#
# A fresh-process "preloaded" decision (`pullgatectl verify` of an image no
# record maps, policy NeverVerifyPreloadedImages) against a read-only
# (kubelet) record directory of N records, against the same decision with an
# empty kubelet directory: bench/README.md, "Read-only directories at scale".
# The names caches are made current first by `pullgatectl prune` (where a node
# builds them: the prune timer, pullgate-cri's prune), so the decision only
# searches them. All sides run interleaved in one exec_bench run.
# BIN_DIR is a build directory (bench/ and tools/ under it).
# COUNTS defaults to "100000 200000", RUNS to 200. Prints one line per side:
#   NAME records=N median_us=.. p90_us=.. ratio=<median / empty median>
# and, per N, the time the cache's first build took (a prune), its size, and
# one decision's time right after pulled/ changed (the cache stale).
set -euo pipefail

build=${1:?usage: rodir_bench.sh BUILD_DIR [COUNTS] [RUNS]}
counts=${2:-100000 200000}
runs=${3:-200}
bin=$build/bench
ctl=$build/tools/pullgatectl
work=${BENCH_WORK:-$(mktemp -d /tmp/pullgate-rodir.XXXXXX)}
[ -n "${BENCH_WORK:-}" ] || trap 'rm -rf "$work"' EXIT
kv() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

image=registry.example.com/preloaded/base:1
ref=sha256:$(printf 'preloaded' | sha256sum | cut -d' ' -f1)

# side NAME KUBELET_DIR: a state directory and config reading KUBELET_DIR.
side() {
    local name=$1 kdir=$2 dir=$work/side-$1
    mkdir -p "$dir/state"
    chmod 0700 "$dir" "$dir/state"
    printf '{"stateDir":"%s","readOnlyRecordDirs":["%s"],"dbus":"none","policy":"NeverVerifyPreloadedImages"}\n' \
        "$dir/state" "$kdir" >"$dir/pullgate.json"
    chmod 0600 "$dir/pullgate.json"
    printf '%s\n' "$dir/pullgate.json"
}

mkdir -p "$work/kubelet-empty/pulled"
args=()
cfg=$(side empty "$work/kubelet-empty")
args+=(empty -- "$ctl" --config "$cfg" verify --image "$image" --image-ref "$ref" --namespace bench)
for n in $counts; do
    kdir=$work/kubelet-$n
    [ -d "$kdir/pulled" ] || "$bin/gen_records" "$kdir" "$n" >/dev/null
    # a directory changed within the last 2 s is not cached (tick-coarse times)
    touch -d '-1 minute' "$kdir/pulled"
    cfg=$(side "$n" "$kdir")
    start=$(date +%s%N)
    "$ctl" --config "$cfg" prune --in-use /dev/null --allow-empty >/dev/null
    end=$(date +%s%N)
    size=$(stat -c %s "$work/side-$n/state/pullgate-dircache/"* 2>/dev/null | head -1)
    # The worst case a decision can meet: pulled/ changed just now (the cache
    # is stale and may not be rewritten yet): refreshed in memory, every record
    # stat'ed, none read (none changed). Once, for information.
    touch "$kdir/pulled"
    s0=$(date +%s%N)
    "$ctl" --config "$cfg" verify --image "$image" --image-ref "$ref" --namespace bench >/dev/null
    s1=$(date +%s%N)
    touch -d '-1 minute' "$kdir/pulled"
    "$ctl" --config "$cfg" prune --in-use /dev/null --allow-empty >/dev/null
    echo "build records=$n prune_ms=$(((end - start) / 1000000)) cache_bytes=${size:-none}" \
        "stale_decision_ms=$(((s1 - s0) / 1000000))"
    args+=(:: "r$n" -- "$ctl" --config "$cfg" verify --image "$image" --image-ref "$ref" --namespace bench)
done
"$ctl" --config "$work/side-empty/pullgate.json" prune --in-use /dev/null --allow-empty >/dev/null
printf '{}' >"$work/stdin"
out=$("$bin/exec_bench" -n "$runs" -w 10 -s "$work/stdin" -o "$work/run" "${args[@]}")
base=$(kv "$(printf '%s\n' "$out" | grep '^empty ')" median_us)
printf '%s\n' "$out" | grep -v '^all_children' | while read -r line; do
    name=${line%% *}
    med=$(kv "$line" median_us)
    echo "$name records=${name#r} median_us=$med p90_us=$(kv "$line" p90_us) fail=$(kv "$line" fail)" \
        "ratio=$(awk -v a="$med" -v b="$base" 'BEGIN { printf "%.2f", a / b }')"
done
