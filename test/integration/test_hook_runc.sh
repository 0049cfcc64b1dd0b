#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# pullgate-hook under a real `runc run`, at the prestart and the createRuntime stage: an authorized
# container (CRI-O-shaped annotations) runs, an unauthorized one fails and runc's error carries the
# hook's denial line. Another tenant's container with a mis-spelled io.kubernetes.cri-o.ImageRef
# (issue 10: once taken for a preloaded image) never starts.
set -euo pipefail

skip() { echo "SKIP: $*"; exit 77; }

[[ -n "${PULLGATE_HOOK:-}" && -x "$PULLGATE_HOOK" ]] || skip "PULLGATE_HOOK not set or not executable"
[[ -n "${PULLGATECTL:-}" && -x "$PULLGATECTL" ]] || skip "PULLGATECTL not set or not executable"
[[ $(id -u) -eq 0 ]] || skip "needs root to run runc"
RUNC=${RUNC:-/usr/sbin/runc}
[[ -x "$RUNC" ]] || skip "runc not installed at $RUNC"
[[ -x /usr/bin/python3 ]] || skip "/usr/bin/python3 not installed"
BUSYBOX=$(command -v busybox || true)
[[ -n "$BUSYBOX" ]] || skip "busybox not installed"
file -L "$BUSYBOX" 2>/dev/null | grep -q "statically linked" || skip "$BUSYBOX is not statically linked"

work=$(mktemp -d /tmp/pg-hook-runc.XXXXXX)
chmod 0755 "$work"
runc_root="$work/runc-root"
containers=()

cleanup() {
    local id
    for id in "${containers[@]}"; do
        "$RUNC" --root "$runc_root" delete -f "$id" >/dev/null 2>&1 || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

HASH_A=$(printf 'a%.0s' {1..64})
REF=$(printf '3%.0s' {1..64})
IMAGE=registry.example.com/team-a/app:1.0
NAME=registry.example.com/team-a/app

# ---------------------------------------------------------------- setup
mkdir -p "$work/rootfs/bin" "$work/rootfs/proc" "$work/rootfs/dev" "$work/rootfs/sys" "$work/state"
chmod 0700 "$work/state"
cp "$BUSYBOX" "$work/rootfs/bin/busybox"
for applet in sh true; do ln -s busybox "$work/rootfs/bin/$applet"; done

cat >"$work/config.json" <<EOF
{"stateDir": "$work/state", "readOnlyRecordDirs": [], "dbus": "none", "runtime": "auto",
 "policy": "NeverVerifyPreloadedImages", "mode": "enforce"}
EOF
"$PULLGATECTL" --config "$work/config.json" record-pulled --image "$IMAGE" \
    --image-ref "sha256:$REF" --secret "team-a/regcred/uid-a:$HASH_A" >/dev/null

good_creds="{\"$NAME\":{\"kubernetesSecrets\":[{\"namespace\":\"team-a\",\"name\":\"regcred\",\"uid\":\"uid-a\",\"credentialHash\":\"$HASH_A\"}]}}"

# make_bundle DIR STAGE CREDENTIALS [NAMESPACE [IMAGE_REF]]: a runc bundle with CRI-O-shaped
# annotations and the hook.
make_bundle() {
    local dir=$1 stage=$2 creds=$3 ns=${4:-team-a} image_ref=${5:-$REF}
    mkdir -p "$dir"
    (cd "$dir" && "$RUNC" spec)
    /usr/bin/python3 - "$dir/config.json" "$stage" "$creds" "$ns" "$image_ref" <<EOF
import json, sys
path, stage, creds, ns, image_ref = sys.argv[1:6]
spec = json.load(open(path))
spec["root"] = {"path": "$work/rootfs", "readonly": True}
spec["process"]["terminal"] = False
spec["process"]["args"] = ["/bin/true"]
spec["process"].pop("rlimits", None)
ann = {}
if creds:
    ann["pullgate.dev/credentials"] = creds
ann.update({
    "io.container.manager": "cri-o",
    "io.kubernetes.cri-o.ContainerType": "container",
    "io.kubernetes.cri-o.Image": "$REF",
    "io.kubernetes.cri-o.ImageName": "$IMAGE",
    "io.kubernetes.cri-o.ImageRef": image_ref,
    "io.kubernetes.pod.namespace": ns,
    "io.kubernetes.pod.name": "pod-1",
    "io.kubernetes.container.name": "app",
})
spec["annotations"] = ann
spec["hooks"] = {stage: [{"path": "$PULLGATE_HOOK",
                          "args": ["pullgate-hook", "--config", "$work/config.json", "--stage", stage],
                          "timeout": 10}]}
json.dump(spec, open(path, "w"), indent=1)
EOF
}

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run_container ID BUNDLE: runs it to completion; prints runc's combined output; returns runc's status.
run_container() {
    local id=$1 bundle=$2
    containers+=("$id")
    timeout 60 "$RUNC" --root "$runc_root" run --bundle "$bundle" "$id" </dev/null 2>&1
}

for stage in prestart createRuntime; do
    id="pg-hook-ok-$stage-$$"
    make_bundle "$work/b-ok-$stage" "$stage" "$good_creds"
    if out=$(run_container "$id" "$work/b-ok-$stage"); then
        echo "ok: $stage: authorized container ran"
    else
        fail "$stage: authorized container did not run: $out"
    fi

    id="pg-hook-deny-$stage-$$"
    make_bundle "$work/b-deny-$stage" "$stage" ""
    if out=$(run_container "$id" "$work/b-deny-$stage"); then
        fail "$stage: unauthorized container ran"
    elif ! grep -q "pullgate: denied container $id (namespace team-a, image $IMAGE): " <<<"$out"; then
        fail "$stage: runc's error lacks the denial line: $out"
    elif ! grep -qi "credential" <<<"$out"; then
        fail "$stage: runc's error lacks the reason: $out"
    else
        echo "ok: $stage: unauthorized container denied: $(grep -o 'pullgate: denied[^"]*' <<<"$out" | head -1)"
    fi
done

# Issue 10: team-b, no credentials, the image ID spelled so that no lookup finds team-a's record.
n=0
for bad_ref in "SHA256:$REF" "sha256:sha256:$REF" "$REF "; do
    n=$((n + 1))
    id="pg-hook-misspelled-$n-$$"
    make_bundle "$work/b-misspelled-$n" createRuntime "" team-b "$bad_ref"
    if out=$(run_container "$id" "$work/b-misspelled-$n"); then
        fail "team-b's container with ImageRef '$bad_ref' ran"
    elif ! grep -q "pullgate: denied container $id (namespace team-b, image $IMAGE): bad request" <<<"$out"; then
        fail "ImageRef '$bad_ref': runc's error lacks the bad-request denial: $out"
    else
        echo "ok: mis-spelled ImageRef '$bad_ref' denied: $(grep -o 'pullgate: denied[^"]*' <<<"$out" | head -1)"
    fi
done

# runc removes a container whose hook failed and one that ran to completion: nothing may remain.
left=$("$RUNC" --root "$runc_root" list -q 2>/dev/null | tr '\n' ' ' || true)
[[ -z "${left// /}" ]] || fail "containers left behind in runc's state: $left"

if ((failures)); then
    echo "$failures failure(s)"
    exit 1
fi
echo "all runc hook checks passed"
