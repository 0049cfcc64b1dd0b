#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Soak: concurrent pullgate-hook runs on synthetic CRI-O bundles and record writes for
# SOAK_SECONDS (default 60; use SOAK_SECONDS=300 for a manual run), checked by
# test/integration/soak.py: every decision right, no crash, no hang, nothing acknowledged lost.
# Memory checking: with PG_ASAN_BUILD_DIR (a -DPG_SANITIZE=ON build) its binaries run and any
# ASan/UBSan/LSan report fails the test; otherwise the normal binaries run and a sample of
# hook runs (SOAK_VALGRIND_RUNS, default 12) goes through valgrind (leaks and errors fail).
set -euo pipefail

: "${PULLGATECTL:?PULLGATECTL must name the pullgatectl binary}"
: "${PULLGATE_HOOK:?PULLGATE_HOOK must name the pullgate-hook binary}"
HERE=$(cd "$(dirname "$0")" && pwd)
SECONDS_TO_RUN=${SOAK_SECONDS:-60}

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: records and bundles must be root-owned as on a node; run as root"
    exit 77
fi

ctl=$PULLGATECTL hook=$PULLGATE_HOOK valgrind_runs=0
if [ -n "${PG_ASAN_BUILD_DIR:-}" ]; then
    ctl=$PG_ASAN_BUILD_DIR/tools/pullgatectl
    hook=$PG_ASAN_BUILD_DIR/hooks/pullgate-hook
    for b in "$ctl" "$hook"; do
        [ -x "$b" ] || { echo "FAIL: PG_ASAN_BUILD_DIR has no $b"; exit 1; }
    done
    echo "soak: sanitizer build $PG_ASAN_BUILD_DIR"
elif command -v valgrind >/dev/null; then
    valgrind_runs=${SOAK_VALGRIND_RUNS:-12}
    echo "soak: normal build, $valgrind_runs hook runs under valgrind"
else
    echo "soak: normal build, no valgrind and no PG_ASAN_BUILD_DIR: decisions and crashes only"
fi

WORK=$(mktemp -d /tmp/pg-soak.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
python3 "$HERE/soak.py" --ctl "$ctl" --hook "$hook" --work "$WORK" --seconds "$SECONDS_TO_RUN" \
    --parallel "${SOAK_PARALLEL:-32}" --valgrind-runs "$valgrind_runs" \
    --memcheck-hook "${PULLGATE_HOOK_MEMCHECK:-$hook}"
