#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""pullgate-webhook throughput and latency at loopback (bench/README.md: reports, never fails).

Starts the Kubernetes API stand-in of the tests (test/integration/webhook_apiserver.py: TLS,
bearer token, keep-alive) and one pullgate-webhook with the annotation HMAC on, then sends
AdmissionReviews for a pod with SECRETS pull secrets (1 + SECRETS API lookups per review) over
keep-alive TLS connections from CONCURRENCY client threads. The same clients also time GET /healthz
on the same server, in rounds alternating with the reviews: the TLS + HTTP floor of this machine, so the review cost is
reported as a ratio to it as well as in milliseconds. RSS is the webhook's VmHWM/VmRSS at the end.

usage: webhook_bench.py WEBHOOK_BINARY [--requests N] [--concurrency C] [--secrets K]
"""
import argparse
import base64
import http.client
import json
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = os.path.join(HERE, "..", "test", "integration", "webhook_apiserver.py")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, secs=10):
    deadline = time.time() + secs
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"process exited: {proc.args}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"port {port} never opened")


def certs(d):
    def run(*a):
        subprocess.run(a, check=True, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for ca in ("api-ca", "wh-ca"):
        run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-days", "1", "-subj", f"/CN={ca}", "-keyout", f"{ca}.key", "-out", f"{ca}.crt")
    for leaf, ca in (("api", "api-ca"), ("wh", "wh-ca")):
        run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-subj", f"/CN={leaf}", "-keyout", f"{leaf}.key", "-out", f"{leaf}.csr")
        with open(os.path.join(d, f"{leaf}.ext"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\n")
        run("openssl", "x509", "-req", "-in", f"{leaf}.csr", "-CA", f"{ca}.crt", "-CAkey",
            f"{ca}.key", "-CAcreateserial", "-days", "1", "-extfile", f"{leaf}.ext", "-out",
            f"{leaf}.crt")
        os.chmod(os.path.join(d, f"{leaf}.key"), 0o600)


def state(n_secrets, token):
    objects = {}
    for i in range(n_secrets):
        cfg = {"auths": {"registry.example.com": {"auth": base64.b64encode(
            f"user{i}:pass{i}".encode()).decode()}}}
        objects[f"/api/v1/namespaces/team-a/secrets/regcred{i}"] = {
            "kind": "Secret", "apiVersion": "v1",
            "metadata": {"name": f"regcred{i}", "namespace": "team-a", "uid": f"uid-{i}"},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(json.dumps(cfg).encode()).decode()}}
    objects["/api/v1/namespaces/team-a/serviceaccounts/default"] = {
        "kind": "ServiceAccount", "apiVersion": "v1",
        "metadata": {"name": "default", "namespace": "team-a", "uid": "uid-sa"}}
    return {"tokens": [token], "objects": objects}


def review(n_secrets):
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "team-a", "name": "app", "operation": "CREATE",
        "object": {"kind": "Pod", "apiVersion": "v1",
                   "metadata": {"name": "app", "namespace": "team-a"},
                   "spec": {"containers": [
                       {"name": "app", "image": "registry.example.com/team-a/app:1.0"},
                       {"name": "side", "image": "registry.example.com/team-a/side:2.0"}],
                       "imagePullSecrets": [{"name": f"regcred{i}"}
                                            for i in range(n_secrets)]}}}}).encode()


def client(port, ca, body, n, out, errors, method):
    ctx = ssl.create_default_context(cafile=ca)
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    for _ in range(n):
        t0 = time.perf_counter()
        if method == "POST":
            conn.request("POST", "/mutate", body=body,
                         headers={"Content-Type": "application/json"})
        else:
            conn.request("GET", "/healthz")
        r = conn.getresponse()
        data = r.read()
        dt = time.perf_counter() - t0
        if r.status != 200 or (method == "POST" and b'"allowed":true' not in data):
            errors.append(data[:200])
        out.append(dt)
    conn.close()


def measure(port, ca, body, requests, concurrency, method):
    """Latencies (s) of requests spread over concurrency clients, and the wall time."""
    lat, errors, threads = [], [], []
    per = max(1, requests // concurrency)
    t0 = time.perf_counter()
    for _ in range(concurrency):
        t = threading.Thread(target=client, args=(port, ca, body, per, lat, errors, method))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    return lat, errors, time.perf_counter() - t0


def interleaved(port, ca, body, requests, concurrency, rounds=20):
    """Reviews and the /healthz floor in alternating rounds, so both see the same machine load."""
    out = {m: {"lat": [], "errors": 0, "wall": 0.0} for m in ("POST", "GET")}
    for _ in range(rounds):
        for m in ("GET", "POST"):
            lat, errors, wall = measure(port, ca, body, requests // rounds, concurrency, m)
            out[m]["lat"] += lat
            out[m]["errors"] += len(errors)
            out[m]["wall"] += wall
    return [summary(out[m]) for m in ("POST", "GET")]


def summary(m):
    lat = sorted(m["lat"])
    return {"n": len(lat), "errors": m["errors"], "per_s": len(lat) / m["wall"],
            "p50_ms": lat[len(lat) // 2] * 1000,
            "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
            "mean_ms": statistics.fmean(lat) * 1000}


def server_side(log, n):
    """p50/p99 of the webhook's own durationMs for the last n reviews (its structured log)."""
    durations = [json.loads(line)["durationMs"] for line in open(log)
                 if '"msg":"admission review"' in line][-n:]
    durations.sort()
    return (durations[len(durations) // 2],
            durations[min(len(durations) - 1, int(len(durations) * 0.99))])


def rss_kib(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = int(line.split()[1])
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("webhook")
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--secrets", type=int, default=2)
    a = p.parse_args()
    d = tempfile.mkdtemp(prefix="pg-webhook-bench.")
    procs = []
    try:
        certs(d)
        token = uuid.uuid4().hex
        with open(os.path.join(d, "token"), "w") as f:
            f.write(token)
        with open(os.path.join(d, "state.json"), "w") as f:
            json.dump(state(a.secrets, token), f)
        with open(os.path.join(d, "hmac.key"), "wb") as f:
            f.write(os.urandom(32))
        os.chmod(os.path.join(d, "hmac.key"), 0o400)
        api_port, wh_port = free_port(), free_port()
        api = subprocess.Popen([sys.executable, STANDIN, "--port", str(api_port), "--cert",
                                f"{d}/api.crt", "--key", f"{d}/api.key", "--state",
                                f"{d}/state.json", "--log", f"{d}/requests.log"])
        procs.append(api)
        wait_port(api_port, api)
        wh = subprocess.Popen([a.webhook, "--listen", f"127.0.0.1:{wh_port}", "--tls-cert",
                               f"{d}/wh.crt", "--tls-key", f"{d}/wh.key", "--api-server",
                               f"https://127.0.0.1:{api_port}", "--api-ca", f"{d}/api-ca.crt",
                               "--api-token-file", f"{d}/token", "--hmac-key-file",
                               f"{d}/hmac.key"], stderr=open(f"{d}/webhook.log", "w"))
        procs.append(wh)
        wait_port(wh_port, wh)
        body = review(a.secrets)
        ca = f"{d}/wh-ca.crt"
        measure(wh_port, ca, body, 100, 1, "POST")  # warm-up: connections to the API, caches
        rev, floor = interleaved(wh_port, ca, body, a.requests, a.concurrency)
        mem = rss_kib(wh.pid)
        server = server_side(f"{d}/webhook.log", rev["n"])
        print(f"| webhook review ({a.secrets} pull secrets, {1 + a.secrets} API GETs, HMAC, "
              f"{a.concurrency} clients) | {rev['per_s']:.0f}/s | p50 {rev['p50_ms']:.2f} ms | "
              f"p99 {rev['p99_ms']:.2f} ms | errors {rev['errors']}/{rev['n']} |")
        print(f"| the same reviews, inside the webhook (request read to answer queued) | | "
              f"p50 {server[0]:.2f} ms | p99 {server[1]:.2f} ms | |")
        print(f"| floor: GET /healthz, same server and clients | {floor['per_s']:.0f}/s | "
              f"p50 {floor['p50_ms']:.2f} ms | p99 {floor['p99_ms']:.2f} ms | "
              f"errors {floor['errors']}/{floor['n']} |")
        print(f"| review / floor (p50) | {rev['p50_ms'] / floor['p50_ms']:.1f}x | "
              f"target p99 <= 5 ms (in the webhook): {'met' if server[1] <= 5 else 'NOT met'} | "
              f"webhook RSS {mem.get('VmRSS', 0)} KiB, peak {mem.get('VmHWM', 0)} KiB | |")
        return 0 if rev["errors"] == 0 else 1
    finally:
        for pr in procs:
            pr.terminate()
            try:
                pr.wait(5)
            except subprocess.TimeoutExpired:
                pr.kill()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
