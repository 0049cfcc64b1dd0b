#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every case of kubelet-record-cases.json through pullgatectl record-intent, record-pulled, record-failed, prune and verify (see ctl_record_cases.py).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${PG_TESTDATA:=$here/../data}"

if [[ -z "${PULLGATECTL:-}" || ! -x "${PULLGATECTL:-}" ]]; then
    echo "SKIP: pullgatectl not built (PULLGATECTL='${PULLGATECTL:-}')"
    exit 77
fi
if [[ ! -x /usr/bin/python3 ]]; then
    echo "SKIP: /usr/bin/python3 not installed"
    exit 77
fi
[[ -f "$PG_TESTDATA/kubelet-record-cases.json" ]] || { echo "FAIL: no $PG_TESTDATA/kubelet-record-cases.json"; exit 1; }

exec /usr/bin/python3 "$here/ctl_record_cases.py" "$PULLGATECTL" "$PG_TESTDATA/kubelet-record-cases.json" "$@"
