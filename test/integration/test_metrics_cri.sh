#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Both daemons' /metrics as an operator's Prometheus sees them (docs/metrics.md): a real Prometheus
# (Debian's `prometheus`, scrape_interval 1s, temp config and data dir on 127.0.0.1) scrapes
# pullgate-cri's criMetricsListen and pullgate-webhook's health address while the whole flow runs:
# the webhook (keyed, against the Kubernetes API stand-in holding team-a's pull secret) writes the
# pod's annotation; containerd + registry (lib/cri_node.sh: containerd 1.6, pullgate-hook in its
# base spec asking pullgate-cri's hook server, a registry with htpasswd auth, the Python CRI client
# as the kubelet) pull and start containers. Queried through Prometheus' HTTP API, the counters
# move as the flow says: a review, a pull recorded with the secret the annotation presents, a pull
# refused (unusable credentials, never forwarded), an allowed and a denied container on the
# resident hook path, CRI calls by method and code, the records on disk; `promtool check metrics`
# accepts what both serve. (test_metrics.sh covers the webhook's own counters in detail.)
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/registry.sh
source "$HERE/lib/registry.sh"
# shellcheck source=lib/podman.sh
source "$HERE/lib/podman.sh" # pg_write_config, pg_cred_hash
# shellcheck source=lib/cri_node.sh
source "$HERE/lib/cri_node.sh"

T0=$SECONDS
: "${PULLGATE_CRI:=${PG_BUILD_DIR:-}/cri/pullgate-cri}"
[[ -x "$PULLGATE_CRI" ]] || pg_skip "pullgate-cri not built ($PULLGATE_CRI)"
WEBHOOK=${PULLGATE_WEBHOOK:-${PG_BUILD_DIR:-}/webhook/pullgate-webhook}
[[ -x "$WEBHOOK" ]] || pg_skip "pullgate-webhook not built ($WEBHOOK)"
pg_node_require
pg_require_pullgate
pg_require_cmd prometheus promtool curl openssl

# prom_expect DESC EXPR VALUE: Prometheus answers VALUE for EXPR within 20 s (scrapes every 1 s).
prom_expect() {
    local got="" i
    for ((i = 0; i < 80; i++)); do
        got="$(curl -sf --get --data-urlencode "query=$2" "http://127.0.0.1:$PROM_PORT/api/v1/query" |
            "$PG_PY" -c 'import json,sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "none")' 2>/dev/null || echo error)"
        [[ "$got" == "$3" ]] && { pg_check_ok "$1 ($2 = $3)"; return 0; }
        sleep 0.25
    done
    pg_check_fail "$1: $2 is $got, expected $3"
}

pg_section "registry, node (containerd + hook + pullgate-cri with criMetricsListen), Prometheus"
PASS_A="tenant-a-pw-$RANDOM$RANDOM"
pg_registry_start tenant-a "$PASS_A"
LAYOUT="$(pg_mktemp_dir oci-layout)/layout"
pg_image_build "$LAYOUT" app "app-marker"
pg_image_push "$LAYOUT" app team-a/app:1.0
IMG_APP="$PG_REG_HOST/team-a/app:1.0"

pg_node_dbus_start
STATE="$(pg_mktemp_dir state)"
chmod 0700 "$STATE"
CFG="$(pg_mktemp_dir cfg)/pullgate.json"
KEY="$(pg_mktemp_dir key)/hmac.key" # the annotation key, shared by the webhook and the node
head -c 32 /dev/urandom >"$KEY"
chmod 0400 "$KEY"
CRI_METRICS="$(pg_free_port)"
pg_write_config "$CFG" "$STATE" AlwaysVerify "$PG_BUS_ADDR" \
    "\"criMetricsListen\": \"127.0.0.1:$CRI_METRICS\", \"hmacKeyFile\": \"$KEY\""
pg_node_containerd_setup "$CFG" "$PG_REG_HOST"
pg_node_containerd_start || pg_skip "containerd's CRI plugin did not come up on this machine (log above)"
pg_node_proxy_start || pg_fail "pullgate-cri did not serve its socket"
grep -q 'msg="metrics listening"' "$PG_CD_DIR/pullgate-cri.log" ||
    pg_fail "pullgate-cri does not serve /metrics: $(tail -5 "$PG_CD_DIR/pullgate-cri.log")"

# The webhook, keyed, against the API stand-in holding team-a's pull secret for the registry.
WH_DIR="$(pg_mktemp_dir webhook)"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=ca \
    -keyout "$WH_DIR/ca.key" -out "$WH_DIR/ca.crt" 2>/dev/null
for leaf in apiserver serving; do
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$leaf" \
        -keyout "$WH_DIR/$leaf.key" -out "$WH_DIR/$leaf.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$WH_DIR/$leaf.ext"
    openssl x509 -req -in "$WH_DIR/$leaf.csr" -CA "$WH_DIR/ca.crt" -CAkey "$WH_DIR/ca.key" \
        -CAcreateserial -days 2 -extfile "$WH_DIR/$leaf.ext" -out "$WH_DIR/$leaf.crt" 2>/dev/null
    chmod 0600 "$WH_DIR/$leaf.key"
done
echo "token-$RANDOM$RANDOM" >"$WH_DIR/token"
"$PG_PY" - "$WH_DIR" "$PG_REG_HOST" tenant-a "$PASS_A" <<'PY'
import base64, json, sys
d, host, user, pw = sys.argv[1:5]
auth = base64.b64encode(f"{user}:{pw}".encode()).decode()
cfg = json.dumps({"auths": {host: {"auth": auth}}})
objs = {
    "/api/v1/namespaces/team-a/secrets/regcred": {
        "kind": "Secret", "apiVersion": "v1", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "regcred", "namespace": "team-a", "uid": "uid-regcred"},
        "data": {".dockerconfigjson": base64.b64encode(cfg.encode()).decode()}},
    "/api/v1/namespaces/team-a/serviceaccounts/default": {
        "kind": "ServiceAccount", "apiVersion": "v1",
        "metadata": {"name": "default", "namespace": "team-a", "uid": "uid-sa"}},
}
json.dump({"tokens": [open(d + "/token").read().strip()], "objects": objs}, open(d + "/state.json", "w"))
PY
API_PORT="$(pg_free_port)"
"$PG_PY" "$HERE/webhook_apiserver.py" --port "$API_PORT" --cert "$WH_DIR/apiserver.crt" \
    --key "$WH_DIR/apiserver.key" --state "$WH_DIR/state.json" --log "$WH_DIR/requests.log" \
    2>"$WH_DIR/apiserver.err" &
pg_on_exit "pg_kill_wait $! 5"
WH_PORT="$(pg_free_port)" WH_HEALTH="$(pg_free_port)"
"$WEBHOOK" --listen "127.0.0.1:$WH_PORT" --health-listen "127.0.0.1:$WH_HEALTH" \
    --hmac-key-file "$KEY" --tls-cert "$WH_DIR/serving.crt" --tls-key "$WH_DIR/serving.key" \
    --api-server "https://127.0.0.1:$API_PORT" --api-ca "$WH_DIR/ca.crt" \
    --api-token-file "$WH_DIR/token" 2>"$WH_DIR/webhook.log" &
pg_on_exit "pg_kill_wait $! 5"
pg_wait_port "$API_PORT" 10 || pg_fail "API stand-in did not start: $(cat "$WH_DIR/apiserver.err")"
pg_wait_port "$WH_HEALTH" 10 || pg_fail "webhook did not start: $(cat "$WH_DIR/webhook.log")"

PROM_DIR="$(pg_mktemp_dir prometheus)"
PROM_PORT="$(pg_free_port)"
cat >"$PROM_DIR/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: pullgate-cri
    static_configs:
      - targets: ["127.0.0.1:$CRI_METRICS"]
  - job_name: pullgate-webhook
    static_configs:
      - targets: ["127.0.0.1:$WH_HEALTH"]
YML
prometheus --config.file="$PROM_DIR/prometheus.yml" --storage.tsdb.path="$PROM_DIR/tsdb" \
    --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn 2>"$PROM_DIR/log" &
PROM_PID=$!
pg_on_exit "pg_kill_wait $PROM_PID 5"
pg_wait_port "$PROM_PORT" 20 || pg_fail "prometheus did not start: $(tail -5 "$PROM_DIR/log")"

prom_expect "Prometheus scrapes pullgate-cri" 'up{job="pullgate-cri"}' 1
prom_expect "Prometheus scrapes pullgate-webhook" 'up{job="pullgate-webhook"}' 1
prom_expect "build info: both daemons" 'count(pullgate_build_info)' 2
prom_expect "the resident hook server is up" 'pullgate_cri_hook_server_up' 1
prom_expect "no pulled record on disk yet" 'pullgate_cri_ondisk_pulledrecords' 0

pg_section "the webhook annotates team-a's pod"
HASH_A="$(pg_cred_hash tenant-a "$PASS_A")" || pg_fail "pullgatectl hash"
ANN_A="$("$PG_PY" "$HERE/metrics_reviews.py" annotate "https://127.0.0.1:$WH_PORT" "$WH_DIR/ca.crt" \
    team-a regcred "$IMG_APP")" || pg_fail "the webhook wrote no annotation: $(tail -3 "$WH_DIR/webhook.log")"
pg_check_ok "the webhook's annotation: $(cut -c1-120 <<<"$ANN_A")..."
prom_expect "one review patched the pod" 'pullgate_webhook_reviews_total{outcome="patched"}' 1
prom_expect "its secret read from the API" \
    'pullgate_webhook_api_reads_total{resource="secrets",result="found"}' 1

pg_section "a pull refused, a pull recorded"
pg_node_run_pod team-a "$ANN_A" || { pg_node_show_log; pg_fail "RunPodSandbox (team-a)"; }
export PG_CRI_AUTH="not base64!"
cri pull --image "$IMG_APP" --auth-env PG_CRI_AUTH --pod-config "$POD_CFG" >/dev/null 2>&1 &&
    pg_check_fail "a pull with unusable credentials was answered OK" ||
    pg_check_ok "a pull with unusable credentials is refused"
unset PG_CRI_AUTH
prom_expect "refused, never forwarded, counted with its reason" \
    'pullgate_cri_pulls_refused_total{code="INVALID_ARGUMENT",reason="credentials-unusable"}' 1
export PG_CRI_PASS="$PASS_A"
cri pull --image "$IMG_APP" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_CFG" >/dev/null ||
    { pg_node_show_log; pg_fail "PullImage with team-a's credentials failed"; }
unset PG_CRI_PASS
prom_expect "one pull recorded, attributed to a secret" 'pullgate_cri_pulls_recorded_total{credentials="secret"}' 1
prom_expect "nothing recorded otherwise" 'sum(pullgate_cri_pulls_recorded_total)' 1
prom_expect "PullImage answered OK once" 'pullgate_cri_calls_total{method="PullImage",code="OK"}' 1
prom_expect "PullImage answered twice in all" 'sum(pullgate_cri_calls_total{method="PullImage"})' 2
prom_expect "the record's latency observed" 'pullgate_cri_recording_duration_seconds_count{stage="record"}' 1
prom_expect "its intent's too (and the refused pull made none)" \
    'pullgate_cri_recording_duration_seconds_count{stage="intent"}' 1
prom_expect "no recording failure" 'sum(pullgate_cri_recording_failures_total)' 0
prom_expect "one pulled record on disk" 'pullgate_cri_ondisk_pulledrecords' 1
prom_expect "no intent left on disk" 'pullgate_cri_ondisk_pullintents' 0

pg_section "an allowed and a denied container, decided on the resident path"
expect_runs "team-a with its annotation" "$IMG_APP"
pg_node_run_pod team-b "" || pg_fail "RunPodSandbox (team-b)"
expect_denied "team-b without credentials" "$IMG_APP"
prom_expect "one allowed by the secret" 'pullgate_cri_hook_decisions_total{result="allow",reason="secret-match"}' 1
prom_expect "one denied" 'sum(pullgate_cri_hook_decisions_total{result="deny"})' 1
prom_expect "every decision delivered" \
    'sum(pullgate_cri_hook_decisions_total) - sum(pullgate_cri_hook_requests_total{result="answered"})' 0
prom_expect "two pods run" 'pullgate_cri_calls_total{method="RunPodSandbox",code="OK"}' 2
prom_expect "StartContainer: OK once, denied once" \
    'count(pullgate_cri_calls_total{method="StartContainer"} == 1)' 2

pg_section "the exposition"
curl -sf "http://127.0.0.1:$CRI_METRICS/metrics" >"$PROM_DIR/cri.metrics" || pg_check_fail "GET /metrics"
if promtool check metrics <"$PROM_DIR/cri.metrics"; then pg_check_ok "promtool check metrics: pullgate-cri"; else
    pg_check_fail "promtool rejects pullgate-cri's metrics"
fi
curl -sf "http://127.0.0.1:$WH_HEALTH/metrics" >"$PROM_DIR/webhook.metrics" || pg_check_fail "GET /metrics (webhook)"
if promtool check metrics <"$PROM_DIR/webhook.metrics"; then pg_check_ok "promtool check metrics: pullgate-webhook"; else
    pg_check_fail "promtool rejects pullgate-webhook's metrics"
fi
if grep -q -e "$PASS_A" -e "$HASH_A" -e team-a -e "$PG_REG_HOST" "$PROM_DIR/cri.metrics"; then
    pg_check_fail "a credential, a namespace or an image name in /metrics"
else
    pg_check_ok "no credential, namespace or image name in /metrics"
fi
CODE="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$CRI_METRICS/")"
[[ "$CODE" == 404 ]] && pg_check_ok "only /metrics is served (/ -> $CODE)" || pg_check_fail "/ -> HTTP $CODE"
CODE="$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary @"$PROM_DIR/cri.metrics" \
    "http://127.0.0.1:$CRI_METRICS/metrics")"
[[ "$CODE" == 405 ]] && pg_check_ok "POST /metrics -> $CODE (its body dropped)" || pg_check_fail "POST -> HTTP $CODE"
# Four idle connections from one address hold its bound: a fifth is closed unanswered; the
# listener serves again once they are gone. pullgate-cri's CRI is untouched meanwhile.
"$PG_PY" "$HERE/metrics_reviews.py" hold "127.0.0.1:$CRI_METRICS" 4 3 >"$PROM_DIR/hold.out" &
HOLD=$!
pg_wait_grep "$PROM_DIR/hold.out" held 30 || pg_check_fail "the four connections were not opened"
if curl -sf --max-time 2 -o /dev/null "http://127.0.0.1:$CRI_METRICS/metrics"; then
    pg_check_fail "a fifth connection from one address was served"
else
    pg_check_ok "a fifth connection from one address is refused (at most 4 per address)"
fi
cri version >/dev/null 2>&1 && pg_check_ok "CRI still served meanwhile" || pg_check_fail "CRI Version failed"
wait "$HOLD"
curl -sf --max-time 5 -o /dev/null "http://127.0.0.1:$CRI_METRICS/metrics" &&
    pg_check_ok "served again once they closed" || pg_check_fail "/metrics not served after the idle connections closed"

pg_log "test_metrics_cri: $((SECONDS - T0)) s"
pg_summary
