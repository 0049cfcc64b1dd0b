#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A Kubernetes API server stand-in for pullgate-webhook's tests (loopback, TLS, bearer token).

It serves GET /api/v1/namespaces/NS/{secrets,serviceaccounts}/NAME and GET /version the way
kube-apiserver does: objects as stored in the state file, a v1 Status for 404 NotFound, 401
Unauthorized (wrong or missing bearer token) and any injected failure. The state file is re-read
whenever it changed (mtime and size), so a test changes behaviour (tokens, objects, failures) by
rewriting it (atomically, with a new mtime):

  {"tokens": ["..."],                       accepted bearer tokens
   "objects": {"/api/v1/...": {...}},       path -> object
   "fail": {"/api/v1/...": 500},            path -> HTTP status answered with a Status
   "delayMs": {"/api/v1/...": 100}}         path -> delay before answering

Every request is appended to the log file as one JSON line {"method","path","token"} (the token's
last 8 characters only), so a test can prove which objects were read and with which token.
"""
import argparse
import json
import os
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"key": None, "value": None}


def load_state(path):
    st = os.stat(path)
    key = (st.st_mtime_ns, st.st_size, st.st_ino)
    with LOCK:
        if STATE["key"] != key:
            with open(path) as f:
                STATE["value"] = json.load(f)
            STATE["key"] = key
        return STATE["value"]


def serialized(state, path):
    """An object's JSON text, made once per state version."""
    cache = state.setdefault("_text", {})
    if path not in cache:
        cache[path] = json.dumps(state["objects"][path]).encode()
    return cache[path]
REASONS = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 500: "InternalError",
           503: "ServiceUnavailable", 429: "TooManyRequests"}


def status_object(code, message, details=None):
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": REASONS.get(code, "Unknown"), "code": code}
    if details:
        s["details"] = details
    return s


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as kube-apiserver
    server_version = "kube-apiserver-standin"

    def setup(self):
        super().setup()
        # Headers and body are two writes: without this, Nagle + delayed ACK add ~40 ms to
        # every keep-alive answer (kube-apiserver, in Go, sets TCP_NODELAY too).
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):  # quiet; the JSON log is the record
        pass

    def send_json(self, code, obj, body=None):
        body = body or json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def record(self, token):
        with LOCK, open(self.server.log_path, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "token": token[-8:] if token else ""}) + "\n")

    def do_GET(self):
        state = load_state(self.server.state_path)
        auth = self.headers.get("Authorization", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        self.record(token)
        delay = state.get("delayMs", {}).get(self.path)
        if delay:
            time.sleep(delay / 1000)
        if token not in state.get("tokens", []):
            return self.send_json(401, status_object(401, "Unauthorized"))
        if self.path == "/version":
            return self.send_json(200, {"major": "1", "minor": "35", "gitVersion": "v1.35.0",
                                        "platform": "linux/amd64"})
        code = state.get("fail", {}).get(self.path)
        if code:
            return self.send_json(code, status_object(code, f"injected failure {code}"))
        obj = state.get("objects", {}).get(self.path)
        if obj is not None:
            return self.send_json(200, None, serialized(state, self.path))
        parts = self.path.split("/")
        # /api/v1/namespaces/NS/RESOURCE/NAME
        if len(parts) == 7 and parts[1:4] == ["api", "v1", "namespaces"]:
            resource, name = parts[5], parts[6]
            return self.send_json(404, status_object(
                404, f'{resource} "{name}" not found', {"name": name, "kind": resource}))
        return self.send_json(404, status_object(404, "the server could not find the "
                                                      "requested resource"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--state", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--workers", type=int, default=1,
                   help="processes sharing the port (SO_REUSEPORT): Python's GIL is the bound")
    a = p.parse_args()
    for _ in range(a.workers - 1):  # children serve too; they end with the parent's group
        if os.fork() == 0:
            break
    srv = ReusePortServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    srv.state_path, srv.log_path = a.state, a.log
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.serve_forever()


class ReusePortServer(ThreadingHTTPServer):
    def server_bind(self):
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()


if __name__ == "__main__":
    main()
