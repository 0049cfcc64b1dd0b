#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian packages of the current work tree (committed or not):
# copies the tree (files git tracks or would track, minus ignored ones) to a
# temporary directory, puts packaging/debian at ./debian there, and runs
# dpkg-buildpackage -us -uc -b. The .deb, .changes and .buildinfo files land
# in OUTDIR (default: ./build-deb).
#
# usage: packaging/build-deb.sh [OUTDIR]
# env:   DEB_BUILD_OPTIONS (default "nocheck"), PG_KEEP_TMP=1 keeps the copy
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=packaging/stage-tree.sh
. "$src/packaging/stage-tree.sh"
outdir=${1:-$src/build-deb}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)

for t in dpkg-buildpackage dh dpkg-parsechangelog; do
    command -v "$t" >/dev/null 2>&1 || { echo "build-deb: $t not found (apt-get install dpkg-dev debhelper)" >&2; exit 2; }
done

version=$(dpkg-parsechangelog -l "$src/packaging/debian/changelog" -S Version)
upstream=${version%-*}
project=$(pg_project_version "$src")
if [ "$upstream" != "$project" ]; then
    echo "build-deb: debian/changelog's newest entry is $version, CMake's project() says $project: add a changelog entry (docs/lifecycle.md, \"Versions\")" >&2
    exit 2
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pullgate-deb.XXXXXX")
cleanup() { [ "${PG_KEEP_TMP:-0}" = 1 ] || rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

tree=$tmp/pullgate-$upstream
mkdir -p "$tree"
pg_stage_tree "$src" "$tree"
rm -rf "$tree/debian"
cp -a "$tree/packaging/debian" "$tree/debian"
# An upstream tarball, so the 3.0 (quilt) source format is complete.
tar -C "$tmp" --exclude="pullgate-$upstream/debian" -czf "$tmp/pullgate_$upstream.orig.tar.gz" "pullgate-$upstream"

export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-nocheck}"
# shellcheck disable=SC2086 # word splitting wanted
(cd "$tree" && dpkg-buildpackage -us -uc -b ${PG_DPKG_BUILDPACKAGE_ARGS:-})

for f in "$tmp"/*.deb "$tmp"/*.changes "$tmp"/*.buildinfo; do
    [ -e "$f" ] && cp "$f" "$outdir/"
done
echo "build-deb: packages in $outdir:"
ls -1 "$outdir"
