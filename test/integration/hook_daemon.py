#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The thin pullgate-hook against a real pullgate-cri's hook server (test_hook_daemon.sh).

(a) equivalence: each decision case gives the same exit status, stderr line and D-Bus signal
    through the daemon as through pullgate-hook-local, and the daemon's log proves it answered;
(b) fallback: no daemon, a SIGSTOPped daemon, a daemon with another configuration file ("not
    mine"): the hook still decides as the local hook does, and the daemon reports nothing;
(c) a client that is not root is refused by the server;
(d) hostile requests (bad magic, huge lengths, no fd, two fds, a non-directory fd, a cut header,
    an oversize message) never crash the daemon, and the next good request is answered.
Bundles, records and helpers come from hook_synthetic.py.
"""
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hook_synthetic as hs  # noqa: E402

HOOK = os.environ["PULLGATE_HOOK"]
LOCAL = os.path.join(os.path.dirname(HOOK), "pullgate-hook-local")
CRI = os.path.join(os.environ["PG_BUILD_DIR"], "cri", "pullgate-cri")

REQ_MAGIC = 0x51484750
REPLY_MAGIC = 0x52484750

failures = []
checks = 0


def check(ok, name, detail=""):
    global checks
    checks += 1
    if ok:
        print(f"ok   {name}", flush=True)
    else:
        failures.append(f"{name}: {detail}")
        print(f"FAIL {name}: {detail}", flush=True)


def run(binary, args, stdin):
    p = subprocess.run(["timeout", "10", binary] + args, input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=15)
    return p.returncode, p.stderr.decode("utf-8", "replace")


class Daemon:
    """pullgate-cri with its hook server on a socket in the test's directory."""

    def __init__(self, root, name, cfg):
        self.dir = os.path.join(root, f"run-{name}")
        os.mkdir(self.dir, 0o700)
        self.sock = os.path.join(self.dir, "hook.sock")
        self.log_path = os.path.join(root, f"cri-{name}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [CRI, "--config", cfg, "--listen", f"unix://{self.dir}/cri.sock",
             "--runtime-endpoint", f"unix://{self.dir}/no-runtime.sock",
             "--hook-socket", self.sock], stdout=subprocess.DEVNULL, stderr=self.log)
        hs.helpers.add(self.proc.pid)
        # A deadline, not a count of tries: on a loaded machine the start can take seconds.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if "hook server listening" in self.text():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise SystemExit(f"pullgate-cri did not start: {self.text()}")

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def logged(self, text, timeout=15):
        """Whether the log shows text within timeout: a line may land after the answer."""
        deadline = time.monotonic() + timeout
        while text not in self.text():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def decided_once(self, cid, timeout=15):
        """Exactly one decision logged for cid, waited for with a deadline."""
        deadline = time.monotonic() + timeout
        while self.decided(cid) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.decided(cid) == 1

    def decided(self, cid):
        return len(re.findall(r'msg="hook decision" container="%s"' % re.escape(cid), self.text()))

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM: a clean exit 0 and no sanitizer report (an ASan build of pullgate-cri)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        text = self.text()
        check(self.proc.returncode == 0 and "Sanitizer" not in text and "runtime error" not in text,
              f"pullgate-cri ({os.path.basename(self.dir)}) stopped cleanly",
              f"exit {self.proc.returncode}: {text[-800:]}")


class Bus:
    """A private dbus-daemon and a dbus-monitor on it; None when not installed."""

    def __init__(self):
        self.daemon = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--nopidfile",
                                        "--print-address=1"], stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL)
        hs.helpers.add(self.daemon.pid)
        self.address = self.daemon.stdout.readline().decode().strip()
        self.monitor = subprocess.Popen(["dbus-monitor", "--address", self.address,
                                         "interface='dev.pullgate.PullGate1'"],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        hs.helpers.add(self.monitor.pid)
        self.watched = hs.MonitorOutput(self.monitor, self.address)
        self.watched.wait_ready()

    def signals(self, ids=()):
        """Waits (with a deadline) until every id was signalled twice, stops both; returns
        [(member, [string args])] in order."""
        self.watched.wait_for(lambda t: all(t.count('"%s"' % i) >= 2 for i in ids))
        for proc in (self.monitor, self.daemon):
            proc.terminate()
            proc.wait(timeout=5)
        self.watched.thread.join(timeout=5)
        out = self.watched.text()
        found = []
        for block in re.split(r"\n(?=signal )", out):
            m = re.match(r"signal .*member=(\w+)", block)
            if m:
                found.append((m.group(1), re.findall(r'^\s+string "(.*)"$', block, re.M)))
        return found


def cases(env):
    """(name, bundle, config): the decision cases compared through the daemon and locally."""
    good = hs.creds("team-a")
    wrong = hs.creds("team-a", hash_=hs.HASH_B)
    return [
        ("allow-secret", env.bundle(hs.crio_annotations("team-a", hs.IMG_APP, hs.REF_APP,
                                                          pod={hs.ANNOTATION: good}))),
        ("deny-wrong-secret", env.bundle(hs.crio_annotations("team-a", hs.IMG_APP, hs.REF_APP,
                                                               pod={hs.ANNOTATION: wrong}))),
        ("deny-no-annotation", env.bundle(hs.crio_annotations("team-a", hs.IMG_APP, hs.REF_APP))),
        ("preloaded", env.bundle(hs.crio_annotations("team-a", hs.IMG_NEVER, "9" * 64))),
        ("sandbox", env.bundle(hs.crio_annotations("team-a", hs.IMG_APP, hs.REF_APP,
                                                     ctype="sandbox"))),
        ("not-kubernetes", env.bundle(hs.podman_annotations())),
        ("malformed-annotation", env.bundle(hs.crio_annotations(
            "team-a", hs.IMG_APP, hs.REF_APP, pod={hs.ANNOTATION: "{not json"}))),
        ("containerd-allow", env.bundle(hs.containerd_annotations(
            "team-a", hs.IMG_APP, pod={hs.ANNOTATION: good}))),
        ("containerd-deny", env.bundle(hs.containerd_annotations("team-a", hs.IMG_APP))),
    ]


def equivalence(root, env, mode, bus):
    """Every case through the daemon (thin hook) and locally; returns the ids sent both ways."""
    cfg = env.config(mode=mode, dbus=bus.address if bus else "none")
    daemon = Daemon(root, f"eq-{mode}", cfg)
    ids = []
    try:
        for name, bundle in cases(env):
            cid = f"ctr-{mode}-{name}"
            stdin = hs.state(cid, bundle)
            thin = run(HOOK, ["--config", cfg, "--daemon-socket", daemon.sock], stdin)
            local = run(LOCAL, ["--config", cfg], stdin)
            check(thin == local, f"equivalent {mode} {name}", f"daemon {thin!r} local {local!r}")
            check(daemon.decided_once(cid), f"daemon answered {mode} {name}",
                  f"{daemon.decided(cid)} decisions logged")
            ids.append(cid)
        if mode == "audit":
            check(any(run(HOOK, ["--config", cfg, "--daemon-socket", daemon.sock],
                          hs.state("ctr-audit-probe", b))[1].startswith("pullgate: audit:")
                      for _, b in cases(env)[2:3]), "audit line through the daemon")
    finally:
        daemon.stop()
    return ids


def compare_signals(signals, ids):
    by_id = {}
    for member, args in signals:
        if args:
            by_id.setdefault(args[0], []).append((member, args))
    for cid in ids:
        got = by_id.get(cid, [])
        check(len(got) == 2 and got[0] == got[1], f"same D-Bus signal {cid}", f"{got!r}")


def fallback(root, env):
    cfg = env.config()
    bundle = env.bundle(hs.crio_annotations("team-a", hs.IMG_APP, hs.REF_APP))
    stdin = hs.state("ctr-fallback", bundle)
    local = run(LOCAL, ["--config", cfg], stdin)
    check(local[0] == 1, "fallback reference decision is a denial", repr(local))

    absent = os.path.join(root, "no-such-dir", "hook.sock")
    check(run(HOOK, ["--config", cfg, "--daemon-socket", absent], stdin) == local,
          "fallback: no daemon")
    check(run(HOOK, ["--config", cfg, "--daemon-socket", "none"], stdin) == local,
          "fallback: --daemon-socket none")

    daemon = Daemon(root, "fallback", cfg)
    try:
        daemon.proc.send_signal(signal.SIGSTOP)
        stopped = run(HOOK, ["--config", cfg, "--daemon-socket", daemon.sock],
                      hs.state("ctr-stopped", bundle))
        daemon.proc.send_signal(signal.SIGCONT)
        want = (local[0], local[1].replace("ctr-fallback", "ctr-stopped"))
        check(stopped == want, "fallback: daemon SIGSTOPped", f"{stopped!r} != {want!r}")
        time.sleep(0.5)  # the daemon now reads the abandoned request
        check(daemon.decided("ctr-stopped") == 0, "stopped daemon does not report an abandoned "
              "request", daemon.text()[-600:])

        # Same content, another file: not the configuration the daemon loaded.
        other = os.path.join(root, "other-config.json")
        with open(cfg) as src, open(other, "w") as dst:
            dst.write(src.read())
        theirs = run(HOOK, ["--config", other, "--daemon-socket", daemon.sock], stdin)
        check(theirs == run(LOCAL, ["--config", other], stdin), "not mine: other config file")
        check(daemon.logged("not mine") and daemon.decided("ctr-fallback") == 0,
              "not mine: the daemon declined", daemon.text()[-600:])
        # A symlink to the daemon's own file: the local hook refuses to load a symlinked
        # configuration, so the daemon must not decide for it either.
        link = os.path.join(root, "config-link.json")
        os.symlink(cfg, link)
        via_daemon = run(HOOK, ["--config", link, "--daemon-socket", daemon.sock], stdin)
        via_local = run(LOCAL, ["--config", link], stdin)
        check(via_daemon == via_local, "symlinked config: both hook paths give the same answer",
              f"{via_daemon!r} != {via_local!r}")
        check(daemon.decided("ctr-fallback") == 0, "symlinked config: the daemon declined",
              daemon.text()[-600:])
        # The daemon's own file, changed after it loaded it: not the same configuration.
        os.utime(cfg)
        check(run(HOOK, ["--config", cfg, "--daemon-socket", daemon.sock], stdin) == local
              and daemon.decided("ctr-fallback") == 0, "not mine: config touched after load")
    finally:
        daemon.stop()


def request(stage=b"prestart", config=b"/nonexistent", state=b"{}", magic=REQ_MAGIC, version=1,
            flags=0, lengths=None):
    ls = lengths or (len(stage), len(config), len(state))
    return struct.pack("<IHHIII", magic, version, flags, *ls) + stage + config + state


def raw_exchange(path, msg, fds, as_nobody=False):
    """Sends one message; returns the reply bytes (b'' when the server closed without one)."""
    code = ("import socket,sys,os\n"
            "msg=sys.stdin.buffer.read()\n"
            "s=socket.socket(socket.AF_UNIX,socket.SOCK_SEQPACKET)\n"
            "s.settimeout(5)\n"
            f"s.connect({path!r})\n"
            f"fds=[os.open(p,os.O_RDONLY) for p in {fds!r}]\n"
            "socket.send_fds(s,[msg],fds) if fds else s.send(msg)\n"
            "sys.stdout.write(s.recv(4096).hex())\n")
    pre = None
    if as_nobody:
        def pre():
            os.setgid(65534)
            os.setuid(65534)
    p = subprocess.run(["/usr/bin/python3", "-c", code], input=msg, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=15, preexec_fn=pre)
    return bytes.fromhex(p.stdout.decode() or ""), p.returncode, p.stderr.decode()


def hostile(root, env):
    cfg = env.config()
    daemon = Daemon(root, "hostile", cfg)
    bundle = env.bundle(hs.crio_annotations("team-a", hs.IMG_APP, hs.REF_APP))
    regular = os.path.join(bundle, "config.json")
    state = hs.state("ctr-hostile", bundle)
    try:
        good = request(config=cfg.encode(), state=state)
        reply, rc, err = raw_exchange(daemon.sock, good, [bundle])
        check(len(reply) >= 16 and struct.unpack("<IHHII", reply[:16])[0] == REPLY_MAGIC
              and struct.unpack("<IHHII", reply[:16])[3] == 1,
              "hand-made request answered (deny)", f"{reply!r} {err}")
        bad = {
            "bad magic": (request(config=cfg.encode(), state=state, magic=0x41414141), [bundle]),
            "bad version": (request(config=cfg.encode(), state=state, version=9), [bundle]),
            "unknown flag": (request(config=cfg.encode(), state=state, flags=2), [bundle]),
            "huge lengths": (request(config=cfg.encode(), state=state,
                                     lengths=(8, 0xFFFFFFF0, 0xFFFFFFF0)), [bundle]),
            "lengths past the end": (request(config=cfg.encode(), state=state,
                                             lengths=(8, len(cfg), len(state) + 1)), [bundle]),
            "cut header": (good[:10], [bundle]),
            "empty message": (b"", [bundle]),
            "no fd": (good, []),
            "two fds": (good, [bundle, bundle]),
            "non-directory fd": (good, [regular]),
            "unknown stage": (request(stage=b"nostage", config=cfg.encode(), state=state),
                              [bundle]),
            "relative config": (request(config=b"config.json", state=state), [bundle]),
            "oversize": (request(config=cfg.encode(), state=b" " * (150 * 1024)), [bundle]),
        }
        for name, (msg, fds) in bad.items():
            reply, rc, err = raw_exchange(daemon.sock, msg, fds)
            check(reply == b"" and daemon.alive(), f"hostile: {name} dropped",
                  f"reply {reply[:40]!r} rc {rc} {err[-300:]}")
        # (c) not root: the socket and its directory opened up for the test only.
        os.chmod(daemon.dir, 0o711)
        os.chmod(daemon.sock, 0o666)
        reply, rc, err = raw_exchange(daemon.sock, good, [bundle], as_nobody=True)
        check(reply == b"" and daemon.logged("refused a peer that is not root"),
              "non-root client refused", f"reply {reply!r} rc {rc} {err[-300:]}")
        os.chmod(daemon.sock, 0o600)
        os.chmod(daemon.dir, 0o700)
        after = run(HOOK, ["--config", cfg, "--daemon-socket", daemon.sock],
                    hs.state("ctr-after-hostile", bundle))
        check(daemon.alive() and daemon.decided_once("ctr-after-hostile") and after[0] == 1,
              "daemon answers after hostile input", f"{after!r}")
    finally:
        daemon.stop()


def no_libcrypto():
    # Dynamic: no libcrypto needed, no EVP_ symbol imported. Static (PG_HOOK_STATIC_PIE): no
    # EVP_ function linked in (the symbol table of the unstripped build).
    out = subprocess.run(["nm", "-D", "--undefined-only", HOOK], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL).stdout.decode()
    linked = subprocess.run(["nm", "--defined-only", HOOK], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL).stdout.decode()
    libs = subprocess.run(["readelf", "-d", HOOK], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL).stdout.decode()
    check("EVP_" not in out and "EVP_" not in linked and "libcrypto" not in libs,
          "pullgate-hook links no libcrypto")


def main():
    hs.become_subreaper()
    have_bus = all(os.path.exists(p) for p in ("/usr/bin/dbus-daemon", "/usr/bin/dbus-monitor"))
    with tempfile.TemporaryDirectory(prefix="pg-hook-daemon-") as root:
        os.chmod(root, 0o755)
        env = hs.Env(root)
        hs.setup_records(env)
        no_libcrypto()
        bus = Bus() if have_bus else None
        ids = []
        for mode in ("enforce", "audit"):
            ids += equivalence(root, env, mode, bus)
        if bus:
            compare_signals(bus.signals(ids), ids)
        else:
            print("skip D-Bus comparison: dbus-daemon or dbus-monitor not installed", flush=True)
        fallback(root, env)
        hostile(root, env)
    print(f"{checks} checks, {len(failures)} failures")
    for f in failures:
        print("  " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
