#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/store_bench.sh BUILD_DIR [BASE_BUILD_DIR]
#
# What each of the record store's indexes and caches buys (bench/README.md,
# "What each index and cache buys"), every number against a baseline measured
# in the same run; with BASE_BUILD_DIR (a build of an earlier commit, the same
# bench targets) that build's binaries run interleaved with this one's:
#  1. the fallback path, pullgate-hook-local (one exec per container start),
#     against a no-op exec (exec_bench, sides interleaved): a 1-secret and a
#     1,000-secret record written by the library, the latter also with its
#     credential index moved aside (what the index buys); RECORDS kubelet
#     records, an allowed image and a preloaded one (names caches current), and
#     the preloaded one once more with no writable directory, so no names cache
#     (what the cache buys: every decision scans; NOCACHE_RUNS runs);
#  2. the resident path, pullgate-cri's hook server asked as the thin hook asks
#     (hook_decide_bench, sides interleaved request by request): 1-secret and
#     1,000-secret records, RECORDS records / IMAGES images;
#  3. one decision's syscalls and opens (strace of pullgatectl verify, image ID
#     known, a writable and a kubelet directory), and a new image's fsyncs and
#     fsync rounds (pullgatectl record-intent, record-pulled; a round is a run
#     of fsyncs with no rename, unlink or write between).
# Knobs: RUNS [200], NOCACHE_RUNS [5], CALLS [5000], RECORDS [100000], IMAGES [5000],
# BENCH_WORK (scratch directory, kept; default a new one, removed). Prints key=value lines.
set -euo pipefail

build=$(cd "${1:?usage: store_bench.sh BUILD_DIR [BASE_BUILD_DIR]}" && pwd)
base=${2:+$(cd "$2" && pwd)}
RUNS=${RUNS:-200} NOCACHE_RUNS=${NOCACHE_RUNS:-5} CALLS=${CALLS:-5000}
RECORDS=${RECORDS:-100000} IMAGES=${IMAGES:-5000}
here=$(cd "$(dirname "$0")" && pwd)
bin=$build/bench
work=${BENCH_WORK:-$(mktemp -d /tmp/pullgate-store.XXXXXX)}
mkdir -p "$work"
chmod 0700 "$work"
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    [ -n "${BENCH_WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
log() { printf '== %s\n' "$*" >&2; }
kv() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
echo "# store_bench.sh $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# cfg FILE STATE_DIR KUBELET_DIR: a configuration (KUBELET_DIR may be empty).
cfg() {
    local ro=""
    [ -z "$3" ] || ro="\"$3\""
    printf '{"stateDir":"%s","readOnlyRecordDirs":[%s],"dbus":"none","logLevel":"info","criMetricsListen":"none"}\n' \
        "$2" "$ro" >"$1"
    chmod 0600 "$1"
}
# bundle DIR IMAGE REF NS ANNOTATION: a CRI-O-shaped bundle and its OCI state.
bundle() {
    mkdir -p "$1/bundle"
    "$here/crio_config.sh" "$2" "$3" "$4" "$5" >"$1/bundle/config.json"
    printf '{"ociVersion":"1.0.2","id":"0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0","status":"created","pid":4242,"bundle":"%s","annotations":{"io.container.manager":"cri-o"}}' \
        "$1/bundle" >"$1/state.json"
}
# record_bench STATE I EXTRA: bench record I (gen_records) written by pullgatectl, so with its
# credential times and credential index, holding EXTRA other namespaces' secrets before its own.
record_bench() {
    local c=$work/record.json args=() k ann
    cfg "$c" "$1" ""
    ann=$("$bin/gen_records" --print-annotation "$2")
    for ((k = 0; k < $3; k++)); do
        args+=(--secret "other-$k/regcred/uid-$k:$(printf 'other-%s' "$k" | sha256sum | cut -c1-64)")
    done
    args+=(--secret "$(printf '%s' "$ann" | python3 -c 'import json,sys; s=list(json.load(sys.stdin).values())[0]["kubernetesSecrets"][0]; print("%s/%s/%s:%s" % (s["namespace"], s["name"], s["uid"], s["credentialHash"]))')")
    "$build/tools/pullgatectl" --config "$c" record-intent --image "$("$bin/gen_records" --print-image "$2")"
    "$build/tools/pullgatectl" --config "$c" record-pulled --image "$("$bin/gen_records" --print-image "$2")" \
        --image-ref "$("$bin/gen_records" --print-ref "$2")" "${args[@]}"
}
bench_bundle() { # DIR I
    bundle "$1" "$("$bin/gen_records" --print-image "$2")" "$("$bin/gen_records" --print-ref "$2")" \
        "$("$bin/gen_records" --print-ns "$2")" "$("$bin/gen_records" --print-annotation "$2")"
}

# ------------------------------------------------------------ stores
log "stores: 1-secret and 1,000-secret records, $RECORDS kubelet records"
s1=$work/one s1k=$work/thousand s1k_noidx=$work/thousand-noidx kub=$work/kubelet
[ -d "$s1/pulled" ] || record_bench "$s1" 7 0
if [ ! -d "$s1k/pulled" ]; then
    record_bench "$s1k" 7 999
    cp -a "$s1k" "$s1k_noidx" && rm -rf "$s1k_noidx/pullgate-credidx"
fi
[ -d "$kub/pulled" ] || "$bin/gen_records" "$kub" "$RECORDS" >/dev/null
touch -d '-1 minute' "$kub/pulled" # a directory changed in the last 2 s is never cached
mkdir -p "$work/kstate"
chmod 0700 "$work/kstate"
for c in one thousand thousand-noidx; do cfg "$work/$c.json" "$work/$c" ""; done
cfg "$work/kub.json" "$work/kstate" "$kub"
cfg "$work/kub-nocache.json" "$work/no-state-dir" "$kub"
"$build/tools/pullgatectl" --config "$work/kub.json" prune --in-use /dev/null --allow-empty >/dev/null
bench_bundle "$work/b7" 7
bench_bundle "$work/bk" $((RECORDS / 2 + 7))
bundle "$work/bp" registry.example.com/preloaded/base:1 "sha256:$(printf preloaded | sha256sum | cut -c1-64)" \
    team-1 '{}'

# ------------------------------------------------------------ 1. fallback
fallback() { # NAME STATE CONFIG [RUNS]: noop and pullgate-hook-local (this build, and base's)
    local sides=(noop -- "$bin/noop_hook" :: new -- "$build/hooks/pullgate-hook-local" --config "$3")
    [ -z "$base" ] || sides+=(:: base -- "$base/hooks/pullgate-hook-local" --config "$3")
    local out n b nb
    out=$("$bin/exec_bench" -n "${4:-$RUNS}" -w 5 -s "$2" -o "$work/run-$1" "${sides[@]}")
    n=$(printf '%s\n' "$out" | grep '^noop ') b=$(printf '%s\n' "$out" | grep '^new ')
    echo "fallback_$1 noop_median_us=$(kv "$n" median_us) local_median_us=$(kv "$b" median_us)" \
        "local_fail=$(kv "$b" fail) ratio=$(ratio "$(kv "$b" median_us)" "$(kv "$n" median_us)")" \
        "min_ratio=$(ratio "$(kv "$b" min_us)" "$(kv "$n" min_us)")"
    if [ -n "$base" ]; then
        nb=$(printf '%s\n' "$out" | grep '^base ')
        echo "fallback_$1 base_median_us=$(kv "$nb" median_us) new_over_base=$(ratio "$(kv "$b" median_us)" "$(kv "$nb" median_us)")"
    fi
}
# reason CONFIG I|-: what pullgatectl decides for bench record I's pod (-: the preloaded image),
# so that each side below is known to decide what it is meant to.
reason() {
    local args
    if [ "$2" = - ]; then
        args=(--image registry.example.com/preloaded/base:1 --image-ref "sha256:$(printf preloaded | sha256sum | cut -c1-64)" --namespace team-1)
    else
        args=(--image "$("$bin/gen_records" --print-image "$2")" --image-ref "$("$bin/gen_records" --print-ref "$2")"
            --namespace "$("$bin/gen_records" --print-ns "$2")" --credentials "$("$bin/gen_records" --print-annotation "$2")")
    fi
    "$build/tools/pullgatectl" --config "$1" verify "${args[@]}" --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["reason"])'
}
echo "reasons one=$(reason "$work/one.json" 7) thousand=$(reason "$work/thousand.json" 7)" \
    "thousand_no_index=$(reason "$work/thousand-noidx.json" 7)" \
    "kubelet_allow=$(reason "$work/kub.json" $((RECORDS / 2 + 7))) kubelet_preloaded=$(reason "$work/kub.json" -)"
log "1. the fallback path, $RUNS runs per side"
fallback one_secret "$work/b7/state.json" "$work/one.json"
fallback thousand_secrets "$work/b7/state.json" "$work/thousand.json"
fallback thousand_secrets_no_index "$work/b7/state.json" "$work/thousand-noidx.json"
fallback kubelet_allow "$work/bk/state.json" "$work/kub.json"
fallback kubelet_preloaded "$work/bp/state.json" "$work/kub.json"
log "   the preloaded image with no names cache, $NOCACHE_RUNS runs"
fallback kubelet_preloaded_no_cache "$work/bp/state.json" "$work/kub-nocache.json" "$NOCACHE_RUNS"

# ------------------------------------------------------------ 2. resident
start_cri() { # BUILD NAME CONFIG: pullgate-cri with its hook socket in work/NAME
    local d=$work/cri-$2 k
    mkdir -p "$d"
    chmod 0700 "$d"
    "$1/cri/pullgate-cri" --config "$3" --listen "unix://$d/cri.sock" \
        --runtime-endpoint "unix://$d/no-runtime.sock" --hook-socket "$d/hook.sock" 2>"$d/cri.log" &
    pids+=($!)
    for ((k = 0; k < 400; k++)); do
        grep -q 'hook server listening' "$d/cri.log" 2>/dev/null && return 0
        sleep 0.05
    done
    log "WARNING: pullgate-cri $2 did not start: $(tail -c 300 "$d/cri.log")"
}
"$here/crio_config.sh" @IMAGE@ @REF@ @NS@ @CREDS@ >"$work/template.json"
resident() { # NAME CONFIG RECORDS IMAGES: this build's pullgate-cri (and base's), interleaved
    start_cri "$build" "$1-new" "$2"
    local sides=("new,$work/cri-$1-new/hook.sock,$2,$3,$4")
    if [ -n "$base" ]; then
        start_cri "$base" "$1-base" "$2"
        sides+=("base,$work/cri-$1-base/hook.sock,$2,$3,$4")
    fi
    mkdir -p "$work/bundles-$1"
    "$bin/hook_decide_bench" -t "$work/template.json" -d "$work/bundles-$1" -n "$CALLS" "${sides[@]}" |
        sed "s/^/resident_$1 /"
    local log # what was decided (the sides must have decided what was meant)
    for log in "$work/cri-$1-new/cri.log" ${base:+"$work/cri-$1-base/cri.log"}; do
        echo "resident_$1 reasons $(grep -o 'msg="hook decision".* reason="[a-z-]*"' "$log" |
            sed 's/.*reason="//; s/"//' | sort | uniq -c | tr -s ' \n' ' ')"
    done
}
log "2. the resident path, $CALLS requests per side"
# The template picks record k * (RECORDS / IMAGES) + 7: record 7 with 8 records, 1 image.
resident one_secret "$work/one.json" 8 1
resident thousand_secrets "$work/thousand.json" 8 1
cfg "$work/kub-state.json" "$kub" ""
resident records_images "$work/kub-state.json" "$RECORDS" "$IMAGES"

# ------------------------------------------------------------ 3. syscalls, fsyncs
syscalls() { # BUILD LABEL
    command -v strace >/dev/null || { echo "syscalls_$2 skipped=no-strace"; return; }
    local tr=$work/strace-$2
    strace -f -o "$tr" "$1/tools/pullgatectl" --config "$work/kub.json" verify \
        --image "$("$bin/gen_records" --print-image $((RECORDS / 2 + 7)))" \
        --image-ref "$("$bin/gen_records" --print-ref $((RECORDS / 2 + 7)))" \
        --namespace "$("$bin/gen_records" --print-ns $((RECORDS / 2 + 7)))" \
        --credentials "$("$bin/gen_records" --print-annotation $((RECORDS / 2 + 7)))" >/dev/null
    # The store's part: from the configuration's read on.
    awk '/kub.json/ {on = 1} on' "$tr" >"$tr.store"
    echo "syscalls_$2 decision=$(wc -l <"$tr.store")" \
        "opens=$(grep -c 'openat(' "$tr.store")" \
        "most_opened=$(grep -o 'openat([^"]*"[^"]*"' "$tr.store" | sort | uniq -c | sort -rn | head -1 | awk '{print $1}')" \
        "mkdirat=$(grep -c 'mkdirat(' "$tr.store")"
}
rounds() { # BUILD LABEL
    command -v strace >/dev/null || { echo "fsyncs_$2 skipped=no-strace"; return; }
    local d=$work/rounds-$2 step img=nginx:1.25
    rm -rf "$d"
    mkdir -p "$d"
    cfg "$d/cfg.json" "$d/state" ""
    for step in "record-intent --image $img" \
        "record-pulled --image $img --image-ref sha256:$(printf a | sha256sum | cut -c1-64) --secret team-a/regcred/uid-1:$(printf x | sha256sum | cut -c1-64)"; do
        strace -f -o "$d/trace" -e trace=fsync,fdatasync,renameat,renameat2,rename,unlinkat,write \
            "$1/tools/pullgatectl" --config "$d/cfg.json" $step
        awk -v what="${step%% *}" -v label="$2" '
            /fsync\(|fdatasync\(/ { if (!in_round) rounds++; in_round = 1; n++; next }
            /rename|unlink|write\(/ && !/resumed/ { in_round = 0 }
            END { printf "fsyncs_%s %s fsyncs=%d rounds=%d\n", label, what, n, rounds }' "$d/trace"
    done
}
log "3. one decision's syscalls, a new image's fsyncs"
syscalls "$build" new
rounds "$build" new
if [ -n "$base" ]; then
    syscalls "$base" base
    rounds "$base" base
fi
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
