#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every credential-hash vector through `pullgatectl hash` (see ctl_hash_vectors.py).
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
[[ -f "$PG_TESTDATA/credential-hash-vectors.json" ]] ||
    { echo "FAIL: no $PG_TESTDATA/credential-hash-vectors.json"; exit 1; }

exec /usr/bin/python3 "$here/ctl_hash_vectors.py" "$PULLGATECTL" "$PG_TESTDATA/credential-hash-vectors.json"
