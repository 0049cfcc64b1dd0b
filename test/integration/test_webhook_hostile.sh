#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgate-webhook against callers and objects that try to turn it against the cluster
# (webhook_hostile.py, issue 19), with the TLS API stand-in (webhook_apiserver.py) on loopback:
#   - who may ask: client certificates checked at TLS, the key required unless opted out;
#   - never fail open: NUL, reviews escaped past 4 MiB, over the 28 MiB bound, nested past
#     jansson's depth, a structure that would blow the memory budget: HTTP 200 refusals with
#     the uid (or patched), never 400/413;
#   - the API server always gets in (issue 28): while five other addresses keep every slot
#     full (reopened as they are shut) and a caller on its own address holds handshakes it
#     never finishes, its reviews are answered within timeoutSeconds, by client certificate
#     and by --api-server-cidr; without certificates, held requests cannot take its reserve;
#   - bounded: 300 idle sockets from 127.0.0.1 while 127.0.0.2 is served, 16 secrets x 128
#     images and the maximum within timeoutSeconds, no work or thread left after the answer,
#     SIGTERM in under 2 s, the worst legal reviews at full concurrency inside the
#     Deployment's memory limit (VmHWM), 1,000 reviews of 64 secrets back to the idle
#     descriptor count;
#   - secrets: a broken dockerconfig leaves no byte in the refusal or the log, a scan of the
#     process memory after reviews finds no password, auth or dockerconfig; identity-token-only
#     and {} entries present nothing;
#   - the annotation reveals nothing checkable offline, is refused in another namespace by
#     pullgatectl verify, survives neither pods/status nor pods/binding, and the key reloads.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib/common.sh"

: "${PULLGATECTL:?PULLGATECTL must name the pullgatectl binary}"
WEBHOOK=${PULLGATE_WEBHOOK:-${PG_BUILD_DIR:-}/webhook/pullgate-webhook}
[ -x "$WEBHOOK" ] || pg_skip "pullgate-webhook not built ($WEBHOOK)"
pg_require_cmd openssl python3
# The memory scan reads /proc/PID/mem of the webhook; the verify part needs root-owned files.
[ "$(id -u)" -eq 0 ] || pg_skip "reading the webhook's memory and the node-side check need root"
python3 -c 'import cryptography.hazmat.primitives.ciphers.aead' 2>/dev/null ||
    pg_skip "python3-cryptography not installed"
python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.2", 0))' 2>/dev/null ||
    pg_skip "no 127.0.0.2 on this machine's loopback"

WORK=$(pg_mktemp_dir webhook-hostile)
cd "$WORK"

make_ca() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=$1" -keyout "$1.key" -out "$1.crt" 2>/dev/null
}
make_leaf() { # NAME CA USAGE
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
        -keyout "$1.key" -out "$1.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=%s\n' "$3" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 2 \
        -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    chmod 0600 "$1.key"
}
make_ca api-ca
make_leaf apiserver api-ca serverAuth
make_ca serving-ca
make_leaf serving serving-ca serverAuth
make_ca client-ca
make_ca other-ca
make_leaf kube-apiserver client-ca clientAuth  # what the AdmissionConfiguration presents
make_leaf impostor other-ca clientAuth         # a certificate from another CA
make_leaf server-only client-ca serverAuth     # the right CA, not for client authentication
head -c 32 /dev/urandom >hmac.key
chmod 0400 hmac.key
echo '{}' >state.json
: >requests.log

API_PORT=$(pg_free_port)
# Two processes on the port (its own process group, ended together): 65,000 GETs in one case.
setsid python3 "$HERE/webhook_apiserver.py" --port "$API_PORT" --cert apiserver.crt \
    --key apiserver.key --state "$WORK/state.json" --log "$WORK/requests.log" --workers 2 \
    2>apiserver.err &
API_PID=$!
pg_on_exit "kill -- -$API_PID"
pg_wait_port "$API_PORT" 10 || pg_fail "API stand-in did not start: $(cat apiserver.err)"

HOOK_CONFIG=$WORK/node-config.json
printf '{"hmacKeyFile":"%s"}\n' "$WORK/hmac.key" >"$HOOK_CONFIG"
chmod 0600 "$HOOK_CONFIG"

rc=0
WH_BIN=$WEBHOOK WH_WORK=$WORK WH_API="https://127.0.0.1:$API_PORT" WH_API_PID=$API_PID \
    WH_MANIFEST=$PG_SOURCE_DIR/packaging/kubernetes/webhook.yaml \
    WH_CTL=$PULLGATECTL WH_NODE_CONFIG=$HOOK_CONFIG \
    timeout 300 python3 "$HERE/webhook_hostile.py" "$@" || rc=$?
[ "$rc" -eq 0 ] || pg_fail "webhook_hostile.py: exit $rc"
echo "test_webhook_hostile: passed"
