#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Verification pulls (issue 20, docs/interfaces.md §10), with the real things: the Python
# CRI client playing the kubelet's EnsureImageExists (ImageStatus with the pod's
# annotations, PullImage only when told "not present" and the policy allows) ->
# pullgate-cri -> containerd 1.6 -> runc -> pullgate-hook (asking pullgate-cri's resident
# decider); one registry with three htpasswd users; keyed (v2) annotations as the webhook
# writes them; policy NeverVerifyPreloadedImages; a private D-Bus bus. Cases:
#  - the owner (tenant A): pulls, recorded, runs; its next pod hears "present";
#  - tenant B with its own valid credentials: "not present" -> pull -> the record keeps
#    both tenants' secrets -> runs; its next pod hears "present"; one log line and one
#    PullRequired signal (image, namespace, reason; no hash);
#  - a wrong password, and no credentials: "not present" -> the registry refuses ->
#    ErrImagePull, no record entry gained, the image stays; the container created anyway
#    (without the pull path) is refused by the hook;
#  - no pull loop: a pod whose verified pull still cannot match its annotation (a secret
#    added after admission) is told "not present" once, then the runtime's truth; it runs
#    what it pulled (its pod binding), another pod of its namespace is refused and the
#    hook's denial says what cures it;
#  - a verified pull whose record cannot be written (the record at its 8 MiB bound) is
#    refused (RESOURCE_EXHAUSTED: the runtime pulled, the record cannot take it) and not
#    remembered: the pod is asked to pull again, and the retry lands once it can be written;
#  - policy Never: ErrImageNeverPull, the image stays;
#  - a registry mirror (containerd hosts.toml: a logical registry served by the mirror): the
#    pull, its record and the decision use the logical name; the mirror decides;
#  - truthful answers: no pod annotations, an allowed pod, a node-accessible image, a preloaded
#    image (byte for byte containerd's), an absent image, containerd down, a malformed
#    annotation; hostile annotations (over the bounds, 5,000 entries) are answered;
#  - a copied annotation of another namespace (keyed; then unkeyed) never runs; a pinned
#    image (AlwaysVerify) is answered byte for byte;
#  - criVerifyPulls false: today's behaviour (the runtime's answer; the hook refuses).
# Env (from ctest): PULLGATE_HOOK, PULLGATECTL, PG_BUILD_DIR; PULLGATE_CRI overrides the binary.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/registry.sh
source "$HERE/lib/registry.sh"
# shellcheck source=lib/podman.sh
source "$HERE/lib/podman.sh" # pg_write_config, pg_image_name
# shellcheck source=lib/cri_node.sh
source "$HERE/lib/cri_node.sh"

T0=$SECONDS
: "${PULLGATE_CRI:=${PG_BUILD_DIR:-}/cri/pullgate-cri}"
[[ -x "$PULLGATE_CRI" ]] || pg_skip "pullgate-cri not built ($PULLGATE_CRI)"
pg_node_require
pg_require_pullgate

ctl() { "$PULLGATECTL" --config "$CFG" "$@"; }
# ensure USER PASS POLICY: the kubelet's EnsureImageExists for $IMG in the current pod;
# sets OUTCOME (present|pulled|ErrImagePull|ErrImageNeverPull).
ensure() {
    local -a auth=()
    [[ -n "$1" ]] && auth=(--username "$1" --password-env PG_CRI_PASS)
    OUTCOME="$(PG_CRI_PASS="$2" cri ensure-image --image "$IMG" --pod-config "$POD_CFG" \
        --policy "$3" "${auth[@]}" | "$PG_PY" -c 'import json,sys; print(json.load(sys.stdin)["outcome"])')"
}
expect_outcome() { # DESC WANT USER PASS POLICY
    ensure "$3" "$4" "$5"
    [[ "$OUTCOME" == "$2" ]] && pg_check_ok "$1: $OUTCOME" || pg_check_fail "$1: $OUTCOME (want $2)"
}
annotation() { # NS NAME USER PASS [--unkeyed]
    local h key=(--hmac-key-file "$KEY")
    [[ "${5:-}" == --unkeyed ]] && key=()
    h="$(printf %s "$4" | "$PULLGATECTL" hash --username "$3" --password-stdin)" || return 1
    ctl annotate --namespace "$1" --image "$IMG" --secret "$1/$2/$(cat /proc/sys/kernel/random/uuid):$h" "${key[@]}"
}
n_secrets() { secrets_of "$REF" "$NAME" | wc -w; }
pulls_logged() { grep -c 'msg="pull"' "$PG_CD_DIR/pullgate-cri.log"; }
same_bytes() { # DESC [POD_CFG]: ImageStatus through the proxy == containerd's, byte for byte
    local a b
    a="$(cri image-status-raw --image "$IMG" ${2:+--pod-config "$2"})"
    b="$(cri_direct image-status-raw --image "$IMG" ${2:+--pod-config "$2"})"
    [[ -n "$a" && "$a" == "$b" ]] && pg_check_ok "$1: byte for byte containerd's (${a:0:24}...)" ||
        pg_check_fail "$1: proxy '${a:0:60}' vs containerd '${b:0:60}'"
}
# expect_signal DESC SIGNAL KEY=VALUE...: the monitor printed SIGNAL with these arguments.
expect_signal() {
    local desc="$1"
    shift
    for _ in $(seq 1 200); do
        "$PG_PY" - "$MON_LOG" "$@" <<'EOF' && { pg_check_ok "$desc"; return; }
import json, sys
log, sig, want = sys.argv[1], sys.argv[2], dict(a.split("=", 1) for a in sys.argv[3:])
for line in open(log):
    try:
        ev = json.loads(line)
    except ValueError:
        continue
    if ev.get("signal") == sig and all(ev.get(k) == v for k, v in want.items()):
        sys.exit(0)
sys.exit(1)
EOF
        sleep 0.1
    done
    pg_check_fail "$desc: no $* in the monitor's output"
    sed 's/^/       | /' "$MON_LOG" >&2
}
restart_proxy() { # JSON-EDIT (python on dict c)
    "$PG_PY" - "$CFG" "$1" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); exec(sys.argv[2])
json.dump(c, open(sys.argv[1], "w"), indent=2)
EOF
    pg_node_proxy_kill
    pg_node_proxy_start || pg_fail "pullgate-cri did not restart"
}

# ---------------------------------------------------------------- the node
pg_section "registry (two users), node: dbus, containerd 1.6 + hook, pullgate-cri"
PASS_A="tenant-a-pw-$RANDOM$RANDOM"
PASS_B="tenant-b-pw-$RANDOM$RANDOM"
PASS_H="tenant-h-pw-$RANDOM$RANDOM"
PG_REG_EXTRA_USERS=("tenant-b:$PASS_B" "tenant-h:$PASS_H")
pg_registry_start tenant-a "$PASS_A"
LAYOUT="$(pg_mktemp_dir oci-layout)/layout"
pg_image_build "$LAYOUT" app "app-marker"
pg_image_push "$LAYOUT" app "team-a/app:1.0"
pg_image_build "$LAYOUT" mirrored "mirrored-marker"
pg_image_push "$LAYOUT" mirrored "team-m/app:1.0"
IMG="$PG_REG_HOST/team-a/app:1.0"
NAME="$(pg_image_name "$IMG")"
pg_registry_start_open
pg_image_build "$LAYOUT" tool "tool-marker"
pg_image_push_open "$LAYOUT" tool "public/tool:1.0"
IMG_OPEN="$PG_OPEN_REG_HOST/public/tool:1.0"

pg_node_dbus_start
STATE="$(pg_mktemp_dir state)"
chmod 0700 "$STATE"
ETC="$(pg_mktemp_dir etc)"
KEY="$ETC/hmac.key"
head -c 48 /dev/urandom >"$KEY" && chmod 0600 "$KEY"
CFG="$ETC/pullgate.json"
METRICS="127.0.0.1:$(pg_free_port)"
pg_write_config "$CFG" "$STATE" NeverVerifyPreloadedImages "$PG_BUS_ADDR" \
    "\"hmacKeyFile\": \"$KEY\", \"criPruneInterval\": \"0s\", \"nodeCredentialFiles\": [], \"criMetricsListen\": \"$METRICS\""
chmod 0600 "$CFG"
pg_node_containerd_setup "$CFG" "$PG_REG_HOST" "$PG_OPEN_REG_HOST"
pg_node_containerd_start || pg_skip "containerd's CRI plugin did not come up on this machine (log above)"
pg_node_proxy_start || pg_fail "pullgate-cri did not serve its socket"
MON_LOG="$PG_CD_DIR/monitor.jsonl"
pg_node_monitor_start "$MON_LOG"

# ---------------------------------------------------------------- owner
pg_section "the owner (tenant A)"
ANN_A="$(annotation team-a regcred tenant-a "$PASS_A")" || pg_fail "annotate"
pg_node_run_pod team-a "$ANN_A" || pg_fail "RunPodSandbox (team-a)"
POD_A_CFG="$POD_CFG"
expect_outcome "first pod: the image is absent, pulled" pulled tenant-a "$PASS_A" IfNotPresent
REF="$(cri_direct image-status --image "$IMG" | "$PG_PY" -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
[[ "$(n_secrets)" == 1 ]] && pg_check_ok "recorded for team-a's secret" || pg_check_fail "secrets: $(secrets_of "$REF" "$NAME")"
expect_runs "team-a runs it" "$IMG"
PULLS="$(pulls_logged)"
pg_node_run_pod team-a "$ANN_A" || pg_fail "RunPodSandbox (team-a, second pod)"
expect_outcome "the owner's next pod" present tenant-a "$PASS_A" IfNotPresent
[[ "$(pulls_logged)" == "$PULLS" ]] && pg_check_ok "no pull for it" || pg_check_fail "it pulled"
expect_runs "and runs" "$IMG"
same_bytes "an allowed pod's ImageStatus" "$POD_A_CFG"

# ---------------------------------------------------------------- tenant B, valid credentials
pg_section "tenant B with its own valid credentials"
pg_node_run_pod team-b "$(annotation team-b regcred tenant-b "$PASS_B")" || pg_fail "RunPodSandbox (team-b)"
POD_B_CFG="$POD_CFG"
expect_outcome "told not present, pulls with its own credentials" pulled tenant-b "$PASS_B" IfNotPresent
[[ "$(n_secrets)" == 2 ]] && pg_check_ok "the record keeps both tenants' secrets" ||
    pg_check_fail "secrets: $(secrets_of "$REF" "$NAME")"
expect_runs "team-b runs it" "$IMG"
expect_outcome "the same pod's next container hears" present tenant-b "$PASS_B" IfNotPresent
# Logged after the answer went out: wait for the line, never grep once.
pg_wait_grep "$PG_CD_DIR/pullgate-cri.log" 'image not present for this pod' 30
LINE="$(grep 'image not present for this pod' "$PG_CD_DIR/pullgate-cri.log" | head -n1)"
pg_expect_contains "one log line: namespace" "$LINE" 'namespace="team-b"'
pg_expect_contains "one log line: reason" "$LINE" 'reason="credentials-mismatch"'
[[ ! "$LINE" =~ [0-9a-f]{64} ]] && pg_check_ok "the log line carries no hash" || pg_check_fail "a hash in: $LINE"
expect_signal "PullRequired on D-Bus" PullRequired image="$IMG" namespace=team-b reason=credentials-mismatch
pg_node_run_pod team-b "$(annotation team-b regcred tenant-b "$PASS_B")" || pg_fail "RunPodSandbox (team-b, next pod)"
expect_outcome "team-b's next pod" present tenant-b "$PASS_B" IfNotPresent

# ---------------------------------------------------------------- refused by the registry
pg_section "a wrong password, and no credentials: the registry decides"
pg_node_run_pod team-c "$(annotation team-c regcred tenant-b "wrong-$RANDOM")" || pg_fail "RunPodSandbox (team-c)"
expect_outcome "wrong password" ErrImagePull tenant-b "wrong-$RANDOM" IfNotPresent
expect_denied "its container, created without a pull" "$IMG"
pg_node_run_pod team-d "" || pg_fail "RunPodSandbox (team-d)"
expect_outcome "no credentials" ErrImagePull "" "" IfNotPresent
expect_denied "its container, created without a pull" "$IMG"
[[ "$(n_secrets)" == 2 ]] && pg_check_ok "no record gained an entry" || pg_check_fail "secrets: $(secrets_of "$REF" "$NAME")"
pg_expect_ok "the image stays in containerd" cri_direct image-status --image "$IMG"

pg_section "no pull loop: a secret added after admission"
# team-g's annotation lists an older secret; the kubelet pulls with tenant-b's (valid)
# credentials from a secret added since: recorded under team-g's placeholder, which the
# annotation does not list. Told "not present" once, then the runtime's truth.
pg_node_run_pod team-g "$(annotation team-g old-cred tenant-a "rotated-$RANDOM")" || pg_fail "RunPodSandbox (team-g)"
expect_outcome "first ImageStatus: a verification pull" pulled tenant-b "$PASS_B" IfNotPresent
expect_outcome "still not verified after it: the runtime's answer" present tenant-b "$PASS_B" IfNotPresent
pg_expect_file_contains "logged" "$PG_CD_DIR/pullgate-cri.log" "pod pulled and is still not verified"
# The pull is also bound to the pod that made it (issue 28): that pod runs it; another pod of
# team-g presenting the same annotation did not pull, and is refused.
expect_runs "the pod that pulled runs it (its pod binding)" "$IMG"
pg_node_run_pod team-g "$(annotation team-g old-cred tenant-a "rotated-$RANDOM")" || pg_fail "RunPodSandbox (team-g, second pod)"
expect_denied "another team-g pod, which did not pull: the hook refuses it" "$IMG"
pg_expect_contains "its denial says what cures it" "$PG_OUT" "recreate the pod so the webhook lists the secret"

pg_section "a verified pull whose record cannot be written is asked again"
# The image's record is filled to just under the 8 MiB its readers accept, so team-h's pull
# (its own valid credentials, a third registry user) cannot be recorded: the intent stays and the pod is not
# remembered as pulled, so its next ImageStatus asks it to pull again instead of answering
# "present" for a pod the hook denies. Once the record can be written, the retry lands.
REC_FILE="$("$PG_PY" - "$STATE/pulled" "$REF" <<'EOF'
import json, os, sys
for f in sorted(os.listdir(sys.argv[1])):
    try:
        if json.load(open(os.path.join(sys.argv[1], f))).get("imageRef") == sys.argv[2]:
            print(os.path.join(sys.argv[1], f))
    except (ValueError, OSError):
        pass
EOF
)"
[[ -f "$REC_FILE" ]] || pg_fail "no record file for $REF"
cp -p "$REC_FILE" "$ETC/record.saved"
"$PG_PY" - "$REC_FILE" $((8 << 20)) <<'EOF' || pg_fail "filling the record"
import json, os, sys
path, bound = sys.argv[1], int(sys.argv[2])
rec = json.load(open(path))
def size():
    return len(json.dumps(rec, separators=(",", ":"))) + 1
m = rec["credentialMapping"]
UID = 2600  # few large entries: each failed write and each decision parses the record
def entry(key, k, uid_len=UID):
    return {key: {"kubernetesSecrets": [{"namespace": "filler", "name": "s", "uid": "u" * uid_len,
                                         "credentialHash": "%064x" % k}]}}
one = len(json.dumps(entry("filler.example/img-000000", 0), separators=(",", ":"))) - 1  # +","
# Fillers of a fixed length, then one whose uid lands the record 64 bytes under the bound.
target = bound - 64
pad_min = len(json.dumps(entry("filler.example/p", 0, 0), separators=(",", ":"))) - 1
n = (target - size() - pad_min - 10) // one
for k in range(n):
    m.update(entry("filler.example/img-%06d" % k, k))
m.update(entry("filler.example/p", 0, target - size() - pad_min))
assert size() == target and len(max(m, key=len)) <= 255, (size(), target)
tmp = path + ".fill"
with open(tmp, "w") as f:
    f.write(json.dumps(rec, separators=(",", ":")) + "\n")
os.chmod(tmp, 0o600)
os.rename(tmp, path)
EOF
pg_log "record filled to $(stat -c %s "$REC_FILE") bytes"
pg_node_run_pod team-h "$(annotation team-h regcred tenant-h "$PASS_H")" || pg_fail "RunPodSandbox (team-h)"
# Told not present, it pulls with its own credentials; the runtime pulls and the record cannot
# take it: the kubelet hears why (RESOURCE_EXHAUSTED), or, when writing an 8 MiB record takes
# longer than the 2 s an answer waits for it, the runtime's OK before the record fails.
not_present_then_pulls() { # DESC
    ensure tenant-h "$PASS_H" IfNotPresent
    case "$OUTCOME" in
    ErrImagePull) pg_check_ok "$1: refused, the record cannot take it (RESOURCE_EXHAUSTED)" ;;
    pulled) pg_check_ok "$1: answered before the record failed (the 2 s an answer waits ran out)" ;;
    *) pg_check_fail "$1: $OUTCOME (want ErrImagePull, or pulled)" ;;
    esac
}
not_present_then_pulls "told not present, pulls with its own credentials"
pg_wait_grep "$PG_CD_DIR/pullgate-cri.log" "pull not fully recorded" 30 &&
    pg_check_ok "the record was not written" || pg_check_fail "no 'pull not fully recorded' in the log"
not_present_then_pulls "not remembered: asked to pull again"
# Both failed writes done (each logs once; an 8 MiB write may outlast its answer), then the
# record is restored: the retry is recorded. On a loaded machine a retry may still find the
# store's lock busy (UNAVAILABLE, as the kubelet would see): it retries, as the kubelet does.
for _ in $(seq 1 300); do
    (($(grep -c 'pull not fully recorded' "$PG_CD_DIR/pullgate-cri.log") >= 2)) && break
    sleep 0.1
done
cp -p "$ETC/record.saved" "$REC_FILE.restore" && mv "$REC_FILE.restore" "$REC_FILE"
for _ in $(seq 1 10); do
    ensure tenant-h "$PASS_H" IfNotPresent
    [[ "$OUTCOME" == pulled ]] && break
    sleep 1
done
[[ "$OUTCOME" == pulled ]] && pg_check_ok "the record can be written again: the retry is recorded" ||
    pg_check_fail "the record can be written again: the retry is recorded: $OUTCOME (want pulled)"
expect_outcome "and its next ImageStatus hears" present tenant-h "$PASS_H" IfNotPresent
expect_runs "team-h runs it" "$IMG"

pg_section "policy Never"
# (The same valid credentials as team-b's would match by credentialHash, as in the kubelet.)
BAD_E="wrong-e-$RANDOM"
pg_node_run_pod team-e "$(annotation team-e regcred tenant-b "$BAD_E")" || pg_fail "RunPodSandbox (team-e)"
expect_outcome "unverified credentials, Never" ErrImageNeverPull tenant-b "$BAD_E" Never
expect_denied "its container" "$IMG"
pg_expect_ok "the image stays in containerd" cri_direct image-status --image "$IMG"

# ---------------------------------------------------------------- a registry mirror
pg_section "a registry mirror: the logical name throughout, the mirror decides"
# containerd's hosts.toml sends the logical registry (nothing listens there) to the mirror (our
# registry, the seed case of ICSP repositoryMirrors): the pull, its record and the decision use
# the logical name; a verification pull goes through the mirror, which decides.
LOGICAL="127.0.0.1:$(pg_free_port)"
mkdir -p "$PG_CD_DIR/certs.d/$LOGICAL"
cat >"$PG_CD_DIR/certs.d/$LOGICAL/hosts.toml" <<EOF
server = "http://$LOGICAL"

[host."http://$PG_REG_HOST"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
EOF
IMG_SAVED="$IMG" REF_SAVED="$REF" NAME_SAVED="$NAME"
IMG="$LOGICAL/team-m/app:1.0"
NAME="$(pg_image_name "$IMG")"
pg_node_run_pod team-a "$(annotation team-a regcred tenant-a "$PASS_A")" || pg_fail "RunPodSandbox (team-a, mirror)"
expect_outcome "tenant A through the mirror" pulled tenant-a "$PASS_A" IfNotPresent
REF="$(cri_direct image-status --image "$IMG" | "$PG_PY" -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
[[ "$(n_secrets)" == 1 ]] && pg_check_ok "recorded under the logical name $NAME" ||
    pg_check_fail "no record mapping $NAME: $(mapping_of "$REF" "$NAME")"
expect_runs "tenant A runs it" "$IMG"
pg_node_run_pod team-b "$(annotation team-b regcred tenant-b "$PASS_B")" || pg_fail "RunPodSandbox (team-b, mirror)"
expect_outcome "tenant B: told not present, pulls through the mirror" pulled tenant-b "$PASS_B" IfNotPresent
pg_expect_file_contains "the verification pull was asked under the logical name" \
    "$PG_CD_DIR/pullgate-cri.log" "image not present for this pod: verification pull (a pod with imagePullPolicy Never reports ErrImageNeverPull)\" image=\"$IMG\""
[[ "$(n_secrets)" == 2 ]] && pg_check_ok "the record (logical name) keeps both tenants' secrets" ||
    pg_check_fail "secrets: $(secrets_of "$REF" "$NAME")"
expect_runs "tenant B runs it" "$IMG"
pg_node_run_pod team-c "$(annotation team-c regcred tenant-b "wrong-m-$RANDOM")" || pg_fail "RunPodSandbox (team-c, mirror)"
expect_outcome "a wrong password: the mirror refuses" ErrImagePull tenant-b "wrong-m-$RANDOM" IfNotPresent
IMG="$IMG_SAVED" REF="$REF_SAVED" NAME="$NAME_SAVED"

# ---------------------------------------------------------------- truthful answers
pg_section "truthful answers"
same_bytes "no pod annotations (crictl, image GC)"
IMG_SAVED="$IMG"
IMG="$IMG_OPEN"
pg_node_run_pod team-y "" || pg_fail "RunPodSandbox (team-y)"
expect_outcome "a public image, no credentials: pulled" pulled "" "" IfNotPresent
pg_node_run_pod team-z "$(annotation team-z regcred tenant-b "$PASS_B")" || pg_fail "RunPodSandbox (team-z)"
expect_outcome "node-accessible: another namespace's pod hears" present tenant-b "$PASS_B" IfNotPresent
same_bytes "node-accessible" "$POD_CFG"
IMG="$PG_SANDBOX_IMAGE"
same_bytes "preloaded (imported, never pulled) under NeverVerifyPreloadedImages" "$POD_B_CFG"
# Hostile pod annotations: a 930 KB credentials annotation of 5,000 entries, and 5,000 keys.
HOSTILE="$PG_CD_DIR/hostile-pod.json"
"$PG_PY" - "$HOSTILE" <<'EOF'
import json, sys
ann = {"r.example/img%d" % i: {"kubernetesSecrets": [{"namespace": "team-b", "name": "s%d" % i,
       "uid": "u", "credentialHash": "%064x" % i}]} for i in range(5000)}
many = {"example.com/k%d" % i: "v" for i in range(5000)}
json.dump({"annotations": dict(many, **{"pullgate.dev/credentials": json.dumps(ann)})}, open(sys.argv[1], "w"))
EOF
OUT_H="$(cri image-status-raw --image "$IMG_OPEN" --pod-config "$HOSTILE")"
[[ "$OUT_H" == "$(cri_direct image-status-raw --image "$IMG_OPEN" --pod-config "$HOSTILE")" ]] &&
    pg_check_ok "5,000 pod annotations (over the bound): the runtime's answer" || pg_check_fail "hostile: '${OUT_H:0:60}'"
"$PG_PY" - "$HOSTILE" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["annotations"] = {k: v for k, v in d["annotations"].items() if not k.startswith("example.com/")}
d["annotations"]["kubernetes.io/config.seen"] = "2026-01-01T00:00:00.000000001Z"
json.dump(d, open(sys.argv[1], "w"))
EOF
OUT_H="$(cri --timeout 10 image-status-raw --image "$IMG_OPEN" --pod-config "$HOSTILE")"
[[ "$OUT_H" == OK* ]] && pg_check_ok "a 930 KB annotation of 5,000 entries: answered (${OUT_H:0:20})" ||
    pg_check_fail "hostile annotation: '${OUT_H:0:60}'"
pg_expect_ok "pullgate-cri still serves" cri version
IMG="$PG_REG_HOST/team-a/other:1.0"
same_bytes "an image containerd does not hold, for a pod with annotations" "$POD_B_CFG"
IMG="$IMG_SAVED"
STATUS_HEX="$("$PG_PY" -c 'import sys
def ld(f, b): return bytes([f << 3 | 2, len(b)]) + b
print(ld(1, ld(1, sys.argv[1].encode())).hex())' "$IMG")"
raw() { "$PG_PY" "$HERE/cri_fail_closed.py" raw "$PG_PROXY_SOCK" /runtime.v1.ImageService/ImageStatus "$@"; }
pg_expect_contains "no request message: refused" "$(raw)" "INVALID_ARGUMENT pullgate: ImageStatus not forwarded: no request message"
[[ "$(raw "$STATUS_HEX" "$STATUS_HEX")" == OK ]] && pg_check_ok "two request messages: the first is answered, the second dropped" ||
    pg_check_fail "two request messages: $(raw "$STATUS_HEX" "$STATUS_HEX")"
pg_node_containerd_kill
OUT_P="$(cri --timeout 5 image-status-raw --image "$IMG" --pod-config "$POD_B_CFG")"
[[ "$OUT_P" == UNAVAILABLE* ]] && pg_check_ok "containerd down: its error, never \"present\" (${OUT_P:0:40})" ||
    pg_check_fail "containerd down: '$OUT_P'"
pg_node_containerd_start || pg_fail "containerd did not come back"
for _ in $(seq 1 50); do cri --timeout 1 version >/dev/null 2>&1 && break; sleep 0.1; done
pg_node_run_pod team-b '{"broken' || pg_fail "RunPodSandbox (malformed annotation)"
expect_outcome "a malformed annotation: the runtime's answer" present tenant-b "$PASS_B" IfNotPresent
expect_denied "and the hook refuses it" "$IMG"

pg_section "metrics"
SCRAPE="$(curl -s "http://$METRICS/metrics")"
metric() { awk -v m="$1" '$1 == m { print $2 }' <<<"$SCRAPE"; }
for r in verified policy-allowed must-pull error; do
    v="$(metric "pullgate_cri_image_verifications_total{result=\"$r\"}")"
    [[ "${v:-0}" != 0 ]] && pg_check_ok "pullgate_cri_image_verifications_total{result=\"$r\"} $v" ||
        pg_check_fail "no $r verification counted: $(grep image_verifications <<<"$SCRAPE")"
done
v="$(metric 'pullgate_cri_calls_total{method="ImageStatus",code="OK"}')"
[[ "${v:-0}" != 0 ]] && pg_check_ok "ImageStatus calls counted ($v)" || pg_check_fail "no ImageStatus call counted"

pg_section "another namespace's annotation, copied"
pg_node_run_pod team-x "$ANN_A" || pg_fail "RunPodSandbox (team-x)"
ensure tenant-b "$PASS_B" IfNotPresent
pg_log "keyed copy of team-a's annotation: $OUTCOME"
expect_denied "keyed: never runs" "$IMG"
# Unkeyed from here; AlwaysVerify with the sandbox image pinned (imported, never pulled).
restart_proxy 'c["hmacKeyFile"] = ""; c["policy"] = "AlwaysVerify"; c["pinnedImages"] = ["pullgate.test/pause*"]'
pg_node_run_pod team-x "$(annotation team-a regcred tenant-a "$PASS_A" --unkeyed)" || pg_fail "RunPodSandbox (team-x, unkeyed)"
ensure tenant-b "$PASS_B" IfNotPresent
pg_log "unkeyed copy of a team-a annotation: $OUTCOME"
expect_denied "unkeyed: never runs" "$IMG"

IMG_SAVED="$IMG"
IMG="$PG_SANDBOX_IMAGE"
same_bytes "a pinned image under AlwaysVerify" "$POD_CFG"
IMG="$IMG_SAVED"

pg_section "criVerifyPulls false: the runtime's answer, as before"
restart_proxy 'c["hmacKeyFile"] = ""; c["criVerifyPulls"] = False'
BAD_F="wrong-f-$RANDOM"
pg_node_run_pod team-f "$(annotation team-f regcred tenant-b "$BAD_F" --unkeyed)" || pg_fail "RunPodSandbox (team-f)"
expect_outcome "credentials not verified" present tenant-b "$BAD_F" IfNotPresent
expect_denied "the hook refuses it (no verification pull)" "$IMG"
same_bytes "an unverified pod's ImageStatus" "$POD_CFG"

if grep -q 'Sanitizer' "$PG_CD_DIR/pullgate-cri.log"; then
    pg_check_fail "sanitizer report in pullgate-cri's log"
    grep -A20 'Sanitizer' "$PG_CD_DIR/pullgate-cri.log" | head -n 40 | sed 's/^/       | /' >&2
fi
if ((PG_FAILURES > 0)); then tail -n 30 "$PG_CD_DIR/pullgate-cri.log" | sed 's/^/  pullgate-cri | /' >&2; fi
pg_log "elapsed: $((SECONDS - T0)) s"
pg_summary
