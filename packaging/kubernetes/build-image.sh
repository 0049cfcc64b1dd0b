#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the pullgate-webhook container image offline from a built binary.
#
#   build-image.sh BINARY [TAG]        (default TAG pullgate-webhook:1.0.0)
#
# Stages BINARY as /usr/bin/pullgate-webhook with every shared library ldd
# resolves for it (and the dynamic loader) under rootfs/, adds a nonroot user
# (65532), and runs `podman build` (or `buildah bud`, `docker build`) on
# Containerfile with --network none. Push the result to your registry and set
# the image in webhook.yaml.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${1:?usage: build-image.sh BINARY [TAG]}
TAG=${2:-pullgate-webhook:1.0.0}
[ -x "$BIN" ] || { echo "build-image.sh: $BIN is not an executable" >&2; exit 1; }
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
ROOT=$STAGE/rootfs
mkdir -p "$ROOT/usr/bin" "$ROOT/etc" "$ROOT/tmp"
install -m 0755 "$BIN" "$ROOT/usr/bin/pullgate-webhook"
# Libraries by their resolved paths, plus the loader ("/lib64/ld-linux-x86-64.so.2 (0x...)").
ldd "$BIN" | awk '/=> \// { print $3 } /^\t\// { print $1 }' | sort -u | while read -r lib; do
    mkdir -p "$ROOT$(dirname "$lib")"
    cp -L "$lib" "$ROOT$lib"
done
if ldd "$BIN" | grep -q 'not found'; then
    echo "build-image.sh: unresolved libraries: $(ldd "$BIN" | grep 'not found')" >&2
    exit 1
fi
printf 'root:x:0:0:root:/:/nonexistent\nnonroot:x:65532:65532:nonroot:/:/nonexistent\n' >"$ROOT/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ROOT/etc/group"
chmod 1777 "$ROOT/tmp"
cp "$HERE/Containerfile" "$STAGE/Containerfile"
if command -v podman >/dev/null; then
    podman build --network none -f "$STAGE/Containerfile" -t "$TAG" "$STAGE"
elif command -v buildah >/dev/null; then
    buildah bud --network none -f "$STAGE/Containerfile" -t "$TAG" "$STAGE"
else
    docker build --network none -f "$STAGE/Containerfile" -t "$TAG" "$STAGE"
fi
echo "built $TAG"
