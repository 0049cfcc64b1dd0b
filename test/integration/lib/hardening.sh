# SPDX-License-Identifier: Apache-2.0
# Helpers shared by the hardening tests (test_hostile_state, test_soak, test_annotate):
# result counting, pullgatectl wrappers and synthetic CRI-O-shaped hook bundles
# (the shape of test/integration/hook_synthetic.py: pod annotations first, CRI-O's own keys last).
# Source after `set -euo pipefail`; needs $PULLGATECTL, $PULLGATE_HOOK and $WORK (a scratch dir).

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

finish() { # test name
    if [ "$failures" -ne 0 ]; then
        echo "$1: $failures failure(s)"
        exit 1
    fi
    echo "$1: passed"
}

HASH_A=$(printf 'a%.0s' $(seq 64))
ANNOTATION_KEY=pullgate.dev/credentials

ref_hex() { printf '%064d' "$1"; }       # CRI-O names image IDs bare
ref_of() { printf 'sha256:%064d' "$1"; } # as recorded
image_of() { echo "registry.example.com/team-a/app$1:1.0"; }
name_of() { echo "registry.example.com/team-a/app$1"; }
creds_for() { # index namespace secret-name
    printf '{"%s":{"kubernetesSecrets":[{"namespace":"%s","name":"%s","uid":"uid-%s"}]}}' \
        "$(name_of "$1")" "$2" "$3" "$3"
}

# run_status WANT DESCRIPTION -- command...: runs it (bounded by timeout 20), keeps $OUT/$ERR.
run_status() {
    local want=$1 what=$2 rc=0
    shift 3
    OUT=$(timeout 20 "$@" 2>"$WORK/.stderr") || rc=$?
    ERR=$(cat "$WORK/.stderr")
    STATUS=$rc
    if [ "$rc" -eq 124 ]; then
        fail "$what: hung (killed by timeout)"
        return 1
    fi
    if [ "$want" != any ] && [ "$rc" -ne "$want" ]; then
        fail "$what: exit $rc, expected $want (stdout: $OUT; stderr: $ERR)"
        return 1
    fi
    return 0
}

# hook_config PATH STATE_DIR [extra JSON members]: a hook configuration file.
hook_config() {
    printf '{"stateDir":"%s","readOnlyRecordDirs":[],"dbus":"none","runtime":"cri-o",
"policy":"AlwaysVerify"%s}\n' "$2" "${3:+,$3}" >"$1"
}

# crio_bundle DIR NAMESPACE IMAGE REF_HEX CREDENTIALS_JSON: a CRI-O application container.
crio_bundle() {
    mkdir -p "$1"
    python3 - "$@" <<'EOF'
import json, sys
path, ns, image, ref, creds = sys.argv[1:6]
ann = {}
if creds:
    ann["pullgate.dev/credentials"] = creds           # pod annotation (webhook output)
ann.update({"io.container.manager": "cri-o",          # CRI-O's own keys overwrite
            "io.kubernetes.cri-o.ContainerType": "container",
            "io.kubernetes.cri-o.ImageName": image,
            "io.kubernetes.cri-o.Image": ref,
            "io.kubernetes.cri-o.ImageRef": ref,
            "io.kubernetes.pod.namespace": ns})       # kubelet label, copied last
spec = {"ociVersion": "1.0.2", "process": {"args": ["/app"]}, "root": {"path": "rootfs"},
        "annotations": ann}
with open(path + "/config.json", "w") as f:
    json.dump(spec, f)
EOF
}

# run_hook CONFIG BUNDLE ID: runs the hook with the OCI state on stdin; $STATUS, $ERR.
run_hook() {
    local rc=0
    printf '{"ociVersion":"1.0.2","id":"%s","status":"creating","pid":1,"bundle":"%s"}' "$3" "$2" |
        timeout 20 "$PULLGATE_HOOK" --config "$1" --stage createRuntime >/dev/null \
            2>"$WORK/.hook-stderr" || rc=$?
    STATUS=$rc
    ERR=$(cat "$WORK/.hook-stderr")
}
