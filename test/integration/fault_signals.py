#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Many concurrent pullgatectl record-pulled / verify runs under signal fire.

A signaller thread keeps picking live children and sends SIGSTOP then SIGCONT a few
milliseconds later, plus signals whose default action is to be ignored (SIGWINCH, SIGURG,
SIGCHLD, SIGCONT): a stop in the middle of a write, a lock wait or an fsync must neither lose
nor corrupt anything. Checks afterwards:
  - every record-pulled that exited 0 is in the record (show --json), nothing else is;
  - every verify decided correctly: a secret acknowledged before the verify started is allowed,
    a secret never recorded is denied (exit 1, "deny:" line) -- never an error or a crash;
  - no process died of a signal.
Exit 0 on success, 1 with a list of failures.
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

HARMLESS = [signal.SIGWINCH, signal.SIGURG, signal.SIGCHLD, signal.SIGCONT]
REFS = 8


def ref_of(i):
    return "sha256:%064d" % (i % REFS + 1)


def image_of(i):
    return "registry.example.com/team-a/app%d:1.0" % (i % REFS + 1)


def name_of(i):
    return "registry.example.com/team-a/app%d" % (i % REFS + 1)


def creds(i, secret):
    return json.dumps({name_of(i): {"kubernetesSecrets": [
        {"namespace": "team-a", "name": secret, "uid": "uid-" + secret}]}})


class Runner:
    def __init__(self, args):
        self.args = args
        self.base = [args.ctl, "--dbus", "none", "--state-dir", args.state_dir,
                     "--policy", "AlwaysVerify"]
        self.live = {}  # pid -> Popen
        self.lock = threading.Lock()
        self.done = False
        self.acked = set()  # (i, secret) acknowledged by exit 0
        self.failures = []
        self.signals_sent = 0

    # ----------------------------------------------------------- signaller
    def signaller(self):
        rng = random.Random(4242)
        while not self.done:
            with self.lock:
                pids = list(self.live)
            if not pids:
                time.sleep(0.001)
                continue
            pid = rng.choice(pids)
            try:
                os.kill(pid, signal.SIGSTOP)
                time.sleep(rng.uniform(0.0005, 0.004))
                os.kill(pid, signal.SIGCONT)
                os.kill(rng.choice(pids), rng.choice(HARMLESS))
                self.signals_sent += 3
            except ProcessLookupError:
                pass

    # -------------------------------------------------------------- jobs
    def start(self, argv):
        p = subprocess.Popen(self.base + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        with self.lock:
            self.live[p.pid] = p
        return p

    def finish(self, p, timeout=60):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
            out, err = p.communicate()
            self.failures.append("hung: %s" % " ".join(p.args[-6:]))
        with self.lock:
            self.live.pop(p.pid, None)
        if p.returncode < 0:
            self.failures.append("killed by signal %d: %s" % (-p.returncode, p.args))
        return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")

    def job(self, i):
        """Returns (kind, i, secret, popen, acked_snapshot)."""
        kind = i % 5
        if kind < 3:  # 60 % writes
            secret = "p%d" % i
            argv = ["record-pulled", "--image", image_of(i), "--image-ref", ref_of(i),
                    "--secret", "team-a/%s/uid-%s:" % (secret, secret)]
            return ("write", i, secret, self.start(argv), None)
        if kind == 3 and self.acked:  # verify something acknowledged earlier: allow
            j, secret = random.Random(i).choice(sorted(self.acked))
            return ("allow", j, secret, self.start(
                ["verify", "--image", image_of(j), "--image-ref", ref_of(j),
                 "--namespace", "team-a", "--credentials", creds(j, secret)]), None)
        secret = "never-%d" % i  # verify a secret nobody recorded: deny
        return ("deny", i, secret, self.start(
            ["verify", "--image", image_of(i), "--image-ref", ref_of(i), "--namespace", "team-a",
             "--credentials", creds(i, secret)]), None)

    def check(self, kind, i, secret, rc, out, err):
        if kind == "write":
            if rc == 0:
                self.acked.add((i, secret))
            else:
                self.failures.append("record-pulled %s exit %d: %s" % (secret, rc, err.strip()))
        elif kind == "allow" and (rc != 0 or not out.startswith("allow:")):
            self.failures.append("verify of acknowledged %s: exit %d: %s %s" % (secret, rc, out, err))
        elif kind == "deny" and (rc != 1 or not out.startswith("deny:")):
            self.failures.append("verify of unknown %s: exit %d: %s %s" % (secret, rc, out, err))

    def run(self):
        t = threading.Thread(target=self.signaller, daemon=True)
        t.start()
        pending = []
        for i in range(self.args.processes):
            pending.append(self.job(i))
            if len(pending) >= self.args.parallel:
                kind, j, secret, p, _ = pending.pop(0)
                self.check(kind, j, secret, *self.finish(p))
        for kind, j, secret, p, _ in pending:
            self.check(kind, j, secret, *self.finish(p))
        self.done = True
        t.join()

    # ------------------------------------------------------- final state
    def recorded(self):
        found = set()
        for r in range(REFS):
            out = subprocess.run(self.base + ["show", "--image-ref", ref_of(r), "--json"],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                self.failures.append("show %s: exit %d: %s" % (ref_of(r), out.returncode,
                                                               out.stderr.strip()))
                continue
            mapping = json.loads(out.stdout)["credentialMapping"].get(name_of(r), {})
            for s in mapping.get("kubernetesSecrets", []):
                found.add((r, s["name"]))
        return found

    def verify_final(self):
        want = {(i % REFS, s) for i, s in self.acked}
        have = self.recorded()
        lost = want - have
        extra = {x for x in have - want}
        if lost:
            self.failures.append("%d acknowledged secrets lost: %s" % (len(lost), sorted(lost)[:10]))
        # A write that failed (exit != 0) may or may not have landed; one never attempted must not.
        attempted = {(i % REFS, "p%d" % i) for i in range(self.args.processes) if i % 5 < 3}
        if extra - attempted:
            self.failures.append("secrets nobody wrote: %s" % sorted(extra - attempted)[:10])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--processes", type=int, default=240)
    ap.add_argument("--parallel", type=int, default=24)
    args = ap.parse_args()
    r = Runner(args)
    start = time.monotonic()
    r.run()
    r.verify_final()
    print("fault_signals: %d processes, %d acknowledged writes, %d signals in %.1fs" %
          (args.processes, len(r.acked), r.signals_sent, time.monotonic() - start))
    for f in r.failures:
        print("FAIL", f)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
