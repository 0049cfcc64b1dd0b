#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""pullgate-cri overhead, as same-run ratios (bench/README.md rules: no timed asserts).

  bench/cri_bench.py PATH/TO/pullgate-cri [N]

Starts a fake runtime (Python gRPC, generic handlers, on a unix socket) and
pullgate-cri in front of it, then measures, interleaved call by call:
  - a unary call of a 1 KiB message, direct vs through the proxy (median, p99, ratio);
  - PullImage through the proxy (intent + pulled record + ImageStatus + aliases, all
    written durably before the answer) vs the same-size unary call through the proxy:
    the difference is the recording overhead a pull pays;
and the proxy's resident memory (VmRSS, VmHWM) afterwards. Pulls are measured twice:
with the record directory on the disk (what a node pays: the store's fsyncs) and on
tmpfs (/dev/shm: pullgate-cri's own work, decoding, ImageStatus and the writer thread).
"""
import hashlib
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))


def load_proto(tmp):
    proto_dir = os.path.join(HERE, "..", "cri")
    if protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + tmp,
                    os.path.join(proto_dir, "cri_subset.proto")]) != 0:
        raise SystemExit("protoc failed")
    sys.path.insert(0, tmp)
    return importlib.import_module("cri_subset_pb2")


class Fake(grpc.GenericRpcHandler):
    def __init__(self, pb):
        self.pb = pb

    def service(self, details):
        m = details.method
        if m == "/bench/Echo":
            return grpc.unary_unary_rpc_method_handler(lambda req, ctx: req)
        if m.endswith("/PullImage"):
            return grpc.unary_unary_rpc_method_handler(self.pull)
        if m.endswith("/ImageStatus"):
            return grpc.unary_unary_rpc_method_handler(self.status)
        return None

    def pull(self, raw, ctx):
        image = self.pb.PullImageRequest.FromString(raw).image.image
        ref = b"sha256:" + hashlib.sha256(image).hexdigest().encode()
        return self.pb.PullImageResponse(image_ref=ref).SerializeToString()

    def status(self, raw, ctx):
        ref = self.pb.ImageStatusRequest.FromString(raw).image.image
        img = self.pb.Image(id=ref, repo_tags=[b"registry.example.com/bench/app:1.0"])
        return self.pb.ImageStatusResponse(image=img).SerializeToString()


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))]


def summary(name, us):
    return "%-34s median %8.1f us   p99 %8.1f us" % (name, statistics.median(us), pct(us, 0.99))


def timed(fn):
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1000.0


def proc_kib(pid, key):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def start_proxy(cri, tmp, state, sock, rt_sock):
    os.mkdir(state, 0o700)
    cfg = os.path.join(tmp, "config-%d.json" % len(os.listdir(tmp)))
    with open(cfg, "w") as f:
        f.write('{"stateDir":"%s","readOnlyRecordDirs":[],"dbus":"none"}' % state)
    os.chmod(cfg, 0o600)
    proc = subprocess.Popen([cri, "--config", cfg, "--listen", "unix://" + sock,
                             "--runtime-endpoint", "unix://" + rt_sock], stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    return proc


def main():
    cri = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    tmp = tempfile.mkdtemp(prefix="cri-bench-")
    pb = load_proto(tmp)
    rt_sock, px_sock = os.path.join(tmp, "rt.sock"), os.path.join(tmp, "run", "cri.sock")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((Fake(pb),))
    server.add_insecure_port("unix:" + rt_sock)
    server.start()
    shm = tempfile.mkdtemp(prefix="cri-bench-", dir="/dev/shm") if os.path.isdir("/dev/shm") else None
    proxy = start_proxy(cri, tmp, os.path.join(tmp, "state"), px_sock, rt_sock)
    tmpfs_sock = os.path.join(tmp, "run2", "cri.sock")
    tmpfs_proxy = start_proxy(cri, tmp, os.path.join(shm, "state"), tmpfs_sock, rt_sock) if shm else None
    try:
        direct = grpc.insecure_channel("unix:" + rt_sock).unary_unary("/bench/Echo")
        ch = grpc.insecure_channel("unix:" + px_sock)
        proxied = ch.unary_unary("/bench/Echo")
        pull = ch.unary_unary("/runtime.v1.ImageService/PullImage")
        payload = os.urandom(1024)
        for _ in range(200):  # warm up both paths and the connections
            direct(payload, timeout=5)
            proxied(payload, timeout=5)
        d, p = [], []
        for _ in range(n):
            d.append(timed(lambda: direct(payload, timeout=5)))
            p.append(timed(lambda: proxied(payload, timeout=5)))
        pull_tmpfs = None
        if tmpfs_proxy:
            pull_tmpfs = grpc.insecure_channel("unix:" + tmpfs_sock).unary_unary(
                "/runtime.v1.ImageService/PullImage")
        pulls, same, pulls_tmpfs = [], [], []
        for i in range(max(50, n // 10)):
            req = pb.PullImageRequest(image=pb.ImageSpec(
                image=b"registry.example.com/bench/app:%d" % i)).SerializeToString()
            pulls.append(timed(lambda: pull(req, timeout=10)))
            same.append(timed(lambda: proxied(req, timeout=10)))
            if pull_tmpfs:
                pulls_tmpfs.append(timed(lambda: pull_tmpfs(req, timeout=10)))
        print("pullgate-cri bench: %d interleaved unary calls per side, %d pulls" % (n, len(pulls)))
        print(summary("unary direct", d))
        print(summary("unary through pullgate-cri", p))
        print("  ratio proxied/direct: median %.2fx  p99 %.2fx" % (
            statistics.median(p) / statistics.median(d), pct(p, 0.99) / pct(d, 0.99)))
        print(summary("same-size unary through the proxy", same))
        print(summary("PullImage through the proxy", pulls))
        print("  recording overhead per pull (median difference): %.2f ms" % (
            (statistics.median(pulls) - statistics.median(same)) / 1000.0))
        if pulls_tmpfs:
            print(summary("PullImage, records on tmpfs", pulls_tmpfs))
            print("  overhead without the disk's fsyncs: %.2f ms" % (
                (statistics.median(pulls_tmpfs) - statistics.median(same)) / 1000.0))
        print("  proxy memory: VmRSS %d KiB, VmHWM %d KiB" % (
            proc_kib(proxy.pid, "VmRSS"), proc_kib(proxy.pid, "VmHWM")))
    finally:
        for p in (proxy, tmpfs_proxy):
            if p:
                p.terminate()
                p.wait(timeout=20)
        server.stop(0)
        subprocess.run(["rm", "-rf", tmp] + ([shm] if shm else []))


if __name__ == "__main__":
    main()
