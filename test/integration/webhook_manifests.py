#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks packaging/kubernetes against what docs/webhook.md promises; run by
test_webhook_manifests.sh. usage: webhook_manifests.py KUBERNETES_DIR GENERATED_CERTS_DIR"""
import base64
import sys

import yaml

kdir, certs = sys.argv[1], sys.argv[2]
failures = []


def check(cond, name, detail=""):
    print(("ok " if cond else "FAIL ") + name + ("" if cond else f": {detail}"), flush=True)
    if not cond:
        failures.append(name)


def load(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]


def find(docs, kind, name=None):
    return next((d for d in docs if d["kind"] == kind and
                 (name is None or d["metadata"]["name"] == name)), None)


docs = load(f"{kdir}/webhook.yaml")
gen = load(f"{certs}/mutatingwebhook.yaml")
secrets = load(f"{certs}/secrets.yaml")

role = find(docs, "ClusterRole")
check(role and role["rules"] == [{"apiGroups": [""], "resources": ["secrets", "serviceaccounts"],
                                  "verbs": ["get"]}],
      "ClusterRole: get on secrets and serviceaccounts only", role)
binding = find(docs, "ClusterRoleBinding")
check(binding and binding["subjects"][0]["name"] == "pullgate-webhook" and
      binding["roleRef"]["name"] == role["metadata"]["name"], "ClusterRoleBinding to the webhook SA")

dep = find(docs, "Deployment")
spec = dep["spec"]["template"]["spec"]
c = spec["containers"][0]
check(dep["spec"]["replicas"] == 2, "Deployment: 2 replicas")
check(spec["securityContext"].get("runAsNonRoot") is True, "runAsNonRoot")
check(c["securityContext"].get("readOnlyRootFilesystem") is True and
      c["securityContext"].get("allowPrivilegeEscalation") is False and
      c["securityContext"]["capabilities"]["drop"] == ["ALL"], "read-only root, no privileges")
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
args = c["args"]
check(c["readinessProbe"]["httpGet"]["path"] == "/readyz" and
      c["livenessProbe"]["httpGet"]["path"] == "/healthz" and
      c["readinessProbe"]["httpGet"]["port"] == "health" and
      c["readinessProbe"]["httpGet"].get("scheme", "HTTP") == "HTTP" and
      f"--health-listen=$(POD_IP):{ports['health']}" in args,
      "probes on /readyz and /healthz, plain HTTP on --health-listen (no client certificate)")
check(f"--listen=$(POD_IP):{ports['https']}" in args and
      any(e["name"] == "POD_IP" and e["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
          for e in c["env"]), "reviews on the pod's address only", args)


def mib(text):
    return int(text[:-2]) if text.endswith("Mi") else int(text[:-2]) * 1024


budget = [int(a.split("=", 1)[1]) for a in args if a.startswith("--memory-budget-mib=")]
limit = mib(c["resources"]["limits"]["memory"])
# The process around the budget: 128 connection threads, their TLS sessions and pools, the
# API connections and the allocator (measured: VmHWM 212 MiB with 8 concurrent 27 MiB
# reviews against the 256 MiB budget, test_webhook_hostile.sh): at least 96 MiB of room.
check(budget and limit >= budget[0] + 96, f"memory: limit {limit} MiB = budget {budget} MiB + room",
      c["resources"])
check("--max-connections=128" in args and "--max-connections-per-peer=32" in args and
      "--reserved-connections=32" in args, "connection bounds set", args)
api_cidrs = [a.split("=", 1)[1] for a in args if a.startswith("--api-server-cidr=")]
check("requests" in c["resources"] and "limits" in c["resources"], "resources set")
check(not any(a.startswith("--unkeyed-annotations") for a in args), "keyed (no opt-out)")
mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
vols = {v["name"]: v for v in spec["volumes"]}
args = " ".join(c["args"])
check(f'--tls-cert={mounts["tls"]}/tls.crt' in args and f'--tls-key={mounts["tls"]}/tls.key' in args
      and f'--hmac-key-file={mounts["hmac"]}/annotation.key' in args,
      "arguments name the mounted files", args)
secret_names = {s["metadata"]["name"]: s for s in secrets}
check(vols["tls"]["secret"]["secretName"] in secret_names and
      vols["hmac"]["secret"]["secretName"] in secret_names,
      "volumes use the Secrets make-certs.sh writes", list(secret_names))
check(vols["hmac"]["secret"]["defaultMode"] & 0o007 == 0, "key volume not readable by others")
check(secret_names["pullgate-annotation-key"]["data"]["annotation.key"] and
      len(base64.b64decode(secret_names["pullgate-annotation-key"]["data"]["annotation.key"])) == 32,
      "HMAC key Secret: 32 bytes")
check(find(docs, "PodDisruptionBudget") is not None, "PodDisruptionBudget")
np = find(docs, "NetworkPolicy")
labels = dep["spec"]["template"]["metadata"]["labels"]
rules_in = (np or {}).get("spec", {}).get("ingress", [])
check(np and np["spec"]["podSelector"]["matchLabels"].items() <= labels.items() and
      np["spec"]["policyTypes"] == ["Ingress"] and len(rules_in) == 1 and
      rules_in[0]["ports"] == [{"protocol": "TCP", "port": ports["https"]}] and
      all("ipBlock" in f for f in rules_in[0]["from"]),
      "NetworkPolicy: the review port from the API server's addresses only", np)
np_cidrs = sorted(f["ipBlock"]["cidr"] for r in rules_in for f in r["from"] if "ipBlock" in f)
check(sorted(c for a in api_cidrs for c in a.split(",")) == np_cidrs and np_cidrs,
      "--api-server-cidr: the NetworkPolicy's CIDR (the reserved slots and the policy agree)",
      f"{api_cidrs} vs {np_cidrs}")
check("client-ca" in open(f"{kdir}/webhook.yaml").read() and
      secret_names.get("pullgate-webhook-client-ca", {}).get("data", {}).get("ca.crt"),
      "client CA: the Secret make-certs.sh writes, named in webhook.yaml")
adm = load(f"{certs}/admission-config.yaml")[0]
conf = adm["plugins"][0]["configuration"]
kc = load(f"{certs}/webhook-client.kubeconfig")[0]
check(adm["kind"] == "AdmissionConfiguration" and adm["plugins"][0]["name"] ==
      "MutatingAdmissionWebhook" and conf["kind"] == "WebhookAdmissionConfiguration" and
      kc["users"][0]["name"] == "pullgate-webhook.pullgate-system.svc" and
      kc["users"][0]["user"]["client-certificate-data"],
      "AdmissionConfiguration: kube-apiserver's client certificate for the Service's DNS name")
svc = find(docs, "Service")
check(svc["spec"]["ports"][0]["port"] == 443, "Service on 443")

mwc = find(gen, "MutatingWebhookConfiguration")
w = mwc["webhooks"][0]
check(w["admissionReviewVersions"] == ["v1"], "admissionReviewVersions [v1]")
check(w["sideEffects"] == "None", "sideEffects None")
check(w["timeoutSeconds"] == 3, "timeoutSeconds 3")
check(w["reinvocationPolicy"] == "IfNeeded", "reinvocationPolicy IfNeeded")
check(w["failurePolicy"] == "Ignore", "failurePolicy Ignore (HMAC on by default)")
check(w["clientConfig"]["service"] == {"name": svc["metadata"]["name"],
                                       "namespace": svc["metadata"]["namespace"],
                                       "path": "/mutate", "port": 443},
      "clientConfig names the Service and /mutate", w["clientConfig"]["service"])
check(base64.b64decode(w["clientConfig"]["caBundle"]).startswith(b"-----BEGIN CERTIFICATE"),
      "caBundle filled in")
rules = {(tuple(r["operations"]), tuple(r["resources"])) for r in w["rules"]}
check(rules == {(("CREATE", "UPDATE"), ("pods",)), (("UPDATE",), ("pods/ephemeralcontainers",)),
                (("UPDATE",), ("pods/status",)), (("CREATE",), ("pods/binding",))},
      "rules: pods CREATE/UPDATE, pods/ephemeralcontainers, pods/status UPDATE, "
      "pods/binding CREATE", rules)
excluded = [e for e in w["namespaceSelector"]["matchExpressions"]
            if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn"]
check(excluded and {"pullgate-system", "kube-system"} <= set(excluded[0]["values"]),
      "namespaceSelector excludes its own and kube-system")
check(w.get("objectSelector") is None, "no objectSelector (pods cannot opt out)")

ds = load(f"{kdir}/daemonset.yaml")
dspec = find(ds, "DaemonSet")["spec"]["template"]["spec"]
key_vols = [v for v in dspec["volumes"] if v.get("secret", {}).get("secretName") ==
            "pullgate-annotation-key"]
init = dspec["initContainers"][0]
check(key_vols and any(m["name"] == key_vols[0]["name"] for m in init["volumeMounts"]) and
      "hmacKeyFile" in init["command"][-1],
      "DaemonSet mounts the same key Secret and sets hmacKeyFile")
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
