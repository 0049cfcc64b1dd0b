#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""pullgate-hook against synthetic OCI bundles in CRI-O, containerd and podman shapes.

Bundles are built the way each runtime builds a container's annotations (pod annotations first,
then the runtime's own keys overwrite), so a "forged" annotation is exactly what a pod can inject.
Records are written with pullgatectl. Every hook run is bounded by a timeout, timed, and run with
this process as child subreaper so that a child the hook left behind would be found.
"""
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HOOK = os.environ["PULLGATE_HOOK"]
CTL = os.environ["PULLGATECTL"]

HASH_A = "a" * 64
HASH_B = "b" * 64
REF_APP = "1" * 64           # recorded as "sha256:<hex>", CRI-O names it bare
REF_TOOLS = "2" * 64         # recorded bare, presented as "sha256:<hex>"
IMG_APP = "registry.example.com/team-a/app:1.0"
IMG_TOOLS = "registry.example.com/team-a/tools:2.0"
IMG_NEVER = "registry.example.com/team-a/never-pulled:1.0"
NAME_APP = "registry.example.com/team-a/app"
NAME_TOOLS = "registry.example.com/team-a/tools"
ANNOTATION = "pullgate.dev/credentials"

DENY_LINE = re.compile(r"^pullgate: denied container (\S+) \(namespace (\S+), image (\S+)\): (.+)\n$")
AUDIT_LINE = re.compile(r"^pullgate: audit: would deny container (\S+) \(namespace (\S+), "
                        r"image (\S+)\): (.+)\n$")

failures = []
checks = 0
helpers = set()  # pids of this test's own long-running helpers (bus daemon, monitor)


def fail(name, msg):
    failures.append(f"{name}: {msg}")
    print(f"FAIL {name}: {msg}", flush=True)


def become_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("warning: cannot become child subreaper; orphan check is weaker", flush=True)


def leftover_children():
    """Children of this process other than running subprocesses: orphans of the hook."""
    me = str(os.getpid())
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me and int(pid) not in helpers:
            found.append(pid)
    return found


def run_hook(args, stdin_bytes=None, stdin_pipe_open=False, limit=5.0):
    """Runs the hook; returns (exit status, stderr, seconds)."""
    start = time.monotonic()
    cmd = ["timeout", "10", HOOK] + args
    if stdin_pipe_open:
        # A writer that never closes: the hook must give up on its own.
        r, w = os.pipe()
        p = subprocess.Popen(cmd, stdin=r, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(r)
        out, err = p.communicate(timeout=15)
        os.close(w)
    else:
        p = subprocess.run(cmd, input=stdin_bytes, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=15)
        out, err = p.stdout, p.stderr
    elapsed = time.monotonic() - start
    orphans = leftover_children()
    for pid in orphans:  # reap, then report
        try:
            os.waitpid(int(pid), os.WNOHANG)
        except ChildProcessError:
            pass
    if orphans:
        fail("no-children", f"hook {args} left children {orphans}")
    if out:
        fail("stdout", f"hook {args} wrote to stdout: {out[:200]!r}")
    if elapsed > limit:
        fail("time", f"hook {args} took {elapsed:.1f}s (limit {limit}s)")
    return p.returncode, err.decode("utf-8", "replace"), elapsed


class Env:
    def __init__(self, root):
        self.root = root
        self.state_dir = os.path.join(root, "state")
        self.bundles = os.path.join(root, "bundles")
        os.makedirs(self.bundles)
        self.n = 0
        self.configs = {}

    def config(self, **overrides):
        cfg = {"stateDir": self.state_dir, "readOnlyRecordDirs": [], "dbus": "none",
               "policy": "NeverVerifyPreloadedImages", "runtime": "auto", "mode": "enforce"}
        cfg.update(overrides)
        key = json.dumps(cfg, sort_keys=True)
        if key not in self.configs:
            path = os.path.join(self.root, f"config-{len(self.configs)}.json")
            with open(path, "w") as f:
                json.dump(cfg, f)
            self.configs[key] = path
        return self.configs[key]

    def ctl(self, *args):
        cmd = [CTL, "--config", self.config(), "--state-dir", self.state_dir] + list(args)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if p.returncode != 0:
            raise SystemExit(f"setup failed: {cmd}: {p.returncode} {p.stderr.decode()}")

    def bundle(self, annotations, raw_config=None):
        self.n += 1
        path = os.path.join(self.bundles, f"b{self.n}")
        os.makedirs(path)
        spec = {"ociVersion": "1.0.2", "process": {"args": ["/bin/true"], "cwd": "/"},
                "root": {"path": "rootfs"}}
        if annotations is not None:
            spec["annotations"] = annotations
        with open(os.path.join(path, "config.json"), "w") as f:
            f.write(raw_config if raw_config is not None else json.dumps(spec))
        return path


def state(cid, bundle, extra=None):
    s = {"ociVersion": "1.0.2", "id": cid, "status": "creating", "pid": 4242, "bundle": bundle,
         "annotations": {}}
    s.update(extra or {})
    return json.dumps(s).encode()


def creds(namespace, name="regcred", uid="uid-a", hash_=HASH_A, image_name=NAME_APP):
    return json.dumps({image_name: {"kubernetesSecrets": [
        {"namespace": namespace, "name": name, "uid": uid, "credentialHash": hash_}]}})


def crio_annotations(namespace, image_name, image_ref, pod=None, ctype="container", image=None,
                     pod_uid="pod-uid-1"):
    """CRI-O's build order: pod annotations, then CRI-O's keys, then kubelet labels (each wins)."""
    ann = dict(pod or {})
    ann.update({
        "io.container.manager": "cri-o",
        "io.kubernetes.cri-o.ContainerType": ctype,
        "io.kubernetes.cri-o.ContainerID": "c" * 64,
        "io.kubernetes.cri-o.SandboxID": "d" * 64,
        "io.kubernetes.cri-o.Image": image if image is not None else image_ref,
        "io.kubernetes.cri-o.ImageName": image_name,
        "io.kubernetes.cri-o.ImageRef": image_ref,
        "io.kubernetes.cri-o.Created": "2026-11-21T10:00:00Z",
    })
    ann.update({
        "io.kubernetes.pod.namespace": namespace,
        "io.kubernetes.pod.name": "pod-1",
        "io.kubernetes.pod.uid": pod_uid,
        "io.kubernetes.container.name": "app",
    })
    return ann


def containerd_annotations(namespace, image, pod=None, ctype="container", pod_uid="pod-uid-1"):
    """containerd: base spec, pod annotations let through by pod_annotations, then its own keys
    (pod_uid None: a containerd before 1.6.11, which sets no sandbox-uid)."""
    ann = dict(pod or {})
    ann.update({
        "io.kubernetes.cri.container-type": ctype,
        "io.kubernetes.cri.sandbox-id": "e" * 64,
        "io.kubernetes.cri.sandbox-namespace": namespace,
        "io.kubernetes.cri.sandbox-name": "pod-1",
        "io.kubernetes.cri.container-name": "app",
        "io.kubernetes.cri.image-name": image,
    })
    if pod_uid is not None:
        ann["io.kubernetes.cri.sandbox-uid"] = pod_uid
    return ann


def podman_annotations(extra=None):
    """What podman 4.3 puts in config.json by itself (no image keys); --annotation wins."""
    ann = {
        "io.container.manager": "libpod",
        "io.kubernetes.cri-o.Created": "2026-11-21T10:00:00Z",
        "io.kubernetes.cri-o.TTY": "false",
        "io.podman.annotations.autoremove": "TRUE",
        "io.podman.annotations.init": "FALSE",
        "io.podman.annotations.privileged": "FALSE",
        "io.podman.annotations.publish-all": "FALSE",
        "org.opencontainers.image.stopSignal": "15",
    }
    ann.update(extra or {})
    return ann


def expect_allow(name, env, bundle_path, cfg=None, args=None):
    global checks
    checks += 1
    cid = f"ctr-{name}"
    rc, err, _ = run_hook(["--config", cfg or env.config()] + (args or []), state(cid, bundle_path))
    if rc != 0 or err:
        fail(name, f"expected allow (exit 0, silent), got exit {rc}, stderr {err!r}")
    else:
        print(f"ok   {name}: allowed", flush=True)


def expect_deny(name, env, bundle_path=None, cfg=None, args=None, stdin=None, ns=None, image=None,
                reason=None, cid=None, limit=5.0, stdin_pipe_open=False):
    """Exit 1 with exactly one well-formed line; optionally checks namespace/image/reason."""
    global checks
    checks += 1
    cid = cid or f"ctr-{name}"
    if stdin is None and not stdin_pipe_open:
        stdin = state(cid, bundle_path)
    rc, err, elapsed = run_hook(["--config", cfg or env.config()] + (args or []), stdin,
                                stdin_pipe_open=stdin_pipe_open, limit=limit)
    m = DENY_LINE.match(err)
    if rc != 1 or not m:
        fail(name, f"expected deny (exit 1, one line), got exit {rc}, stderr {err!r}")
        return
    if err.count("\n") != 1:
        fail(name, f"more than one stderr line: {err!r}")
    got_id, got_ns, got_image, got_reason = m.groups()
    problems = []
    if bundle_path and got_id != cid:
        problems.append(f"container id {got_id!r} != {cid!r}")
    if ns is not None and got_ns != ns:
        problems.append(f"namespace {got_ns!r} != {ns!r}")
    if image is not None and got_image != image:
        problems.append(f"image {got_image!r} != {image!r}")
    if reason is not None and not re.search(reason, got_reason):
        problems.append(f"reason {got_reason!r} does not match /{reason}/")
    if problems:
        fail(name, "; ".join(problems))
        return
    print(f"ok   {name}: denied in {elapsed:.2f}s: {got_reason}", flush=True)


def setup_records(env):
    env.ctl("record-pulled", "--image", IMG_APP, "--image-ref", "sha256:" + REF_APP,
            "--secret", f"team-a/regcred/uid-a:{HASH_A}")
    env.ctl("record-pulled", "--image", IMG_TOOLS, "--image-ref", REF_TOOLS,
            "--secret", f"team-a/regcred/uid-a:{HASH_A}")


def crio_cases(env):
    good = creds("team-a")
    b = env.bundle(crio_annotations("team-a", IMG_APP, REF_APP, pod={ANNOTATION: good}))
    expect_allow("crio-authorized-bare-ref", env, b)
    for stage in ("prestart", "createRuntime", "createContainer"):
        expect_allow(f"crio-authorized-stage-{stage}", env, b, args=["--stage", stage])
    b = env.bundle(crio_annotations("team-a", IMG_TOOLS, "sha256:" + REF_TOOLS,
                                    pod={ANNOTATION: creds("team-a", image_name=NAME_TOOLS)}))
    expect_allow("crio-authorized-prefixed-ref", env, b)
    # ImageName empty, Image a name: the name is used.
    b = env.bundle(crio_annotations("team-a", "", REF_APP, pod={ANNOTATION: good}, image=IMG_APP))
    expect_allow("crio-image-from-Image-key", env, b)

    b = env.bundle(crio_annotations("team-a", IMG_APP, REF_APP))
    expect_deny("crio-no-credentials", env, b, ns="team-a", image=IMG_APP,
                reason=r"^no pullgate\.dev/credentials annotation in the container's OCI config "
                       r"\(no admission webhook .*presented 0 secrets")
    # An annotation that lists nothing is another case: it was passed, it just holds nothing.
    b = env.bundle(crio_annotations("team-a", IMG_APP, REF_APP, pod={ANNOTATION: "{}"}))
    expect_deny("crio-empty-annotation", env, b, ns="team-a", image=IMG_APP,
                reason=r"^no presented credential matches .*presented 0 secrets")
    b = env.bundle(crio_annotations("team-a", IMG_APP, REF_APP,
                                    pod={ANNOTATION: creds("team-a", uid="uid-x", hash_=HASH_B)}))
    expect_deny("crio-wrong-credentials", env, b, ns="team-a", image=IMG_APP)
    # ImageName empty and Image an ID: the image is unknown.
    b = env.bundle(crio_annotations("team-a", "", REF_APP, pod={ANNOTATION: good}))
    expect_deny("crio-image-unknown", env, b, ns="team-a", reason="no image")
    ann = crio_annotations("team-a", IMG_APP, REF_APP, pod={ANNOTATION: good})
    del ann["io.kubernetes.pod.namespace"]
    expect_deny("crio-no-namespace", env, env.bundle(ann), reason="io.kubernetes.pod.namespace")
    ann = crio_annotations("team-a", IMG_APP, REF_APP, pod={ANNOTATION: good})
    ann["io.kubernetes.cri-o.ContainerType"] = "weird"
    expect_deny("crio-unknown-container-type", env, env.bundle(ann), reason="ContainerType")

    b = env.bundle(crio_annotations("team-a", "", "", ctype="sandbox", image=""))
    expect_allow("crio-sandbox", env, b)


def forged_cases(env):
    """Annotations a pod can inject under CRI-O must not change a denial into an allow."""
    stolen = creds("team-a")
    # A pod in team-b copies team-a's annotation: entries of another namespace are ignored.
    b = env.bundle(crio_annotations("team-b", IMG_APP, REF_APP, pod={ANNOTATION: stolen}))
    expect_deny("forged-credentials-other-namespace", env, b, ns="team-b")
    # ... plus CRI-O's sandbox-only namespace key claiming team-a.
    b = env.bundle(crio_annotations("team-b", IMG_APP, REF_APP, pod={
        ANNOTATION: stolen, "io.kubernetes.cri-o.Namespace": "team-a"}))
    expect_deny("forged-crio-Namespace-key", env, b, ns="team-b")
    # ... plus containerd's keys: a sandbox type, another namespace, another image.
    b = env.bundle(crio_annotations("team-b", IMG_APP, REF_APP, pod={
        ANNOTATION: stolen,
        "io.kubernetes.cri.container-type": "sandbox",
        "io.kubernetes.cri.sandbox-namespace": "team-a",
        "io.kubernetes.cri.image-name": "registry.example.com/public/free:1"}))
    expect_deny("forged-containerd-keys-under-crio", env, b, ns="team-b", image=IMG_APP)
    # The pod's own namespace keys, which CRI-O/kubelet overwrite, can only be set as pod keys here.
    b = env.bundle(crio_annotations("team-b", IMG_APP, REF_APP, pod={
        "io.kubernetes.cri.container-type": "sandbox"}))
    expect_deny("forged-containerd-sandbox-type-under-crio", env, b, ns="team-b")


def containerd_cases(env):
    good = creds("team-a")
    b = env.bundle(containerd_annotations("team-a", IMG_APP, pod={ANNOTATION: good}))
    expect_allow("containerd-authorized", env, b)
    b = env.bundle(containerd_annotations("team-a", IMG_APP))
    expect_deny("containerd-no-credentials", env, b, ns="team-a", image=IMG_APP,
                reason=r"^no pullgate\.dev/credentials annotation in the container's OCI config "
                       r"\(containerd passes it only when the runtime handler lists it: "
                       r"pod_annotations = \[\"pullgate\.dev/credentials\"\]")
    b = env.bundle(containerd_annotations("team-a", IMG_APP, pod={ANNOTATION: "{}"}))
    expect_deny("containerd-empty-annotation", env, b, ns="team-a", image=IMG_APP,
                reason=r"^no presented credential matches .*presented 0 secrets")
    b = env.bundle(containerd_annotations("team-b", IMG_APP, pod={ANNOTATION: good}))
    expect_deny("containerd-credentials-other-namespace", env, b, ns="team-b")
    # Never pulled under any spelling, no record maps its name: proven preloaded.
    b = env.bundle(containerd_annotations("team-a", IMG_NEVER, pod={ANNOTATION: good}))
    expect_allow("containerd-never-pulled-is-preloaded", env, b)
    # Without an image ID only a proven-preloaded image is exempt; AlwaysVerify denies.
    expect_deny("containerd-image-ref-unknown", env, b, cfg=env.config(policy="AlwaysVerify"),
                ns="team-a", image=IMG_NEVER, reason="image ID of .* is unknown")
    b = env.bundle(containerd_annotations("team-a", "", ctype="sandbox"))
    expect_allow("containerd-sandbox", env, b)
    # runtime: containerd ignores CRI-O keys a permissive pod_annotations would let through.
    cfg = env.config(runtime="containerd")
    b = env.bundle(containerd_annotations("team-b", IMG_APP, pod={
        "io.container.manager": "cri-o", "io.kubernetes.cri-o.ContainerType": "sandbox",
        "io.kubernetes.pod.namespace": "team-a"}))
    expect_deny("containerd-explicit-ignores-crio-keys", env, b, cfg=cfg, ns="team-b")
    b = env.bundle(crio_annotations("team-a", IMG_APP, REF_APP, pod={ANNOTATION: good}))
    expect_deny("containerd-explicit-on-crio-bundle", env, b, cfg=cfg,
                reason="io.kubernetes.cri.container-type")
    cfg = env.config(runtime="cri-o")
    b = env.bundle(containerd_annotations("team-a", IMG_APP, pod={ANNOTATION: good}))
    expect_deny("crio-explicit-on-containerd-bundle", env, b, cfg=cfg, reason="io.container.manager")


def podman_cases(env):
    expect_allow("podman-plain-container", env, env.bundle(podman_annotations()))
    expect_allow("no-annotations", env, env.bundle(None))
    # podman playing CRI-O (as the podman hooks.d test does): --annotation overrides the manager.
    pod = crio_annotations("team-a", IMG_APP, REF_APP, pod={ANNOTATION: creds("team-a")})
    expect_allow("podman-as-crio-authorized", env, env.bundle(podman_annotations(pod)))
    pod = crio_annotations("team-a", IMG_APP, REF_APP)
    expect_deny("podman-as-crio-unauthorized", env, env.bundle(podman_annotations(pod)),
                ns="team-a", image=IMG_APP)


def audit_cases(env):
    global checks
    cfg = env.config(mode="audit")
    b = env.bundle(crio_annotations("team-a", IMG_APP, REF_APP))
    checks += 1
    rc, err, _ = run_hook(["--config", cfg], state("ctr-audit", b))
    m = AUDIT_LINE.match(err)
    if rc != 0 or not m or m.group(1) != "ctr-audit" or m.group(2) != "team-a":
        fail("audit-would-deny", f"exit {rc}, stderr {err!r}")
    else:
        print(f"ok   audit-would-deny: {m.group(4)}", flush=True)
    b = env.bundle(crio_annotations("team-a", IMG_APP, REF_APP, pod={ANNOTATION: creds("team-a")}))
    expect_allow("audit-allow-is-silent", env, b, cfg=cfg)


def hostile_bundle_cases(env):
    plain = env.bundle(podman_annotations())   # a bundle that would be allowed
    # config.json a symlink to an allowed container's config: refused, not followed.
    b = env.bundle(crio_annotations("team-a", IMG_APP, REF_APP))
    os.unlink(os.path.join(b, "config.json"))
    os.symlink(os.path.join(plain, "config.json"), os.path.join(b, "config.json"))
    expect_deny("config-json-symlink", env, b, reason="symbolic link")
    b = env.bundle({})
    os.unlink(os.path.join(b, "config.json"))
    os.mkfifo(os.path.join(b, "config.json"))
    expect_deny("config-json-fifo", env, b, reason="regular file")
    b = env.bundle({})
    os.unlink(os.path.join(b, "config.json"))
    os.mkdir(os.path.join(b, "config.json"))
    expect_deny("config-json-directory", env, b)
    b = env.bundle({})
    os.truncate(os.path.join(b, "config.json"), 17 << 20)
    expect_deny("config-json-17MiB", env, b, reason="larger")
    b = env.bundle(None, raw_config='{"annotations": [1, 2]}')
    expect_deny("annotations-not-object", env, b, reason="annotations")
    b = env.bundle(None, raw_config='{"annotations": {"io.container.manager": 7}}')
    expect_deny("annotation-not-string", env, b, reason="not a string")
    b = env.bundle(None, raw_config='["not", "an", "object"]')
    expect_deny("config-json-array", env, b)
    b = env.bundle(None, raw_config='{"annotations": {"a": "1", "a": "2"}}')
    expect_deny("config-json-duplicate-key", env, b)
    b = env.bundle(None, raw_config='{"annotations": {"io.container.manager": "cri-o"')
    expect_deny("config-json-truncated", env, b)
    expect_deny("bundle-missing", env, os.path.join(env.root, "no-such-bundle"))
    b = env.bundle({})
    os.unlink(os.path.join(b, "config.json"))
    expect_deny("config-json-missing", env, b, reason="not found")


def hostile_stdin_cases(env):
    b = env.bundle(podman_annotations())  # would be allowed: only the input makes it a denial
    good = state("ctr-x", b)
    expect_deny("stdin-garbage", env, stdin=b"\x00\x01garbage\xff\n{{{")
    expect_deny("stdin-empty", env, stdin=b"")
    expect_deny("stdin-truncated", env, stdin=good[: len(good) // 2])
    expect_deny("stdin-64MiB", env, stdin=b"\0" * (64 << 20), reason="larger")
    expect_deny("stdin-64MiB-json", env, stdin=b'{"id":"' + b"x" * (64 << 20) + b'"}',
                reason="larger")
    expect_deny("stdin-array", env, stdin=b"[1,2,3]")
    expect_deny("stdin-no-bundle", env, stdin=json.dumps({"id": "c1"}).encode(), reason="bundle")
    expect_deny("stdin-no-id", env, stdin=json.dumps({"bundle": b}).encode(), reason="id")
    expect_deny("stdin-id-not-string", env, stdin=json.dumps({"id": 7, "bundle": b}).encode())
    expect_deny("stdin-bundle-relative", env, stdin=json.dumps({"id": "c", "bundle": "b"}).encode())
    expect_deny("stdin-trailing-garbage", env, stdin=good + b"{}")
    expect_deny("stdin-never-closes", env, stdin_pipe_open=True, limit=3.5, reason="stdin")
    # Control characters in the id cannot split the denial line.
    nb = os.path.join(env.root, "no-such-bundle")
    expect_deny("id-with-newline", env,
                stdin=json.dumps({"id": "evil\ninjected\x1b[2J", "bundle": nb}).encode())


def config_cases(env):
    b = env.bundle(podman_annotations())
    bad = os.path.join(env.root, "bad-config.json")
    with open(bad, "w") as f:
        f.write('{"policy": "NeverVerify", "noSuchKey": true}')
    expect_deny("config-unknown-key", env, b, cfg=bad, reason="noSuchKey")
    expect_deny("config-missing-explicit", env, b, cfg=os.path.join(env.root, "nope.json"))
    expect_deny("bad-argument", env, b, args=["--bogus"])
    expect_deny("unknown-stage", env, b, args=["--stage", "sometime"], reason="stage")


def syslog_cases(env):
    """crun discards hook stderr: every decision must reach syslog (LOG_AUTHPRIV).

    The hook runs in a private mount namespace whose /dev is a tmpfs holding a /dev/log symlink
    to a socket this test reads, so the host's logger is left alone."""
    global checks
    import socket
    sock_path = os.path.join(env.root, "log.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(0.5)
    probe = subprocess.run(["unshare", "-m", "true"], stderr=subprocess.DEVNULL)
    if probe.returncode != 0:
        print("skip syslog-*: cannot create a mount namespace", flush=True)
        return
    cases = [("syslog-deny", crio_annotations("team-a", IMG_APP, REF_APP), 84, "denied container"),
             ("syslog-allow", crio_annotations("team-a", IMG_APP, REF_APP,
                                               pod={ANNOTATION: creds("team-a")}), 86,
              "allowed container")]
    for name, ann, prio, text in cases:
        checks += 1
        b = env.bundle(ann)
        script = (f"mount -t tmpfs none /dev && ln -s {sock_path} /dev/log && "
                  f"exec timeout 10 {HOOK} --config {env.config()} --stage createRuntime")
        subprocess.run(["unshare", "-m", "sh", "-c", script], input=state(f"ctr-{name}", b),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=15)
        try:
            msg = sock.recv(65536).decode("utf-8", "replace")
        except socket.timeout:
            fail(name, "nothing logged")
            continue
        want = f"<{prio}>"
        if not msg.startswith(want) or "pullgate-hook[" not in msg or text not in msg \
                or f"ctr-{name}" not in msg or "stage createRuntime" not in msg:
            fail(name, f"unexpected syslog message {msg!r}")
        else:
            print(f"ok   {name}: {msg}", flush=True)
    sock.close()


class MonitorOutput:
    """dbus-monitor's output, read on a thread, so a check waits for what it expects with a
    deadline instead of sleeping a fixed time (signals travel through the bus asynchronously)."""

    def __init__(self, monitor, address):
        import threading
        self.monitor, self.address, self.chunks = monitor, address, []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in iter(self.monitor.stdout.readline, b""):
            with self.lock:
                self.chunks.append(line.decode("utf-8", "replace"))

    def text(self):
        with self.lock:
            return "".join(self.chunks)

    def wait_for(self, predicate, seconds=30.0):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if predicate(self.text()):
                return True
            time.sleep(0.05)
        return predicate(self.text())

    def wait_ready(self, seconds=30.0):
        """Until the monitor's match rule is in place: a probe signal of the interface is seen."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            subprocess.run(["/usr/bin/dbus-send", "--address=" + self.address, "--type=signal",
                            "/dev/pullgate/PullGate1", "dev.pullgate.PullGate1.MonitorProbe"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self.wait_for(lambda t: "member=MonitorProbe" in t, 0.5):
                return True
        return False


def dbus_cases(env):
    """Every decision is signalled on the configured bus (a private dbus-daemon here)."""
    global checks
    if not (os.path.exists("/usr/bin/dbus-daemon") and os.path.exists("/usr/bin/dbus-monitor")):
        print("skip dbus-*: dbus-daemon or dbus-monitor not installed", flush=True)
        return
    daemon = subprocess.Popen(["/usr/bin/dbus-daemon", "--session", "--nofork", "--nopidfile",
                               "--print-address=1"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    helpers.add(daemon.pid)
    monitor = None
    try:
        address = daemon.stdout.readline().decode().strip()
        monitor = subprocess.Popen(["/usr/bin/dbus-monitor", "--address", address,
                                    "interface='dev.pullgate.PullGate1'"],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        helpers.add(monitor.pid)
        watched = MonitorOutput(monitor, address)
        watched.wait_ready()
        cfg = env.config(dbus=address)
        expect_deny("dbus-deny", env, env.bundle(crio_annotations("team-a", IMG_APP, REF_APP)),
                    cfg=cfg, cid="ctr-dbus-deny")
        good = crio_annotations("team-a", IMG_APP, REF_APP, pod={ANNOTATION: creds("team-a")})
        expect_allow("dbus-allow", env, env.bundle(good), cfg=cfg)
        watched.wait_for(lambda t: "ctr-dbus-deny" in t and "ctr-dbus-allow" in t)
    finally:
        for proc in (monitor, daemon):
            if proc:
                proc.terminate()
                proc.wait(timeout=5)
    watched.thread.join(timeout=5)
    out = watched.text()
    checks += 1
    if "member=ContainerDenied" not in out or "ctr-dbus-deny" not in out:
        fail("dbus-signals", f"no ContainerDenied for ctr-dbus-deny in {out[:2000]!r}")
    elif "member=ContainerAllowed" not in out or "ctr-dbus-allow" not in out:
        fail("dbus-signals", f"no ContainerAllowed for ctr-dbus-allow in {out[:2000]!r}")
    elif HASH_A in out:
        fail("dbus-signals", "a credential hash was sent on the bus")
    else:
        print("ok   dbus-signals: ContainerDenied and ContainerAllowed seen", flush=True)


# ------------------------------------------------ image identity (issue 10)

ID_X = "7" * 64
MANIFEST = "sha256:" + "4" * 64
CRED_C = "c" * 64


def sha_name(key):
    import hashlib
    return "sha256-" + hashlib.sha256(key.encode()).hexdigest()


def kubelet_dir(root, name):
    d = os.path.join(root, name)
    for sub in ("pulled", "pulling"):
        os.makedirs(os.path.join(d, sub), mode=0o700)
    os.chmod(d, 0o700)
    return d


def write_record(d, image_ref, mapping, updated=None):
    rec = {"kind": "ImagePulledRecord", "apiVersion": "kubelet.config.k8s.io/v1alpha1",
           "lastUpdatedTime": updated or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "imageRef": image_ref, "credentialMapping": mapping}
    path = os.path.join(d, "pulled", sha_name(image_ref))
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        json.dump(rec, f)


def write_intent(d, image):
    path = os.path.join(d, "pulling", sha_name(image))
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        json.dump({"kind": "ImagePullIntent", "apiVersion": "kubelet.config.k8s.io/v1alpha1",
                   "image": image}, f)


def secret_mapping(name, ns="team-a", uid="uid-a", hash_=HASH_A):
    return {name: {"kubernetesSecrets": [{"uid": uid, "namespace": ns, "name": "regcred",
                                          "credentialHash": hash_}]}}


def fresh_env(root, tag):
    d = os.path.join(root, f"identity-{tag}")
    os.makedirs(d)
    os.chmod(d, 0o755)
    return Env(d)


def identity_cases(root):
    """Issue 10: every spelling of an image's identity is looked up; preloaded must be proven."""
    # Case 1: a record under sha256:<ID>; team-b's ImageRef mis-spelled -> bad request, not preloaded.
    env = fresh_env(root, "misspelled")
    env.ctl("record-pulled", "--image", IMG_APP, "--image-ref", "sha256:" + REF_APP,
            "--secret", f"team-a/regcred/uid-a:{HASH_A}")
    for i, ref in enumerate(("SHA256:" + REF_APP, "sha256:sha256:" + REF_APP, REF_APP + " ")):
        b = env.bundle(crio_annotations("team-b", IMG_APP, ref))
        expect_deny(f"identity-misspelled-id-{i}", env, b, ns="team-b", reason="bad request")

    # Case 2: the kubelet keyed its record by a repo digest; CRI-O annotates the image ID.
    env = fresh_env(root, "repo-digest")
    kdir = kubelet_dir(env.root, "kubelet")
    cfg = env.config(readOnlyRecordDirs=[kdir])
    digest_ref = f"{NAME_APP}@{MANIFEST}"
    write_record(kdir, digest_ref, secret_mapping(NAME_APP))
    b = env.bundle(crio_annotations("team-b", IMG_APP, ID_X))
    expect_deny("identity-repo-digest-id-only", env, b, cfg=cfg, ns="team-b", reason="no pull record")
    b = env.bundle(crio_annotations("team-b", IMG_APP, ID_X, image=digest_ref))
    expect_deny("identity-repo-digest-in-Image", env, b, cfg=cfg, ns="team-b",
                reason="no presented credential")
    b = env.bundle(crio_annotations("team-b", IMG_APP, ID_X, image=ID_X,
                                    pod={"io.kubernetes.cri-o.ImageRepoDigests": digest_ref}))
    expect_deny("identity-repo-digest-hint", env, b, cfg=cfg, ns="team-b")
    b = env.bundle(crio_annotations("team-a", IMG_APP, ID_X, image=digest_ref,
                                    pod={ANNOTATION: creds("team-a")}))
    expect_allow("identity-repo-digest-authorises-owner", env, b, cfg=cfg)
    b = env.bundle(crio_annotations("team-a", IMG_APP, ID_X, image=ID_X,
                                    pod={ANNOTATION: creds("team-a"),
                                         "io.kubernetes.cri-o.ImageRepoDigests": digest_ref}))
    expect_deny("identity-hint-never-authorises", env, b, cfg=cfg, ns="team-a")

    # Case 3: leftover intents spelled as the pod or the kubelet wrote them.
    env = fresh_env(root, "intents")
    kdir = kubelet_dir(env.root, "kubelet")
    cfg = env.config(readOnlyRecordDirs=[kdir])
    os.makedirs(os.path.join(env.state_dir, "pulling"), mode=0o700)
    os.chmod(env.state_dir, 0o700)
    write_intent(env.state_dir, "acme/app:1.0")
    write_intent(kdir, "nginx:1.25")
    b = env.bundle(crio_annotations("team-b", "docker.io/acme/app:1.0", ID_X))
    expect_deny("identity-intent-short-name", env, b, cfg=cfg, ns="team-b", reason="intent")
    b = env.bundle(crio_annotations("team-b", "docker.io/library/nginx:1.25", ID_X))
    expect_deny("identity-kubelet-intent-short-name", env, b, cfg=cfg, ns="team-b", reason="intent")

    # Case 4: records under both ID spellings, in both directories: the union decides.
    env = fresh_env(root, "union")
    kdir = kubelet_dir(env.root, "kubelet")
    cfg = env.config(readOnlyRecordDirs=[kdir])
    env.ctl("record-pulled", "--image", IMG_APP, "--image-ref", "sha256:" + REF_APP,
            "--secret", f"team-a/regcred/uid-a:{HASH_A}")
    write_record(kdir, REF_APP, secret_mapping(NAME_APP, "team-c", "uid-c", CRED_C))
    b = env.bundle(crio_annotations("team-c", IMG_APP, "sha256:" + REF_APP,
                                    pod={ANNOTATION: creds("team-c", uid="uid-c", hash_=CRED_C)}))
    expect_allow("identity-union-kubelet-record", env, b, cfg=cfg)
    b = env.bundle(crio_annotations("team-a", IMG_APP, REF_APP, pod={ANNOTATION: creds("team-a")}))
    expect_allow("identity-union-own-record", env, b, cfg=cfg)

    # Case 5: containerd with only the kubelet's records.
    env = fresh_env(root, "containerd")
    kdir = kubelet_dir(env.root, "kubelet")
    cfg = env.config(readOnlyRecordDirs=[kdir])
    write_record(kdir, "sha256:" + REF_APP, secret_mapping(NAME_APP))
    b = env.bundle(containerd_annotations("team-a", IMG_APP, pod={ANNOTATION: creds("team-a")}))
    expect_allow("identity-containerd-kubelet-records", env, b, cfg=cfg)
    b = env.bundle(containerd_annotations("team-b", IMG_APP, pod={ANNOTATION: creds("team-a")}))
    expect_deny("identity-containerd-kubelet-records-other-tenant", env, b, cfg=cfg, ns="team-b",
                reason="no presented credential")

    # Case 6: a pinned pattern does not cover a private image pulled with credentials.
    env = fresh_env(root, "pinned")
    kdir = kubelet_dir(env.root, "kubelet")
    cfg = env.config(readOnlyRecordDirs=[kdir], pinnedImages=["*pause*"])
    helper = "registry.example.com/team-a/pause-helper"
    write_record(kdir, "sha256:" + REF_APP, secret_mapping(helper))
    b = env.bundle(crio_annotations("team-b", helper + ":1", REF_APP))
    expect_deny("identity-pinned-private-image", env, b, cfg=cfg, ns="team-b")
    b = env.bundle(crio_annotations("team-b", "registry.k8s.io/pause:3.10", ID_X))
    expect_allow("identity-pinned-never-pulled", env, b, cfg=cfg)
    b = env.bundle(crio_annotations("team-b", "registry.k8s.io/pause:3.10", ID_X,
                                    pod={ANNOTATION: "{broken"}))
    expect_deny("identity-pinned-bad-annotation", env, b, cfg=cfg, reason="annotation")

    # Case 7: credentialTTL per credential; a future lastUpdatedTime never authorises.
    env = fresh_env(root, "ttl")
    kdir = kubelet_dir(env.root, "kubelet")
    cfg = env.config(readOnlyRecordDirs=[kdir], credentialTTL="1h")
    env.ctl("record-pulled", "--image", IMG_TOOLS, "--image-ref", "sha256:" + REF_TOOLS,
            "--secret", f"team-a/regcred/uid-a:{HASH_A}")
    old = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 7200))
    write_record(env.state_dir, "sha256:" + REF_APP, secret_mapping(NAME_APP), updated=old)
    env.ctl("record-pulled", "--image", IMG_APP, "--image-ref", "sha256:" + REF_APP,
            "--secret", f"team-c/regcred/uid-c:{CRED_C}")
    b = env.bundle(crio_annotations("team-c", IMG_APP, REF_APP,
                                    pod={ANNOTATION: creds("team-c", uid="uid-c", hash_=CRED_C)}))
    expect_allow("identity-ttl-fresh-credential", env, b, cfg=cfg)
    b = env.bundle(crio_annotations("team-a", IMG_APP, REF_APP, pod={ANNOTATION: creds("team-a")}))
    expect_deny("identity-ttl-not-refreshed-by-other-tenant", env, b, cfg=cfg, ns="team-a",
                reason="credentialTTL")
    write_record(kdir, ID_X, secret_mapping(NAME_APP), updated="2096-01-01T00:00:00Z")
    b = env.bundle(crio_annotations("team-a", IMG_APP, ID_X, pod={ANNOTATION: creds("team-a")}))
    expect_deny("identity-future-record", env, b, cfg=env.config(readOnlyRecordDirs=[kdir]),
                ns="team-a", reason="future")


def pod_binding_cases(root):
    """Issue 28: a pull pullgate-cri bound to the pod that made it ({ns, "pullgate:pod-<uid>",
    uid "", hash ""}) lets that pod run it: the pod UID is read only from the key the runtime
    sets (CRI-O: the kubelet's io.kubernetes.pod.uid label, copied last; containerd 1.6.11+:
    io.kubernetes.cri.sandbox-uid), never from a key a pod can inject."""
    env = fresh_env(root, "pod-binding")
    env.ctl("record-pulled", "--image", IMG_TOOLS, "--image-ref", "sha256:" + REF_TOOLS,
            "--secret", f"team-a/regcred/uid-a:{HASH_A}")  # creates the record directory
    owner, other = "7c1f0a52-3d1e-4c3b-9a8e-0d6f5b2c1a11", "2b9e4d07-8f61-4a5c-b3d2-6e1f0c9a7b22"
    write_record(env.state_dir, "sha256:" + REF_APP, {NAME_APP: {"kubernetesSecrets": [
        {"uid": "", "namespace": "team-a", "name": "pullgate:pod-" + owner, "credentialHash": ""},
        {"uid": "", "namespace": "team-a", "name": "pullgate:unverified-" + HASH_B,
         "credentialHash": HASH_B}]}})
    # A pull of another namespace merged in by pullgate: the binding is kept, and the image
    # index and name index (containerd's lookups) now name the record.
    env.ctl("record-pulled", "--image", IMG_APP, "--image-ref", "sha256:" + REF_APP,
            "--secret", f"team-z/regcred/uid-z:{HASH_B}")
    old = {ANNOTATION: creds("team-a")}  # lists a secret's old hash (rotated after admission)
    b = env.bundle(crio_annotations("team-a", IMG_APP, REF_APP, pod=old, pod_uid=owner))
    expect_allow("pod-binding-crio-owner", env, b)
    b = env.bundle(crio_annotations("team-a", IMG_APP, REF_APP, pod=old, pod_uid=other))
    expect_deny("pod-binding-crio-other-pod", env, b, ns="team-a", reason="no presented credential")
    b = env.bundle(crio_annotations("team-a", IMG_APP, REF_APP, pod_uid=other, pod=dict(
        old, **{"io.kubernetes.cri.sandbox-uid": owner, "io.kubernetes.pod.uid": owner})))
    expect_deny("pod-binding-crio-injected-uid", env, b, ns="team-a")
    b = env.bundle(crio_annotations("team-b", IMG_APP, REF_APP, pod_uid=owner,
                                    pod={ANNOTATION: creds("team-b")}))
    expect_deny("pod-binding-crio-other-namespace", env, b, ns="team-b")
    b = env.bundle(containerd_annotations("team-a", IMG_APP, pod=old, pod_uid=owner))
    expect_allow("pod-binding-containerd-owner", env, b)
    b = env.bundle(containerd_annotations("team-a", IMG_APP, pod_uid=other, pod=dict(
        old, **{"io.kubernetes.pod.uid": owner})))
    expect_deny("pod-binding-containerd-injected-uid", env, b, ns="team-a")
    b = env.bundle(containerd_annotations("team-a", IMG_APP, pod=old, pod_uid=None))
    expect_deny("pod-binding-containerd-before-1.6.11", env, b, ns="team-a")
    b = env.bundle(containerd_annotations("team-a", IMG_APP, pod=old, pod_uid="pullgate:pod-" + owner))
    expect_deny("pod-binding-containerd-malformed-uid", env, b, ns="team-a")


def version_cases():
    """--version alone prints the version and allows nothing else: with other arguments it
    is a bad argument, which denies (a runtime never passes it)."""
    global checks
    local = os.path.join(os.path.dirname(HOOK), "pullgate-hook-local")
    for prog in (HOOK, local):
        checks += 1
        name = os.path.basename(prog)
        r = subprocess.run([prog, "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=10)
        if r.returncode != 0 or not re.fullmatch(re.escape(name) + r" \d+\.\d+\.\d+\n", r.stdout):
            fail(f"{name}-version", f"exit {r.returncode}, stdout {r.stdout!r}, stderr {r.stderr!r}")
        else:
            print(f"ok   {name}-version: {r.stdout.strip()}", flush=True)
        checks += 1
        r = subprocess.run([prog, "--stage", "createRuntime", "--version"], input=b"{}",
                           capture_output=True, timeout=10)
        if r.returncode != 1 or b"bad argument" not in r.stderr:
            fail(f"{name}-version-in-a-run", f"exit {r.returncode}, stderr {r.stderr!r}")
        else:
            print(f"ok   {name}-version-in-a-run: denied", flush=True)


# ------------------------------------------------ image-name spellings (issue 22)

# Every way a pod (so the kubelet's key, its intent, containerd 2.x's image-name) or a runtime may
# spell one Docker Hub image, and the tag/digest forms it may carry.
OFFICIAL = ["tool", "library/tool", "docker.io/tool", "docker.io/library/tool",
            "index.docker.io/library/tool", "index.docker.io/tool"]
ORG = ["secretorg/myimage", "docker.io/secretorg/myimage", "index.docker.io/secretorg/myimage"]
SPELLING_DIGEST = "sha256:" + "5" * 64
SUFFIXES = ["", ":1", "@" + SPELLING_DIGEST, ":1@" + SPELLING_DIGEST]
REF_SPELL = "6" * 64


def normalised(name):
    return "docker.io/library/tool" if name in OFFICIAL else "docker.io/secretorg/myimage"


def spelling_cases(root):
    """Issue 22: whichever spelling the kubelet recorded and the runtime names, one image."""
    # Records: the kubelet keyed its record by the name as the pod wrote it.
    for family in (OFFICIAL, ORG):
        for key in family:
            env = fresh_env(root, "spell-record-" + key.replace("/", "_"))
            kdir = kubelet_dir(env.root, "kubelet")
            cfg = env.config(readOnlyRecordDirs=[kdir])
            write_record(kdir, "sha256:" + REF_SPELL, secret_mapping(key))
            owner = creds("team-a", image_name=normalised(key))
            for name in family:
                # CRI-O names the image ID (the suffix changes nothing); under containerd a
                # digest makes the content known, which takes another path.
                b = env.bundle(crio_annotations("team-b", name + ":1", REF_SPELL))
                expect_deny(f"spell-record-{key}-as-{name}:1-crio-team-b", env, b, cfg=cfg,
                            ns="team-b", reason="no presented credential")
                for suffix in (":1", ":1@" + SPELLING_DIGEST):
                    b = env.bundle(containerd_annotations("team-b", name + suffix))
                    expect_deny(f"spell-record-{key}-as-{name + suffix}-containerd-team-b", env, b,
                                cfg=cfg, ns="team-b")
                b = env.bundle(crio_annotations("team-a", name + ":1", REF_SPELL,
                                                pod={ANNOTATION: owner}))
                expect_allow(f"spell-record-{key}-as-{name}-crio-owner", env, b, cfg=cfg)
                b = env.bundle(containerd_annotations("team-a", name + ":1", pod={ANNOTATION: owner}))
                expect_allow(f"spell-record-{key}-as-{name}-containerd-owner", env, b, cfg=cfg)

    # Intents: the kubelet's intent under the pod's spelling, the runtime naming it otherwise.
    env = fresh_env(root, "spell-intents")
    kdir = kubelet_dir(env.root, "kubelet")
    cfg = env.config(readOnlyRecordDirs=[kdir])
    for family in (OFFICIAL, ORG):
        for name in family:
            for suffix in SUFFIXES:
                write_intent(kdir, name + suffix)
                # The same probes on both paths: CRI-O shows the normalised name (an image ID
                # nothing recorded), containerd 2.x the pod's short one.
                image = normalised(name) + suffix
                b = env.bundle(crio_annotations("team-b", image, ID_X))
                expect_deny(f"spell-intent-{name + suffix}-as-{image}-crio", env, b, cfg=cfg,
                            ns="team-b", reason="intent")
                image = family[0] + suffix
                b = env.bundle(containerd_annotations("team-b", image))
                expect_deny(f"spell-intent-{name + suffix}-as-{image}-containerd", env, b, cfg=cfg,
                            ns="team-b", reason="intent")
                os.unlink(os.path.join(kdir, "pulling", sha_name(name + suffix)))

    # The name index: pullgate's own record (pulled under any spelling, keyed normalised);
    # another tag of that name has no index entry and no ID, so the index of names decides.
    for family in (OFFICIAL, ORG):
        for pulled in family:
            env = fresh_env(root, "spell-index-" + pulled.replace("/", "_"))
            env.ctl("record-pulled", "--image", pulled + ":1", "--image-ref", "sha256:" + REF_SPELL,
                    "--secret", f"team-a/regcred/uid-a:{HASH_A}")
            for name in family:
                b = env.bundle(containerd_annotations("team-b", name + ":2"))
                expect_deny(f"spell-index-{pulled}-as-{name}:2-containerd", env, b, ns="team-b",
                            reason="no presented credential")
                b = env.bundle(crio_annotations("team-b", name + ":2", ID_X))
                expect_deny(f"spell-index-{pulled}-as-{name}:2-crio-other-id", env, b, ns="team-b",
                            reason="no pull record")


def main():
    become_subreaper()
    version_cases()
    with tempfile.TemporaryDirectory(prefix="pg-hook-synth-") as root:
        os.chmod(root, 0o755)
        env = Env(root)
        setup_records(env)
        for group in (crio_cases, forged_cases, containerd_cases, podman_cases, audit_cases,
                      hostile_bundle_cases, hostile_stdin_cases, config_cases, syslog_cases,
                      dbus_cases):
            group(env)
        identity_cases(root)
        pod_binding_cases(root)
        spelling_cases(root)
    print(f"{checks} checks, {len(failures)} failures")
    for f in failures:
        print("  " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
