#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgate-webhook against a Kubernetes API server stand-in (webhook_apiserver.py: TLS with a test
# CA, bearer token, Secret/ServiceAccount/Status shaped like the real API) on 127.0.0.1.
#   - webhook_cases.py: the admission cases (pull secrets, service account, init/regular/ephemeral
#     containers, forged annotation, no annotations, Opaque/missing secrets, namespace isolation,
#     UPDATE, HMAC, API 500/401/unreachable, malformed reviews, token and certificate rotation);
#   - end to end: the webhook's annotation for a team-a pod allows team-a's recorded pull through
#     `pullgatectl verify` and pullgate-hook, and is refused when copied into team-b (HMAC on);
#   - SIGTERM: each instance stops cleanly (exit 0).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib/common.sh"

: "${PULLGATECTL:?PULLGATECTL must name the pullgatectl binary}"
: "${PULLGATE_HOOK:?PULLGATE_HOOK must name the pullgate-hook binary}"
WEBHOOK=${PULLGATE_WEBHOOK:-${PG_BUILD_DIR:-}/webhook/pullgate-webhook}
[ -x "$WEBHOOK" ] || pg_skip "pullgate-webhook not built ($WEBHOOK)"
pg_require_cmd openssl python3
# The end-to-end part runs the hook with root-owned records and key, as on a node.
[ "$(id -u)" -eq 0 ] || pg_skip "the HMAC key and the records must be root-owned as on a node"

VECTORS=${PG_TESTDATA:-$PG_SOURCE_DIR/test/data}/credential-hash-vectors.json
[ -f "$VECTORS" ] || VECTORS=$PG_SOURCE_DIR/test/data/credential-hash-vectors.json

WORK=$(pg_mktemp_dir webhook)
# shellcheck source=lib/hardening.sh
. "$HERE/lib/hardening.sh"
cd "$WORK"

# ------------------------------------------------------------ certificates
# make_ca NAME; make_leaf NAME CA: test CAs and loopback serving certificates.
make_ca() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=$1" -keyout "$1.key" -out "$1.crt" 2>/dev/null
}
make_leaf() {
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
        -keyout "$1.key" -out "$1.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 2 \
        -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    chmod 0600 "$1.key"
}
make_ca api-ca
make_leaf apiserver api-ca
make_ca serving-ca1
make_ca serving-ca2
make_leaf serving1 serving-ca1
make_leaf serving2 serving-ca2
make_leaf plain serving-ca1
cat serving-ca1.crt serving-ca2.crt >serving-ca12.crt # caBundle during a CA rotation

head -c 32 /dev/urandom >hmac.key
chmod 0400 hmac.key
printf '{"hmacKeyFile":"%s"}\n' "$WORK/hmac.key" >webhook-config.json
echo '{}' >state.json
: >requests.log

# ------------------------------------------------------------ processes
API_PORT=$(pg_free_port)
python3 "$HERE/webhook_apiserver.py" --port "$API_PORT" --cert apiserver.crt --key apiserver.key \
    --state "$WORK/state.json" --log "$WORK/requests.log" 2>apiserver.err &
API_PID=$!
pg_on_exit "kill $API_PID"
pg_wait_port "$API_PORT" 10 || pg_fail "API stand-in did not start: $(cat apiserver.err)"

DOWN_PORT=$(pg_free_port) # nothing listens there
API=(--api-server "https://127.0.0.1:$API_PORT" --api-ca api-ca.crt --api-token-file "$WORK/token")
# start_webhook NAME PORT ARGS...: background instance, stderr in NAME.log
start_webhook() {
    local name=$1 port=$2
    shift 2
    "$WEBHOOK" --listen "127.0.0.1:$port" "$@" 2>"$name.log" &
    eval "${name}_PID=$!"
    pg_on_exit "kill $! 2>/dev/null"
    pg_wait_port "$port" 10 || pg_fail "webhook $name did not start: $(cat "$name.log")"
}
SIGNED_PORT=$(pg_free_port)
start_webhook signed "$SIGNED_PORT" --config webhook-config.json --tls-cert "$WORK/serving1.crt" \
    --tls-key "$WORK/serving1.key" "${API[@]}"
PLAIN_PORT=$(pg_free_port)
start_webhook plain "$PLAIN_PORT" --unkeyed-annotations --tls-cert plain.crt --tls-key plain.key "${API[@]}"
DOWN_PORT_WH=$(pg_free_port)
start_webhook down "$DOWN_PORT_WH" --unkeyed-annotations --tls-cert plain.crt --tls-key plain.key \
    --api-server "https://127.0.0.1:$DOWN_PORT" --api-ca api-ca.crt --api-token-file "$WORK/token"

# ------------------------------------------------------------ admission cases
mkdir -p out
rc=0
WH_SIGNED=https://127.0.0.1:$SIGNED_PORT WH_PLAIN=https://127.0.0.1:$PLAIN_PORT \
    WH_DOWN=https://127.0.0.1:$DOWN_PORT_WH WH_CA1=serving-ca1.crt WH_CA12=serving-ca12.crt \
    WH_STATE=$WORK/state.json WH_REQUESTS=$WORK/requests.log WH_VECTORS=$VECTORS \
    WH_KEY=$WORK/hmac.key WH_TOKEN=$WORK/token WH_CERT=$WORK/serving1.crt \
    WH_CERT_KEY=$WORK/serving1.key WH_CERT2=serving2.crt WH_CERT2_KEY=serving2.key WH_OUT=out \
    timeout 120 python3 "$HERE/webhook_cases.py" || rc=$?
[ "$rc" -eq 0 ] || fail "webhook_cases.py: exit $rc"

# Secret material never reaches the logs.
for v in s3cret hunter2 "$(base64 -w0 <<<'alice:s3cret')"; do
    if grep -qF -- "$v" signed.log plain.log down.log; then fail "a password reached the logs"; fi
done
grep -q '"outcome":"patched"' signed.log && pass "structured review log lines" ||
    fail "no review log line: $(head -c 600 signed.log)"

# ------------------------------------------------------------ end to end (HMAC on)
ANNOTATION_VALUE=$(cat out/annotation-team-a.json 2>/dev/null || true)
[ -n "$ANNOTATION_VALUE" ] || pg_fail "no annotation from the cases"
HASH_PLAIN=$(python3 -c 'import json,sys; print([v for v in json.load(open(sys.argv[1]))
    if v["name"] == "plain"][0]["credentialHash"])' "$VECTORS")
STATE=$WORK/state-dir
CONFIG=$WORK/hook-config.json
hook_config "$CONFIG" "$STATE" "\"hmacKeyFile\":\"$WORK/hmac.key\""
CTL=("$PULLGATECTL" --dbus none --config "$CONFIG")
IMAGE=registry.example.com/team-a/app:1.0
REF=sha256:$(printf '7%.0s' $(seq 64))
run_status 0 "record team-a's pull" -- "${CTL[@]}" record-pulled --image "$IMAGE" \
    --image-ref "$REF" --secret "team-a/regcred/uid-regcred:$HASH_PLAIN"
run_status 0 "verify: webhook annotation in team-a" -- "${CTL[@]}" verify --image "$IMAGE" \
    --image-ref "$REF" --namespace team-a --credentials "$ANNOTATION_VALUE" &&
    pass "verify allows team-a with the webhook's annotation"
run_status 1 "verify: the same annotation in team-b" -- "${CTL[@]}" verify --json \
    --image "$IMAGE" --image-ref "$REF" --namespace team-b --credentials "$ANNOTATION_VALUE" &&
    pass "verify refuses the copy in team-b: $OUT"
REPLAYED=${ANNOTATION_VALUE//\"team-a\"/\"team-b\"}
run_status 1 "verify: replayed into team-b, namespaces rewritten" -- "${CTL[@]}" verify --json \
    --image "$IMAGE" --image-ref "$REF" --namespace team-b --credentials "$REPLAYED" &&
    { grep -q annotation-signature <<<"$OUT" && pass "replay refused by the MAC" ||
        fail "replay refused for another reason: $OUT"; }
for ns in team-a team-b; do
    bundle=$WORK/bundle-$ns
    creds=$ANNOTATION_VALUE
    [ "$ns" = team-a ] || creds=$REPLAYED
    crio_bundle "$bundle" "$ns" "$IMAGE" "${REF#sha256:}" "$creds"
    run_hook "$CONFIG" "$bundle" "ctr-$ns"
    if [ "$ns" = team-a ]; then
        [ "$STATUS" -eq 0 ] && pass "hook allows team-a" || fail "hook denied team-a: $ERR"
    else
        [ "$STATUS" -ne 0 ] && pass "hook refuses team-b: $ERR" || fail "hook allowed team-b"
    fi
done

# ------------------------------------------------------------ graceful stop
for name in signed plain down; do
    pid_var=${name}_PID
    kill -TERM "${!pid_var}"
    rc=0
    wait "${!pid_var}" || rc=$?
    [ "$rc" -eq 0 ] && grep -q '"msg":"stopped"' "$name.log" && pass "$name: SIGTERM, exit 0" ||
        fail "$name: exit $rc after SIGTERM: $(tail -3 "$name.log")"
done

finish test_webhook
