#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""systemctl for a test node in a temp dir (test_doctor.sh runs the fix commands pullgatectl
doctor prints, as printed, with this first in PATH). It does what the real one would to that node:

  daemon-reload                 every unit of the node's unit directory, with its drop-ins,
                                must pass `systemd-analyze verify` (systemd need not run); the
                                ExecStart= each one resolves to is what later starts use
  start|restart UNIT, enable --now UNIT
      pullgate-cri              stops the running one (its pid file) and starts the ExecStart
                                loaded at the last daemon-reload, detached; waits for its socket
      kubelet                   the node's kubelet stand-in takes its flags file again: its fake
                                /proc cmdline becomes `kubelet --config=<as before> $KUBELET_KUBEADM_ARGS`
      containerd                stops the node's containerd (its pid file) and starts it again with the
                                same command line, detached; waits for its socket: a configuration
                                it cannot start with fails the restart
      crio                      no CRI-O runs on a test node: parses every drop-in of its
                                crio.conf.d as TOML, as CRI-O does at start (one it cannot read fails)

The node: $FAKE_NODE (a JSON file): unit_dir, pid_file, cri_log, cri_socket, hook_socket, proc,
kubelet_pid, kubelet_flags, containerd_pid_file, containerd_socket, containerd_log,
crio_config_dir, log. Unknown verbs or units fail loudly.
"""
import json
import os
import shlex
import signal
import subprocess
import sys
import time


def node():
    with open(os.environ["FAKE_NODE"]) as f:
        return json.load(f)


def exec_start(unit_dir, unit):
    """The unit's ExecStart= after its drop-ins (an empty ExecStart= clears the list)."""
    files = [os.path.join(unit_dir, unit)]
    d = os.path.join(unit_dir, unit + ".d")
    if os.path.isdir(d):
        files += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".conf")]
    starts = []
    for path in files:
        section = None
        for line in open(path):
            line = line.strip()
            if line.startswith("["):
                section = line
            elif section == "[Service]" and line.startswith("ExecStart="):
                value = line[len("ExecStart="):]
                starts = [] if not value else starts + [value]
    return starts


def daemon_reload(n):
    loaded = {}
    for unit in sorted(os.listdir(n["unit_dir"])):
        if not unit.endswith(".service"):
            continue
        env = dict(os.environ, SYSTEMD_UNIT_PATH=n["unit_dir"] + ":")
        # --man=no: Documentation=man:... is not this check's business (man may be absent).
        r = subprocess.run(["systemd-analyze", "verify", "--man=no",
                            os.path.join(n["unit_dir"], unit)],
                           env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(f"systemctl daemon-reload: {unit} refused:\n{r.stdout}{r.stderr}")
            return 1
        starts = exec_start(n["unit_dir"], unit)
        if len(starts) != 1:
            sys.stderr.write(f"systemctl daemon-reload: {unit}: {len(starts)} ExecStart= lines\n")
            return 1
        loaded[unit] = starts[0]
    with open(os.path.join(n["unit_dir"], ".loaded.json"), "w") as f:
        json.dump(loaded, f)
    return 0


def running(pid):
    """Alive and not a zombie: an earlier start's process is no child of ours, and its
    reaper (the container's init) may take a second to collect it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop_pid(pid_file):
    try:
        pid = int(open(pid_file).read())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(1200):
        if not running(pid):
            return
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)


def start_cri(n):
    with open(os.path.join(n["unit_dir"], ".loaded.json")) as f:
        argv = shlex.split(json.load(f)["pullgate-cri.service"])
    stop_pid(n["pid_file"])
    socks = [n["cri_socket"], n["hook_socket"]]
    for sock in socks:
        if os.path.exists(sock):
            os.unlink(sock)
    with open(n["cri_log"], "a") as log:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True)
    with open(n["pid_file"], "w") as f:
        f.write(str(p.pid))
    for _ in range(1000):
        if all(os.path.exists(sock) for sock in socks):  # the hook server binds last
            return 0
        if p.poll() is not None:
            break
        time.sleep(0.01)
    sys.stderr.write("systemctl: pullgate-cri did not start (its log: %s)\n" % n["cri_log"])
    return 1


def restart_kubelet(n):
    args = []
    for line in open(n["kubelet_flags"]):
        if line.startswith("KUBELET_KUBEADM_ARGS="):
            args = shlex.split(line.split("=", 1)[1])[0].split()
    path = os.path.join(n["proc"], str(n["kubelet_pid"]), "cmdline")
    before = open(path).read().split("\0")
    config = [a for a in before if a.startswith("--config=")][:1]  # the unit's, kept
    with open(path, "w") as f:
        f.write("".join(a + "\0" for a in ["/usr/bin/kubelet"] + config + args))
    return 0


def restart_containerd(n):
    t0 = time.monotonic()
    pid_file = n["containerd_pid_file"]
    pid = int(open(pid_file).read())
    argv = [a for a in open(f"/proc/{pid}/cmdline").read().split("\0") if a]
    stop_pid(pid_file)
    sock = n["containerd_socket"]
    if os.path.exists(sock):
        os.unlink(sock)
    with open(n["containerd_log"], "a") as log:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True)
    with open(pid_file, "w") as f:
        f.write(str(p.pid))
    for _ in range(3000):
        if os.path.exists(sock):
            with open(n["log"], "a") as f:  # the test reports what its restarts cost
                f.write("containerd restarted in %.2f s\n" % (time.monotonic() - t0))
            return 0
        if p.poll() is not None:
            break
        time.sleep(0.01)
    sys.stderr.write("systemctl: containerd did not start (its log: %s)\n" % n["containerd_log"])
    return 1


def restart_crio(n):
    import tomllib
    d = n["crio_config_dir"]
    for name in sorted(os.listdir(d)):
        try:
            with open(os.path.join(d, name), "rb") as f:
                tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as e:
            sys.stderr.write(f"systemctl: crio would not start: {name}: {e}\n")
            return 1
    return 0


def main(argv):
    n = node()
    with open(n["log"], "a") as f:
        f.write("systemctl " + " ".join(argv) + "\n")
    if argv == ["daemon-reload"]:
        return daemon_reload(n)
    if argv[:2] == ["enable", "--now"]:
        argv = ["start"] + argv[2:]
    if len(argv) == 2 and argv[0] in ("start", "restart"):
        unit = argv[1].removesuffix(".service")
        if unit == "pullgate-cri":
            return start_cri(n)
        if unit == "kubelet":
            return restart_kubelet(n)
        if unit == "containerd":
            return restart_containerd(n)
        if unit == "crio":
            return restart_crio(n)
    sys.stderr.write("fake systemctl: not for this node: %s\n" % " ".join(argv))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
