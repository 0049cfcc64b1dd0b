#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""pullgate-webhook against the API server stand-in (webhook_apiserver.py); run by test_webhook.sh.

AdmissionReview requests are shaped like kube-apiserver's. Expected credential hashes come from
the shared vectors (credential-hash-vectors.json), expected MACs are recomputed here from the text
of docs/annotation-hmac.md: nothing expected is taken from the code under test.
Environment: WH_SIGNED, WH_PLAIN, WH_DOWN (https://127.0.0.1:PORT of three webhook instances:
HMAC on, off, API unreachable), WH_CA1, WH_CA12 (serving CA, old+new CA bundle), WH_STATE,
WH_REQUESTS (stand-in files), WH_VECTORS, WH_KEY, WH_TOKEN, WH_CERT/WH_CERT_KEY (serving pair of
WH_SIGNED) and WH_CERT2/WH_CERT2_KEY (its replacement), WH_OUT (files for the end-to-end part).
"""
import base64
import hashlib
import hmac
import http.client
import json
import os
import shutil
import ssl
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import annotation_v2  # noqa: E402  (the independent reader of keyed annotations)

E = os.environ
ANNOTATION = "pullgate.dev/credentials"
failures = []
checks = 0


def check(cond, name, detail=""):
    global checks
    checks += 1
    if cond:
        print(f"ok {name}", flush=True)
    else:
        failures.append(name)
        print(f"FAIL {name}: {detail}", flush=True)


VECTORS = {v["name"]: v for v in json.load(open(E["WH_VECTORS"]))}


def vec_hash(name):
    return VECTORS[name]["credentialHash"]


def vec_auth_hash(name):
    """A: the vector's hash with the email omitted (docs/interfaces.md §4); ASCII vectors only."""
    v = VECTORS[name]
    return hashlib.sha256(json.dumps({"username": v["username"], "password": v["password"]},
                                     separators=(",", ":")).encode()).hexdigest()


def auth_entry(name):
    v = VECTORS[name]
    e = {"auth": base64.b64encode(f'{v["username"]}:{v["password"]}'.encode()).decode()}
    if v.get("email"):
        e["email"] = v["email"]
    return e


# ----------------------------------------------------------------- the stand-in's objects

def secret(ns, name, uid, typ, data):
    return {"kind": "Secret", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns, "uid": uid, "resourceVersion": "1",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "type": typ,
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def dockerconfigjson(ns, name, uid, auths):
    return secret(ns, name, uid, "kubernetes.io/dockerconfigjson",
                  {".dockerconfigjson": json.dumps({"auths": auths})})


def service_account(ns, name, uid, pull_secrets):
    sa = {"kind": "ServiceAccount", "apiVersion": "v1",
          "metadata": {"name": name, "namespace": ns, "uid": uid, "resourceVersion": "1"}}
    if pull_secrets:
        sa["imagePullSecrets"] = [{"name": s} for s in pull_secrets]
    return sa


def path(ns, resource, name):
    return f"/api/v1/namespaces/{ns}/{resource}/{name}"


OBJECTS = {}
for o in [
    dockerconfigjson("team-a", "regcred", "uid-regcred",
                     {"registry.example.com": auth_entry("plain")}),
    dockerconfigjson("team-a", "sa-regcred", "uid-sa-regcred",
                     {"https://registry.example.com/v1/": auth_entry("with-email")}),
    dockerconfigjson("team-a", "multi", "uid-multi",
                     {"registry.example.com": auth_entry("html-escaped"),
                      "registry.example.com/team-a": auth_entry("quote-backslash"),
                      "other.example.com": auth_entry("plain")}),
    dockerconfigjson("team-a", "dockerhub", "uid-dockerhub",
                     {"https://index.docker.io/v1/": auth_entry("plain")}),
    secret("team-a", "legacy", "uid-legacy", "kubernetes.io/dockercfg",
           {".dockercfg": json.dumps({"legacy.example.com": auth_entry("unicode")})}),
    secret("team-a", "opaque", "uid-opaque", "Opaque", {"password": "not a pull secret"}),
    secret("team-a", "broken-data", "uid-broken", "kubernetes.io/dockerconfigjson",
           {".dockerconfigjson": "{not json"}),
    service_account("team-a", "default", "uid-sa-default", ["sa-regcred"]),
    service_account("team-a", "builder", "uid-sa-builder", []),
    # team-b holds a secret of the same name: it must never be read for a team-a pod.
    dockerconfigjson("team-b", "regcred", "uid-b-regcred",
                     {"registry.example.com": auth_entry("with-email")}),
    service_account("team-b", "default", "uid-b-default", ["regcred"]),
]:
    kind = "secrets" if o["kind"] == "Secret" else "serviceaccounts"
    OBJECTS[path(o["metadata"]["namespace"], kind, o["metadata"]["name"])] = o

TOKEN_1 = "token-one-" + uuid.uuid4().hex
TOKEN_2 = "token-two-" + uuid.uuid4().hex
STATE = {"tokens": [TOKEN_1], "objects": OBJECTS,
         "fail": {path("team-a", "secrets", "broken500"): 500,
                  path("team-a", "secrets", "forbidden"): 401},
         "delayMs": {path("team-a", "secrets", "slow"): 4000}}
OBJECTS[path("team-a", "secrets", "slow")] = dockerconfigjson(
    "team-a", "slow", "uid-slow", {"registry.example.com": auth_entry("plain")})


def write_atomic(p, text, mode=0o644):
    tmp = p + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, p)


def save_state():
    write_atomic(E["WH_STATE"], json.dumps(STATE))


# ----------------------------------------------------------------- reviews

def pod(ns="team-a", containers=("registry.example.com/team-a/app:1.0",), init=(), ephemeral=(),
        pull_secrets=None, sa=None, annotations=None, name="app-1"):
    p = {"kind": "Pod", "apiVersion": "v1",
         "metadata": {"name": name, "namespace": ns, "uid": str(uuid.uuid4()),
                      "labels": {"app": "demo"}},
         "spec": {"containers": [{"name": f"c{i}", "image": img, "resources": {},
                                  "imagePullPolicy": "IfNotPresent"}
                                 for i, img in enumerate(containers)],
                  "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
                  "serviceAccountName": sa or "default", "serviceAccount": sa or "default",
                  "securityContext": {}, "schedulerName": "default-scheduler"},
         "status": {}}
    if init:
        p["spec"]["initContainers"] = [{"name": f"i{i}", "image": img}
                                       for i, img in enumerate(init)]
    if ephemeral:
        p["spec"]["ephemeralContainers"] = [{"name": f"debug{i}", "image": img,
                                             "targetContainerName": "c0"}
                                            for i, img in enumerate(ephemeral)]
    if pull_secrets is not None:
        p["spec"]["imagePullSecrets"] = [{"name": s} for s in pull_secrets]
    if annotations is not None:
        p["metadata"]["annotations"] = annotations
    return p


def review(obj, operation="CREATE", sub="", old=None, dry_run=False):
    ns = obj["metadata"]["namespace"]
    req = {"uid": str(uuid.uuid4()),
           "kind": {"group": "", "version": "v1", "kind": "Pod"},
           "resource": {"group": "", "version": "v1", "resource": "pods"},
           "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
           "requestResource": {"group": "", "version": "v1", "resource": "pods"},
           "name": obj["metadata"]["name"], "namespace": ns, "operation": operation,
           "userInfo": {"username": "alice", "uid": "u-1", "groups": ["system:authenticated"]},
           "object": obj, "oldObject": old, "dryRun": dry_run,
           "options": {"kind": "CreateOptions" if operation == "CREATE" else "UpdateOptions",
                       "apiVersion": "meta.k8s.io/v1"}}
    if sub:
        req["subResource"] = sub
        req["requestSubResource"] = sub
        req["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def connect(url, cafile):
    host, port = url.replace("https://", "").rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.check_hostname = True
    return http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)


def post(url, body, cafile=None):
    c = connect(url, cafile or E["WH_CA12"])
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    try:
        c.request("POST", "/mutate", body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def get(url, p):
    c = connect(url, E["WH_CA12"])
    try:
        c.request("GET", p)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def admit(url, rev):
    status, body = post(url, rev)
    if status != 200:
        return status, None
    out = json.loads(body)
    return status, out


def patch_of(resp):
    r = resp["response"]
    if "patch" not in r:
        return None
    return json.loads(base64.b64decode(r["patch"]))


def annotation_of(resp):
    ops = patch_of(resp) or []
    for op in ops:
        if op["path"] == "/metadata/annotations/pullgate.dev~1credentials":
            return json.loads(op["value"])
    return None


# ----------------------------------------------------------------- expected values

KEY = open(E["WH_KEY"], "rb").read()


def expected_mac(ns, image_name, entry):
    """docs/annotation-hmac.md (v1 or v2 message), independently of the C code."""
    return annotation_v2.entry_mac(KEY, ns, image_name, entry)


def clear_view(ann):
    """The annotation with every sealed item opened (KEY) into its v1 spelling: credentialHash,
    and authHash when it differs. A keyed annotation must not carry a hash in clear."""
    if ann is None:
        return None
    out = {}
    for img, e in ann.items():
        items = []
        for s in e.get("kubernetesSecrets", []):
            s = dict(s)
            if "sealedHashes" in s:
                h, a = annotation_v2.unseal(KEY, s["namespace"], s["name"], s["uid"],
                                            s.pop("sealedHashes"))
                s["credentialHash"] = h
                if a != h:
                    s["authHash"] = a
            items.append(s)
        out[img] = dict(e, kubernetesSecrets=items)
    return out


def sec(name, uid, vector):
    return {"namespace": "team-a", "name": name, "uid": uid, "credentialHash": vec_hash(vector)}


def sec_email(name, uid, vector):
    return dict(sec(name, uid, vector), authHash=vec_auth_hash(vector))


def sa_entry(name, uid):
    return {"namespace": "team-a", "name": name, "uid": uid}


def strip_mac(ann):
    return {k: {f: v for f, v in e.items() if f != "hmac"} for k, e in clear_view(ann).items()}


def check_macs(ann, ns, name):
    ok = all(e.get("hmac") == expected_mac(ns, img, e) for img, e in ann.items())
    check(ok and ann, f"{name}: every entry carries the MAC of docs/annotation-hmac.md",
          json.dumps(ann))


# ----------------------------------------------------------------- cases

def case_pull_secrets_all_container_kinds():
    p = pod(containers=["registry.example.com/team-a/app:1.0", "nginx:1.25"],
            init=["registry.example.com/team-a/init@sha256:" + "a" * 64],
            ephemeral=["registry.example.com/team-a/debug:3"],
            pull_secrets=["regcred"], sa="builder", annotations={"owner": "x"})
    rev = review(p)
    status, resp = admit(E["WH_SIGNED"], rev)
    check(status == 200 and resp["response"]["allowed"] is True, "imagePullSecrets: allowed",
          f"{status} {resp}")
    if not resp:
        return
    check(resp["response"]["uid"] == rev["request"]["uid"] and
          resp["response"]["patchType"] == "JSONPatch", "same uid, JSONPatch", resp)
    ann = annotation_of(resp)
    want = {
        "registry.example.com/team-a/init": {
            "kubernetesSecrets": [sec("regcred", "uid-regcred", "plain")],
            "kubernetesServiceAccounts": [sa_entry("builder", "uid-sa-builder")]},
        "registry.example.com/team-a/app": {
            "kubernetesSecrets": [sec("regcred", "uid-regcred", "plain")],
            "kubernetesServiceAccounts": [sa_entry("builder", "uid-sa-builder")]},
        "docker.io/library/nginx": {
            "kubernetesSecrets": [],
            "kubernetesServiceAccounts": [sa_entry("builder", "uid-sa-builder")]},
        "registry.example.com/team-a/debug": {
            "kubernetesSecrets": [sec("regcred", "uid-regcred", "plain")],
            "kubernetesServiceAccounts": [sa_entry("builder", "uid-sa-builder")]},
    }
    check(ann is not None and strip_mac(ann) == want,
          "init, regular and ephemeral containers, hashes from the vectors",
          json.dumps(ann))
    check(list(ann or {}) == list(want), "entries in container order (init, regular, ephemeral)",
          list(ann or {}))
    ops = patch_of(resp)
    check(len(ops) == 1 and ops[0]["op"] == "add", "annotations map present: one add", ops)
    check_macs(ann or {}, "team-a", "signed")
    with open(os.path.join(E["WH_OUT"], "annotation-team-a.json"), "w") as f:
        f.write(next(op["value"] for op in ops if op["path"].endswith("credentials")))


def case_service_account_pull_secrets_and_no_annotations():
    p = pod(containers=["registry.example.com/team-a/app:2.0"])
    p["metadata"].pop("annotations", None)
    status, resp = admit(E["WH_PLAIN"], review(p))
    ops = patch_of(resp) if resp else None
    check(ops is not None and len(ops) == 2 and ops[0] == {
        "op": "add", "path": "/metadata/annotations", "value": {}},
        "pod without annotations: the patch creates the map first", ops)
    ann = annotation_of(resp) if resp else None
    want = {"registry.example.com/team-a/app": {
        "kubernetesSecrets": [sec_email("sa-regcred", "uid-sa-regcred", "with-email")],
        "kubernetesServiceAccounts": [sa_entry("default", "uid-sa-default")]}}
    check(ann == want, "the service account's imagePullSecrets when the pod lists none",
          json.dumps(ann))
    check(all("hmac" not in e for e in (ann or {}).values()), "no key: entries unsigned")


def case_own_list_of_impossible_names():
    # The pod lists pull secrets, all of which the webhook skips (no such object can exist):
    # the ServiceAccount admission plugin fills in only an empty list, so the kubelet pulls with
    # none, and the annotation must present none (never the service account's sa-regcred).
    for names in (["../../team-b/secrets/regcred"], ["Not_A_Name", "a/b"]):
        p = pod(containers=["registry.example.com/team-a/app:2.0"], pull_secrets=names)
        status, resp = admit(E["WH_PLAIN"], review(p))
        ann = annotation_of(resp) if resp else None
        entry = (ann or {}).get("registry.example.com/team-a/app", {})
        check(ann is not None and not entry.get("kubernetesSecrets") and
              "sa-regcred" not in json.dumps(ann) and
              entry.get("kubernetesServiceAccounts") == [sa_entry("default", "uid-sa-default")],
              f"a pod listing only impossible names {names}: no service-account secrets",
              json.dumps(ann))


def case_forged_annotation_overwritten():
    forged = json.dumps({"registry.example.com/team-a/app": {"kubernetesSecrets": [
        {"namespace": "team-a", "name": "stolen", "uid": "x", "credentialHash": "f" * 64}]}})
    p = pod(pull_secrets=["regcred"], annotations={ANNOTATION: forged, "other": "kept"})
    for op_name in ("CREATE", "UPDATE"):
        status, resp = admit(E["WH_SIGNED"], review(p, operation=op_name, old=pod()))
        ann = annotation_of(resp) if resp else None
        ops = patch_of(resp) if resp else []
        check(ann is not None and "f" * 64 not in json.dumps(ann) and len(ops) == 1 and
              vec_hash("plain") not in json.dumps(ann) and
              clear_view(ann)["registry.example.com/team-a/app"]["kubernetesSecrets"] ==
              [sec("regcred", "uid-regcred", "plain")],
              f"{op_name}: a user-forged annotation is overwritten", json.dumps(ops))


def case_update_changed_image():
    old = pod(pull_secrets=["regcred"])
    new = pod(containers=["registry.example.com/team-a/app2:1"], pull_secrets=["regcred"],
              annotations={ANNOTATION: "{}"})
    status, resp = admit(E["WH_SIGNED"], review(new, operation="UPDATE", old=old))
    ann = annotation_of(resp) if resp else None
    check(ann is not None and list(ann) == ["registry.example.com/team-a/app2"],
          "UPDATE recomputes for the changed image", json.dumps(ann))


def case_skipped_secrets():
    p = pod(containers=["legacy.example.com/x/y:1", "registry.example.com/team-a/app:1"],
            pull_secrets=["opaque", "missing", "legacy", "multi", "legacy"])
    status, resp = admit(E["WH_PLAIN"], review(p))
    ann = annotation_of(resp) if resp else None
    check(resp is not None and resp["response"]["allowed"] is True,
          "Opaque and missing secrets: still admitted", f"{status} {resp}")
    want = {
        "legacy.example.com/x/y": {
            "kubernetesSecrets": [sec("legacy", "uid-legacy", "unicode")],
            "kubernetesServiceAccounts": [sa_entry("default", "uid-sa-default")]},
        "registry.example.com/team-a/app": {
            "kubernetesSecrets": [sec("multi", "uid-multi", "quote-backslash"),
                                  sec("multi", "uid-multi", "html-escaped")],
            "kubernetesServiceAccounts": [sa_entry("default", "uid-sa-default")]},
    }
    check(ann == want, "Opaque and missing skipped; legacy dockercfg read; two matching entries "
                       "of one secret, most specific first", json.dumps(ann))


def case_docker_hub():
    p = pod(containers=["nginx", "docker.io/library/nginx:1.27", "index.docker.io/library/redis"],
            pull_secrets=["dockerhub"], sa="builder")
    status, resp = admit(E["WH_PLAIN"], review(p))
    ann = annotation_of(resp) if resp else None
    check(ann is not None and list(ann) == ["docker.io/library/nginx", "docker.io/library/redis"]
          and ann["docker.io/library/nginx"]["kubernetesSecrets"] ==
          [sec("dockerhub", "uid-dockerhub", "plain")],
          "docker.io images: one entry per normalised name, the index.docker.io credential",
          json.dumps(ann))


def refused(url, rev, pattern, name):
    status, resp = admit(url, rev)
    r = (resp or {}).get("response", {})
    msg = r.get("status", {}).get("message", "")
    check(status == 200 and r.get("allowed") is False and pattern in msg and "patch" not in r
          and r.get("uid") == rev["request"]["uid"],
          f"{name}: refused with a message ({msg!r})", f"{status} {resp}")


def case_failures():
    refused(E["WH_PLAIN"], review(pod(pull_secrets=["regcred", "broken500"])), "HTTP 500",
            "API 500")
    refused(E["WH_PLAIN"], review(pod(pull_secrets=["forbidden"])), "HTTP 401", "API 401")
    refused(E["WH_DOWN"], review(pod(pull_secrets=["regcred"])), "API server",
            "API unreachable")
    refused(E["WH_PLAIN"], review(pod(pull_secrets=["broken-data"])), "broken-data",
            "malformed dockerconfigjson")
    refused(E["WH_PLAIN"], review(pod(containers=["Not A Valid//Ref"])), "image",
            "invalid image reference")
    t0 = time.monotonic()
    refused(E["WH_PLAIN"], review(pod(pull_secrets=["regcred", "slow"])), "time limit",
            "API slower than the review deadline")
    took = time.monotonic() - t0
    check(took < 2.9, f"the budget holds the answer inside timeoutSeconds 3 ({took:.2f} s)")
    bad_sa = pod()
    bad_sa["spec"]["serviceAccountName"] = "../../secrets/x"
    refused(E["WH_PLAIN"], review(bad_sa), "service account", "path-injection attempt")


def case_malformed_reviews():
    good = review(pod())
    bad = [b"", b"not json", b"[]", json.dumps({**good, "apiVersion": "admission.k8s.io/v1beta1"}),
           json.dumps({**good, "kind": "Pod"}), json.dumps({"apiVersion": "admission.k8s.io/v1",
                                                            "kind": "AdmissionReview"}),
           json.dumps({**good, "request": {**good["request"], "uid": ""}}),
           b'{"apiVersion":"admission.k8s.io/v1","apiVersion":"x"}']
    codes = []
    for b in bad:
        status, _ = post(E["WH_PLAIN"], b if isinstance(b, bytes) else b.encode())
        codes.append(status)
    check(all(c == 400 for c in codes), "malformed reviews: HTTP 400", codes)
    try:  # over the 28 MiB bound, and no request.uid in its first bytes to refuse it by
        status, _ = post(E["WH_PLAIN"], b"{" + b" " * (29 * 1024 * 1024) + b"}")
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        status = f"connection closed ({e.__class__.__name__})"
    check(status == 413, "a 29 MiB body without a uid: 413", status)


def case_ephemeral_subresource():
    # The annotation the webhook wrote for the pod: it covers app (regcred applies), not busybox.
    status, resp = admit(E["WH_SIGNED"], review(pod(pull_secrets=["regcred"])))
    ann = json.dumps(annotation_of(resp) if resp else {})
    p = pod(annotations={ANNOTATION: ann}, pull_secrets=["regcred"],
            ephemeral=["busybox:1.36", "registry.example.com/team-a/app:1.0"])
    status, resp = admit(E["WH_SIGNED"], review(p, operation="UPDATE", sub="ephemeralcontainers",
                                                old=pod(annotations={ANNOTATION: ann})))
    r = (resp or {}).get("response", {})
    warnings = r.get("warnings", [])
    check(r.get("allowed") is True and "patch" not in r, "ephemeralcontainers: admitted, no patch",
          r)
    check(len(warnings) == 1 and "busybox:1.36" in warnings[0] and "debug0" in warnings[0],
          "ephemeralcontainers: a warning names the uncovered image only", warnings)
    log_len = len(open(E["WH_REQUESTS"]).read().splitlines())
    admit(E["WH_SIGNED"], review(p, operation="UPDATE", sub="ephemeralcontainers"))
    check(len(open(E["WH_REQUESTS"]).read().splitlines()) == log_len,
          "ephemeralcontainers: no API lookups")


def case_ignored_and_deterministic():
    rev = review(pod(pull_secrets=["regcred", "multi"]))
    rev["request"]["resource"] = {"group": "", "version": "v1", "resource": "configmaps"}
    status, resp = admit(E["WH_PLAIN"], rev)
    check(resp and resp["response"] == {"uid": rev["request"]["uid"], "allowed": True},
          "another resource: admitted untouched", resp)
    p = pod(pull_secrets=["regcred", "multi"])
    a = admit(E["WH_SIGNED"], review(p))[1]
    b = admit(E["WH_SIGNED"], review(p, dry_run=True))[1]
    check(a and b and a["response"]["patch"] == b["response"]["patch"],
          "same pod twice (once dry-run): the same patch")


def case_namespace_isolation():
    reqs = [json.loads(line) for line in open(E["WH_REQUESTS"])]
    outside = [r["path"] for r in reqs
               if r["path"] != "/version" and not r["path"].startswith("/api/v1/namespaces/team-a/")]
    check(reqs and not outside, f"{len(reqs)} API requests, none outside the pod's namespace",
          outside)
    check(all(r["method"] == "GET" for r in reqs), "the webhook only ever GETs")


def case_token_rotation():
    write_atomic(E["WH_TOKEN"], TOKEN_2 + "\n")
    STATE["tokens"] = [TOKEN_2]
    save_state()
    status, resp = admit(E["WH_PLAIN"], review(pod(pull_secrets=["regcred"])))
    check(resp and resp["response"]["allowed"] is True, "rotated token: admitted", resp)
    last = json.loads(open(E["WH_REQUESTS"]).read().splitlines()[-1])
    check(last["token"] == TOKEN_2[-8:], "rotated token: the new token was used", last)


def served_cert(url, cafile):
    host, port = url.replace("https://", "").rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=cafile)
    import socket
    with socket.create_connection((host, int(port)), timeout=5) as s:
        with ctx.wrap_socket(s, server_hostname=host) as t:
            return t.getpeercert(binary_form=True)


def case_cert_rotation():
    def der(p):
        return ssl.PEM_cert_to_DER_cert(open(p).read())
    first = served_cert(E["WH_SIGNED"], E["WH_CA12"])
    check(first == der(E["WH_CERT"]), "serves the first certificate")
    # Rotate key and certificate (a new CA too), the way a Secret volume update lands: replaced
    # files, not rewritten ones.
    shutil.copy(E["WH_CERT2_KEY"], E["WH_CERT_KEY"] + ".new")
    os.chmod(E["WH_CERT_KEY"] + ".new", 0o600)
    os.replace(E["WH_CERT_KEY"] + ".new", E["WH_CERT_KEY"])
    shutil.copy(E["WH_CERT2"], E["WH_CERT"] + ".new")
    os.replace(E["WH_CERT"] + ".new", E["WH_CERT"])
    deadline = time.time() + 10
    got = first
    while time.time() < deadline and got != der(E["WH_CERT2"]):
        time.sleep(0.3)
        got = served_cert(E["WH_SIGNED"], E["WH_CA12"])
    check(got == der(E["WH_CERT2"]), "rotated certificate served (clients trusting old+new CA)")
    status, resp = post(E["WH_SIGNED"], review(pod(pull_secrets=["regcred"])), E["WH_CA12"])
    check(status == 200, "reviews after the rotation", status)


def case_health():
    for name in ("WH_SIGNED", "WH_PLAIN", "WH_DOWN"):
        status, body = get(E[name], "/healthz")
        check(status == 200, f"{name}: /healthz 200", status)
    check(get(E["WH_PLAIN"], "/readyz")[0] == 200, "/readyz 200 with the API reachable")
    status, body = get(E["WH_DOWN"], "/readyz")
    check(status == 503, "/readyz 503 with the API unreachable", f"{status} {body!r}")
    check(get(E["WH_PLAIN"], "/nope")[0] == 404, "unknown path: 404")


def main():
    save_state()
    write_atomic(E["WH_TOKEN"], TOKEN_1 + "\n", 0o600)
    cases = [case_pull_secrets_all_container_kinds,
             case_service_account_pull_secrets_and_no_annotations, case_own_list_of_impossible_names,
             case_forged_annotation_overwritten, case_update_changed_image, case_skipped_secrets,
             case_docker_hub, case_failures, case_malformed_reviews, case_ephemeral_subresource,
             case_ignored_and_deterministic, case_namespace_isolation, case_token_rotation,
             case_health, case_cert_rotation]
    if len(sys.argv) > 1 and sys.argv[1] == "--setup-only":
        return 0
    for c in cases:
        try:
            c()
        except Exception as e:  # a crash of the driver is a failure, not a pass
            check(False, c.__name__, repr(e))
    for name in ("WH_SIGNED", "WH_PLAIN", "WH_DOWN"):  # the processes survived everything
        check(get(E[name], "/healthz")[0] == 200, f"{name} still serving at the end")
    print(f"{checks} checks, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
