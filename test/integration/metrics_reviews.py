#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_metrics.sh's webhook traffic: AdmissionReviews with known outcomes, and connections
held open from one address to reach the per-peer bound.

  metrics_reviews.py review URL CA NS POD_SECRET     POST one review; prints the outcome seen
  metrics_reviews.py annotate URL CA NS POD_SECRET IMAGE   POST one review of a pod running IMAGE;
                                                     prints the credentials annotation it adds
  metrics_reviews.py hold URL COUNT SECONDS          open COUNT TCP connections, keep them
"""
import base64
import http.client
import json
import socket
import ssl
import sys
import time
import uuid


def review(ns, secret, image="registry.example.com/team-a/app:1.0"):
    pod = {"kind": "Pod", "apiVersion": "v1",
           "metadata": {"name": "app", "namespace": ns, "uid": str(uuid.uuid4())},
           "spec": {"containers": [{"name": "c0", "image": image}],
                    "imagePullSecrets": [{"name": secret}], "serviceAccountName": "default"}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": str(uuid.uuid4()),
                        "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "name": "app", "namespace": ns, "operation": "CREATE",
                        "userInfo": {"username": "alice"}, "object": pod, "dryRun": False}}


def post(url, ca, body):
    host, port = url.replace("https://", "").rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=ca)
    c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
    try:
        c.request("POST", "/mutate", body=json.dumps(body).encode(),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read())
    finally:
        c.close()


def main():
    if sys.argv[1] == "review":
        url, ca, ns, secret = sys.argv[2:6]
        status, answer = post(url, ca, review(ns, secret))
        resp = answer["response"]
        print("patched" if resp.get("patch") else
              "allowed" if resp["allowed"] else "refused:" + resp["status"]["message"])
        return 0 if status == 200 else 1
    if sys.argv[1] == "annotate":
        url, ca, ns, secret, image = sys.argv[2:7]
        status, answer = post(url, ca, review(ns, secret, image))
        resp = answer["response"]
        for op in json.loads(base64.b64decode(resp.get("patch", "W10="))):
            value = op.get("value")
            if op["path"] == "/metadata/annotations" and isinstance(value, dict):
                value = value.get("pullgate.dev/credentials")
            elif op["path"] != "/metadata/annotations/pullgate.dev~1credentials":
                continue
            if isinstance(value, str):
                print(value)
                return 0
        print(f"no annotation in the answer: {resp}", file=sys.stderr)
        return 1
    if sys.argv[1] == "hold":
        host, port = sys.argv[2].replace("https://", "").rsplit(":", 1)
        held = [socket.create_connection((host, int(port)), timeout=5)
                for _ in range(int(sys.argv[3]))]
        print("held", flush=True)  # the caller waits for this line, not for a fixed time
        time.sleep(float(sys.argv[4]))
        for s in held:
            s.close()
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
