#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The kubelet's start of one container, with pullgate and without, on a real containerd.

  bench/start_bench.py --cd-sock SOCK --proxy-sock SOCK --gen-dir DIR --image IMG
                       --pod ID=CONFIG --plain-pod ID=CONFIG [--rounds N] [--parallel P]
                       [--batches B] [--label L]

Started by bench/start_path.sh, which sets up the node. Per container the kubelet's sequence
(pkg/kubelet/kuberuntime: EnsureImageExists, then startContainer), RunPodSandbox excluded (done
once per pod beforehand):

  ImageStatus with every pod annotation in ImageSpec  (image service)
  CreateContainer                                      (runtime service)
  StartContainer                                       (runtime service)

Two sides, alternating, the order rotating each round:
  with     - the image service through pullgate-cri (--proxy-sock), the runtime service direct,
             the pod on the runtime handler whose base_runtime_spec runs pullgate-hook
             (the recommended split, docs/kubelet-setup.md);
  without  - everything direct to containerd, the pod on a handler without the hook.
  noop-hook - (with --noop-pod) all direct, the pod on a handler whose base spec runs a no-op
             hook at the same stage: what any createRuntime hook costs runc and containerd.
The timed part is the three calls; the containers are stopped and removed between rounds,
untimed. Serial: one container per side per round. Parallel: P containers of one side started
at once from P threads (a node starting a ReplicaSet's pods), its wall time from the first call
to the last answer.

The client is Python gRPC (the integration tests' client, test/integration/cri/cri_client.py):
~0.3 ms per call on both sides, ~1 ms per start against ~100 ms for the start itself, so it
dilutes the ratio by under 1 %; the unary ratios, where it would not, use grpc_unary_bench (C).

--pulls N: afterwards, the image is removed and pulled again N times per side, alternating: with
pullgate through pullgate-cri (the pull recorded durably before the answer), without direct; both
with the pod's sandbox config and the registry credentials, as the kubelet pulls.

Prints one line per side and mode:
  start side=with mode=serial records=L n=N fail=F median_ms=.. p90_ms=.. mean_ms=.. min_ms=..
  paired side=with mode=serial records=L n=N median_ratio=.. mean_diff_ms=.. ci95_ms=.. mean_ratio=..
  pull side=with mode=serial records=L n=N fail=F median_ms=..   (with --pulls)
"""
import argparse
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
sys.path.insert(0, os.path.join(HERE, "..", "test", "integration", "cri"))
import cri_client  # noqa: E402  (the test client's proto and request builders)


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))]


class Side:
    def __init__(self, name, pb, image_stub, runtime_stub, pod_id, spec, image):
        self.name, self.pb, self.im, self.rt = name, pb, image_stub, runtime_stub
        self.pod_id, self.spec, self.image = pod_id, spec, image
        self.serial, self.batches, self.fail = [], [], 0
        self.sandbox = cri_client.pod_config(pb, spec)
        self.status_req = pb.ImageStatusRequest(
            image=cri_client.pod_image_spec(pb, image, spec))
        self.seq = 0
        self.lock = threading.Lock()

    def container_config(self):
        with self.lock:
            self.seq += 1
            name = "bench-%s-%d" % (self.name, self.seq)
        pb = self.pb
        return pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name, attempt=0),
            image=pb.ImageSpec(image=self.image),
            command=["/bin/sleep"], args=["3600"],
            labels={"io.kubernetes.container.name": name,
                    "io.kubernetes.pod.name": self.spec["name"],
                    "io.kubernetes.pod.namespace": self.spec["namespace"],
                    "io.kubernetes.pod.uid": self.spec["uid"]},
            log_path=name + ".log",
            linux=pb.LinuxContainerConfig(security_context=pb.LinuxContainerSecurityContext(
                namespace_options=pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER,
                                                     ipc=pb.POD))))

    def start_one(self):
        """The kubelet's three calls; returns (ms, container id or None)."""
        cfg = self.container_config()
        t0 = time.perf_counter_ns()
        cid = None
        try:
            st = self.im.ImageStatus(self.status_req, timeout=30)
            if not st.image.id:
                raise RuntimeError("ImageStatus: image not present (denied?)")
            cid = self.rt.CreateContainer(self.pb.CreateContainerRequest(
                pod_sandbox_id=self.pod_id, config=cfg, sandbox_config=self.sandbox),
                timeout=60).container_id
            self.rt.StartContainer(self.pb.StartContainerRequest(container_id=cid), timeout=60)
        except Exception as e:  # noqa: BLE001  (counted, first one shown)
            with self.lock:
                self.fail += 1
                if self.fail == 1:
                    sys.stderr.write("start_bench: %s side failed: %s\n" % (self.name, e))
            return None, cid
        return (time.perf_counter_ns() - t0) / 1e6, cid

    def remove(self, cids):
        for cid in cids:
            if not cid:
                continue
            try:
                self.rt.StopContainer(self.pb.StopContainerRequest(container_id=cid, timeout=0),
                                      timeout=60)
                self.rt.RemoveContainer(self.pb.RemoveContainerRequest(container_id=cid),
                                        timeout=60)
            except Exception as e:  # noqa: BLE001
                sys.stderr.write("start_bench: removing %s: %s\n" % (cid, e))

    def pull(self, username, password):
        """PullImage of the image (removed first, untimed), with the pod's sandbox config and
        credentials, as the kubelet pulls; returns ms or None."""
        pb = self.pb
        try:
            self.im_direct.RemoveImage(pb.RemoveImageRequest(image=pb.ImageSpec(image=self.image)),
                                       timeout=60)
        except Exception:  # noqa: BLE001  (absent already)
            pass
        req = pb.PullImageRequest(image=cri_client.pod_image_spec(pb, self.image, self.spec),
                                  sandbox_config=self.sandbox,
                                  auth=pb.AuthConfig(username=username, password=password))
        t0 = time.perf_counter_ns()
        try:
            self.im.PullImage(req, timeout=120)
        except Exception as e:  # noqa: BLE001
            with self.lock:
                self.fail += 1
                sys.stderr.write("start_bench: %s side's pull failed: %s\n" % (self.name, e))
            return None
        return (time.perf_counter_ns() - t0) / 1e6

    def batch(self, p):
        """P starts at once; returns the wall time of the batch in ms and the container ids."""
        out = [None] * p
        gate = threading.Barrier(p + 1)

        def run(k):
            gate.wait()
            out[k] = self.start_one()
        threads = [threading.Thread(target=run, args=(k,)) for k in range(p)]
        for t in threads:
            t.start()
        gate.wait()
        t0 = time.perf_counter_ns()
        for t in threads:
            t.join()
        ms = (time.perf_counter_ns() - t0) / 1e6
        return ms, [cid for _, cid in out], all(m is not None for m, _ in out)


def summary(kind, side, mode, label, values):
    if not values:
        print("start side=%s mode=%s records=%s n=0 fail=%d" % (side.name, mode, label, side.fail))
        return
    print("%s side=%s mode=%s records=%s n=%d fail=%d median_ms=%.2f p90_ms=%.2f mean_ms=%.2f "
          "min_ms=%.2f" % (kind, side.name, mode, label, len(values), side.fail,
                           statistics.median(values), pct(values, 0.9), statistics.mean(values),
                           min(values)))


def rotated(sides, r):
    """The sides in round r's order: every side goes first, middle and last equally often."""
    k = r % len(sides)
    return sides[k:] + sides[:k]


def paired(name, mode, label, pairs):
    """Per-round ratios of side NAME against its baseline ("without" unless NAME says), and the mean difference with its 95 %
    interval: whether the run can tell a 2 % difference from noise at all."""
    if len(pairs) < 2:
        return
    ratios = [w / o for w, o in pairs]
    diffs = [w - o for w, o in pairs]
    ci = 1.96 * statistics.stdev(diffs) / len(diffs) ** 0.5
    base = statistics.mean(o for _, o in pairs)
    print("paired side=%s mode=%s records=%s n=%d median_ratio=%.3f mean_diff_ms=%.2f ci95_ms=%.2f "
          "mean_ratio=%.3f ci95_ratio=%.3f" % (name, mode, label, len(pairs), statistics.median(ratios),
                                              statistics.mean(diffs), ci,
                                              1 + statistics.mean(diffs) / base, ci / base))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cd-sock", required=True)
    ap.add_argument("--proxy-sock", required=True)
    ap.add_argument("--gen-dir", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--pod", required=True, help="ID=CONFIG of the pod on the hooked handler")
    ap.add_argument("--plain-pod", required=True, help="ID=CONFIG of the pod without the hook")
    ap.add_argument("--noop-pod", default="", help="ID=CONFIG of a pod on a handler running a "
                    "no-op hook (the hook machinery's own cost; image service direct)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--label", default="?")
    ap.add_argument("--pulls", type=int, default=0,
                    help="also PullImage the image N times per side (removed before each pull)")
    ap.add_argument("--username", default="")
    ap.add_argument("--password-env", default="", help="env var holding the registry password")
    args = ap.parse_args()

    pb, pbg = cri_client.load_modules(args.gen_dir)
    import grpc
    import json
    cd = grpc.insecure_channel("unix://" + args.cd_sock)
    px = grpc.insecure_channel("unix://" + args.proxy_sock)
    rt = pbg.RuntimeServiceStub(cd)

    def side(name, pod, image_chan):
        pod_id, cfg = pod.split("=", 1)
        with open(cfg) as f:
            spec = json.load(f)
        return Side(name, pb, pbg.ImageServiceStub(image_chan), rt, pod_id, spec, args.image)
    # "without" first: the baseline the other sides are paired with.
    sides = [side("without", args.plain_pod, cd), side("with", args.pod, px)]
    if args.noop_pod:
        sides.append(side("noop-hook", args.noop_pod, cd))
    for s in sides:
        s.im_direct = pbg.ImageServiceStub(cd)

    for r in range(args.warmup):  # connections, page cache, containerd's first-start work
        for s in sides:
            _, cid = s.start_one()
            s.remove([cid])
    for s in sides:
        s.fail = 0

    # (side, without) of one round: paired, so slow minutes of the machine cancel
    pairs = {s.name: [] for s in sides[1:]}
    with_vs_noop = []
    for r in range(args.rounds):
        order = rotated(sides, r)
        done, got = [], {}
        for s in order:
            ms, cid = s.start_one()
            if ms is not None:
                s.serial.append(ms)
                got[s.name] = ms
            done.append((s, cid))
        for s, cid in done:
            s.remove([cid])
        for name in pairs:
            if name in got and "without" in got:
                pairs[name].append((got[name], got["without"]))
        if "with" in got and "noop-hook" in got:
            with_vs_noop.append((got["with"], got["noop-hook"]))
    for s in sides:
        summary("start", s, "serial", args.label, s.serial)
        s.fail = 0
    for name in pairs:
        paired(name, "serial", args.label, pairs[name])
    # pullgate's own share: the hooked start against a start running a no-op hook at the same stage.
    paired("with-vs-noop-hook", "serial", args.label, with_vs_noop)

    if args.parallel > 1 and args.batches > 0:
        bpairs = {s.name: [] for s in sides[1:]}
        for b in range(args.batches):
            order = rotated(sides, b)
            got = {}
            for s in order:
                ms, cids, ok = s.batch(args.parallel)
                if ok:
                    s.batches.append(ms)
                    got[s.name] = ms
                s.remove(cids)
            for name in bpairs:
                if name in got and "without" in got:
                    bpairs[name].append((got[name], got["without"]))
        for s in sides:
            summary("start", s, "parallel%d" % args.parallel, args.label, s.batches)
        for name in bpairs:
            paired(name, "parallel%d" % args.parallel, args.label, bpairs[name])
    if args.pulls > 0:
        # Last: the image must be back in place for any later run (the final pull puts it back).
        password = os.environ.get(args.password_env, "") if args.password_env else ""
        pulls = {s.name: [] for s in sides}
        for s in sides:
            s.fail = 0
        pullers = sides[:2]  # with and without: the no-op hook plays no part in a pull
        for r in range(args.pulls):
            for s in (pullers if r % 2 == 0 else pullers[::-1]):
                ms = s.pull(args.username, password)
                if ms is not None:
                    pulls[s.name].append(ms)
        for s in pullers:
            summary("pull", s, "serial", args.label, pulls[s.name])
        sides[1].pull(args.username, password)  # recorded again, through pullgate-cri
    sys.stdout.flush()


if __name__ == "__main__":
    main()
