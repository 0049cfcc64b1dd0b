#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Install paths and version come from CMake, not from strings in the code:
#   1. configure with a custom prefix, build, `cmake --install`;
#   2. the installed pullgatectl names ${prefix}/etc/pullgate/config.json in --help and reads it:
#      check-config names a deliberately invalid key there (exit 2), and without the file the
#      built-in stateDir is ${prefix}/var/lib/pullgate;
#   3. the installed pullgate-hook reads the same file (denies naming the key);
#   4. the version is project(VERSION): the installed <pullgate/version.h>, `pullgatectl --version`,
#      debian/changelog, the rpm spec's Version and its shared-object file name agree.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

pg_require_cmd cmake make
SRC="$PG_SOURCE_DIR"
WORK="$(pg_mktemp_dir install)"
PREFIX="$WORK/opt"
BUILD="$WORK/build"

pg_section "configure, build and install with prefix $PREFIX"
# Only the parts installed for a node: no tests, bench or daemons (they do not change paths).
cmake -S "$SRC" -B "$BUILD" -DCMAKE_INSTALL_PREFIX="$PREFIX" -DPG_WERROR=ON \
    -DPG_BUILD_TESTS=OFF -DPG_BUILD_BENCH=OFF -DPG_BUILD_CRI=OFF -DPG_BUILD_WEBHOOK=OFF \
    >"$WORK/configure.log" 2>&1 || { cat "$WORK/configure.log" >&2; pg_fail "configure failed"; }
cmake --build "$BUILD" -j2 >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log" >&2; pg_fail "build failed"; }
cmake --install "$BUILD" >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log" >&2; pg_fail "install failed"; }

CTL="$PREFIX/bin/pullgatectl"
HOOK="$PREFIX/libexec/oci/hooks.d/pullgate-hook"
CONFIG="$PREFIX/etc/pullgate/config.json"
[[ -x $CTL && -x $HOOK ]] || pg_fail "pullgatectl or pullgate-hook not installed under $PREFIX"
# The thin hook execs its fallback from its own directory.
[[ -x ${HOOK}-local ]] && pg_check_ok "pullgate-hook-local installed next to pullgate-hook" ||
    pg_check_fail "pullgate-hook-local not installed next to $HOOK"
pg_expect_ok "the config is installed under the prefix ($CONFIG)" test -f "$CONFIG"
pg_expect_ok "nothing was installed outside the prefix" \
    bash -c "! grep -v '^-- Up-to-date\\|^-- Installing: $PREFIX/\\|^-- Install configuration' '$WORK/install.log' | grep -q ."

pg_section "pullgatectl uses the installed config"
pg_expect_ok "pullgatectl --help" "$CTL" --help
pg_expect_contains "--help names the installed config path" "$PG_OUT" "(default $CONFIG)"

pg_expect_ok "check-config accepts the installed config" "$CTL" check-config
cp "$CONFIG" "$WORK/config.good"
# A key no version of the config knows: check-config must name it and exit 2.
python3 - "$CONFIG" <<'EOF'
import json, sys
path = sys.argv[1]
cfg = json.load(open(path))
cfg["pgInstallPathsProbe"] = True
json.dump(cfg, open(path, "w"))
EOF
"$CTL" check-config >"$WORK/out" 2>&1
rc=$?
[[ $rc == 2 ]] && pg_check_ok "check-config exits 2 on the invalid installed config" ||
    pg_check_fail "check-config exit $rc on the invalid installed config (want 2)"
pg_expect_contains "check-config names the invalid key" "$(cat "$WORK/out")" "pgInstallPathsProbe"

pg_section "pullgate-hook uses the installed config"
"$HOOK" </dev/null >"$WORK/hook.out" 2>&1
rc=$?
[[ $rc == 1 ]] && pg_check_ok "the hook denies (exit 1) on the invalid installed config" ||
    pg_check_fail "hook exit $rc on the invalid installed config (want 1)"
pg_expect_contains "the hook names the invalid key" "$(cat "$WORK/hook.out")" "pgInstallPathsProbe"

pg_section "built-in stateDir follows the prefix"
rm -f "$CONFIG"
pg_expect_ok "check-config without a config file (built-in defaults)" "$CTL" check-config
state_dir="$(printf '%s' "$PG_OUT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["stateDir"])')"
[[ $state_dir == "$PREFIX/var/lib/pullgate" ]] && pg_check_ok "default stateDir is $state_dir" ||
    pg_check_fail "default stateDir is '$state_dir', want $PREFIX/var/lib/pullgate"
cp "$WORK/config.good" "$CONFIG"

pg_section "one version: project(VERSION)"
project_version="$(sed -n 's/^project(pullgate VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")"
[[ -n $project_version ]] || pg_fail "no project(pullgate VERSION x.y.z) in CMakeLists.txt"
header_version="$(sed -n 's/^#define PG_VERSION_STRING "\(.*\)"$/\1/p' "$PREFIX/include/pullgate/version.h")"
[[ $header_version == "$project_version" ]] && pg_check_ok "installed version.h says $header_version" ||
    pg_check_fail "installed version.h says '$header_version', project says $project_version"
pg_expect_ok "pullgatectl --version" "$CTL" --version
pg_expect_contains "pullgatectl --version prints $project_version" "$PG_OUT" "$project_version (libpullgate $project_version)"
deb_version="$(sed -n '1s/^pullgate (\([^-)]*\).*/\1/p' "$SRC/packaging/debian/changelog")"
[[ $deb_version == "$project_version" ]] && pg_check_ok "debian/changelog's upstream version is $deb_version" ||
    pg_check_fail "debian/changelog says '$deb_version', project says $project_version"
spec="$SRC/packaging/rpm/pullgate.spec"
rpm_version="$(awk '$1 == "Version:" { print $2; exit }' "$spec")"
[[ $rpm_version == "$project_version" ]] && pg_check_ok "the rpm spec's Version is $rpm_version" ||
    pg_check_fail "the rpm spec says Version '$rpm_version', project says $project_version"
if grep -q "libpullgate.so.\($project_version\|%{version}\)\$" "$spec"; then
    pg_check_ok "the rpm spec lists libpullgate.so.$project_version (or .%{version})"
else
    pg_check_fail "the rpm spec does not list libpullgate.so.$project_version"
fi
pg_expect_ok "the installed library is libpullgate.so.$project_version" \
    test -f "$PREFIX/lib/libpullgate.so.$project_version" -o -f "$PREFIX/lib/$(gcc -print-multiarch 2>/dev/null)/libpullgate.so.$project_version"

pg_summary
