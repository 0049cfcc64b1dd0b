#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Every metric the alert rules and the dashboard use is one the daemons define, with labels and
label values they export; every defined metric is documented in docs/metrics.md, with every
value of its labels in its row (`value` or ="value"; the CRI method names and the build's
version are documented by reference).

    metrics_consistency.py SOURCE_DIR [RULES_YAML [DASHBOARD_JSON]]

Definitions are read from the daemons' tables (cri/cri_metrics.c, webhook/whmetrics.c): each
pg_metric_def's .name, .type and .labels, and the NULL-terminated value arrays they name; and
pullgate_build_info from common/metrics.c, defined there for every daemon's pg_metrics_define
call, whose second argument is its component. Exit 0 when consistent; 1 with one line per problem.
"""
import json
import re
import sys

import yaml

PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                   "and", "or", "unless", "offset"}
GENERIC_LABELS = {"job", "instance", "le"}


def string_arrays(text):
    """NAME -> [values] for every `const char *const NAME[] = {"a", ..., NULL};`."""
    arrays = {}
    for m in re.finditer(r'const char \*const (\w+)\[\]\s*=\s*\{(.*?)\};', text, re.S):
        arrays[m.group(1)] = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2))
    return arrays


def definitions(path):
    text = open(path).read()
    text = re.sub(r'PG_WEBHOOK_VERSION|PG_VERSION_STRING', '"version"', text)
    arrays = string_arrays(text)
    defs = {}
    for m in re.finditer(r'\{\s*\.name\s*=\s*"(pullgate_\w+)",\s*\.type\s*=\s*PG_METRIC_(\w+)(.*?)\}\s*,\s*(?=\{\s*\.name|\};)',
                         text, re.S):
        name, kind, rest = m.group(1), m.group(2).lower(), m.group(3)
        labels = {}
        for lm in re.finditer(r'\{\s*"(\w+)",\s*(\w+)\s*\}', rest):
            labels[lm.group(1)] = arrays.get(lm.group(2))
        defs[name] = {"type": kind, "labels": labels, "file": path}
    return defs


DAEMONS = ("cri/cri_metrics.c", "webhook/whmetrics.c")


def build_info(src):
    """pullgate_build_info: its labels in common/metrics.c, a component per daemon's call."""
    text = open(src + "/common/metrics.c").read()
    m = re.search(r'\.name = "pullgate_build_info",\s*\.type = PG_METRIC_(\w+)(.*?)\};', text, re.S)
    if not m:
        return {}
    labels = {l: [] for l in re.findall(r'\{\s*"(\w+)",\s*\w+\s*\}', m.group(2))}
    labels["version"] = ["version"]
    for f in DAEMONS:
        labels.setdefault("component", []).extend(
            re.findall(r'pg_metrics_define\(\s*\w+,\s*"(\w+)"', open(src + "/" + f).read()))
    return {"pullgate_build_info": {"type": m.group(1).lower(), "labels": labels,
                                    "file": "common/metrics.c"}}


def selectors(expr):
    """(metric, [(label, op, value)]) for every pullgate_* name in a PromQL expression."""
    out = []
    for m in re.finditer(r'\b(pullgate_\w+)(\{([^}]*)\})?', expr):
        matchers = re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', m.group(3) or "")
        out.append((m.group(1), matchers))
    return out


def by_labels(expr):
    return [l.strip() for grp in re.findall(r'\b(?:by|without)\s*\(([^)]*)\)', expr)
            for l in grp.split(",") if l.strip()]


def check_expr(where, expr, defs, problems):
    names = selectors(expr)
    used_labels = set()
    for name, matchers in names:
        base = name
        d = defs.get(name)
        if d is None:
            for suffix in ("_bucket", "_sum", "_count"):
                if name.endswith(suffix) and defs.get(name[: -len(suffix)], {}).get("type") == "histogram":
                    base, d = name[: -len(suffix)], defs[name[: -len(suffix)]]
        if d is None:
            problems.append(f"{where}: {name} is not a metric the daemons define")
            continue
        for label, op, value in matchers:
            used_labels.add(label)
            if label in GENERIC_LABELS:
                continue
            allowed = d["labels"].get(label)
            if allowed is None:
                problems.append(f"{where}: {base} has no label {label}")
                continue
            values = [value] if op in ("=", "!=") else (
                value.split("|") if re.fullmatch(r"[\w-]+(\|[\w-]+)*", value) else [])
            for v in values:
                if v not in allowed:
                    problems.append(f"{where}: {base}{{{label}={v!r}}}: not a value it exports "
                                    f"({', '.join(allowed)})")
    if names:
        known = set(GENERIC_LABELS)
        for name, _ in names:
            for n in (name, re.sub(r"_(bucket|sum|count)$", "", name)):
                known |= set(defs.get(n, {}).get("labels", {}))
        for label in by_labels(expr):
            if label not in known:
                problems.append(f"{where}: aggregates by {label}, a label none of its metrics has")


def main():
    src = sys.argv[1]
    rules_path = sys.argv[2] if len(sys.argv) > 2 else src + "/packaging/kubernetes/prometheus-rules.yaml"
    dash_path = sys.argv[3] if len(sys.argv) > 3 else src + "/packaging/kubernetes/grafana-dashboard.json"
    defs = build_info(src)
    for f in DAEMONS:
        for name, d in definitions(src + "/" + f).items():
            if name in defs:
                print(f"{name} defined twice")
                return 1
            defs[name] = d
    problems = []
    if len(defs) < 20:
        problems.append(f"only {len(defs)} definitions read: the table parser is out of date")
    rules = yaml.safe_load(open(rules_path))
    n_exprs = 0
    for group in rules["spec"]["groups"]:
        for rule in group["rules"]:
            n_exprs += 1
            check_expr(f"rule {rule.get('alert') or rule.get('record')}", rule["expr"], defs, problems)
    dash = json.load(open(dash_path))
    def walk(panels):
        for p in panels:
            yield p
            yield from walk(p.get("panels", []))
    for p in walk(dash["panels"]):
        for t in p.get("targets", []):
            n_exprs += 1
            check_expr(f"panel {p['title']!r}", t["expr"], defs, problems)
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict):
            check_expr(f"variable {v['name']}", q.get("query", ""), defs, problems)
    try:
        doc = open(src + "/docs/metrics.md").read()
    except OSError:
        doc = ""
    # Rows in the document's order; a label "(as above)" takes the values an earlier row of
    # another metric documented for a label of the same name.
    rows, all_rows = [], {}  # pullgate_build_info has a row per daemon: judged by both
    for line in doc.splitlines():
        m = re.match(r"\|\s*`(pullgate_\w+)`\s*\|", line)
        if m:
            rows.append(m.group(1))
            all_rows[m.group(1)] = all_rows.get(m.group(1), "") + line
    for name in defs:
        if f"`{name}`" not in doc:
            problems.append(f"docs/metrics.md does not document {name}")
    seen = {}  # label -> values documented so far
    for name in dict.fromkeys(rows):
        row = all_rows[name]
        d = defs.get(name)
        if d is None:
            continue
        for label, values in d["labels"].items():
            if label in ("method", "version"):
                continue
            named = {v for v in values or [] if f"`{v}`" in row or f'="{v}"' in row}
            if re.search(rf"`{label}` \([^)]*as above\)", row):
                named |= seen.get(label, set())
            for v in values or []:
                if v not in named:
                    problems.append(f"docs/metrics.md: {name}'s row does not name {label} value {v!r}")
            seen.setdefault(label, set()).update(named)
    for p in problems:
        print(p)
    print(f"{len(defs)} metrics defined, {n_exprs} expressions checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
