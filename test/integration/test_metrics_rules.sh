#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The alert rules and the dashboard in packaging/kubernetes (docs/metrics.md), linted:
#   - `promtool check rules` accepts the PrometheusRule's spec;
#   - `promtool test rules` (test/data/metrics-rules-test.yaml): each alert fires on the series
#     it is about, with its labels and annotations, and not before its `for`;
#   - every metric, label and label value the rules and the dashboard use is one the daemons
#     define (metrics_consistency.py, from cri/cri_metrics.c and webhook/whmetrics.c), and every
#     defined metric is documented in docs/metrics.md; a rules file with a misspelt metric or
#     an unknown label value is refused (the check can fail).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib/common.sh"
pg_require_cmd python3 promtool
python3 -c 'import yaml' 2>/dev/null || pg_skip "python3-yaml not installed"

WORK=$(pg_mktemp_dir metrics-rules)
# shellcheck source=lib/hardening.sh
. "$HERE/lib/hardening.sh"
RULES=$PG_SOURCE_DIR/packaging/kubernetes/prometheus-rules.yaml
DASHBOARD=$PG_SOURCE_DIR/packaging/kubernetes/grafana-dashboard.json

python3 - "$RULES" "$WORK/prometheus-rules.spec.yaml" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PrometheusRule", doc.get("kind")
yaml.safe_dump(doc["spec"], open(sys.argv[2], "w"))
PY
promtool check rules "$WORK/prometheus-rules.spec.yaml" && pass "promtool check rules" ||
    fail "promtool check rules rejects $RULES"
# The packages' plain rules file (packaging/plain-rules.cmake): promtool takes it as it is, and
# it is the PrometheusRule's spec, rule for rule.
PLAIN=$PG_BUILD_DIR/packaging/pullgate-rules.yml
promtool check rules "$PLAIN" && pass "promtool check rules: the plain rules file as installed" ||
    fail "promtool check rules rejects $PLAIN"
python3 - "$RULES" "$PLAIN" <<'PY' && pass "the plain rules file is the PrometheusRule's spec" ||
import sys, yaml
assert yaml.safe_load(open(sys.argv[1]))["spec"] == yaml.safe_load(open(sys.argv[2]))
PY
    fail "$PLAIN differs from the spec of $RULES"
cp "$PG_SOURCE_DIR/test/data/metrics-rules-test.yaml" "$WORK/"
(cd "$WORK" && promtool test rules metrics-rules-test.yaml) && pass "promtool test rules: the alerts fire as described" ||
    fail "promtool test rules"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$DASHBOARD" && pass "the dashboard is JSON" ||
    fail "the dashboard is not JSON"
python3 "$HERE/metrics_consistency.py" "$PG_SOURCE_DIR" && pass "rules and dashboard use only defined metrics; all documented" ||
    fail "metrics used but not defined, or not documented (above)"

sed 's/pullgate_cri_hook_server_up == 0/pullgate_cri_hook_server_upp == 0/' "$RULES" >"$WORK/bad-name.yaml"
sed 's/outcome=~"error|bad-request"/outcome=~"error|bad-requests"/' "$RULES" >"$WORK/bad-value.yaml"
for bad in bad-name bad-value; do
    if python3 "$HERE/metrics_consistency.py" "$PG_SOURCE_DIR" "$WORK/$bad.yaml" >"$WORK/$bad.out"; then
        fail "a rules file with a $bad passes the check"
    else
        pass "a rules file with a $bad is refused: $(head -n1 "$WORK/$bad.out")"
    fi
done
finish test_metrics_rules
