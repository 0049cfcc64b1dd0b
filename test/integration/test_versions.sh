#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One version everywhere (docs/lifecycle.md, "Versions"): CMake's project(VERSION) is the
# source; the newest debian/changelog entry, the RPM spec's Version and its newest %changelog
# entry, packaging/previous-release (older), and the --version of every binary the build made
# must all say it. (pullgate_build_info's label: test_metrics_cri.)
set -uo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=../../packaging/stage-tree.sh
source "$PG_SOURCE_DIR/packaging/stage-tree.sh"

V="$(pg_project_version "$PG_SOURCE_DIR")"
[[ "$V" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] && pg_check_ok "project(VERSION) is $V" || pg_fail "project(VERSION): '$V'"

same() { # DESC GOT
    [[ "$2" == "$V" ]] && pg_check_ok "$1: $2" || pg_check_fail "$1 says '$2', project() $V"
}
same "debian/changelog, newest entry" \
    "$(sed -n '1s/^pullgate (\([^)-]*\)-[^)]*).*/\1/p' "$PG_SOURCE_DIR/packaging/debian/changelog")"
SPEC="$PG_SOURCE_DIR/packaging/rpm/pullgate.spec"
same "pullgate.spec Version" "$(sed -n 's/^Version:[[:space:]]*//p' "$SPEC")"
same "pullgate.spec, newest %changelog entry" \
    "$(sed -n '/^%changelog/,$ s/^\* .* - \([0-9.]*\)-[0-9]*$/\1/p' "$SPEC" | head -n 1)"
read -r PREV_V PREV_COMMIT < <(grep -v '^#' "$PG_SOURCE_DIR/packaging/previous-release")
python3 - "$PREV_V" "$V" <<'PY' && pg_check_ok "packaging/previous-release ($PREV_V, $PREV_COMMIT) is older" ||
import sys
a, b = (tuple(map(int, v.split("."))) for v in sys.argv[1:])
sys.exit(0 if a < b else 1)
PY
    pg_check_fail "packaging/previous-release says $PREV_V, not older than $V"

B="$PG_BUILD_DIR"
for bin in "$PULLGATECTL" "$PULLGATE_HOOK" "$B/hooks/pullgate-hook-local" "$B/cri/pullgate-cri" \
    "$B/webhook/pullgate-webhook" "$B/tools/pullgate-doctor" "$B/tools/pullgate-wire" \
    "$B/tools/pullgate-config-rollback"; do
    name="$(basename "$bin")"
    if [[ ! -x "$bin" ]]; then
        pg_check_fail "$name is not built in $B (every binary says the version)"
        continue
    fi
    same "$name --version" "$("$bin" --version 2>&1 | head -n 1 | awk '{print $2}')"
done
pg_summary
