#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds every libFuzzer target with clang (ASan + UBSan) and runs each for a
# bounded time on a copy of its seed corpus. Prints executions per target.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DPG_FUZZ=ON -DPG_SANITIZE=ON \
  -DPG_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" >/dev/null
# Strict string checks keep harnesses and library honest about NUL termination.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
total=0 crashes=0
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
for bin in build-fuzz/test/fuzz_*; do
  name=$(basename "$bin"); corpus=test/fuzz/corpus/${name#fuzz_}
  mkdir -p "$work/$name"; [ -d "$corpus" ] && cp -r "$corpus/." "$work/$name/"
  log=$work/$name.log
  if "$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$work/$name-" "$work/$name" >"$log" 2>&1; then
    execs=$(grep -o 'Done [0-9]* runs' "$log" | grep -o '[0-9]*' || echo 0)
    echo "fuzz: $name: $execs executions, no crash"
    total=$((total + execs))
  else
    echo "fuzz: $name: CRASH"
    sed -n '/ERROR:/,/^SUMMARY/p' "$log" | head -40; tail -6 "$log"
    crashes=$((crashes + 1))
  fi
done
echo "fuzz: $total executions in total, $crashes crashing targets"
[ "$crashes" -eq 0 ]
