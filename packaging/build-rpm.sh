#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the RPMs of the current work tree (committed or not): makes
# pullgate-VERSION.tar.gz from the files git tracks or would track (minus
# ignored ones) and runs rpmbuild -bb in a private _topdir. Works with
# Debian's rpmbuild (no build dependencies are checked: --nodeps).
# The RPMs land in OUTDIR (default: ./build-rpm).
#
# usage: packaging/build-rpm.sh [OUTDIR]
# env:   PG_KEEP_TMP=1 keeps the rpmbuild _topdir
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=packaging/stage-tree.sh
. "$src/packaging/stage-tree.sh"
outdir=${1:-$src/build-rpm}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
spec=$src/packaging/rpm/pullgate.spec

command -v rpmbuild >/dev/null 2>&1 || { echo "build-rpm: rpmbuild not found (apt-get install rpm)" >&2; exit 2; }

version=$(sed -n 's/^Version:[[:space:]]*//p' "$spec")
project=$(pg_project_version "$src")
if [ "$version" != "$project" ]; then
    echo "build-rpm: pullgate.spec says Version $version, CMake's project() says $project (docs/lifecycle.md, \"Versions\")" >&2
    exit 2
fi
top=$(mktemp -d "${TMPDIR:-/tmp}/pullgate-rpm.XXXXXX")
cleanup() { [ "${PG_KEEP_TMP:-0}" = 1 ] || rm -rf "$top"; }
trap cleanup EXIT
trap 'exit 1' HUP INT TERM
mkdir -p "$top/SOURCES" "$top/SPECS" "$top/BUILD" "$top/RPMS" "$top/SRPMS" "$top/stage/pullgate-$version"

pg_stage_tree "$src" "$top/stage/pullgate-$version"
tar -C "$top/stage" -czf "$top/SOURCES/pullgate-$version.tar.gz" "pullgate-$version"
cp "$spec" "$top/SPECS/"

# Debian's rpm has no debugedit: build without -debuginfo subpackages there.
set -- --define "_topdir $top" --nodeps
if ! command -v debugedit >/dev/null 2>&1 && [ ! -x /usr/lib/rpm/debugedit ]; then
    set -- "$@" --define "debug_package %{nil}"
fi
rpmbuild -bb "$@" "$top/SPECS/pullgate.spec"

find "$top/RPMS" -name '*.rpm' -exec cp {} "$outdir/" \;
echo "build-rpm: packages in $outdir:"
ls -1 "$outdir"
