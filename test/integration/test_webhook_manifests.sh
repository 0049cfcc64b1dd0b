#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgate-webhook's Kubernetes packaging (packaging/kubernetes/):
#   - the manifests say what docs/webhook.md promises (webhook_manifests.py);
#   - make-certs.sh: init, then a CA rotation in three steps against a running pullgate-webhook,
#     checked with curl at every step the way the API server calls it (service DNS name, the
#     caBundle of that moment): admission never loses trust, and the webhook reloads the
#     certificate without a restart;
#   - build-image.sh builds the image offline (--network none) into a private podman store, and
#     the image runs the binary (skipped without podman + runc).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib/common.sh"
KDIR=$PG_SOURCE_DIR/packaging/kubernetes
WEBHOOK=${PULLGATE_WEBHOOK:-${PG_BUILD_DIR:-}/webhook/pullgate-webhook}
[ -x "$WEBHOOK" ] || pg_skip "pullgate-webhook not built ($WEBHOOK)"
pg_require_cmd openssl python3 curl
python3 -c 'import yaml' 2>/dev/null || pg_skip "python3-yaml not installed"
WORK=$(pg_mktemp_dir manifests)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# ------------------------------------------------------------ manifests
bash "$KDIR/make-certs.sh" --dir "$WORK/certs" init >"$WORK/init.out" || pg_fail "make-certs.sh init"
if python3 "$HERE/webhook_manifests.py" "$KDIR" "$WORK/certs"; then
    pass "manifests"
else
    fail "manifests (see above)"
fi

# ------------------------------------------------------------ certificates
C=$WORK/certs
SVC=pullgate-webhook.pullgate-system.svc
[ "$(stat -c %a "$C/annotation.key")" = 600 ] && [ "$(stat -c %s "$C/annotation.key")" = 32 ] &&
    pass "HMAC key: 32 random bytes, mode 0600" || fail "HMAC key: $(stat -c '%a %s' "$C/annotation.key")"
openssl verify -CAfile "$C/ca.crt" "$C/tls.crt" >/dev/null && pass "leaf verifies against the CA" ||
    fail "leaf does not verify"
openssl x509 -in "$C/tls.crt" -noout -ext subjectAltName | grep -q "DNS:$SVC" &&
    pass "leaf names $SVC" || fail "leaf SANs: $(openssl x509 -in "$C/tls.crt" -noout -ext subjectAltName)"

# The webhook serves copies of the Secret's files, replaced the way the kubelet updates a volume.
mkdir -p "$WORK/tls"
publish() { # replace the served pair atomically (key first, as a volume swap makes both appear)
    cp "$C/tls.key" "$WORK/tls/tls.key.new" && chmod 0600 "$WORK/tls/tls.key.new"
    cp "$C/tls.crt" "$WORK/tls/tls.crt.new"
    mv -f "$WORK/tls/tls.key.new" "$WORK/tls/tls.key"
    mv -f "$WORK/tls/tls.crt.new" "$WORK/tls/tls.crt"
}
publish
echo token >"$WORK/token"
PORT=$(pg_free_port)
"$WEBHOOK" --listen "127.0.0.1:$PORT" --tls-cert "$WORK/tls/tls.crt" --tls-key "$WORK/tls/tls.key" \
    --api-server https://127.0.0.1:1 --api-ca "$C/ca.crt" --api-token-file "$WORK/token" \
    --hmac-key-file "$C/annotation.key" 2>"$WORK/webhook.log" &
WH_PID=$!
pg_on_exit "kill $WH_PID"
pg_wait_port "$PORT" 10 || pg_fail "webhook did not start: $(cat "$WORK/webhook.log")"

call() { # CA_FILE: GET /healthz as the API server would (service name, given CA bundle)
    curl -sS --max-time 5 --cacert "$1" --resolve "$SVC:$PORT:127.0.0.1" "https://$SVC:$PORT/healthz" \
        >/dev/null 2>"$WORK/curl.err"
}
served_issuer() {
    openssl s_client -connect "127.0.0.1:$PORT" -servername "$SVC" </dev/null 2>/dev/null |
        openssl x509 -noout -issuer
}
wait_issuer() { # EXPECTED_ISSUER_LINE
    local i
    for i in $(seq 1 50); do
        [ "$(served_issuer)" = "$1" ] && return 0
        sleep 0.2
    done
    return 1
}
bundle_of() { # mutatingwebhook.yaml -> PEM bundle file
    python3 -c 'import base64,sys,yaml
d=yaml.safe_load(open(sys.argv[1]))
sys.stdout.write(base64.b64decode(d["webhooks"][0]["clientConfig"]["caBundle"]).decode())' "$1" >"$2"
}
bundle_of "$C/mutatingwebhook.yaml" "$WORK/bundle0.pem"
call "$WORK/bundle0.pem" && pass "init: the caBundle trusts the served certificate" ||
    fail "init: $(cat "$WORK/curl.err")"
OLD_ISSUER=$(openssl x509 -in "$C/ca.crt" -noout -subject | sed 's/^subject/issuer/')
cp "$C/ca.crt" "$WORK/old-ca.pem"

sleep 1.1 # CA names carry the time to the second
bash "$KDIR/make-certs.sh" --dir "$C" rotate-ca >/dev/null
bundle_of "$C/mutatingwebhook.yaml" "$WORK/bundle1.pem"
[ "$(grep -c 'BEGIN CERTIFICATE' "$WORK/bundle1.pem")" = 2 ] && pass "rotate-ca: caBundle holds old + new CA" ||
    fail "rotate-ca: bundle has $(grep -c 'BEGIN CERTIFICATE' "$WORK/bundle1.pem") certificates"
call "$WORK/bundle1.pem" && pass "rotate-ca: old certificate still trusted" ||
    fail "rotate-ca: $(cat "$WORK/curl.err")"

bash "$KDIR/make-certs.sh" --dir "$C" issue-next >/dev/null
NEW_ISSUER=$(openssl x509 -in "$C/ca-next.crt" -noout -subject | sed 's/^subject/issuer/')
publish
wait_issuer "$NEW_ISSUER" && pass "issue-next: the webhook serves the new certificate without a restart" ||
    fail "issue-next: still served: $(served_issuer) (want $NEW_ISSUER)"
call "$WORK/bundle1.pem" && pass "issue-next: trusted by the old+new caBundle" ||
    fail "issue-next: $(cat "$WORK/curl.err")"
if call "$WORK/old-ca.pem"; then fail "the new certificate verified against the old CA alone"; else
    pass "the new certificate is not trusted by the old CA alone (the rotation is real)"; fi

bash "$KDIR/make-certs.sh" --dir "$C" finish-ca >/dev/null
bundle_of "$C/mutatingwebhook.yaml" "$WORK/bundle2.pem"
[ "$(grep -c 'BEGIN CERTIFICATE' "$WORK/bundle2.pem")" = 1 ] && call "$WORK/bundle2.pem" &&
    pass "finish-ca: the new CA alone trusts the served certificate" ||
    fail "finish-ca: $(cat "$WORK/curl.err")"
[ "$OLD_ISSUER" != "$NEW_ISSUER" ] || fail "CA names did not change"
grep -q '"msg":"serving certificate reloaded"' "$WORK/webhook.log" && pass "reload logged" ||
    fail "no reload in the log: $(cat "$WORK/webhook.log")"
kill -0 "$WH_PID" && pass "webhook still running (no restart)" || fail "webhook died"

# ------------------------------------------------------------ client certificates
# A webhook with --client-ca-file as webhook.yaml documents it, called the way kube-apiserver
# calls it with the kubeconfig make-certs.sh wrote, and without.
CC_PORT=$(pg_free_port)
"$WEBHOOK" --listen "127.0.0.1:$CC_PORT" --tls-cert "$C/tls.crt" --tls-key "$C/tls.key" \
    --api-server https://127.0.0.1:1 --api-ca "$C/ca.crt" --api-token-file "$WORK/token" \
    --hmac-key-file "$C/annotation.key" --client-ca-file "$C/client-ca.crt" 2>"$WORK/cc.log" &
pg_on_exit "kill $!"
pg_wait_port "$CC_PORT" 10 || pg_fail "webhook with client CA did not start: $(cat "$WORK/cc.log")"
python3 - "$C/webhook-client.kubeconfig" "$WORK" <<'EOF'
import base64, sys, yaml
u = yaml.safe_load(open(sys.argv[1]))["users"][0]["user"]
for field, name in (("client-certificate-data", "kc.crt"), ("client-key-data", "kc.key")):
    with open(f"{sys.argv[2]}/{name}", "wb") as f:
        f.write(base64.b64decode(u[field]))
EOF
cc_call() { # curl options...: GET /healthz on the client-certificate webhook
    curl -sS --max-time 5 --cacert "$C/ca.crt" --resolve "$SVC:$CC_PORT:127.0.0.1" "$@" \
        "https://$SVC:$CC_PORT/healthz" 2>"$WORK/curl.err"
}
[ "$(cc_call --cert "$WORK/kc.crt" --key "$WORK/kc.key")" = ok ] &&
    pass "client CA: the kubeconfig's certificate is accepted" || fail "$(cat "$WORK/curl.err")"
if cc_call >/dev/null; then fail "client CA: a caller without a certificate was served"; else
    pass "client CA: a caller without a certificate is refused at TLS"; fi

# ------------------------------------------------------------ image (offline)
if command -v podman >/dev/null && command -v runc >/dev/null && [ "$(id -u)" = 0 ]; then
    export CONTAINERS_STORAGE_CONF=$WORK/storage.conf
    mkdir -p "$WORK/storage" "$WORK/runroot"
    printf '[storage]\ndriver = "vfs"\ngraphroot = "%s"\nrunroot = "%s"\n' "$WORK/storage" \
        "$WORK/runroot" >"$CONTAINERS_STORAGE_CONF"
    TAG=localhost/pullgate-webhook-test:$$
    if timeout 300 bash "$KDIR/build-image.sh" "$WEBHOOK" "$TAG" >"$WORK/build.log" 2>&1; then
        pass "build-image.sh: image built with --network none"
        out=$(timeout 60 podman run --rm --network none --ulimit nofile=1024:1024 \
            --ulimit nproc=1024:1024 --runtime runc --cgroup-manager cgroupfs \
            --events-backend file "$TAG" --version 2>&1) || true
        if [[ "$out" == "pullgate-webhook "* ]]; then
            pass "the image runs pullgate-webhook: $out"
            # Serve TLS from the image (GnuTLS and libcurl without a base image), as uid 65532.
            mkdir -p "$WORK/ctr"
            cp "$C/tls.crt" "$C/tls.key" "$WORK/token" "$WORK/ctr/"
            chown 65532:65532 "$WORK/ctr/tls.key" && chmod 0600 "$WORK/ctr/tls.key"
            chmod 0644 "$WORK/ctr/token" "$WORK/ctr/tls.crt" && chmod 0755 "$WORK/ctr"
            CPORT=$(pg_free_port)
            podman run -d --name "pg-wh-$$" --network host --ulimit nofile=1024:1024 \
                --ulimit nproc=1024:1024 --runtime runc --cgroup-manager cgroupfs \
                --events-backend file -v "$WORK/ctr:/certs:ro" "$TAG" --listen "127.0.0.1:$CPORT" \
                --tls-cert /certs/tls.crt --tls-key /certs/tls.key --api-server https://127.0.0.1:1 \
                --api-ca /certs/tls.crt --api-token-file /certs/token --unkeyed-annotations \
                >/dev/null
            pg_on_exit "podman rm -f pg-wh-$$"
            if pg_wait_port "$CPORT" 10 && curl -sS --max-time 5 --cacert "$C/ca.crt" \
                --resolve "$SVC:$CPORT:127.0.0.1" "https://$SVC:$CPORT/healthz" | grep -qx ok; then
                pass "the container serves HTTPS as uid 65532"
            else
                fail "the container does not serve: $(podman logs "pg-wh-$$" 2>&1 | tail -3)"
            fi
            podman rm -f "pg-wh-$$" >/dev/null 2>&1 || true
        else
            echo "note: podman cannot run containers here ($out); image built but not run"
        fi
        user=$(podman image inspect --format '{{.Config.User}}' "$TAG")
        [ "$user" = 65532:65532 ] && pass "image user 65532 (runAsNonRoot)" || fail "image user $user"
        podman rmi -f "$TAG" >/dev/null 2>&1 || true
    else
        fail "build-image.sh: $(tail -5 "$WORK/build.log")"
    fi
else
    echo "note: podman/runc/root unavailable: image build not tested"
fi

[ "$failures" -eq 0 ] || { echo "test_webhook_manifests: $failures failure(s)"; exit 1; }
echo "test_webhook_manifests: passed"
