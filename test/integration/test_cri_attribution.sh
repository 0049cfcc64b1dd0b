#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Which credentials a pull records, with the real things: the Python CRI client (the
# kubelet's stand-in) -> pullgate-cri -> containerd 1.6 -> runc -> pullgate-hook; a registry
# with htpasswd users and one without auth; keyed (v2) annotations as the webhook writes them
# (pullgatectl annotate --hmac-key-file); policy NeverVerifyPreloadedImages, the default: a
# pull recorded node-wide by mistake is an authorisation. Cases (docs/interfaces.md §10):
#  - a secret with an email: recorded for that secret (its kubelet hash, with the email);
#    team-b without credentials, with its own secret, and with a copy of team-a's
#    annotation are denied; team-a runs;
#  - a secret added after admission (the pod's annotation lists an older one): recorded
#    under the pod's namespace only; a later pod of that namespace presenting it runs,
#    another namespace presenting the same credentials is denied;
#  - no credentials -> node-accessible; the node's own docker config credentials
#    (nodeCredentialFiles) -> node-accessible;
#  - a secret rotated after admission (issue 28): the pod pulled and ran; the image left the
#    node and its record was pruned; the secret now holds other credentials, which the pod's
#    annotation does not list. Its container restarts: the kubelet pulls with the new
#    credentials, recorded under the namespace's placeholder and bound to that pod, which
#    runs; a second pod of the namespace presenting only the old hash, and a pod of another
#    namespace presenting the new credentials, are refused;
#  - a namespace's fair share of a record (issue 28): team-b's pods list 64 secrets of
#    253-character names holding its one credential (one entry recorded); with its share of
#    the record used up, its pull under a new name of the same content is refused
#    (RESOURCE_EXHAUSTED, a 'pullgate:' message, pullgate_cri_pulls_refused_total
#    {reason="record-share"}), while team-a's first pull of that content is recorded and its
#    pod runs;
#  - containerd takes a PullImage whose tag is a non-minimal varint; pullgate-cri refuses
#    it; a method path without '/' is recorded like the canonical one;
#  - the annotation key rotated while pullgate-cri runs: pulls after it are attributed to their
#    secrets; a pod sealed with the retired key runs (and is attributed) only while that key is
#    the key file's PATH.previous;
#  - prune against the configured runtime (containerd's ListImages), with podman, crictl and
#    ctr stand-ins on PATH that list nothing: records of images containerd still holds (or
#    runs a container of) are kept, the record of an image removed from containerd is deleted.
# Env (from ctest): PULLGATE_HOOK, PULLGATECTL, PG_BUILD_DIR; PULLGATE_CRI overrides the binary.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/registry.sh
source "$HERE/lib/registry.sh"
# shellcheck source=lib/podman.sh
source "$HERE/lib/podman.sh" # pg_write_config, pg_cred_hash, pg_image_name
# shellcheck source=lib/cri_node.sh
source "$HERE/lib/cri_node.sh"

T0=$SECONDS
: "${PULLGATE_CRI:=${PG_BUILD_DIR:-}/cri/pullgate-cri}"
[[ -x "$PULLGATE_CRI" ]] || pg_skip "pullgate-cri not built ($PULLGATE_CRI)"
pg_node_require
pg_require_pullgate
export PG_SOURCE_DIR

ctl() { "$PULLGATECTL" --config "$CFG" "$@"; }
pull_as() { # USER PASS IMAGE POD_CFG [-- extra cri args]: prints the image_ref
    local user="$1" image="$3" pod_cfg="$4"
    export PG_CRI_PASS="$2"
    cri pull --image "$image" --username "$user" --password-env PG_CRI_PASS --pod-config "$pod_cfg"
    local rc=$?
    unset PG_CRI_PASS
    return $rc
}
expect_mapping() { # DESC REF IMAGE_NAME WANT_SECRETS WANT_NODE(true|false)
    local got node
    got="$(secrets_of "$2" "$3")"
    node="$(mapping_of "$2" "$3" | "$PG_PY" -c 'import json,sys; m=json.load(sys.stdin) or {}; print(str(bool(m.get("nodePodsAccessible"))).lower())')"
    if [[ "$got" == "$4" && "$node" == "$5" ]]; then
        pg_check_ok "$1 (${got:-no secret}, nodePodsAccessible $node)"
    else
        pg_check_fail "$1: secrets '$got' (want '$4'), nodePodsAccessible $node (want $5)"
    fi
}

# ---------------------------------------------------------------- registries
pg_section "registries, images, the node's key and its own docker config"
PASS_A="tenant-a-pw-$RANDOM$RANDOM"
PASS_B="tenant-b-pw-$RANDOM$RANDOM"
PASS_N="node-pw-$RANDOM$RANDOM"
PASS_R="tenant-r-pw-$RANDOM$RANDOM"
PG_REG_EXTRA_USERS=("tenant-b:$PASS_B" "node-user:$PASS_N" "tenant-r:$PASS_R")
pg_registry_start tenant-a "$PASS_A"
# One image content per repository: containerd names a container's image by its ID's tags.
LAYOUT="$(pg_mktemp_dir oci-layout)/layout"
for repo in email later node rotate fair; do
    pg_image_build "$LAYOUT" "$repo" "$repo-marker"
    pg_image_push "$LAYOUT" "$repo" "team-a/$repo:1.0"
done
# One content under three names: team-a's, and two copies in team-b's repositories.
pg_image_push "$LAYOUT" fair "team-b/fair:1.0"
pg_image_push "$LAYOUT" fair "team-b/fair2:1.0"
pg_registry_start_open
for repo in tool wire wire2; do
    pg_image_build "$LAYOUT" "$repo" "$repo-marker"
    pg_image_push_open "$LAYOUT" "$repo" "public/$repo:1.0"
done
IMG_EMAIL="$PG_REG_HOST/team-a/email:1.0"
IMG_LATER="$PG_REG_HOST/team-a/later:1.0"
IMG_NODE="$PG_REG_HOST/team-a/node:1.0"
IMG_ROT="$PG_REG_HOST/team-a/rotate:1.0"
IMG_FAIR_A="$PG_REG_HOST/team-a/fair:1.0"
IMG_FAIR_B="$PG_REG_HOST/team-b/fair:1.0"
IMG_FAIR_B2="$PG_REG_HOST/team-b/fair2:1.0"
IMG_TOOL="$PG_OPEN_REG_HOST/public/tool:1.0"
IMG_WIRE="$PG_OPEN_REG_HOST/public/wire:1.0"
IMG_WIRE2="$PG_OPEN_REG_HOST/public/wire2:1.0"

STATE="$(pg_mktemp_dir state)"
chmod 0700 "$STATE"
ETC="$(pg_mktemp_dir etc)"
KEY="$ETC/hmac.key"
head -c 48 /dev/urandom >"$KEY" && chmod 0600 "$KEY"
NODE_DOCKER="$ETC/node-config.json"
printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$PG_REG_HOST" "$(printf '%s' "node-user:$PASS_N" | base64 -w0)" >"$NODE_DOCKER"
chmod 0600 "$NODE_DOCKER"
CFG="$ETC/pullgate.json"
METRICS="127.0.0.1:$(pg_free_port)"
pg_write_config "$CFG" "$STATE" NeverVerifyPreloadedImages none \
    "\"hmacKeyFile\": \"$KEY\", \"nodeCredentialFiles\": [\"$NODE_DOCKER\"], \"criPruneInterval\": \"0s\", \"criMetricsListen\": \"$METRICS\""
chmod 0600 "$CFG"
ctl check-config >/dev/null || pg_fail "pullgatectl check-config rejects $CFG"
pg_node_containerd_setup "$CFG" "$PG_REG_HOST" "$PG_OPEN_REG_HOST"
pg_node_containerd_start || pg_skip "containerd's CRI plugin did not come up on this machine (log above)"
pg_node_proxy_start || pg_fail "pullgate-cri did not serve its socket"

# annotation NS IMAGE NAME UID USER PASS [EMAIL]: the keyed value the webhook writes.
annotation() {
    local h a
    h="$(printf %s "$6" | "$PULLGATECTL" hash --username "$5" --password-stdin ${7:+--email "$7"})" || return 1
    a="$(printf %s "$6" | "$PULLGATECTL" hash --username "$5" --password-stdin)" || return 1
    ctl annotate --namespace "$1" --image "$2" --secret "$1/$3/$4:$h:$a" --hmac-key-file "$KEY"
}
UID_A="$(cat /proc/sys/kernel/random/uuid)"
UID_B="$(cat /proc/sys/kernel/random/uuid)"
H_EMAIL="$(printf %s "$PASS_A" | "$PULLGATECTL" hash --username tenant-a --password-stdin --email a@team-a.example)"

# ---------------------------------------------------------- a secret with an email
pg_section "a secret with an email"
ANN_A="$(annotation team-a "$IMG_EMAIL" regcred "$UID_A" tenant-a "$PASS_A" a@team-a.example)" || pg_fail "annotate"
[[ $ANN_A != *"$H_EMAIL"* ]] && pg_check_ok "the keyed annotation shows no hash in clear" ||
    pg_check_fail "the annotation carries the credential hash in clear"
pg_node_run_pod team-a "$ANN_A" || pg_fail "RunPodSandbox (team-a)"
POD_A="$POD" POD_A_CFG="$POD_CFG" POD_A_LOGDIR="$POD_LOGDIR"
REF_EMAIL="$(pull_as tenant-a "$PASS_A" "$IMG_EMAIL" "$POD_A_CFG")" || pg_fail "PullImage (team-a, email secret)"
expect_mapping "recorded for team-a's secret with its kubelet hash (with the email)" \
    "$REF_EMAIL" "$(pg_image_name "$IMG_EMAIL")" "team-a/regcred/$UID_A:$H_EMAIL" false
expect_runs "team-a (the owner) runs it" "$IMG_EMAIL"
pg_node_run_pod team-b "" || pg_fail "RunPodSandbox (team-b)"
expect_denied "team-b without credentials" "$IMG_EMAIL"
pg_node_run_pod team-b "$(annotation team-b "$IMG_EMAIL" regcred "$UID_B" tenant-b "$PASS_B")" || pg_fail "RunPodSandbox"
expect_denied "team-b with its own secret" "$IMG_EMAIL"
pg_node_run_pod team-b "$ANN_A" || pg_fail "RunPodSandbox (team-b, copied annotation)"
expect_denied "team-b with a copy of team-a's annotation" "$IMG_EMAIL"

# ---------------------------------------------------------- a secret added after admission
pg_section "a secret added after admission"
# team-c's pod was admitted with an older secret for the image; the kubelet pulls with
# tenant-b's credentials, from a secret added since.
OLD="$(annotation team-c "$IMG_LATER" old-cred "$(cat /proc/sys/kernel/random/uuid)" tenant-a "rotated-$RANDOM")"
pg_node_run_pod team-c "$OLD" || pg_fail "RunPodSandbox (team-c)"
REF_LATER="$(pull_as tenant-b "$PASS_B" "$IMG_LATER" "$POD_CFG")" || pg_fail "PullImage (team-c)"
A_B="$(printf %s "$PASS_B" | "$PULLGATECTL" hash --username tenant-b --password-stdin)"
POD_C_UID="$("$PG_PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["uid"])' "$POD_CFG")"
expect_mapping "recorded under team-c only (the namespace-bound placeholder, the pulling pod's binding)" \
    "$REF_LATER" "$(pg_image_name "$IMG_LATER")" \
    "team-c/pullgate:pod-$POD_C_UID/: team-c/pullgate:unverified-$A_B/:$A_B" false
pg_node_run_pod team-c "$(annotation team-c "$IMG_LATER" new-cred "$(cat /proc/sys/kernel/random/uuid)" tenant-b "$PASS_B")" ||
    pg_fail "RunPodSandbox (team-c, new secret)"
expect_runs "a later team-c pod presenting the new secret runs it" "$IMG_LATER"
pg_node_run_pod team-d "$(annotation team-d "$IMG_LATER" same-cred "$(cat /proc/sys/kernel/random/uuid)" tenant-b "$PASS_B")" ||
    pg_fail "RunPodSandbox (team-d)"
expect_denied "team-d presenting the same credentials in its own secret" "$IMG_LATER"
pg_node_run_pod team-d "" || pg_fail "RunPodSandbox (team-d)"
expect_denied "team-d without credentials" "$IMG_LATER"

# ---------------------------------------------------------- node-wide only when proven
pg_section "node-accessible only without credentials, or with the node's own"
pg_node_run_pod team-e "" || pg_fail "RunPodSandbox (team-e)"
POD_E="$POD" POD_E_CFG="$POD_CFG" POD_E_LOGDIR="$POD_LOGDIR"
REF_TOOL="$(cri pull --image "$IMG_TOOL" --pod-config "$POD_E_CFG")" || pg_fail "anonymous PullImage"
expect_mapping "no credentials: node-accessible" "$REF_TOOL" "$(pg_image_name "$IMG_TOOL")" "" true
REF_NODE="$(pull_as node-user "$PASS_N" "$IMG_NODE" "$POD_E_CFG")" || pg_fail "PullImage (node credentials)"
expect_mapping "the node's docker config credentials: node-accessible" "$REF_NODE" "$(pg_image_name "$IMG_NODE")" "" true
pg_node_run_pod team-f "" || pg_fail "RunPodSandbox (team-f)"
expect_runs "another namespace runs the anonymous pull" "$IMG_TOOL"
expect_runs "another namespace runs the node-credential pull" "$IMG_NODE"

# ---------------------------------------------------------- a rotated secret (issue 28)
pg_section "a secret rotated after admission: the pod that pulled runs it"
T_ROT=$SECONDS
UID_S="$(cat /proc/sys/kernel/random/uuid)"
ANN_R="$(annotation team-r "$IMG_ROT" rot-cred "$UID_S" tenant-a "$PASS_A")" || pg_fail "annotate (team-r)"
pg_node_run_pod team-r "$ANN_R" || pg_fail "RunPodSandbox (team-r)"
POD_R="$POD" POD_R_CFG="$POD_CFG" POD_R_LOGDIR="$POD_LOGDIR"
POD_R_UID="$("$PG_PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["uid"])' "$POD_R_CFG")"
REF_ROT="$(pull_as tenant-a "$PASS_A" "$IMG_ROT" "$POD_R_CFG")" || pg_fail "PullImage (team-r, before the rotation)"
expect_runs "team-r's pod, before the rotation" "$IMG_ROT"
# The image leaves the node and its record is pruned (what pullgate-cri's prune does once
# the runtime no longer lists it; here by hand, without the prune's hour of grace).
cri_direct remove-image --image "$IMG_ROT" >/dev/null || pg_fail "RemoveImage ($IMG_ROT)"
ctl list --json | "$PG_PY" -c '
import json, sys
for rec in json.load(sys.stdin):
    if rec.get("imageRef") != sys.argv[1]:
        print(rec["imageRef"])' "$REF_ROT" >"$ETC/in-use"
ctl prune --in-use "$ETC/in-use" --allow-empty >/dev/null || pg_fail "pullgatectl prune"
pg_expect_fail "its record is pruned" ctl show --image-ref "$REF_ROT"
# rot-cred now holds tenant-r's credentials; the pod's annotation still lists the old hash.
# The container restarts: the kubelet's EnsureImageExists finds the image absent and pulls
# with the secret as it is now.
OUT="$(PG_CRI_PASS="$PASS_R" cri ensure-image --image "$IMG_ROT" --pod-config "$POD_R_CFG" \
    --policy IfNotPresent --username tenant-r --password-env PG_CRI_PASS)"
pg_expect_contains "the kubelet stand-in pulls with the rotated credentials" "$OUT" '"outcome": "pulled"'
A_R="$(printf %s "$PASS_R" | "$PULLGATECTL" hash --username tenant-r --password-stdin)"
expect_mapping "recorded under team-r's placeholder and bound to the pod that pulled" \
    "$REF_ROT" "$(pg_image_name "$IMG_ROT")" \
    "team-r/pullgate:pod-$POD_R_UID/: team-r/pullgate:unverified-$A_R/:$A_R" false
POD="$POD_R" POD_CFG="$POD_R_CFG" POD_LOGDIR="$POD_R_LOGDIR"
expect_runs "the pod that pulled runs it (its annotation lists only the old hash)" "$IMG_ROT"
pg_node_run_pod team-r "$ANN_R" || pg_fail "RunPodSandbox (team-r, second pod)"
expect_denied "a second team-r pod presenting only the old hash" "$IMG_ROT"
pg_node_run_pod team-s "$(annotation team-s "$IMG_ROT" rot-cred "$(cat /proc/sys/kernel/random/uuid)" tenant-r "$PASS_R")" ||
    pg_fail "RunPodSandbox (team-s)"
expect_denied "a pod of another namespace presenting the rotated credentials" "$IMG_ROT"
pg_log "rotation: $((SECONDS - T_ROT)) s"

# ---------------------------------------------------------- a namespace's fair share (issue 28)
pg_section "a namespace's fair share of a record"
T_FAIR=$SECONDS
H_B="$(printf %s "$PASS_B" | "$PULLGATECTL" hash --username tenant-b --password-stdin)"
SECRETS_B=()
for i in $(seq -w 0 63); do
    name="$(printf 's%s-%0249d' "$i" 0)" # 253 characters
    SECRETS_B+=(--secret "team-b/$name/$(cat /proc/sys/kernel/random/uuid):$H_B:$H_B")
done
ANN_B64="$(ctl annotate --namespace team-b --image "$IMG_FAIR_B" "${SECRETS_B[@]}" --hmac-key-file "$KEY")" ||
    pg_fail "annotate (team-b, 64 secrets)"
ANN_B64_2="$(ctl annotate --namespace team-b --image "$IMG_FAIR_B2" "${SECRETS_B[@]}" --hmac-key-file "$KEY")" ||
    pg_fail "annotate (team-b, 64 secrets, second name)"
pg_node_run_pod team-b "$ANN_B64" || pg_fail "RunPodSandbox (team-b, 64 secrets)"
REF_FAIR="$(pull_as tenant-b "$PASS_B" "$IMG_FAIR_B" "$POD_CFG")" || pg_fail "PullImage (team-b)"
N_B="$(secrets_of "$REF_FAIR" "$(pg_image_name "$IMG_FAIR_B")" | wc -w)"
[[ "$N_B" == 1 ]] && pg_check_ok "64 secrets holding one credential: one entry" ||
    pg_check_fail "$N_B entries for team-b's one credential"
# team-b's share used up: what its pulls under 99 more names of this content would leave
# (each a new name and one entry; through the proxy that takes ~40 s, here a rewrite).
"$PG_PY" - "$STATE/pulled" "$REF_FAIR" "$PG_REG_HOST" <<'EOF' || pg_fail "filling team-b's share"
import hashlib, json, os, sys
d, ref, host = sys.argv[1:4]
for f in os.listdir(d):
    path = os.path.join(d, f)
    rec = json.load(open(path))
    if rec.get("imageRef") != ref:
        continue
    m = rec["credentialMapping"]
    for k in range(99):
        name = "filler-%02d" % k
        m["%s/team-b/fill-%02d" % (host, k)] = {"kubernetesSecrets": [{
            "uid": "u-%02d" % k, "namespace": "team-b", "name": name,
            "credentialHash": hashlib.sha256(name.encode()).hexdigest()}]}
    rec["credentialMapping"] = dict(sorted(m.items()))
    tmp = path + ".fill"
    with open(tmp, "w") as out:
        out.write(json.dumps(rec, separators=(",", ":")) + "\n")
    os.chmod(tmp, 0o600)
    os.rename(tmp, path)
    sys.exit(0)
sys.exit(1)
EOF
pg_node_run_pod team-b "$ANN_B64_2" || pg_fail "RunPodSandbox (team-b, second name)"
# (The answer waits 2 s for the record; should a loaded machine take longer, the kubelet's
# retry hears the refusal: so does this one's.)
for _ in 1 2 3; do
    OUT="$(pull_as tenant-b "$PASS_B" "$IMG_FAIR_B2" "$POD_CFG" 2>&1)" || break
done
pg_expect_contains "team-b's pull past its share: refused" "$OUT" \
    "code = RESOURCE_EXHAUSTED desc = pullgate: the pull of $IMG_FAIR_B2 cannot be recorded: namespace team-b has used up its share"
[[ -z "$(secrets_of "$REF_FAIR" "$(pg_image_name "$IMG_FAIR_B2")")" ]] &&
    pg_check_ok "nothing of it recorded" || pg_check_fail "team-b's refused pull was recorded"
SCRAPE="$(curl -s "http://$METRICS/metrics")"
grep -q '^pullgate_cri_pulls_refused_total{code="RESOURCE_EXHAUSTED",reason="record-share"} [1-9]' <<<"$SCRAPE" &&
    pg_check_ok "counted: pullgate_cri_pulls_refused_total{reason=\"record-share\"}" ||
    pg_check_fail "not counted: $(grep pulls_refused <<<"$SCRAPE")"
# team-a's first pull of the same content (containerd names the image by its first name,
# team-a's, in sort order) is recorded, and its pod runs.
UID_FA="$(cat /proc/sys/kernel/random/uuid)"
pg_node_run_pod team-a "$(annotation team-a "$IMG_FAIR_A" regcred "$UID_FA" tenant-a "$PASS_A")" ||
    pg_fail "RunPodSandbox (team-a, fair)"
REF_FAIR_A="$(pull_as tenant-a "$PASS_A" "$IMG_FAIR_A" "$POD_CFG")" || pg_fail "team-a's first pull was refused"
[[ "$REF_FAIR_A" == "$REF_FAIR" ]] && pg_check_ok "one content, one record ($REF_FAIR)" ||
    pg_check_fail "team-a's pull answered $REF_FAIR_A, team-b's $REF_FAIR"
H_FA="$(printf %s "$PASS_A" | "$PULLGATECTL" hash --username tenant-a --password-stdin)"
expect_mapping "team-a's first pull of the same content is recorded" "$REF_FAIR" \
    "$(pg_image_name "$IMG_FAIR_A")" "team-a/regcred/$UID_FA:$H_FA" false
expect_runs "team-a's pod runs it" "$IMG_FAIR_A"
pg_log "fair share: $((SECONDS - T_FAIR)) s"

# ---------------------------------------------------------- the wire
pg_section "the wire: what containerd would take and pullgate-cri cannot read is refused"
wire_req() { "$PG_PY" "$HERE/cri_fail_closed.py" request "$1" team-a "" ""; }
raw() { "$PG_PY" "$HERE/cri_fail_closed.py" raw "$@"; }
REQ_HEX="$(wire_req "$IMG_WIRE")"
LONG_TAG="8a8080808000${REQ_HEX:2}"
OUT="$(raw "$PG_PROXY_SOCK" /runtime.v1.ImageService/PullImage "$LONG_TAG")"
pg_expect_contains "through pullgate-cri: refused" "$OUT" "INVALID_ARGUMENT pullgate: PullImage request not understood"
pg_expect_fail "containerd holds no such image" cri_direct image-status --image "$IMG_WIRE"
OUT="$(raw "$PG_CD_SOCK" /runtime.v1.ImageService/PullImage "$LONG_TAG")"
[[ $OUT == OK ]] && pg_check_ok "containerd itself takes the same bytes and pulls the image" ||
    pg_check_fail "containerd answered '$OUT' to the non-minimal tag"
OUT="$(raw "$PG_PROXY_SOCK" runtime.v1.ImageService/PullImage "$(wire_req "$IMG_WIRE2")")"
[[ $OUT == OK ]] && pg_check_ok "a method path without '/': containerd pulls it" || pg_check_fail "no-slash path: $OUT"
REF_WIRE2="$(cri_direct image-status --image "$IMG_WIRE2" | "$PG_PY" -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
expect_mapping "a method path without '/': recorded like the canonical one" \
    "$REF_WIRE2" "$(pg_image_name "$IMG_WIRE2")" "" true

# ---------------------------------------------------------- key rotation
pg_section "the annotation key rotated while pullgate-cri runs"
# team-g's first pod was admitted before the rotation (sealed with the old key), its second
# after it (sealed with the new one, as the webhook then seals).
A_A="$(printf %s "$PASS_A" | "$PULLGATECTL" hash --username tenant-a --password-stdin)"
UID_G_OLD="$(cat /proc/sys/kernel/random/uuid)" UID_G_NEW="$(cat /proc/sys/kernel/random/uuid)"
ANN_G_OLD="$(annotation team-g "$IMG_EMAIL" regcred "$UID_G_OLD" tenant-a "$PASS_A")" || pg_fail "annotate"
cp -p "$KEY" "$ETC/hmac.key.old"
head -c 48 /dev/urandom >"$KEY.new" && chmod 0600 "$KEY.new" && mv "$KEY.new" "$KEY"
ANN_G_NEW="$(annotation team-g "$IMG_EMAIL" regcred "$UID_G_NEW" tenant-a "$PASS_A")" || pg_fail "annotate"
pg_node_run_pod team-g "$ANN_G_NEW" || pg_fail "RunPodSandbox (team-g, new key)"
REF_G="$(pull_as tenant-a "$PASS_A" "$IMG_EMAIL" "$POD_CFG")" || pg_fail "PullImage (team-g, new key)"
GOT="$(secrets_of "$REF_G" "$(pg_image_name "$IMG_EMAIL")")"
[[ " $GOT " == *" team-g/regcred/$UID_G_NEW:$A_A "* && "$GOT" != *unverified* ]] &&
    pg_check_ok "a pull after the rotation is attributed to its secret (the key was reloaded)" ||
    pg_check_fail "after the rotation: recorded '$GOT', want team-g/regcred/$UID_G_NEW:$A_A"
expect_runs "the pod sealed with the new key runs" "$IMG_EMAIL"
pg_node_run_pod team-g "$ANN_G_OLD" || pg_fail "RunPodSandbox (team-g, old key)"
expect_denied "sealed with the retired key, no $KEY.previous: denied" "$IMG_EMAIL"
pg_expect_contains "as a bad signature" "$PG_OUT" "annotation"
cp -p "$ETC/hmac.key.old" "$KEY.previous"
expect_runs "with the retired key as $KEY.previous (the grace): a pod admitted before runs" "$IMG_EMAIL"
pull_as tenant-a "$PASS_A" "$IMG_EMAIL" "$POD_CFG" >/dev/null || pg_fail "PullImage (team-g, old key)"
GOT="$(secrets_of "$REF_G" "$(pg_image_name "$IMG_EMAIL")")"
# Attributed, the pull adds nothing: team-g already holds this credential for the image (one entry
# per credential and namespace, §2). Not attributed, it would add the namespace's placeholder and
# this pod's binding.
[[ " $GOT " == *" team-g/regcred/"*":$A_A "* && "$GOT" != *unverified* && "$GOT" != *pullgate:pod-* ]] &&
    pg_check_ok "and its pulls are attributed to its secret (pullgate-cri reads $KEY.previous too)" ||
    pg_check_fail "with the previous key: recorded '$GOT', want team-g's regcred with $A_A and no placeholder or pod binding"
rm -f "$KEY.previous"
expect_denied "the grace ends when $KEY.previous is removed" "$IMG_EMAIL"

# ---------------------------------------------------------- prune
pg_section "prune from the configured runtime (containerd), never from another tool"
"$PG_PY" - "$CFG" "unix://$PG_CD_SOCK" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["criRuntimeEndpoint"] = sys.argv[2]
json.dump(c, open(sys.argv[1], "w"), indent=2)
EOF
"$PG_PY" "$HERE/cri_fail_closed.py" age-records "$STATE" 7200
BIN="$(pg_mktemp_dir fake-tools)"
for tool in podman crictl ctr; do
    printf '#!/bin/sh\necho "$0 $*" >>%s/asked\nexit 0\n' "$BIN" >"$BIN/$tool"
    chmod +x "$BIN/$tool"
done
prune() {
    env PATH="$BIN:$PATH" PULLGATE_CRI="$PULLGATE_CRI" PULLGATECTL="$PULLGATECTL" \
        PULLGATE_CONFIG="$CFG" sh "$PG_SOURCE_DIR/packaging/systemd/pullgate-prune"
}
pg_expect_ok "pullgate-prune with podman, crictl and ctr stand-ins that list nothing" prune
[[ ! -e $BIN/asked ]] && pg_check_ok "none of them was asked" || pg_check_fail "asked: $(cat "$BIN/asked")"
KEPT=0
for ref in "$REF_EMAIL" "$REF_LATER" "$REF_TOOL" "$REF_NODE"; do
    ctl show --image-ref "$ref" >/dev/null 2>&1 && KEPT=$((KEPT + 1))
done
((KEPT == 4)) && pg_check_ok "the records of images containerd holds are kept" ||
    pg_check_fail "only $KEPT of 4 records of images containerd holds are left"
cri_direct remove-image --image "$IMG_WIRE2" >/dev/null || pg_fail "RemoveImage"
cri_direct remove-image --image "$IMG_LATER" >/dev/null || pg_fail "RemoveImage"
pg_expect_ok "pullgate-prune after two images left containerd" prune
pg_expect_fail "the record of a removed image no container uses is deleted" ctl show --image-ref "$REF_WIRE2"
pg_expect_ok "the record of a removed image a container still uses is kept" ctl show --image-ref "$REF_LATER"
pg_expect_ok "the others are kept" ctl show --image-ref "$REF_EMAIL"

if grep -q 'Sanitizer' "$PG_CD_DIR/pullgate-cri.log"; then
    pg_check_fail "sanitizer report in pullgate-cri's log"
    grep -A20 'Sanitizer' "$PG_CD_DIR/pullgate-cri.log" | head -n 40 | sed 's/^/       | /' >&2
fi
if ((PG_FAILURES > 0)); then tail -n 30 "$PG_CD_DIR/pullgate-cri.log" | sed 's/^/  pullgate-cri | /' >&2; fi
pg_log "elapsed: $((SECONDS - T0)) s"
pg_summary
