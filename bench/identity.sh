#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The hook's cost with the identity lookups (docs/design.md, "Image identity"), end to end, against
# the no-op exec floor measured in the same run, interleaved; optionally against a hook built from
# an older commit (OLD_HOOK) in the same run: before/after.
#
# Scenarios, for each record count in IDENTITY_COUNTS:
#   allow        CRI-O container of a recorded image (record under the bare ID's other spelling)
#   preloaded    CRI-O container of an image never pulled: every probe misses, the name check runs
#   +kubelet     the same two with a 1,000-record read-only kubelet directory configured
#                (KUBELET_RECORDS), its name cache built by the first run
#
# Knobs: IDENTITY_RUNS=200 IDENTITY_COUNTS="10000 100000" KUBELET_RECORDS=1000
#        OLD_HOOK=PATH  BUILD_DIR=DIR (default build-bench-identity)  SKIP_BUILD=1  BENCH_WORK=DIR
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$repo/build-bench-identity}
RUNS=${IDENTITY_RUNS:-200}
COUNTS=${IDENTITY_COUNTS:-"10000 100000"}
KUBELET_RECORDS=${KUBELET_RECORDS:-1000}
OLD_HOOK=${OLD_HOOK:-}

log() { printf '== %s\n' "$*" >&2; }
kv() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

if [ "${SKIP_BUILD:-0}" = 0 ]; then
    log "building (Release) in $BUILD_DIR"
    cmake -S "$repo" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPG_BUILD_TESTS=OFF \
        -DPG_BUILD_BENCH=ON -DPG_BUILD_CRI=OFF -DPG_BUILD_WEBHOOK=OFF >/dev/null
    cmake --build "$BUILD_DIR" -j2 --target pullgate-hook pullgatectl pg_noop_hook pg_exec_bench \
        pg_gen_records >/dev/null
fi
bin=$BUILD_DIR/bench
hook=$BUILD_DIR/hooks/pullgate-hook
ctl=$BUILD_DIR/tools/pullgatectl

if [ -n "${BENCH_WORK:-}" ]; then
    work=$BENCH_WORK
    mkdir -p "$work"
else
    work=$(mktemp -d /tmp/pullgate-bench-identity.XXXXXX)
    trap 'rm -rf "$work"' EXIT
fi
chmod 0700 "$work"

# store N: N generated records, name index built the way prune builds it (keeps every record).
store_for() {
    local n=$1 dir=$work/store-$1
    if [ ! -d "$dir/pulled" ]; then
        log "generating $n records (and the name index)"
        "$bin/gen_records" "$dir" "$n"
        "$ctl" --state-dir "$dir" prune --in-use /dev/null --before 1970-01-02T00:00:00Z \
            --allow-empty >/dev/null
    fi
    printf '%s\n' "$dir"
}

kubelet_dir() {
    local dir=$work/kubelet
    if [ ! -d "$dir/pulled" ]; then
        log "generating a $KUBELET_RECORDS-record read-only kubelet directory"
        "$bin/gen_records" "$dir" "$KUBELET_RECORDS"
        mkdir -p "$dir/pulling"
        sleep 3 # a directory changed within the last 2 s is never cached (plugin/store/store_names.c)
    fi
    printf '%s\n' "$dir"
}

# bundle DIR IMAGE REF NS ANNOTATION: a CRI-O bundle and its OCI state.
bundle() {
    local dir=$1
    mkdir -p "$dir/bundle"
    "$here/crio_config.sh" "$2" "$3" "$4" "$5" >"$dir/bundle/config.json"
    printf '{"ociVersion":"1.0.2","id":"0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0","status":"created","pid":4242,"bundle":"%s","annotations":{"io.container.manager":"cri-o"}}' \
        "$dir/bundle" >"$dir/state.json"
}

rows=()
RESULTS=${RESULTS:-$work/identity-results.md}
: >"$RESULTS"
measure() { # NAME DIR CONFIG
    local name=$1 dir=$2 cfg=$3
    local cmds=(noop -- "$bin/noop_hook" :: new -- "$hook" --config "$cfg")
    [ -n "$OLD_HOOK" ] && cmds+=(:: old -- "$OLD_HOOK" --config "$cfg")
    "$hook" --config "$cfg" <"$dir/state.json" 2>/dev/null || true # builds a name cache, if any
    log "$name: $RUNS runs per command"
    local out
    out=$("$bin/exec_bench" -n "$RUNS" -w 20 -s "$dir/state.json" -o "$dir/run" "${cmds[@]}")
    local noop new old
    noop=$(grep '^noop ' <<<"$out") new=$(grep '^new ' <<<"$out")
    local outcome=allow
    [ "$(kv "$new" fail)" = 0 ] || outcome="deny ($(head -c 160 "$dir/run.new.err" | tr '\n' ' '))"
    local old_cell="—"
    if [ -n "$OLD_HOOK" ]; then
        old=$(grep '^old ' <<<"$out")
        old_cell="$(kv "$old" median_us) µs ($(ratio "$(kv "$old" median_us)" "$(kv "$noop" median_us)")×)"
        [ "$(kv "$old" fail)" = 0 ] || old_cell="$old_cell, denied"
    fi
    rows+=("| $name | $(kv "$noop" median_us) µs | $(kv "$new" median_us) µs ($(ratio "$(kv "$new" median_us)" "$(kv "$noop" median_us)")×) | $old_cell | $outcome |")
    printf '%s\n' "${rows[-1]}" >>"$RESULTS" # kept even if a later scenario breaks
}

for n in $COUNTS; do
    store=$(store_for "$n")
    i=$((n / 2 + 7))
    image=$("$bin/gen_records" --print-image $i)
    ref=$("$bin/gen_records" --print-ref $i)
    ns=$("$bin/gen_records" --print-ns $i)
    ann=$("$bin/gen_records" --print-annotation $i)
    bare=${ref#sha256:} # CRI-O names the ID bare; the record is under "sha256:"
    d=$work/allow-$n
    bundle "$d" "$image" "$bare" "$ns" "$ann"
    printf '{"stateDir":"%s","readOnlyRecordDirs":[],"dbus":"none"}\n' "$store" >"$d/cfg.json"
    measure "allow, $n records" "$d" "$d/cfg.json"
    d=$work/preloaded-$n
    bundle "$d" "registry.example.com/never/pulled:1" "$(printf 'e%.0s' {1..64})" team-z '{}'
    printf '{"stateDir":"%s","readOnlyRecordDirs":[],"dbus":"none"}\n' "$store" >"$d/cfg.json"
    measure "preloaded (all probes miss, name check), $n records" "$d" "$d/cfg.json"
    kdir=$(kubelet_dir)
    for kind in allow preloaded; do
        d=$work/$kind-$n
        printf '{"stateDir":"%s","readOnlyRecordDirs":["%s"],"dbus":"none"}\n' "$store" "$kdir" \
            >"$d/cfg-k.json"
        measure "$kind, $n records + $KUBELET_RECORDS-record kubelet dir" "$d" "$d/cfg-k.json"
    done
done


echo
echo "| scenario | no-op exec (median) | hook, this tree (median, × floor) | hook, OLD_HOOK (median, × floor) | outcome |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
