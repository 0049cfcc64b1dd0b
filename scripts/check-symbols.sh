#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The shared library must export exactly the documented API (the functions
# declared in include/pullgate/pullgate.h), all under version PULLGATE_1.
set -euo pipefail
lib=${1:?usage: check-symbols.sh LIBRARY}
root=$(cd "$(dirname "$0")/.." && pwd)
expected=$(grep -o '\bpg_[a-z0-9_]*(' "$root/include/pullgate/pullgate.h" | tr -d '(' |
  grep -v -e '^pg_record_cb$' -e '^pg_bad_record_cb$' | sort -u)
actual=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRtdbr]$/ {print $3}' | sed 's/@.*//' | sort -u)
if ! diff <(echo "$expected") <(echo "$actual"); then
  echo "check-symbols: exported symbols differ from the public header (< header, > library)" >&2
  exit 1
fi
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
[ "$soname" = libpullgate.so.1 ] || { echo "check-symbols: SONAME is '$soname'" >&2; exit 1; }
echo "check-symbols: $(echo "$actual" | wc -l) symbols, all documented; SONAME $soname"
