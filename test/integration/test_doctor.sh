#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgatectl doctor on a node in a temp dir (docs/lifecycle.md, pullgatectl(8) "doctor"):
#   real: containerd 1.6 (its own config, socket and base_runtime_spec with the hook and
#         pod_annotations: lib/cri_node.sh) and pullgate-cri in front of it with its hook socket;
#   fake: /proc (--proc-root) holding a "kubelet" (cmdline, status, exe -> a script printing its
#         version) and a mirror of the real pullgate-cri's cmdline; the kubelet's config YAML;
#         CRI-O hooks.d directories and crio.conf.
# All checks pass when wired; then each wiring is broken one at a time: that check fails with a
# fix, doctor exits 1, and the wiring is restored before the next one.
# Env (from ctest): PULLGATE_HOOK, PULLGATECTL, PG_BUILD_DIR; PULLGATE_CRI overrides the binary.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/registry.sh
source "$HERE/lib/registry.sh"
# shellcheck source=lib/cri_node.sh
source "$HERE/lib/cri_node.sh"

: "${PULLGATE_CRI:=${PG_BUILD_DIR:-}/cri/pullgate-cri}"
[[ -x "$PULLGATE_CRI" ]] || pg_skip "pullgate-cri not built ('$PULLGATE_CRI')"
[[ -x "$(dirname "$PULLGATECTL")/pullgate-doctor" ]] || pg_skip "pullgate-doctor not built (PG_BUILD_DOCTOR=OFF)"
pg_node_require
pg_require_pullgate

W="$(pg_mktemp_dir doctor)"
chmod 0755 "$W"
CFG="$W/config.json"
STATE="$W/state"
KEY="$W/annotation.key"
mkdir -m 0700 "$STATE"
head -c 48 /dev/urandom >"$KEY"
chmod 0600 "$KEY"
write_cfg() { # [KEY=JSON-VALUE]...: the node's configuration with these keys changed
    "$PG_PY" - "$CFG" "$STATE" "$KEY" "$@" <<'PY'
import json, os, sys
path, state, key = sys.argv[1:4]
cfg = {"stateDir": state, "readOnlyRecordDirs": [], "dbus": "none", "runtime": "containerd",
       "hmacKeyFile": key}
for kv in sys.argv[4:]:
    k, v = kv.split("=", 1)
    cfg[k] = json.loads(v)
with open(path + ".tmp", "w") as f:
    json.dump(cfg, f)
os.chmod(path + ".tmp", 0o644)
os.replace(path + ".tmp", path)
PY
}
write_cfg

pg_section "a node: containerd with the hook, pullgate-cri in front"
pg_node_containerd_setup "$CFG"
pg_node_containerd_start || pg_fail "containerd did not start"
pg_node_proxy_start || pg_fail "pullgate-cri did not start"
CD_CONFIG="$PG_CD_DIR/config.toml"
BASE_SPEC="$PG_CD_DIR/base-spec.json"

# ---- the fake /proc: a kubelet and a mirror of pullgate-cri
PROC="$W/proc"
KPID=4242
mkdir -p "$PROC/$KPID"
KUBELET_BIN="$W/bin/kubelet"
mkdir -p "$W/bin"
set_kubelet_version() { # VERSION
    printf '#!/bin/sh\n[ "$1" = --version ] && echo "Kubernetes %s"\n' "$1" >"$KUBELET_BIN"
    chmod 0755 "$KUBELET_BIN"
}
set_kubelet_version v1.33.2
ln -sfn "$KUBELET_BIN" "$PROC/$KPID/exe"
echo kubelet >"$PROC/$KPID/comm"
printf 'Name:\tkubelet\nUid:\t0\t0\t0\t0\n' >"$PROC/$KPID/status"
# The doctor's own mount namespace: a process on the node's filesystem, not in a container.
mkdir -p "$PROC/$KPID/ns"
ln -sfn /proc/self/ns/mnt "$PROC/$KPID/ns/mnt"
KCONFIG="$W/kubelet-config.yaml"
set_kubelet_cmdline() { # ARGS...
    printf '%s\0' /usr/bin/kubelet --config="$KCONFIG" "$@" >"$PROC/$KPID/cmdline"
}
set_kubelet_cmdline --v=2
write_kubelet_config() { # RUNTIME_ENDPOINT IMAGE_ENDPOINT [EXTRA YAML]
    cat >"$KCONFIG" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: $1
imageServiceEndpoint: "$2"
${3:-}
EOF
}
write_kubelet_config "unix://$PG_PROXY_SOCK" "unix://$PG_PROXY_SOCK"
MIRROR_PID=""
mirror_cri() { # the real pullgate-cri's cmdline, or a rewritten one: ARGS...
    [[ -n "$MIRROR_PID" ]] && rm -rf "${PROC:?}/$MIRROR_PID"
    MIRROR_PID="$PG_PROXY_PID"
    mkdir -p "$PROC/$PG_PROXY_PID"
    echo pullgate-cri >"$PROC/$PG_PROXY_PID/comm"
    printf 'Name:\tpullgate-cri\nUid:\t0\t0\t0\t0\n' >"$PROC/$PG_PROXY_PID/status"
    mkdir -p "$PROC/$PG_PROXY_PID/ns"
    ln -sfn /proc/self/ns/mnt "$PROC/$PG_PROXY_PID/ns/mnt"
    if (($#)); then printf '%s\0' "$@" >"$PROC/$PG_PROXY_PID/cmdline"; else
        cp "/proc/$PG_PROXY_PID/cmdline" "$PROC/$PG_PROXY_PID/cmdline"
    fi
}
mirror_cri

DOCTOR_ARGS=(--proc-root "$PROC" --containerd-config "$CD_CONFIG" --timeout-ms 3000)
OUT=""
STATUS=0
doctor() { # runs doctor --json; OUT, STATUS
    STATUS=0
    OUT="$("$PULLGATECTL" --config "$CFG" doctor --json "${DOCTOR_ARGS[@]}" "$@" 2>"$W/doctor.err")" || STATUS=$?
    if ((STATUS > 1)); then
        pg_log "doctor exited $STATUS; its stderr:"
        head -c 4000 "$W/doctor.err" >&2
    fi
}
# expect CHECK ok|fail [TEXT]: the check's verdict (and TEXT in its detail), the exit status
# that follows from all checks, and a fix for every failed check.
expect() {
    local name="$1" want="$2" text="${3:-}" why
    PG_CHECKS=$((PG_CHECKS + 1))
    why="$("$PG_PY" - "$OUT" "$STATUS" "$name" "$want" "$text" <<'PY'
import json, sys
out, status, name, want, text = sys.argv[1:6]
try:
    doc = json.loads(out)
except ValueError:
    print(f"not JSON (exit {status}): {out[:300]!r}"); sys.exit()
checks = {c["name"]: c for c in doc["checks"]}
c = checks.get(name)
if c is None:
    print(f"no check {name}"); sys.exit()
if c["ok"] != (want == "ok"):
    print(f"{name} is {'ok' if c['ok'] else 'failed'}: {c['detail']} | fix: {c['fix']}"); sys.exit()
if text and text not in c["detail"]:
    print(f"{name}: {text!r} not in {c['detail']!r}"); sys.exit()
if not c["ok"] and not c["fix"]:
    print(f"{name} failed without a fix"); sys.exit()
want_status = 0 if doc["ok"] else 1
if doc["ok"] != all(x["ok"] for x in doc["checks"]) or int(status) != want_status:
    print(f"exit {status} with ok={doc['ok']}"); sys.exit()
PY
)"
    if [[ -z "$why" ]]; then
        pg_log "ok   - $name $want${text:+ ($text)}"
    else
        PG_FAILURES=$((PG_FAILURES + 1))
        pg_log "FAIL - $name: $why"
    fi
}
expect_all_ok() {
    doctor
    PG_CHECKS=$((PG_CHECKS + 1))
    if [[ "$STATUS" == 0 ]] && "$PG_PY" -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d["ok"] and all(c["ok"] for c in d["checks"]) else 1)' "$OUT"; then
        pg_log "ok   - every check passes ($1)"
    else
        PG_FAILURES=$((PG_FAILURES + 1))
        pg_log "FAIL - not every check passes ($1), exit $STATUS:"
        "$PG_PY" -c 'import json,sys
for c in json.loads(sys.argv[1])["checks"]:
    print("   ", "ok  " if c["ok"] else "FAIL", c["name"], c["detail"], c["fix"])' "$OUT" >&2 || printf '%s\n' "$OUT" >&2
    fi
}

pg_section "wired: every check passes"
expect_all_ok "containerd node"
"$PULLGATECTL" --config "$CFG" doctor "${DOCTOR_ARGS[@]}" >"$W/text.out" 2>&1
pg_expect_contains "text output: one line per check with a check mark" "$(cat "$W/text.out")" "✔ hook-socket: pullgate-cri decides for $CFG"
[[ "$(wc -l <"$W/text.out")" == 13 ]] && pg_check_ok "text output: 13 lines" || pg_check_fail "text output: $(wc -l <"$W/text.out") lines"
expect runtime ok "containerd"
expect crio-namespaced-auth ok "the runtime is containerd"
expect kubelet-policy ok "KubeletEnsureSecretPulledImages off"

pg_section "configuration, state directory, key"
write_cfg polcy='"AlwaysVerify"'
doctor
expect config fail "polcy"
write_cfg
chmod 0755 "$STATE"
doctor
expect state-dir fail "mode 0755"
chmod 0700 "$STATE"
mkdir -m 0700 "$STATE/pulled" 2>/dev/null
chmod 0777 "$STATE/pulled"
doctor
expect state-dir fail "writable by group or others"
chmod 0700 "$STATE/pulled"
chmod 0644 "$KEY"
doctor
expect hmac-key fail "$KEY"
chmod 0600 "$KEY"
write_cfg hmacKeyFile='""'
doctor
expect hmac-key fail "hmacKeyFile is not set"
write_cfg
# The file changed: pullgate-cri (which loaded it at start) now answers "not mine".
doctor
expect hook-socket fail "not mine"
pg_node_proxy_kill
pg_node_proxy_start || pg_fail "pullgate-cri did not restart"
mirror_cri
expect_all_ok "configuration restored, pullgate-cri restarted"

pg_section "pullgate-cri and the runtime"
pg_node_proxy_kill
doctor
expect cri-proxy fail "no CRI answer on unix://$PG_PROXY_SOCK"
expect hook-socket fail "nothing answers"
expect runtime ok
pg_node_proxy_start || pg_fail "pullgate-cri did not restart"
mirror_cri "$PULLGATE_CRI" --config "$CFG" --listen "unix://$PG_PROXY_SOCK" \
    --runtime-endpoint "unix://$W/no-runtime.sock" --hook-socket "$PG_HOOK_SOCK"
doctor
expect runtime fail "unix://$W/no-runtime.sock"
mirror_cri "$PULLGATE_CRI" --config "$W/other.json" --listen "unix://$PG_PROXY_SOCK" \
    --runtime-endpoint "unix://$PG_CD_SOCK" --hook-socket "$PG_HOOK_SOCK"
doctor
expect same-config fail "pullgate-cri reads $W/other.json"
mirror_cri
expect_all_ok "pullgate-cri back"

pg_section "the kubelet"
write_kubelet_config "unix://$PG_CD_SOCK" "unix://$PG_CD_SOCK"
doctor
expect kubelet fail "not pullgate-cri"
write_kubelet_config "unix://$PG_CD_SOCK" "unix://$PG_PROXY_SOCK"
doctor
expect kubelet ok "ImageService-only"
write_kubelet_config "unix://$PG_PROXY_SOCK" "unix://$PG_PROXY_SOCK"
set_kubelet_cmdline --image-service-endpoint "unix://$PG_CD_SOCK"
doctor
expect kubelet fail "pulls through unix://$PG_CD_SOCK"
set_kubelet_cmdline --v=2
mv "$PROC/$KPID" "$W/kubelet-away"
doctor
expect kubelet fail "no kubelet process runs"
expect kubelet-policy fail "no kubelet process runs"
doctor --kubelet-version v1.35.0
expect kubelet-policy ok "KubeletEnsureSecretPulledImages on (default: beta since 1.35)"
mv "$W/kubelet-away" "$PROC/$KPID"
set_kubelet_version v1.32.4
doctor
expect kubelet-policy ok "no KEP-2535 check"
set_kubelet_version v1.34.1
write_kubelet_config "unix://$PG_PROXY_SOCK" "unix://$PG_PROXY_SOCK" "featureGates:
  KubeletEnsureSecretPulledImages: true
imagePullCredentialsVerificationPolicy: AlwaysVerify"
doctor
expect kubelet-policy ok "on (featureGates), policy AlwaysVerify"
set_kubelet_cmdline --feature-gates=KubeletEnsureSecretPulledImages=false,Other=true
doctor
expect kubelet-policy ok "off (--feature-gates)"
set_kubelet_cmdline --v=2
chmod 0775 "$KUBELET_BIN"
doctor
expect kubelet-policy fail "not run"
chmod 0755 "$KUBELET_BIN"
printf 'Name:\tkubelet\nUid:\t1000\t1000\t1000\t1000\n' >"$PROC/$KPID/status"
doctor
# A "kubelet" not running as root is not the node's: its argv proves nothing, its binary never runs.
expect kubelet fail "no kubelet process runs"
expect kubelet-policy fail "no kubelet process runs"
printf 'Name:\tkubelet\nUid:\t0\t0\t0\t0\n' >"$PROC/$KPID/status"
# A container's "kubelet" (root, no user namespace; the host's /proc lists it) whose argv
# points at pullgate-cri and whose binary, in its image, leaves a marker when run: it is not
# the node's kubelet, so the endpoints check fails and nothing of it is run.
mv "$PROC/$KPID" "$W/kubelet-away"
CPID=4343
mkdir -p "$PROC/$CPID/ns"
echo kubelet >"$PROC/$CPID/comm"
printf 'Name:\tkubelet\nUid:\t0\t0\t0\t0\n' >"$PROC/$CPID/status"
printf '%s\0' /usr/bin/kubelet --image-service-endpoint="unix://$PG_PROXY_SOCK" \
    --container-runtime-endpoint="unix://$PG_PROXY_SOCK" >"$PROC/$CPID/cmdline"
printf 'mnt:[1]\n' >"$PROC/$CPID/ns/mnt" # another mount namespace than the doctor's
printf '#!/bin/sh\ntouch "%s"\necho "Kubernetes v1.34.0"\n' "$W/container-kubelet-ran" >"$W/bin/ctr-kubelet"
chmod 0755 "$W/bin/ctr-kubelet"
ln -sfn "$W/bin/ctr-kubelet" "$PROC/$CPID/exe"
doctor
expect kubelet fail "no kubelet process runs"
expect kubelet-policy fail "no kubelet process runs"
PG_CHECKS=$((PG_CHECKS + 1))
if [[ -e "$W/container-kubelet-ran" ]]; then
    PG_FAILURES=$((PG_FAILURES + 1))
    pg_log "FAIL - the doctor ran a container's \"kubelet\" binary"
else
    pg_log "ok   - a container's \"kubelet\" binary is never run"
fi
rm -rf "${PROC:?}/$CPID"
mv "$W/kubelet-away" "$PROC/$KPID"
printf 'a: &x [1]\nb: *x\n' >"$KCONFIG"
doctor
expect kubelet fail "aliases are not accepted"
write_kubelet_config "unix://$PG_PROXY_SOCK" "unix://$PG_PROXY_SOCK"
expect_all_ok "kubelet restored"

pg_section "the hook in containerd"
cp "$BASE_SPEC" "$W/base-spec.orig"
cp "$CD_CONFIG" "$W/config.toml.orig"
"$PG_PY" - "$BASE_SPEC" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); s["hooks"] = {}; json.dump(s, open(sys.argv[1], "w"))
PY
doctor
expect hook fail "runs no pullgate-hook"
expect same-config fail "runs no pullgate-hook"
cp "$W/base-spec.orig" "$BASE_SPEC"
chmod 0666 "$BASE_SPEC"
doctor
expect hook fail "writable by group or others"
chmod 0644 "$BASE_SPEC"
"$PG_PY" - "$BASE_SPEC" "$W/other.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
args = s["hooks"]["createRuntime"][0]["args"]
args[args.index("--config") + 1] = sys.argv[2]
json.dump(s, open(sys.argv[1], "w"))
PY
doctor
expect same-config fail "the hook reads $W/other.json"
cp "$W/base-spec.orig" "$BASE_SPEC"
sed -i '/pod_annotations/d' "$CD_CONFIG"
doctor
expect pod-annotations fail "does not pass pullgate.dev/credentials"
cp "$W/config.toml.orig" "$CD_CONFIG"
sed -i 's|pod_annotations = \["pullgate.dev/credentials"\]|pod_annotations = ["pullgate.dev/credentials", "io.*"]|' "$CD_CONFIG"
write_cfg runtime='"auto"'
doctor --runtime containerd
expect pod-annotations fail "a pod could forge its identity"
write_cfg
cp "$W/config.toml.orig" "$CD_CONFIG"
cat >>"$CD_CONFIG" <<'EOF'
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]
      runtime_type = "io.containerd.kata.v2"
      pod_annotations = ["pullgate.dev/credentials"]
EOF
doctor
expect hook fail "runtime handler kata has no base_runtime_spec"
cp "$W/config.toml.orig" "$CD_CONFIG"
printf 'version = 2\n[plugins\n' >"$CD_CONFIG"
doctor
expect hook fail "containerd: $CD_CONFIG"
cp "$W/config.toml.orig" "$CD_CONFIG"

pg_section "the hook in CRI-O"
HOOKS_A="$W/hooks-usr"
HOOKS_B="$W/hooks-etc"
mkdir -p "$HOOKS_A" "$HOOKS_B"
hooks_entry() { # FILE [WHEN JSON]
    "$PG_PY" - "$1" "$PULLGATE_HOOK" "$CFG" "$PG_HOOK_SOCK" "${2:-}" <<'PY'
import json, sys
path, hook, cfg, sock, when = sys.argv[1:6]
json.dump({"version": "1.0.0",
           "hook": {"path": hook, "args": ["pullgate-hook", "--stage", "createRuntime",
                                           "--config", cfg, "--daemon-socket", sock]},
           "when": json.loads(when) if when else {"always": True},
           "stages": ["createRuntime"]}, open(path, "w"))
PY
}
hooks_entry "$HOOKS_A/pullgate.json"
CRIO=(--runtime cri-o --crio-hooks-dir "$HOOKS_A" --crio-hooks-dir "$HOOKS_B")
doctor "${CRIO[@]}"
expect hook ok "$HOOKS_A/pullgate.json runs pullgate-hook"
expect pod-annotations ok "CRI-O passes every pod annotation"
expect same-config ok
hooks_entry "$HOOKS_B/pullgate.json" '{"annotations": {"x": "y"}}'
doctor "${CRIO[@]}"
expect hook fail "\"when\" is not {\"always\": true}"
rm "$HOOKS_B/pullgate.json"
echo '{not json' >"$HOOKS_A/zz-other.json"
doctor "${CRIO[@]}"
expect hook fail "CRI-O then loads no hook of that directory"
rm "$HOOKS_A/zz-other.json"
# hooks_dir from crio.conf and crio.conf.d (the last file that sets it wins)
mkdir -p "$W/crio.conf.d"
printf '[crio.runtime]\nhooks_dir = ["%s"]\n' "$HOOKS_B" >"$W/crio.conf"
printf '[crio.runtime]\nhooks_dir = ["%s", "%s"]\n' "$HOOKS_B" "$HOOKS_A" >"$W/crio.conf.d/10-pullgate.conf"
CRIO_CONF=(--runtime cri-o --crio-config "$W/crio.conf" --crio-config-dir "$W/crio.conf.d")
doctor "${CRIO_CONF[@]}"
expect hook ok "hooks_dir: $HOOKS_B, $HOOKS_A"
expect crio-namespaced-auth ok "CRI-O's namespaced auth is on (namespaced_auth_dir unset"
rm "$W/crio.conf.d/10-pullgate.conf"
doctor "${CRIO_CONF[@]}"
expect hook fail "no hooks.d entry in CRI-O's hooks_dir runs pullgate-hook"
# CRI-O's namespaced auth (crio.image.namespaced_auth_dir), as pullgate-cri reads it
printf '[crio.image]\nnamespaced_auth_dir = "/srv/auth"\n' >"$W/crio.conf.d/20-auth.conf"
doctor "${CRIO_CONF[@]}"
expect crio-namespaced-auth ok "is on (namespaced_auth_dir = \"/srv/auth\""
printf '[crio.image]\nnamespaced_auth_dir = ""\n' >"$W/crio.conf.d/30-off.conf"
doctor "${CRIO_CONF[@]}"
expect crio-namespaced-auth ok "is off"
printf '[crio.image\n' >"$W/crio.conf.d/40-broken.conf"
doctor "${CRIO_CONF[@]}"
expect crio-namespaced-auth fail "cannot be read"
rm "$W/crio.conf.d/"*.conf

pg_section "usage"
PG_CHECKS=$((PG_CHECKS + 1))
if "$PULLGATECTL" --policy AlwaysVerify doctor >/dev/null 2>"$W/usage.err"; then
    PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - doctor accepted --policy"
else
    [[ $? == 2 ]] && pg_log "ok   - doctor refuses global overrides other than --config (exit 2)" ||
        { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - doctor --policy: wrong exit status"; }
fi
pg_expect_fail "doctor --runtime bogus" "$PULLGATECTL" doctor --runtime bogus
pg_expect_ok "doctor --help" "$PULLGATECTL" doctor --help
pg_expect_contains "doctor --help names the checks" "$PG_OUT" "base_runtime_spec"

pg_summary
