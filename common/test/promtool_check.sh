#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `promtool check metrics` on the sample registry test_metrics prints with --render
# (every type, labels, escapes): Prometheus' own linter accepts our exposition.
set -eu
command -v promtool >/dev/null 2>&1 || { echo "SKIP: promtool not installed (Debian: prometheus)"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$1" --render >"$out"
head -n 12 "$out"
promtool check metrics <"$out"
echo "promtool check metrics: ok"
