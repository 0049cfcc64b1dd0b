#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# /metrics as an operator's Prometheus sees it (docs/metrics.md): a real Prometheus (Debian's
# `prometheus`, scrape_interval 1s, temp config and data dir on 127.0.0.1) scrapes
# pullgate-webhook's health address while reviews run against the Kubernetes API stand-in;
# queried through Prometheus' HTTP API, the counters move as the flow says:
#   - a review that patches a pod, one refused because the API answers 500 (reviews by
#     outcome, refusals by reason, API reads by result, API read errors by kind), the
#     serving certificate's expiry equal to its notAfter, build info;
#   - connections over --max-connections-per-peer are refused and counted;
#   - /metrics is served on the health address only, never on the admission port;
#   - `promtool check metrics` accepts what each daemon serves.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib/common.sh"

WEBHOOK=${PULLGATE_WEBHOOK:-${PG_BUILD_DIR:-}/webhook/pullgate-webhook}
[ -x "$WEBHOOK" ] || pg_skip "pullgate-webhook not built ($WEBHOOK)"
pg_require_cmd openssl python3 curl prometheus promtool

WORK=$(pg_mktemp_dir metrics)
# shellcheck source=lib/hardening.sh
. "$HERE/lib/hardening.sh"
cd "$WORK"

# ------------------------------------------------------------ helpers
# prom_query EXPR: the first sample's value, or "none".
prom_query() {
    curl -sf --get --data-urlencode "query=$1" "http://127.0.0.1:$PROM_PORT/api/v1/query" |
        python3 -c 'import json,sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "none")'
}
# prom_expect DESC EXPR VALUE: Prometheus answers VALUE for EXPR within 20 s (scrapes every 1 s).
prom_expect() {
    local got="" i
    for ((i = 0; i < 80; i++)); do
        got=$(prom_query "$2" || echo "error")
        [ "$got" = "$3" ] && { pass "$1 ($2 = $3)"; return 0; }
        sleep 0.25
    done
    fail "$1: $2 is $got, expected $3"
}

# ------------------------------------------------------------ the webhook and its API
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=ca \
    -keyout ca.key -out ca.crt 2>/dev/null
leaf() { # NAME DAYS
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
        -keyout "$1.key" -out "$1.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$2" \
        -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    chmod 0600 "$1.key"
}
leaf apiserver 2
leaf serving 9 # expires within the alert's 14 days
head -c 32 /dev/urandom >hmac.key
chmod 0400 hmac.key
printf '{"hmacKeyFile":"%s"}\n' "$WORK/hmac.key" >webhook-config.json
echo "token-$$" >token
python3 - "$WORK" <<'PY'
import base64, json, sys
def path(ns, res, name): return f"/api/v1/namespaces/{ns}/{res}/{name}"
auth = base64.b64encode(b"alice:s3cret").decode()
cfg = base64.b64encode(json.dumps({"auths": {"registry.example.com": {"auth": auth}}}).encode()).decode()
objs = {
    path("team-a", "secrets", "regcred"): {
        "kind": "Secret", "apiVersion": "v1", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "regcred", "namespace": "team-a", "uid": "uid-regcred"},
        "data": {".dockerconfigjson": cfg}},
    path("team-a", "serviceaccounts", "default"): {
        "kind": "ServiceAccount", "apiVersion": "v1",
        "metadata": {"name": "default", "namespace": "team-a", "uid": "uid-sa"}},
}
state = {"tokens": [open(sys.argv[1] + "/token").read().strip()], "objects": objs,
         "fail": {path("team-a", "secrets", "broken500"): 500}}
json.dump(state, open(sys.argv[1] + "/state.json", "w"))
PY
: >requests.log
API_PORT=$(pg_free_port)
python3 "$HERE/webhook_apiserver.py" --port "$API_PORT" --cert apiserver.crt --key apiserver.key \
    --state "$WORK/state.json" --log "$WORK/requests.log" 2>apiserver.err &
pg_on_exit "kill $!"
pg_wait_port "$API_PORT" 10 || pg_fail "API stand-in did not start: $(cat apiserver.err)"

WH_PORT=$(pg_free_port)
WH_HEALTH=$(pg_free_port)
"$WEBHOOK" --listen "127.0.0.1:$WH_PORT" --health-listen "127.0.0.1:$WH_HEALTH" \
    --config webhook-config.json --tls-cert serving.crt --tls-key serving.key \
    --max-connections-per-peer 3 --api-server "https://127.0.0.1:$API_PORT" --api-ca ca.crt \
    --api-token-file "$WORK/token" 2>webhook.log &
WH_PID=$!
pg_on_exit "kill $WH_PID 2>/dev/null"
pg_wait_port "$WH_PORT" 10 || pg_fail "webhook did not start: $(cat webhook.log)"
pg_wait_port "$WH_HEALTH" 10 || pg_fail "webhook health address did not start: $(cat webhook.log)"

# ------------------------------------------------------------ Prometheus
PROM_PORT=$(pg_free_port)
cat >prometheus.yml <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: pullgate-webhook
    static_configs:
      - targets: ["127.0.0.1:$WH_HEALTH"]
YML
promtool check config prometheus.yml >/dev/null || pg_fail "promtool rejects the test's config"
prometheus --config.file=prometheus.yml --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn 2>prometheus.log &
PROM_PID=$!
pg_on_exit "kill $PROM_PID 2>/dev/null"
pg_wait_port "$PROM_PORT" 20 || pg_fail "prometheus did not start: $(tail -5 prometheus.log)"

# ------------------------------------------------------------ the webhook's flow
prom_expect "Prometheus scrapes the webhook" 'up{job="pullgate-webhook"}' 1
prom_expect "build info" 'pullgate_build_info{component="webhook"}' 1
prom_expect "no review yet" 'sum(pullgate_webhook_reviews_total)' 0

out=$(python3 "$HERE/metrics_reviews.py" review "https://127.0.0.1:$WH_PORT" ca.crt team-a regcred)
[ "$out" = patched ] && pass "a review patches the pod" || fail "review: $out"
prom_expect "one review patched" 'pullgate_webhook_reviews_total{outcome="patched"}' 1
prom_expect "its secret read from the API" \
    'pullgate_webhook_api_reads_total{resource="secrets",result="found"}' 1
prom_expect "its latency observed" 'pullgate_webhook_review_duration_seconds_count{outcome="patched"}' 1

out=$(python3 "$HERE/metrics_reviews.py" review "https://127.0.0.1:$WH_PORT" ca.crt team-a broken500)
[[ $out == refused:* ]] && pass "a review refused (API 500): ${out#refused:}" || fail "review: $out"
prom_expect "one review refused" 'pullgate_webhook_reviews_total{outcome="refused"}' 1
prom_expect "refused for a server error" 'pullgate_webhook_refusals_total{reason="server-error"}' 1
prom_expect "one API read error, an HTTP error" \
    'pullgate_webhook_api_read_errors_total{kind="http-error"}' 1
prom_expect "the failed read counted as failed" \
    'pullgate_webhook_api_reads_total{resource="secrets",result="failed"}' 1
prom_expect "nothing else counted" 'sum(pullgate_webhook_reviews_total)' 2

NOT_AFTER=$(date -d "$(openssl x509 -in serving.crt -noout -enddate | cut -d= -f2)" +%s)
prom_expect "certificate expiry = the serving certificate's notAfter" \
    'pullgate_webhook_certificate_expiry_timestamp_seconds' "$NOT_AFTER"
prom_expect "expires within 14 days: the alert's expression holds" \
    'count(pullgate_webhook_certificate_expiry_timestamp_seconds - time() < 14 * 86400)' 1

# Three connections held open from 127.0.0.1 reach the bound; the fourth is refused.
python3 "$HERE/metrics_reviews.py" hold "https://127.0.0.1:$WH_PORT" 3 4 >hold.out &
HOLD=$!
pg_wait_grep hold.out held 30 || fail "the three connections were not opened"
out=$(python3 "$HERE/metrics_reviews.py" review "https://127.0.0.1:$WH_PORT" ca.crt team-a regcred 2>&1) &&
    fail "a fourth connection from the same address was served: $out" ||
    pass "a fourth connection from the same address is refused"
wait "$HOLD" || true
prom_expect "the refusal counted per peer" \
    'pullgate_webhook_connections_refused_total{reason="per-peer"} >= bool 1' 1

# /metrics on the health address only.
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert ca.crt "https://127.0.0.1:$WH_PORT/metrics")
[ "$code" = 404 ] && pass "no /metrics on the admission port (HTTP $code)" ||
    fail "/metrics on the admission port answered HTTP $code"
curl -sf "http://127.0.0.1:$WH_HEALTH/metrics" >webhook.metrics
promtool check metrics <webhook.metrics && pass "promtool check metrics: pullgate-webhook" ||
    fail "promtool rejects pullgate-webhook's metrics: $(promtool check metrics <webhook.metrics 2>&1 | head -5)"
grep -q 's3cret\|alice' webhook.metrics && fail "credential material in /metrics" ||
    pass "no credential material in /metrics"

finish test_metrics
