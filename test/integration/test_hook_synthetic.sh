#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# pullgate-hook against synthetic CRI-O, containerd and podman bundles, forged annotations and
# hostile input (see hook_synthetic.py). Needs pullgatectl to write records.
set -euo pipefail

skip() { echo "SKIP: $*"; exit 77; }

[[ -n "${PULLGATE_HOOK:-}" && -x "$PULLGATE_HOOK" ]] || skip "PULLGATE_HOOK not set or not executable"
[[ -n "${PULLGATECTL:-}" && -x "$PULLGATECTL" ]] || skip "PULLGATECTL not set or not executable"
[[ -x /usr/bin/python3 ]] || skip "/usr/bin/python3 not installed"
command -v timeout >/dev/null || skip "timeout(1) not installed"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec /usr/bin/python3 "$here/hook_synthetic.py"
