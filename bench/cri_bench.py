#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""pullgate-cri overhead, as same-run ratios (bench/README.md rules: no timed asserts).

  bench/cri_bench.py PATH/TO/pullgate-cri [N] [--baseline OTHER/pullgate-cri] [--work-us U]
                     [--no-pulls]

Starts a fake runtime (Python gRPC, generic handlers, on a unix socket) and
pullgate-cri in front of it, then measures, interleaved call by call:
  - a unary call of a 1 KiB message, direct vs through the proxy (median, p99, ratio);
  - the kubelet's ImageStatus with the pod's annotations (verification pulls: forwarded, then
    decided as the hook would), direct vs through the proxy vs through a proxy with
    criVerifyPulls false (the byte pump only), interleaved;
  - PullImage through the proxy (intent + pulled record + ImageStatus + aliases, all
    written durably before the answer) vs the same-size unary call through the proxy:
    the difference is the recording overhead a pull pays;
and the proxy's resident memory (VmRSS, VmHWM) afterwards. --baseline starts a second
proxy (e.g. an older build) on the same runtime and interleaves it too, so a change is
measured against its predecessor in the same run. --work-us adds a call whose runtime side
burns U microseconds of CPU (a runtime doing real work, as containerd does: ListImages, Version
and the like cost it a millisecond or more), measured the same way. Pulls are measured twice:
with the record directory on the disk (what a node pays: the store's fsyncs) and on
tmpfs (/dev/shm: pullgate-cri's own work, decoding, ImageStatus and the writer thread).
"""
import argparse
import hashlib
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
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
    def __init__(self, pb, work_us):
        self.pb = pb
        self.work_us = work_us

    def service(self, details):
        m = details.method
        if m == "/bench/Echo":
            return grpc.unary_unary_rpc_method_handler(lambda req, ctx: req)
        if m == "/bench/Work":
            return grpc.unary_unary_rpc_method_handler(self.work)
        if m.endswith("/PullImage"):
            return grpc.unary_unary_rpc_method_handler(self.pull)
        if m.endswith("/ImageStatus"):
            return grpc.unary_unary_rpc_method_handler(self.status)
        return None

    def work(self, req, ctx):
        until = time.perf_counter_ns() + self.work_us * 1000
        while time.perf_counter_ns() < until:
            pass
        return req

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


def cpu_us(pid):
    """User + system CPU of a process so far, in us (/proc/PID/stat, clock ticks)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1e6 / os.sysconf("SC_CLK_TCK")


def start_proxy(cri, tmp, state, sock, rt_sock, extra=""):
    os.mkdir(state, 0o700)
    cfg = os.path.join(tmp, "config-%d.json" % len(os.listdir(tmp)))
    with open(cfg, "w") as f:
        f.write('{"stateDir":"%s","readOnlyRecordDirs":[],"dbus":"none"%s}' % (state, extra))
    os.chmod(cfg, 0o600)
    proc = subprocess.Popen([cri, "--config", cfg, "--listen", "unix://" + sock,
                             "--runtime-endpoint", "unix://" + rt_sock], stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    return proc


def interleaved(n, payload, sides):
    """Calls every side in turn, n rounds, rotating who goes first; latencies in us per side."""
    out = [[] for _ in sides]
    for i in range(n):
        for k in range(len(sides)):
            j = (i + k) % len(sides)
            out[j].append(timed(lambda: sides[j](payload, timeout=5)))
    return out


def report(title, names, results):
    print(title)
    for name, us in zip(names, results):
        print(summary("  " + name, us))
    base = results[0]
    for name, us in zip(names[1:], results[1:]):
        print("  ratio %s/%s: median %.2fx  p99 %.2fx" % (
            name, names[0], statistics.median(us) / statistics.median(base),
            pct(us, 0.99) / pct(base, 0.99)))


def noise(us):
    """Spread of one side's medians over 5 consecutive slices: how far run-to-run drift goes."""
    k = max(1, len(us) // 5)
    meds = [statistics.median(us[i:i + k]) for i in range(0, k * 5, k)]
    return "slice medians %s us" % " ".join("%.0f" % m for m in meds)


def parse_args(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("cri")
    ap.add_argument("n", nargs="?", type=int, default=2000)
    ap.add_argument("--baseline", help="another pullgate-cri, interleaved in the same run")
    ap.add_argument("--work-us", type=int, default=0, help="also measure a call costing the runtime U us")
    ap.add_argument("--no-pulls", action="store_true", help="skip the PullImage measurements")
    ap.add_argument("--runtime", metavar="SOCK",
                    help="a real CRI runtime's socket (e.g. containerd's): measure its Version and "
                         "ListImages direct vs proxied, nothing else")
    return ap.parse_args(argv)


def bench_runtime(args, tmp):
    """Version and ListImages (empty requests) on a real runtime, direct vs through the proxy."""
    rt = args.runtime
    procs = [start_proxy(args.cri, tmp, os.path.join(tmp, "state"), os.path.join(tmp, "run", "cri.sock"), rt)]
    names, socks = ["direct", "proxied"], [rt, os.path.join(tmp, "run", "cri.sock")]
    if args.baseline:
        socks.append(os.path.join(tmp, "run3", "cri.sock"))
        procs.append(start_proxy(args.baseline, tmp, os.path.join(tmp, "state3"), socks[-1], rt))
        names.append("baseline")
    try:
        chans = [grpc.insecure_channel("unix:" + s) for s in socks]
        for method in ("/runtime.v1.RuntimeService/Version", "/runtime.v1.ImageService/ListImages"):
            calls = [c.unary_unary(method) for c in chans]
            interleaved(100, b"", calls)
            res = interleaved(args.n, b"", calls)
            report("%s against %s (%d rounds):" % (method, rt, args.n), names, res)
            print("  noise: direct %s; proxied %s" % (noise(res[0]), noise(res[1])))
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=20)


def bench_image_status(pb, tmp, cri, rt_sock, chans, n):
    """The kubelet's ImageStatus (EnsureImageExists: every pod annotation in ImageSpec), direct,
    through the proxy (decided: the record store is read) and through a proxy with
    criVerifyPulls false (forwarded as bytes), interleaved."""
    sock = os.path.join(tmp, "run5", "cri.sock")
    plain = start_proxy(cri, tmp, os.path.join(tmp, "state5"), sock, rt_sock,
                        ',"criVerifyPulls":false')
    try:
        image = b"registry.example.com/bench/app:1.0"
        creds = (b'{"registry.example.com/bench/app":{"kubernetesSecrets":[{"namespace":"bench",'
                 b'"name":"regcred","uid":"5c3f0b7e-0000-4000-8000-000000000001","credentialHash":"'
                 + hashlib.sha256(b"bench").hexdigest().encode() + b'"}]}}')
        ann = [pb.StringMapEntry(key=k, value=v) for k, v in (
            (b"kubernetes.io/config.source", b"api"),
            (b"kubernetes.io/config.seen", b"2026-11-25T09:00:00.123456789Z"),
            (b"kubectl.kubernetes.io/last-applied-configuration", b"{" + b"x" * 600 + b"}"),
            (b"pullgate.dev/credentials", creds))]
        req = pb.ImageStatusRequest(image=pb.ImageSpec(image=image, annotations=ann)).SerializeToString()
        method = "/runtime.v1.ImageService/ImageStatus"
        calls = [c.unary_unary(method) for c in chans]
        calls.append(grpc.insecure_channel("unix:" + sock).unary_unary(method))
        names = ["direct", "proxied (decided)", "proxied, criVerifyPulls false"]
        interleaved(100, req, calls)
        res = interleaved(max(500, n // 2), req, calls)
        report("kubelet ImageStatus with pod annotations (%d bytes, %d rounds):" % (
            len(req), len(res[0])), names, res)
        print("  noise: direct %s; proxied %s" % (noise(res[0]), noise(res[1])))
    finally:
        plain.terminate()
        plain.wait(timeout=20)


def main():
    args = parse_args(sys.argv[1:])
    cri, n = args.cri, args.n
    tmp = tempfile.mkdtemp(prefix="cri-bench-")
    if args.runtime:
        try:
            bench_runtime(args, tmp)
        finally:
            subprocess.run(["rm", "-rf", tmp])
        return
    pb = load_proto(tmp)
    rt_sock, px_sock = os.path.join(tmp, "rt.sock"), os.path.join(tmp, "run", "cri.sock")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((Fake(pb, args.work_us),))
    server.add_insecure_port("unix:" + rt_sock)
    server.start()
    shm = tempfile.mkdtemp(prefix="cri-bench-", dir="/dev/shm") if os.path.isdir("/dev/shm") else None
    proxy = start_proxy(cri, tmp, os.path.join(tmp, "state"), px_sock, rt_sock)
    tmpfs_sock = os.path.join(tmp, "run2", "cri.sock")
    tmpfs_proxy = None
    if shm and not args.no_pulls:
        tmpfs_proxy = start_proxy(cri, tmp, os.path.join(shm, "state"), tmpfs_sock, rt_sock)
    base_proxy, base_sock = None, os.path.join(tmp, "run3", "cri.sock")
    base_tmpfs_proxy, base_tmpfs_sock = None, os.path.join(tmp, "run4", "cri.sock")
    if args.baseline:
        base_proxy = start_proxy(args.baseline, tmp, os.path.join(tmp, "state3"), base_sock, rt_sock)
        if shm and not args.no_pulls:
            base_tmpfs_proxy = start_proxy(args.baseline, tmp, os.path.join(shm, "state4"),
                                           base_tmpfs_sock, rt_sock)
    try:
        names = ["direct", "proxied"] + (["baseline"] if base_proxy else [])
        socks = [rt_sock, px_sock] + ([base_sock] if base_proxy else [])
        chans = [grpc.insecure_channel("unix:" + s) for s in socks]
        echo = [c.unary_unary("/bench/Echo") for c in chans]
        proxied = echo[1]
        pull = chans[1].unary_unary("/runtime.v1.ImageService/PullImage")
        payload = os.urandom(1024)
        interleaved(200, payload, echo)  # warm up every path and its connections
        proxies = [proxy] + ([base_proxy] if base_proxy else [])
        cpu0 = [cpu_us(x.pid) for x in proxies]
        res = interleaved(n, payload, echo)
        cpu = [(cpu_us(x.pid) - c0) / n for x, c0 in zip(proxies, cpu0)]
        d, p = res[0], res[1]
        print("pullgate-cri bench: %d interleaved rounds (%s)" % (n, ", ".join(names)))
        report("unary 1 KiB echo:", names, res)
        print("  noise: direct %s; proxied %s" % (noise(d), noise(p)))
        # Less noisy than latency on a shared machine (the clock tick is 10 ms: +-5 us at 2,000 calls).
        print("  proxy CPU per call (user+system): %s" % ", ".join(
            "%s %.0f us" % (name, c) for name, c in zip(names[1:], cpu)))
        bench_image_status(pb, tmp, cri, rt_sock, chans[:2], n)
        if args.work_us:
            work = [c.unary_unary("/bench/Work") for c in chans]
            report("unary 1 KiB, the runtime working %d us per call:" % args.work_us, names,
                   interleaved(max(200, n // 4), payload, work))
        if args.no_pulls:
            return
        def pull_on(proc, sock):
            if not proc:
                return None
            return grpc.insecure_channel("unix:" + sock).unary_unary(
                "/runtime.v1.ImageService/PullImage")
        # Every side pulls the same new image in turn, rotating who goes first.
        sides = [("same-size unary through the proxy", proxied),
                 ("PullImage through the proxy", pull),
                 ("PullImage, records on tmpfs", pull_on(tmpfs_proxy, tmpfs_sock)),
                 ("baseline PullImage", pull_on(base_proxy, base_sock)),
                 ("baseline PullImage, records on tmpfs",
                  pull_on(base_tmpfs_proxy, base_tmpfs_sock))]
        sides = [(name, fn) for name, fn in sides if fn]
        lat = {name: [] for name, _ in sides}
        for i in range(max(50, n // 10)):
            req = pb.PullImageRequest(image=pb.ImageSpec(
                image=b"registry.example.com/bench/app:%d" % i)).SerializeToString()
            for k in range(len(sides)):
                name, fn = sides[(i + k) % len(sides)]
                lat[name].append(timed(lambda: fn(req, timeout=10)))
        same, pulls = lat["same-size unary through the proxy"], lat["PullImage through the proxy"]
        pulls_tmpfs = lat.get("PullImage, records on tmpfs")
        print("%d pulls:" % len(pulls))
        print(summary("same-size unary through the proxy", same))
        print(summary("PullImage through the proxy", pulls))
        print("  recording overhead per pull (median difference): %.2f ms" % (
            (statistics.median(pulls) - statistics.median(same)) / 1000.0))
        if pulls_tmpfs:
            print(summary("PullImage, records on tmpfs", pulls_tmpfs))
            print("  overhead without the disk's fsyncs: %.2f ms" % (
                (statistics.median(pulls_tmpfs) - statistics.median(same)) / 1000.0))
        for name in ("baseline PullImage", "baseline PullImage, records on tmpfs"):
            if name in lat:
                print(summary(name, lat[name]))
                print("  baseline recording overhead%s: %.2f ms" % (
                    " on tmpfs" if "tmpfs" in name else "",
                    (statistics.median(lat[name]) - statistics.median(same)) / 1000.0))
        print("  proxy memory: VmRSS %d KiB, VmHWM %d KiB" % (
            proc_kib(proxy.pid, "VmRSS"), proc_kib(proxy.pid, "VmHWM")))
    finally:
        for p in (proxy, tmpfs_proxy, base_proxy, base_tmpfs_proxy):
            if p:
                p.terminate()
                p.wait(timeout=20)
        server.stop(0)
        subprocess.run(["rm", "-rf", tmp] + ([shm] if shm else []))


if __name__ == "__main__":
    main()
