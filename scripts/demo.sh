#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgate demo: the real node flow on one machine, narrated. No pull is recorded by hand.
#
#   sudo bash scripts/demo.sh
#
#   Python CRI client (the kubelet's stand-in) ──▶ pullgate-cri ──▶ containerd 1.6 ──▶ runc ──▶ pullgate-hook
#
# 1. installs what it needs (scripts/install-deps.sh) and builds pullgate into ./build-demo
# 2. starts a private D-Bus bus and `pullgatectl monitor` on it
# 3. starts a private registry with authentication on 127.0.0.1 and pushes a private image
# 4. starts containerd (own root, state and socket in a temp dir) with pullgate-hook in its
#    runc handler's base_runtime_spec, and pullgate-cri in front of it
# 5. starts pullgate-webhook (keyed with the node's HMAC key, TLS) against a Kubernetes API
#    stand-in (test/integration/webhook_apiserver.py) holding each tenant's docker-registry
#    secret; each tenant pod's AdmissionReview is sent with curl, as the API server would, and
#    the annotation of the returned JSON patch is the pod's credentials annotation
# 6. the kubelet stand-in follows EnsureImageExists (ImageStatus with the pod's annotations,
#    PullImage only when told "not present"). Tenant A's pod (the webhook's annotation, hashes
#    sealed) pulls with A's secret, one with an email; pullgate-cri records the pull for that
#    secret; A's container runs
# 7. tenant B, with its own valid credentials (a second registry user), is told "not
#    present" (a verification pull), pulls, the registry lets it in, B runs
# 8. tenant C with a wrong password, and a pod with no credentials: told "not present", the
#    registry refuses (ErrImagePull), nothing starts, the image stays
# 9. a container created without the pull path (and one presenting a copied annotation) is
#    still refused by the hook
# 10. never forwarded unrecorded: with the record store's lock held the pull is refused
# 11. prints the D-Bus pull and decision events the monitor saw
# 12. scrapes pullgate-cri's /metrics and pullgate-webhook's (its health address): pulls,
#    verification pulls, denials; reviews by outcome, the certificate's expiry, build info
# 13. ends with `pullgatectl doctor` on the demo's node (its path options name containerd's
#    config, the hook socket, a kubelet configuration the demo writes, the kubelet's version):
#    every check holds but "a kubelet runs", a warning here (no kubelet; said in the output), exit 0
#
# Everything lives in a temp dir removed at exit, with every process the demo started.
# Exit status: 0 when every expected outcome happened, 1 otherwise (2: setup failed).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-demo"
T_START=$SECONDS

if [[ -t 1 ]]; then
    B=$'\e[1m' G=$'\e[32m' R=$'\e[31m' Y=$'\e[33m' C=$'\e[36m' N=$'\e[0m'
else
    B="" G="" R="" Y="" C="" N=""
fi
STEP=0
header() {
    STEP=$((STEP + 1))
    printf '\n%s== %d. %s ==%s\n' "$B$C" "$STEP" "$*" "$N"
}
say() { printf '   %s\n' "$*"; }
run_shown() { printf '   %s$ %s%s\n' "$Y" "$*" "$N"; }
indent() { sed 's/^/     | /'; }
declare -a OUTCOMES=()
FAILED=0
outcome_ok() { OUTCOMES+=("${G}PASS${N}  $*"); printf '   %s✔ %s%s\n' "$G" "$*" "$N"; }
outcome_bad() { OUTCOMES+=("${R}FAIL${N}  $*"); FAILED=$((FAILED + 1)); printf '   %s✘ %s%s\n' "$R" "$*" "$N"; }
die() { printf '%sdemo: %s%s\n' "$R" "$*" "$N" >&2; exit 2; }

if [[ "$(id -u)" != 0 ]]; then
    die "run as root (it installs packages and runs containers): sudo bash scripts/demo.sh"
fi

header "Dependencies"
bash "$ROOT/scripts/install-deps.sh" 2>&1 | indent
[[ ${PIPESTATUS[0]} == 0 ]] || die "scripts/install-deps.sh failed"

header "Build pullgate (cmake, ./build-demo)"
{
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPG_BUILD_BENCH=OFF \
        -DPG_BUILD_TESTS=OFF -DPG_BUILD_CRI=ON >"$BUILD.cmake.log" 2>&1 &&
        cmake --build "$BUILD" -j"$(nproc)" --target pullgate-hook pullgate-hook-local pullgatectl pullgate-cri \
            pullgate-webhook pullgate-doctor >>"$BUILD.cmake.log" 2>&1
} || { tail -n 30 "$BUILD.cmake.log" | indent; die "build failed (full log: $BUILD.cmake.log)"; }
rm -f "$BUILD.cmake.log"
T_BUILT=$SECONDS
PULLGATE_HOOK="$BUILD/hooks/pullgate-hook"
PULLGATECTL="$BUILD/tools/pullgatectl"
PULLGATE_CRI="$BUILD/cri/pullgate-cri"
PULLGATE_WEBHOOK="$BUILD/webhook/pullgate-webhook"
for b in "$PULLGATE_HOOK" "$BUILD/hooks/pullgate-hook-local" "$PULLGATECTL" "$PULLGATE_CRI" \
    "$PULLGATE_WEBHOOK" "$BUILD/tools/pullgate-doctor"; do
    [[ -x "$b" ]] || die "built binary not found: $b"
done
export PULLGATE_HOOK PULLGATECTL PULLGATE_CRI
say "hook:         $PULLGATE_HOOK"
say "pullgatectl:  $PULLGATECTL"
say "pullgate-cri: $PULLGATE_CRI"
say "webhook:      $PULLGATE_WEBHOOK"

# Helpers shared with the tests: temp dir + cleanup stack, registry, containerd node.
# shellcheck source=../test/integration/lib/registry.sh
source "$ROOT/test/integration/lib/registry.sh"
# shellcheck source=../test/integration/lib/podman.sh
source "$ROOT/test/integration/lib/podman.sh" # pg_write_config, pg_cred_hash
# shellcheck source=../test/integration/lib/cri_node.sh
source "$ROOT/test/integration/lib/cri_node.sh"
pg_skip() { die "cannot run here: $*"; } # the demo never "skips"
pg_log() { printf '   %s\n' "$*"; }
pg_node_require

header "Private D-Bus bus + pullgatectl monitor"
pg_node_dbus_start
say "bus: $PG_BUS_ADDR (dbus-daemon pid $PG_BUS_PID)"
STATE="$PG_TMPDIR/state"
mkdir -m 0700 "$STATE"
CFG="$PG_TMPDIR/pullgate.json"
KEY="$PG_TMPDIR/hmac.key"
head -c 48 /dev/urandom >"$KEY" && chmod 0600 "$KEY"
METRICS="127.0.0.1:$(pg_free_port)" # pullgate-cri's GET /metrics (docs/metrics.md)
# pullgate-cri's socket is named in the configuration, as on a node (doctor finds the
# pullgate-cri serving criListen; pg_node_proxy_start listens on PG_PROXY_SOCK).
PG_PROXY_SOCK="$(pg_mktemp_dir cri-run)/cri.sock"
pg_write_config "$CFG" "$STATE" NeverVerifyPreloadedImages "$PG_BUS_ADDR" \
    "\"hmacKeyFile\": \"$KEY\", \"criMetricsListen\": \"$METRICS\", \"criListen\": \"unix://$PG_PROXY_SOCK\""
chmod 0600 "$CFG"
say "pullgate config ($CFG), read by the hook, pullgate-cri and pullgatectl alike:"
indent <"$CFG"
CHECK="$("$PULLGATECTL" --config "$CFG" check-config 2>&1)" ||
    { printf '%s\n' "$CHECK" | indent; die "pullgatectl check-config rejected the demo config"; }
MON_LOG="$PG_TMPDIR/monitor.log"
run_shown "pullgatectl --config $CFG monitor &"
"$PULLGATECTL" --config "$CFG" monitor >"$MON_LOG" 2>&1 &
MON_PID=$!
pg_on_exit 'pg_kill_wait "$MON_PID" 3'
sleep 0.5
kill -0 "$MON_PID" 2>/dev/null || { indent <"$MON_LOG"; die "pullgatectl monitor did not start"; }

header "Private registry with authentication"
PASS_A="tenant-a-$(head -c 9 /dev/urandom | base64 | tr -d '/+=')"
PASS_B="tenant-b-$(head -c 9 /dev/urandom | base64 | tr -d '/+=')"
PG_REG_EXTRA_USERS=("tenant-b:$PASS_B")
pg_registry_start tenant-a "$PASS_A"
say "docker-registry (distribution) on http://$PG_REG_HOST, htpasswd (bcrypt) users 'tenant-a', 'tenant-b'"
say "anonymous GET /v2/ -> HTTP $(curl -s -o /dev/null -w '%{http_code}' "http://$PG_REG_HOST/v2/")"
PG_LAYOUT="$PG_TMPDIR/oci-layout"
pg_image_build "$PG_LAYOUT" app "hello from the private image"
pg_image_push "$PG_LAYOUT" app team-a/app:1.0
IMAGE="$PG_REG_HOST/team-a/app:1.0"
say "private image: $IMAGE (busybox, built locally with umoci, pushed with skopeo)"

header "The node: containerd + pullgate-hook, pullgate-cri in front"
pg_node_containerd_setup "$CFG" "$PG_REG_HOST"
pg_node_containerd_start || die "containerd's CRI plugin did not come up (log above)"
say "containerd: $PG_CD_VERSION, socket $PG_CD_SOCK"
say "its runc handler runs the hook (base_runtime_spec) and passes the pod's credentials annotation:"
grep -E 'base_runtime_spec|pod_annotations' "$PG_CD_DIR/config.toml" | sed 's/^ *//' | indent
"$PG_PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["hooks"]))' \
    "$PG_CD_DIR/base-spec.json" | indent
run_shown "pullgate-cri --config $CFG --listen unix://<tmp>/cri.sock --runtime-endpoint unix://$PG_CD_SOCK --hook-socket $PG_HOOK_SOCK &"
pg_node_proxy_start || die "pullgate-cri did not serve its socket"
say "pullgate-cri (pid $PG_PROXY_PID) serves CRI on $PG_PROXY_SOCK; the kubelet stand-in talks only to it"
say "and decides for the hook on $PG_HOOK_SOCK (the hook's --daemon-socket): the hook execs no libcrypto"
run_shown "cri_client.py --socket <pullgate-cri> version"
cri version | indent

header "The admission webhook: pullgate-webhook against a Kubernetes API stand-in"
say "the API stand-in (test/integration/webhook_apiserver.py: TLS, bearer token) holds each tenant's"
say "kubernetes.io/dockerconfigjson secret 'regcred' (A's with an email, C's with a wrong password);"
say "pullgate-webhook reads a pod's pull secrets from it and writes the credentials annotation."
WH_DIR="$PG_TMPDIR/webhook"
mkdir -m 0700 "$WH_DIR"
# A test CA, the API stand-in's and the webhook's serving certificates (loopback), as the tests make them.
wh_cert() { # NAME: a leaf for 127.0.0.1 signed by the demo's CA
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
        -keyout "$WH_DIR/$1.key" -out "$WH_DIR/$1.csr" 2>/dev/null &&
        printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$WH_DIR/$1.ext" &&
        openssl x509 -req -in "$WH_DIR/$1.csr" -CA "$WH_DIR/ca.crt" -CAkey "$WH_DIR/ca.key" \
            -CAcreateserial -days 2 -extfile "$WH_DIR/$1.ext" -out "$WH_DIR/$1.crt" 2>/dev/null &&
        chmod 0600 "$WH_DIR/$1.key"
}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=pullgate-demo-ca \
    -keyout "$WH_DIR/ca.key" -out "$WH_DIR/ca.crt" 2>/dev/null && wh_cert apiserver && wh_cert webhook ||
    die "openssl could not make the demo's certificates"
head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$WH_DIR/token"
chmod 0600 "$WH_DIR/token"
"$PG_PY" - "$WH_DIR" "$PG_REG_HOST" "$PASS_A" "$PASS_B" <<'PY' || die "API stand-in state"
import base64, json, sys, uuid
wh, reg, pass_a, pass_b = sys.argv[1:5]
def secret(ns, user, password, email=None):
    entry = {"username": user, "password": password,
             "auth": base64.b64encode(f"{user}:{password}".encode()).decode()}
    if email:
        entry["email"] = email
    cfg = json.dumps({"auths": {reg: entry}}).encode()
    return {"kind": "Secret", "apiVersion": "v1", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": "regcred", "namespace": ns, "uid": str(uuid.uuid4())},
            "data": {".dockerconfigjson": base64.b64encode(cfg).decode()}}
objs = {}
for ns, s in (("team-a", secret("team-a", "tenant-a", pass_a, "a@team-a.example")),
              ("team-b", secret("team-b", "tenant-b", pass_b)),
              ("team-c", secret("team-c", "tenant-b", "not-the-password"))):
    objs[f"/api/v1/namespaces/{ns}/secrets/regcred"] = s
    objs[f"/api/v1/namespaces/{ns}/serviceaccounts/default"] = {
        "kind": "ServiceAccount", "apiVersion": "v1",
        "metadata": {"name": "default", "namespace": ns, "uid": str(uuid.uuid4())}}
json.dump({"tokens": [open(wh + "/token").read().strip()], "objects": objs},
          open(wh + "/state.json", "w"))
PY
WH_API_PORT="$(pg_free_port)"
"$PG_PY" "$ROOT/test/integration/webhook_apiserver.py" --port "$WH_API_PORT" --cert "$WH_DIR/apiserver.crt" \
    --key "$WH_DIR/apiserver.key" --state "$WH_DIR/state.json" --log "$WH_DIR/requests.log" \
    2>"$WH_DIR/apiserver.log" &
# shellcheck disable=SC2034 # read by the exit handler below
WH_API_PID=$!
pg_on_exit 'pg_kill_wait "$WH_API_PID" 3'
WH_PORT="$(pg_free_port)"
WH_HEALTH="127.0.0.1:$(pg_free_port)"
run_shown "pullgate-webhook --listen 127.0.0.1:$WH_PORT --health-listen $WH_HEALTH --tls-cert webhook.crt --tls-key webhook.key --hmac-key-file $KEY --api-server https://127.0.0.1:$WH_API_PORT --api-ca ca.crt --api-token-file token &"
"$PULLGATE_WEBHOOK" --listen "127.0.0.1:$WH_PORT" --health-listen "$WH_HEALTH" \
    --tls-cert "$WH_DIR/webhook.crt" --tls-key "$WH_DIR/webhook.key" --hmac-key-file "$KEY" \
    --api-server "https://127.0.0.1:$WH_API_PORT" --api-ca "$WH_DIR/ca.crt" \
    --api-token-file "$WH_DIR/token" 2>"$WH_DIR/webhook.log" &
WH_PID=$!
pg_on_exit 'pg_kill_wait "$WH_PID" 3'
for _ in $(seq 1 50); do
    curl -sf -o /dev/null "http://$WH_HEALTH/readyz" && break
    kill -0 "$WH_PID" 2>/dev/null || break
    sleep 0.1
done
curl -sf -o /dev/null "http://$WH_HEALTH/readyz" || { indent <"$WH_DIR/webhook.log"; die "pullgate-webhook did not become ready"; }
say "pullgate-webhook (pid $WH_PID) serves POST /mutate on https://127.0.0.1:$WH_PORT, keyed with the node's key"
# webhook_annotation NS: the API server's AdmissionReview for a pod of NS pulling $IMAGE with
# its pull secret 'regcred', sent with curl; prints the annotation of the returned JSON patch.
webhook_annotation() {
    local review="$WH_DIR/review-$1.json" answer="$WH_DIR/answer-$1.json"
    "$PG_PY" - "$1" "$IMAGE" >"$review" <<'PY' || return 1
import json, sys, uuid
ns, image = sys.argv[1:3]
pod = {"kind": "Pod", "apiVersion": "v1",
       "metadata": {"name": "app", "namespace": ns, "uid": str(uuid.uuid4())},
       "spec": {"containers": [{"name": "app", "image": image}],
                "imagePullSecrets": [{"name": "regcred"}], "serviceAccountName": "default"}}
print(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": str(uuid.uuid4()),
                              "kind": {"group": "", "version": "v1", "kind": "Pod"},
                              "resource": {"group": "", "version": "v1", "resource": "pods"},
                              "name": "app", "namespace": ns, "operation": "CREATE",
                              "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
                              "object": pod, "dryRun": False}}))
PY
    run_shown "curl --cacert ca.crt -H 'Content-Type: application/json' --data-binary @review-$1.json https://127.0.0.1:$WH_PORT/mutate" >&2
    curl -sS --max-time 10 --cacert "$WH_DIR/ca.crt" -H 'Content-Type: application/json' \
        --data-binary "@$review" "https://127.0.0.1:$WH_PORT/mutate" >"$answer" || return 1
    "$PG_PY" - "$answer" <<'PY'
import base64, json, sys
resp = json.load(open(sys.argv[1]))["response"]
if not resp.get("allowed") or "patch" not in resp:
    sys.exit("the webhook answered no patch: %s" % json.dumps(resp)[:300])
for op in json.loads(base64.b64decode(resp["patch"])):
    value = op.get("value")
    if op["path"] == "/metadata/annotations" and isinstance(value, dict):
        value = value.get("pullgate.dev/credentials")
    elif op["path"] != "/metadata/annotations/pullgate.dev~1credentials":
        continue
    if isinstance(value, str):
        print(value)
        sys.exit(0)
sys.exit("no credentials annotation in the patch")
PY
}

# kubelet DESC USER PASS [POLICY]: the kubelet stand-in's EnsureImageExists for $IMAGE in
# the current pod ($POD_CFG): ImageStatus with the pod's annotations, then PullImage with the
# pod's credentials only when told "not present". Sets KUBELET (its JSON) and OUTCOME.
kubelet() {
    local -a auth=()
    [[ -n "$2" ]] && auth=(--username "$2" --password-env PG_CRI_PASS)
    run_shown "kubelet: EnsureImageExists $IMAGE (${4:-IfNotPresent}) for $1"
    KUBELET="$(PG_CRI_PASS="$3" cri ensure-image --image "$IMAGE" --pod-config "$POD_CFG" \
        --policy "${4:-IfNotPresent}" "${auth[@]}")"
    OUTCOME="$("$PG_PY" -c 'import json,sys; print(json.load(sys.stdin)["outcome"])' <<<"$KUBELET")"
    "$PG_PY" -c 'import json, sys
k = json.load(sys.stdin)
print("ImageStatus (with the pod'"'"'s annotations) -> %s" % k["imageStatus"])
if k["outcome"] == "pulled": print("PullImage (the pod'"'"'s own credentials) -> %s" % k["imageRef"])
elif k["outcome"] == "ErrImagePull": print("PullImage -> ...%s" % k.get("error", "")[-120:])
elif k["outcome"] == "ErrImageNeverPull": print("imagePullPolicy Never: no pull")
print("kubelet: %s" % {"present": "image present, no pull", "pulled": "pulled",
      "ErrImagePull": "ErrImagePull: the pod does not start",
      "ErrImageNeverPull": "ErrImageNeverPull"}[k["outcome"]])' <<<"$KUBELET" | indent
}
secrets_now() { # the record's secrets for the image, one line each
    "$PULLGATECTL" --config "$CFG" show --image-ref "$REF" --json | "$PG_PY" -c 'import json, sys
for m in json.load(sys.stdin)["credentialMapping"].values():
    for s in m.get("kubernetesSecrets", []):
        print("secret %s/%s hash=%s..." % (s["namespace"], s["name"], s["credentialHash"][:12]))
    print("nodePodsAccessible:", m.get("nodePodsAccessible", False))'
}

# start_container CMD -> CID; StartContainer's output in $OUT; its status returned
start_container() {
    local name="app-$RANDOM"
    CTR_LOG="$POD_LOGDIR/$name.log"
    CID="$(cri create --pod "$POD" --pod-config "$POD_CFG" --name "$name" --image "$IMAGE" \
        --log-path "$name.log" -- /bin/sh -c "$1")" || { OUT="CreateContainer failed"; return 2; }
    OUT="$(cri start --id "$CID" 2>&1)"
}
# expect_run DESC: a container of the current pod runs and prints the image's marker.
expect_run() {
    if start_container 'cat /etc/pg-marker' && [[ "$(cri wait --id "$CID" --wait-timeout 30)" == 0 ]] &&
        pg_wait_file "$CTR_LOG" 5 && grep -q "hello from the private image" "$CTR_LOG"; then
        sed -E 's/^[^ ]+ [^ ]+ [^ ]+ //' "$CTR_LOG" | indent
        outcome_ok "$1"
    else
        printf '%s\n' "$OUT" | indent
        outcome_bad "$1: it should have run"
    fi
}
# expect_refused DESC [TEXT]: a container created in the current pod anyway is refused by the
# hook (and the denial says TEXT).
expect_refused() {
    if start_container 'echo got in'; then
        outcome_bad "$1: it should have been refused"
    elif [[ "$OUT" == *"pullgate: denied"*"${2:-}"* ]]; then
        printf '%s\n' "$OUT" | grep -o 'pullgate: denied.*' | head -n1 | fold -s -w 110 | indent
        outcome_ok "$1"
    else
        printf '%s\n' "$OUT" | indent
        outcome_bad "$1: failed, but not because of pullgate"
    fi
}

header "Tenant A: the kubelet pulls with A's secret; pullgate-cri records it"
say "tenant A's secret carries an email (kubectl create secret docker-registry --docker-email=...):"
say "the kubelet's credential hash covers it, the CRI's AuthConfig does not carry it."
say "the API server sends pullgate-webhook the AdmissionReview of tenant A's pod:"
ANN_A="$(webhook_annotation team-a)" || die "pullgate-webhook: no annotation for team-a ($(tail -c 400 "$WH_DIR/webhook.log"))"
HASH_A="$(printf %s "$PASS_A" | "$PULLGATECTL" hash --username tenant-a --password-stdin --email a@team-a.example)"
say "the annotation its JSON patch writes on tenant A's pod (pullgate.dev/credentials; the hashes are"
say "sealed under the node key, nothing in it can be checked against a guessed password):"
printf '%s\n' "$ANN_A" | fold -w 110 | indent
pg_node_run_pod team-a "$ANN_A" || { pg_node_show_log; die "RunPodSandbox (team-a)"; }
POD_A="$POD" POD_A_CFG="$POD_CFG" POD_A_LOGDIR="$POD_LOGDIR"
kubelet "tenant A's pod" tenant-a "$PASS_A"
[[ "$OUTCOME" == pulled ]] || die "tenant A's pull failed: $KUBELET"
REF="$("$PG_PY" -c 'import json,sys; print(json.load(sys.stdin)["imageRef"])' <<<"$KUBELET")"
run_shown "pullgatectl show --image-ref $REF"
SHOW="$("$PULLGATECTL" --config "$CFG" show --image-ref "$REF" --json 2>&1)"
secrets_now | indent
if [[ "$SHOW" == *"\"namespace\": \"team-a\""* && "$SHOW" == *"$HASH_A"* && "$SHOW" != *nodePodsAccessible* ]]; then
    outcome_ok "pullgate-cri recorded the pull for tenant A's secret (the kubelet's hash, with the email), not node-wide"
else
    outcome_bad "the record does not name tenant A's secret"
fi
expect_run "tenant A's container ran (allowed by pullgate-hook)"
pg_node_run_pod team-a "$ANN_A" || die "RunPodSandbox (team-a)"
kubelet "tenant A's next pod" tenant-a "$PASS_A"
[[ "$OUTCOME" == present ]] && outcome_ok "tenant A's next pod: \"present\", no pull" ||
    outcome_bad "tenant A's next pod should have heard \"present\" ($OUTCOME)"

header "Tenant B, with its own valid credentials: a verification pull (KEP-2535)"
say "the image is on the node. A kubelet without its own KEP-2535 check would hear \"present\","
say "skip the pull, and the hook would refuse B for good. pullgate-cri answers B's ImageStatus"
say "\"not present\": the kubelet pulls with B's own secret and the registry decides."
ANN_B="$(webhook_annotation team-b)" || die "pullgate-webhook: no annotation for team-b"
pg_node_run_pod team-b "$ANN_B" || die "RunPodSandbox (team-b)"
kubelet "tenant B's pod" tenant-b "$PASS_B"
if [[ "$OUTCOME" == pulled ]] && grep -q "$IMAGE" <<<"$(grep 'image not present for this pod' "$PG_CD_DIR/pullgate-cri.log")"; then
    grep 'image not present for this pod' "$PG_CD_DIR/pullgate-cri.log" | head -n1 | cut -c1-220 | indent
    outcome_ok "tenant B was told \"not present\" and pulled; the registry let it in"
else
    outcome_bad "tenant B should have been asked to pull ($OUTCOME)"
fi
secrets_now | indent
[[ "$(secrets_now | grep -c '^secret')" == 2 ]] && outcome_ok "the record keeps both tenants' secrets" ||
    outcome_bad "the record should list both tenants' secrets"
expect_run "tenant B's container ran"

header "Tenant C, with a wrong password, and a pod with no credentials: the registry refuses"
ANN_C="$(webhook_annotation team-c)" || die "pullgate-webhook: no annotation for team-c"
pg_node_run_pod team-c "$ANN_C" || die "RunPodSandbox (team-c)"
kubelet "tenant C's pod (tenant-b's name, a wrong password)" tenant-b "not-the-password"
[[ "$OUTCOME" == ErrImagePull ]] && outcome_ok "tenant C: ErrImagePull (the registry refused), nothing starts" ||
    outcome_bad "tenant C should have got ErrImagePull ($OUTCOME)"
POD_C="$POD" POD_C_CFG="$POD_CFG" POD_C_LOGDIR="$POD_LOGDIR"
pg_node_run_pod team-d "" || die "RunPodSandbox (team-d)"
kubelet "a pod with no credentials" "" ""
[[ "$OUTCOME" == ErrImagePull ]] && outcome_ok "no credentials: ErrImagePull, nothing starts" ||
    outcome_bad "the pod without credentials should have got ErrImagePull ($OUTCOME)"
[[ "$(secrets_now | grep -c '^secret')" == 2 ]] && outcome_ok "no record gained an entry" ||
    outcome_bad "a refused pull changed the record"
cri_direct image-status --image "$IMAGE" >/dev/null && outcome_ok "the image stays on the node" ||
    outcome_bad "the image left the node"

header "A container created without the kubelet's pull path"
say "someone with CRI access creates tenant C's container anyway: the hook still decides."
POD="$POD_C" POD_CFG="$POD_C_CFG" POD_LOGDIR="$POD_C_LOGDIR"
expect_refused "refused by pullgate-hook, the denial says what cures it" "cured by a pull with the pod's own credentials"
pg_node_run_pod team-b "$ANN_A" || die "RunPodSandbox (team-b, copied annotation)"
expect_refused "a team-b pod presenting tenant A's annotation (copied) is refused"

header "Never forwarded unrecorded"
say "another process holds the record store's lock (a long prune, a hung writer): pullgate-cri cannot"
say "write the pull's intent, so the pull never reaches containerd; the kubelet retries with back-off."
flock "$STATE/.pullgate.lock" sleep 4 &
LOCK_PID=$!
pg_on_exit 'pg_kill_wait "$LOCK_PID" 2'
sleep 0.3
POD="$POD_A" POD_CFG="$POD_A_CFG" POD_LOGDIR="$POD_A_LOGDIR"
export PG_CRI_PASS="$PASS_A"
run_shown "cri_client.py pull --image $IMAGE --username tenant-a ...   # the store's lock held"
if OUT="$(cri pull --image "$IMAGE" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_A_CFG" 2>&1)"; then
    outcome_bad "the pull should have been refused while its intent could not be written"
else
    printf '%s\n' "$OUT" | fold -s -w 110 | indent
    [[ "$OUT" == *"UNAVAILABLE"*"pullgate: the record store did not take the pull intent in time"* ]] &&
        outcome_ok "refused with UNAVAILABLE, never forwarded unrecorded" ||
        outcome_bad "refused, but not by pullgate-cri's rule"
fi
wait "$LOCK_PID" 2>/dev/null
run_shown "cri_client.py pull ...   # the kubelet's retry, the lock free again"
cri pull --image "$IMAGE" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_A_CFG" >/dev/null &&
    outcome_ok "the retry is recorded" || outcome_bad "the retry failed"
unset PG_CRI_PASS

header "Who decided: pullgate-cri's resident hook server"
say "the hook asked pullgate-cri (pullgate-hook-local decides only when the daemon cannot):"
grep 'msg="hook decision"' "$PG_CD_DIR/pullgate-cri.log" | cut -c1-200 | indent
if grep -q 'msg="hook decision" .*allowed="true"' "$PG_CD_DIR/pullgate-cri.log" &&
    grep -q 'msg="hook decision" .*allowed="false"' "$PG_CD_DIR/pullgate-cri.log"; then
    outcome_ok "the allow and the denials were decided by the resident pullgate-cri"
else
    outcome_bad "pullgate-cri's log shows no resident decision (the hook fell back)"
fi

header "D-Bus events seen by pullgatectl monitor"
sleep 1
pg_kill_wait "$MON_PID" 3
if [[ -s "$MON_LOG" ]]; then
    cut -c1-200 "$MON_LOG" | indent
else
    say "(no events captured)"
fi
for sig in PullIntent ImagePulled PullFailed PullRequired ContainerAllowed ContainerDenied; do
    if grep -q "$sig" "$MON_LOG"; then
        outcome_ok "D-Bus signal $sig observed"
    else
        outcome_bad "D-Bus signal $sig not observed"
    fi
done

header "What Prometheus sees: pullgate-cri's /metrics"
run_shown "curl -s http://$METRICS/metrics"
if curl -sf "http://$METRICS/metrics" >"$PG_TMPDIR/cri.metrics"; then
    grep -E '^pullgate_(build_info|cri_ondisk_|cri_pulls_recorded_total|cri_pulls_refused_total|cri_hook_decisions_total|cri_image_verifications_total)' \
        "$PG_TMPDIR/cri.metrics" | grep -v ' 0$' | indent
    grep -q '^pullgate_cri_hook_decisions_total{result="deny"' "$PG_TMPDIR/cri.metrics" &&
        grep -q '^pullgate_cri_pulls_recorded_total{credentials="secret"} [1-9]' "$PG_TMPDIR/cri.metrics" &&
        grep -q '^pullgate_cri_image_verifications_total{result="must-pull"} [1-9]' "$PG_TMPDIR/cri.metrics" &&
        outcome_ok "the metrics count the recorded pulls, the verification pulls and the denials (alerts: packaging/kubernetes/prometheus-rules.yaml)" ||
        outcome_bad "the metrics do not show the pulls and decisions above"
else
    outcome_bad "pullgate-cri does not serve /metrics on $METRICS"
fi

header "What Prometheus sees: pullgate-webhook's /metrics (its health address)"
WH_REVIEWS="$(find "$WH_DIR" -name 'answer-*.json' | wc -l)" # the reviews sent above
run_shown "curl -s http://$WH_HEALTH/metrics"
if curl -sf "http://$WH_HEALTH/metrics" >"$PG_TMPDIR/webhook.metrics"; then
    grep -E '^pullgate_(build_info|webhook_reviews_total|webhook_api_reads_total|webhook_certificate_expiry_timestamp_seconds)' \
        "$PG_TMPDIR/webhook.metrics" | grep -v ' 0$' | indent
    WH_NOT_AFTER="$(date -d "$(openssl x509 -in "$WH_DIR/webhook.crt" -noout -enddate | cut -d= -f2)" +%s)"
    say "the serving certificate's notAfter: $WH_NOT_AFTER ($(date -u -d "@$WH_NOT_AFTER" '+%F %T') UTC)"
    if grep -qx "pullgate_webhook_reviews_total{outcome=\"patched\"} $WH_REVIEWS" "$PG_TMPDIR/webhook.metrics" &&
        grep -q '^pullgate_build_info{.*component="webhook"' "$PG_TMPDIR/webhook.metrics" &&
        "$PG_PY" -c 'import sys
v = [l.split()[-1] for l in open(sys.argv[1]) if l.startswith("pullgate_webhook_certificate_expiry_timestamp_seconds")]
sys.exit(0 if v and int(float(v[0])) == int(sys.argv[2]) else 1)' "$PG_TMPDIR/webhook.metrics" "$WH_NOT_AFTER"; then
        outcome_ok "the webhook's metrics count the $WH_REVIEWS reviews it patched; its certificate's expiry is the notAfter"
    else
        outcome_bad "the webhook's metrics do not show the $WH_REVIEWS reviews (or the certificate's expiry)"
    fi
else
    outcome_bad "pullgate-webhook does not serve /metrics on $WH_HEALTH"
fi

header "pullgatectl doctor: this node's wiring, one line per check"
say "the demo's node has no kubelet: doctor reads the kubelet configuration the demo writes (both"
say "endpoints at pullgate-cri), is told the kubelet's version, and finds containerd's config,"
say "pullgate-cri (its command line) and the hook socket with its path options."
KUBELET_CFG="$PG_TMPDIR/kubelet-config.yaml"
cat >"$KUBELET_CFG" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$PG_PROXY_SOCK
imageServiceEndpoint: unix://$PG_PROXY_SOCK
YAML
indent <"$KUBELET_CFG"
# doctor finds pullgate-cri's command line (--config, --listen) among the processes; this
# machine may run other pullgate-cri (the tests), so it looks at a view of /proc holding only
# the demo's own pullgate-cri (a link to its real /proc entry).
PROC_VIEW="$PG_TMPDIR/proc-view"
mkdir -m 0700 "$PROC_VIEW" && ln -s "/proc/$PG_PROXY_PID" "$PROC_VIEW/$PG_PROXY_PID"
say "processes: $PROC_VIEW (a view of /proc with the demo's pullgate-cri, pid $PG_PROXY_PID, only)"
DOCTOR=("$PULLGATECTL" --config "$CFG" doctor --runtime containerd --containerd-config "$PG_CD_DIR/config.toml"
    --hook-socket "$PG_HOOK_SOCK" --kubelet-config "$KUBELET_CFG" --kubelet-version v1.35.0
    --proc-root "$PROC_VIEW")
run_shown "pullgatectl --config $CFG doctor --runtime containerd --containerd-config $PG_CD_DIR/config.toml --hook-socket $PG_HOOK_SOCK --kubelet-config $KUBELET_CFG --kubelet-version v1.35.0 --proc-root $PROC_VIEW"
"${DOCTOR[@]}" 2>&1 | fold -s -w 110 | indent
DOCTOR_JSON="$("${DOCTOR[@]}" --json 2>/dev/null)"
DOCTOR_RC=$?
# The one check that cannot hold here by nature: "kubelet" wants a running kubelet process.
# Every other check must hold, and "kubelet" must be a warning for that reason only (its
# configuration points at pullgate-cri): a node without a kubelet yet is not a failure, so
# doctor exits 0 and says why.
DOCTOR_VERDICT="$("$PG_PY" - "$DOCTOR_JSON" "$DOCTOR_RC" <<'PY'
import json, sys
try:
    doc = json.loads(sys.argv[1])
except ValueError:
    print("doctor printed no JSON (exit %s)" % sys.argv[2]); sys.exit()
bad = [c for c in doc["checks"] if c["level"] != "ok"]
others = [c["name"] + ": " + c["detail"] for c in bad if c["name"] != "kubelet"]
kub = [c for c in bad if c["name"] == "kubelet"]
if others:
    print("not ok: " + " | ".join(others))
elif kub and (kub[0]["level"] != "warning" or
              "points its image service at pullgate-cri, but no kubelet runs" not in kub[0]["detail"]):
    print("kubelet: %s: %s" % (kub[0]["level"], kub[0]["detail"]))
elif sys.argv[2] != "0":
    print("exit %s with no failed check" % sys.argv[2])
else:
    print("ok %d" % sum(c["level"] == "ok" for c in doc["checks"]))
PY
)"
if [[ "$DOCTOR_VERDICT" == ok* ]]; then
    say "(‼ kubelet is the demo's nature: no kubelet process runs here; its configuration points at pullgate-cri)"
    outcome_ok "pullgatectl doctor: ${DOCTOR_VERDICT#ok } checks hold, exit 0; \"a kubelet runs\" is a warning, the demo has none"
else
    outcome_bad "pullgatectl doctor: $DOCTOR_VERDICT"
fi

header "Summary"
for o in "${OUTCOMES[@]}"; do printf '   %s\n' "$o"; done
printf '\n   finished in %d s (%d s after the build); cleaning up (pods, pullgate-cri, containerd, registry, bus, temp files)\n' \
    "$((SECONDS - T_START))" "$((SECONDS - T_BUILT))"
if ((FAILED > 0)); then
    printf '   %s%d expected outcome(s) did not happen%s\n' "$R" "$FAILED" "$N"
    exit 1
fi
printf '   %sall expected outcomes happened%s\n' "$G" "$N"
exit 0
