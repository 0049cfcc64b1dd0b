#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds every libFuzzer target with clang (ASan + UBSan) and runs each for a
# bounded time on a copy of its seed corpus, one target per core at a time
# (a libFuzzer run is single-threaded). Prints executions per target.
#   scripts/fuzz.sh [SECONDS]   (default 20; FUZZ_JOBS overrides the parallelism)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
jobs=${FUZZ_JOBS:-$(nproc)}
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DPG_FUZZ=ON -DPG_SANITIZE=ON \
  -DPG_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" >/dev/null
# Strict string checks keep harnesses and library honest about NUL termination.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export FUZZ_WORK=$work FUZZ_SECONDS=$seconds

# One target: its result goes to $work/<name>.result ("ok <executions>" or "crash").
run_target() {
  local bin=$1 name corpus log
  name=$(basename "$bin"); corpus=test/fuzz/corpus/${name#fuzz_}
  mkdir -p "$FUZZ_WORK/$name"; [ -d "$corpus" ] && cp -r "$corpus/." "$FUZZ_WORK/$name/"
  log=$FUZZ_WORK/$name.log
  if "$bin" -max_total_time="$FUZZ_SECONDS" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$FUZZ_WORK/$name-" "$FUZZ_WORK/$name" >"$log" 2>&1; then
    echo "ok $(grep -o 'Done [0-9]* runs' "$log" | grep -o '[0-9]*' || echo 0)" >"$FUZZ_WORK/$name.result"
  else
    echo crash >"$FUZZ_WORK/$name.result"
  fi
}
export -f run_target
printf '%s\n' build-fuzz/test/fuzz_* | xargs -P "$jobs" -I{} bash -c 'run_target "$1"' _ {}

total=0 crashes=0
for bin in build-fuzz/test/fuzz_*; do
  name=$(basename "$bin"); read -r status execs <"$work/$name.result" || status=missing
  if [ "$status" = ok ]; then
    echo "fuzz: $name: $execs executions, no crash"
    total=$((total + execs))
  else
    echo "fuzz: $name: CRASH ($status)"
    sed -n '/ERROR:/,/^SUMMARY/p' "$work/$name.log" | head -40; tail -6 "$work/$name.log"
    crashes=$((crashes + 1))
  fi
done
echo "fuzz: $total executions in total, $crashes crashing targets"
[ "$crashes" -eq 0 ]
