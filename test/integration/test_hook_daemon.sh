#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The thin pullgate-hook against a real pullgate-cri hook server: the same decisions, stderr lines
# and D-Bus signals as pullgate-hook-local; fallback when the daemon is absent, stopped or holds
# another configuration; non-root and hostile clients refused (see hook_daemon.py).
set -euo pipefail

skip() { echo "SKIP: $*"; exit 77; }

[[ -n "${PULLGATE_HOOK:-}" && -x "$PULLGATE_HOOK" ]] || skip "PULLGATE_HOOK not set or not executable"
[[ -x "$(dirname "$PULLGATE_HOOK")/pullgate-hook-local" ]] || skip "pullgate-hook-local not built"
[[ -n "${PULLGATECTL:-}" && -x "$PULLGATECTL" ]] || skip "PULLGATECTL not set or not executable"
[[ -x "${PG_BUILD_DIR:-}/cri/pullgate-cri" ]] || skip "pullgate-cri not built (PG_BUILD_CRI=OFF?)"
[[ -x /usr/bin/python3 ]] || skip "/usr/bin/python3 not installed"
[[ $(id -u) == 0 ]] || skip "needs root (the hook server serves uid 0 only)"
command -v timeout >/dev/null || skip "timeout(1) not installed"
command -v nm >/dev/null || skip "nm (binutils) not installed"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec /usr/bin/python3 "$here/hook_daemon.py"
