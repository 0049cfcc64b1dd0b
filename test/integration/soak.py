#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Soak: many concurrent pullgate-hook runs and record writes for a bounded time.

Synthetic CRI-O-shaped bundles (as in hook_synthetic.py) with a known expected decision:
  allow  team-a pod presenting the secret a record was written with;
  deny   team-b pod presenting a team-b secret (never recorded);
  deny   team-a pod presenting a wrong secret;
  deny   team-a pod whose image was never recorded (policy AlwaysVerify).
Meanwhile writers keep merging new secrets of their own namespaces into the same records (which never changes an
expected decision). Every run is checked: exit status and the deny line, no death by signal,
no sanitizer report (ASan/UBSan/LSan builds) and, for a sample run under valgrind, no memory
error and no definite leak. Finally every acknowledged write must be in its record.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import time

ANNOTATION = "pullgate.dev/credentials"
IMAGES = 6
SANITIZER = re.compile(rb"ERROR: (Address|Leak|Memory|Thread)Sanitizer|runtime error:")
DENY_LINE = re.compile(r"^pullgate: denied container (\S+) \(namespace (\S+), image (\S+)\): .+$")
VALGRIND_STATUS = 97


def ref_hex(i):
    return "%064x" % (0x50a4 + i)


def image(i):
    return "registry.example.com/soak/app%d:1.0" % i


def name(i):
    return "registry.example.com/soak/app%d" % i


def creds(i, ns, secret):
    return json.dumps({name(i): {"kubernetesSecrets": [
        {"namespace": ns, "name": secret, "uid": "uid-" + secret}]}})


class Soak:
    def __init__(self, a):
        self.a = a
        self.root = a.work
        self.state = os.path.join(self.root, "state")
        self.config = os.path.join(self.root, "hook.json")
        with open(self.config, "w") as f:
            json.dump({"stateDir": self.state, "readOnlyRecordDirs": [], "dbus": "none",
                       "runtime": "cri-o", "policy": "AlwaysVerify"}, f)
        self.ctl_base = [a.ctl, "--dbus", "none", "--state-dir", self.state]
        self.env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=98",
                        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=98")
        self.bundles = []  # (path, expected_allow, container id)
        self.failures = []
        self.acked = set()
        self.counts = {"hook": 0, "write": 0, "valgrind": 0}

    # ------------------------------------------------------------ setup
    def ctl(self, *args):
        return subprocess.run(self.ctl_base + list(args), capture_output=True, text=True,
                              env=self.env, timeout=60)

    def bundle(self, ns, i, presented, expect_allow):
        path = os.path.join(self.root, "b%d" % len(self.bundles))
        os.makedirs(path)
        ann = {ANNOTATION: presented, "io.container.manager": "cri-o",
               "io.kubernetes.cri-o.ContainerType": "container",
               "io.kubernetes.cri-o.ImageName": image(i), "io.kubernetes.cri-o.Image": ref_hex(i),
               "io.kubernetes.cri-o.ImageRef": ref_hex(i), "io.kubernetes.pod.namespace": ns}
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump({"ociVersion": "1.0.2", "annotations": ann}, f)
        cid = "soak-%d" % len(self.bundles)
        with open(path + ".state", "w") as f:  # the OCI state the runtime writes to stdin
            json.dump({"ociVersion": "1.0.2", "id": cid, "status": "creating", "pid": 1,
                       "bundle": path}, f)
        self.bundles.append((path, expect_allow, cid))

    def setup(self):
        for i in range(IMAGES):
            recorded = i < IMAGES - 1  # the last image is never recorded
            if recorded:
                r = self.ctl("record-pulled", "--image", image(i), "--image-ref",
                             "sha256:" + ref_hex(i), "--secret", "team-a/s%d/uid-s%d:" % (i, i))
                if r.returncode != 0:
                    raise SystemExit("setup record failed: " + r.stderr)
            self.bundle("team-a", i, creds(i, "team-a", "s%d" % i), recorded)
            self.bundle("team-b", i, creds(i, "team-b", "s%d" % i), False)
            self.bundle("team-a", i, creds(i, "team-a", "wrong"), False)

    # ------------------------------------------------------------- runs
    def start_hook(self, rng, under_valgrind):
        path, allow, cid = rng.choice(self.bundles)
        hook = self.a.memcheck_hook if under_valgrind else self.a.hook
        cmd = [hook, "--config", self.config, "--stage", "createRuntime"]
        if under_valgrind:
            cmd = ["valgrind", "-q", "--error-exitcode=%d" % VALGRIND_STATUS, "--leak-check=full",
                   "--errors-for-leak-kinds=definite,indirect"] + cmd
        with open(path + ".state", "rb") as state:
            p = subprocess.Popen(["timeout", "120"] + cmd, stdin=state, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=self.env)
        return ("hook", p, (allow, cid, under_valgrind))

    def start_write(self, n):
        i = n % (IMAGES - 1)
        secret = "w%d" % n
        # Writers spread over namespaces of their own: one namespace may hold at most 100
        # entries of a record (its fair share, interfaces.md section 2); 50 writes in a row
        # put about 7 entries in each of the records.
        ns = "soak-w%d" % (n // 50)
        p = subprocess.Popen(self.ctl_base + ["record-pulled", "--image", image(i), "--image-ref",
                                              "sha256:" + ref_hex(i), "--secret",
                                              "%s/%s/uid-%s:" % (ns, secret, secret)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)
        return ("write", p, (i, secret))

    def check(self, kind, p, info):
        out, err = p.communicate()
        text = err.decode(errors="replace").strip()
        if SANITIZER.search(err) or p.returncode == 98:
            self.failures.append("%s: sanitizer report: %s" % (kind, text[-2000:]))
            return
        if p.returncode < 0 or p.returncode == 124:
            self.failures.append("%s: killed or hung (status %d): %s" % (kind, p.returncode, text))
            return
        if kind == "write":
            self.counts["write"] += 1
            if p.returncode == 0:
                self.acked.add(info)
            else:
                self.failures.append("record-pulled %s: exit %d: %s" % (info, p.returncode, text))
            return
        allow, cid, valgrind = info
        self.counts["hook"] += 1
        self.counts["valgrind"] += valgrind
        if valgrind and p.returncode == VALGRIND_STATUS:
            self.failures.append("valgrind %s: %s" % (cid, text[-2000:]))
        elif allow and (p.returncode != 0 or text):
            self.failures.append("%s should be allowed: exit %d: %s" % (cid, p.returncode, text))
        elif not allow:
            lines = [l for l in text.splitlines() if not l.startswith("==")]  # valgrind noise
            if p.returncode != 1 or len(lines) != 1 or not DENY_LINE.match(lines[0]) \
                    or cid not in lines[0]:
                self.failures.append("%s should be denied: exit %d: %s" % (cid, p.returncode, text))

    def run(self):
        rng = random.Random(2535)
        deadline = time.monotonic() + self.a.seconds
        running, n = [], 0
        while time.monotonic() < deadline or running:
            while time.monotonic() < deadline and len(running) < self.a.parallel:
                n += 1
                running.append(self.start_write(n) if n % 5 == 0 else self.start_hook(rng, False))
            still = []
            for job in running:
                if job[1].poll() is None:
                    still.append(job)
                else:
                    self.check(*job)
            running = still
            time.sleep(0.002)

    def run_valgrind_sample(self):
        """One at a time, after the load: valgrind slows the hook ~30x and the hook's own
        5 s deadline (which denies) must not be what the sample measures."""
        rng = random.Random(1337)
        for _ in range(self.a.valgrind_runs):
            self.check(*self.start_hook(rng, True))

    def verify_final(self):
        for i in range(IMAGES - 1):
            r = self.ctl("show", "--image-ref", "sha256:" + ref_hex(i), "--json")
            if r.returncode != 0:
                self.failures.append("show app%d: %s" % (i, r.stderr))
                continue
            have = {s["name"] for s in json.loads(r.stdout)["credentialMapping"][name(i)]
                    ["kubernetesSecrets"]}
            lost = {s for j, s in self.acked if j == i} - have
            if lost:
                self.failures.append("app%d lost acknowledged secrets %s" % (i, sorted(lost)[:10]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--hook", required=True)
    # A static PIE's glibc start-up reads as uninitialised memory to valgrind: its dynamic twin.
    ap.add_argument("--memcheck-hook")
    ap.add_argument("--work", required=True)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--parallel", type=int, default=32)
    ap.add_argument("--valgrind-runs", type=int, default=0)
    a = ap.parse_args()
    a.memcheck_hook = a.memcheck_hook or a.hook
    s = Soak(a)
    s.setup()
    start = time.monotonic()
    s.run()
    s.run_valgrind_sample()
    s.verify_final()
    print("soak: %.0fs, %d hook runs (%d under valgrind), %d record writes (%d acknowledged), "
          "%d failure(s)" % (time.monotonic() - start, s.counts["hook"], s.counts["valgrind"],
                             s.counts["write"], len(s.acked), len(s.failures)))
    for f in s.failures[:50]:
        print("FAIL", f)
    return 1 if s.failures else 0


if __name__ == "__main__":
    sys.exit(main())
