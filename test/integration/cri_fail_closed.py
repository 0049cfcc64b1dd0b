#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Kubelet stand-ins for test_cri_fail_closed.sh (the fake runtime is cri_pull_recording.py).

  burst SOCKET N PREFIX NS USER PASS SPREAD_S [EXTRA...]
        N pulls of PREFIX-<i>:1.0 at once (spread over SPREAD_S seconds); one line each:
        "<image> OK <ref>" or "<image> <CODE> <details>"
  raw SOCKET METHOD HEX...            one call with these raw request messages (hex), in
                                      order on one stream; prints "OK" or "<CODE> <details>"
  request IMAGE NS USER PASS          the hex of a well-formed PullImageRequest
  memscan PID NEEDLE...               every NEEDLE found in the process's writable memory,
                                      one per line with its address ("clean" when none)
  watch STATE CTL CONFIG EVENTS SECONDS PREFIX
        while the test runs: every image named PREFIX... the runtime holds (EVENTS
        "pull X intent-...", pulled with credentials) must be verified for a foreign
        namespace, never allowed as preloaded; one line per violation, then "checked N"
  age-records STATE SECONDS           moves every pulled record's lastUpdatedTime back
"""
import binascii
import concurrent.futures
import datetime
import glob
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cri_pull_recording as fake  # noqa: E402  (the same generated messages)

import grpc  # noqa: E402

pb = fake.pb


def one_pull(sock, image, ns, user, password):
    req = pb.PullImageRequest(image=pb.ImageSpec(image=image.encode()))
    if user or password:
        req.auth.username = user.encode()
        req.auth.password = password.encode()
    req.sandbox_config.metadata.name = b"pod-1"
    req.sandbox_config.metadata.uid = b"pod-uid-1"
    req.sandbox_config.metadata.namespace = ns.encode()
    with grpc.insecure_channel("unix:" + sock) as ch:
        try:
            raw = ch.unary_unary("/runtime.v1.ImageService/PullImage")(req.SerializeToString(),
                                                                       timeout=90)
            return "OK " + pb.PullImageResponse.FromString(raw).image_ref.decode()
        except grpc.RpcError as e:
            return "%s %s" % (e.code().name, e.details())


def burst(sock, n, prefix, ns, user, password, spread):
    n, spread = int(n), float(spread)
    images = ["%s-%d:1.0" % (prefix, i) for i in range(n)]

    def run(i):
        time.sleep(spread * i / max(n, 1))
        return images[i], one_pull(sock, images[i], ns, user, password)

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(n, 128)) as ex:
        for image, out in ex.map(run, range(n)):
            print(image, out, flush=True)


def raw(sock, method, *hexes):
    msgs = [binascii.unhexlify(h) for h in hexes]
    with grpc.insecure_channel("unix:" + sock) as ch:
        try:
            ch.stream_unary(method)(iter(msgs), timeout=20)
            print("OK")
        except grpc.RpcError as e:
            print(e.code().name, e.details())


def request(image, ns, user, password):
    req = pb.PullImageRequest(image=pb.ImageSpec(image=image.encode()))
    if user or password:
        req.auth.username = user.encode()
        req.auth.password = password.encode()
    req.sandbox_config.metadata.namespace = ns.encode()
    print(binascii.hexlify(req.SerializeToString()).decode())


CHUNK = 16 << 20
MAX_REGION = 1 << 30  # larger: a sanitizer's reserved shadow or allocator space, not the heap


def memscan(pid, *needles):
    found, skipped = 0, 0
    keep = max(len(n) for n in needles) if needles else 0
    maps = open("/proc/%s/maps" % pid).read().splitlines()
    with open("/proc/%s/mem" % pid, "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if "w" not in fields[1] or (len(fields) > 5 and fields[5].startswith("/dev/")):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if end - start > MAX_REGION:
                skipped += 1
                continue
            tail = b""
            for at in range(start, end, CHUNK):
                try:
                    mem.seek(at)
                    data = tail + mem.read(min(CHUNK, end - at))
                except (OSError, ValueError, OverflowError):
                    break
                base = at - len(tail)
                for needle in needles:
                    pos = data.find(needle.encode())
                    while pos >= 0:
                        ctx = data[max(0, pos - int(os.environ.get("PG_MEMSCAN_BEFORE", "48"))):
                                   pos + len(needle) + 16]
                        print("found %s at %#x (%s) context %r" % (
                            needle[:6] + "...", base + pos,
                            fields[5] if len(fields) > 5 else "anon",
                            ctx if os.environ.get("PG_MEMSCAN_CONTEXT") else len(ctx)))
                        found += 1
                        pos = data.find(needle.encode(), pos + 1)
                tail = data[-keep:] if keep else b""
    if skipped:
        sys.stderr.write("memscan: %d writable regions over 1 GiB not read (sanitizer "
                         "reservations)\n" % skipped)
    if not found:
        print("clean")


def watch(state, ctl, config, events, seconds, prefix):
    """Samples the images the runtime holds: none may be allowed to a foreign namespace."""
    end = time.monotonic() + float(seconds)
    checked, seen = 0, set()
    while time.monotonic() < end:
        try:
            lines = open(events).read().splitlines()
        except OSError:
            lines = []
        held = [m.group(1) for m in (re.match(r"pull (\S+) intent-", l) for l in lines)
                if m and m.group(1).startswith(prefix)]
        for image in held:
            if image in seen and checked > 40:
                continue
            seen.add(image)
            r = subprocess.run([ctl, "--config", config, "verify", "--image", image, "--image-ref",
                                fake.image_id(image), "--namespace", "watcher",
                                "--credentials", "{}"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            checked += 1
            if r.returncode == 0:
                print("ALLOWED %s: %s" % (image, r.stdout.strip()[:200]), flush=True)
        time.sleep(0.2)
    print("checked", checked)


def age_records(state, seconds):
    old = datetime.datetime.utcnow() - datetime.timedelta(seconds=int(seconds))
    stamp = old.strftime("%Y-%m-%dT%H:%M:%SZ")
    for path in glob.glob(os.path.join(state, "pulled", "sha256-*")):
        rec = json.load(open(path))
        rec["lastUpdatedTime"] = stamp
        tmp = path + ".aging"
        with open(tmp, "w") as f:
            json.dump(rec, f, separators=(",", ":"))
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
    # credential times beside the records (credentialTTL) are not pruning's business


def main(argv):
    cmds = {"burst": burst, "raw": raw, "request": request, "memscan": memscan, "watch": watch,
            "age-records": age_records}
    if len(argv) < 2 or argv[1] not in cmds:
        sys.stderr.write(__doc__)
        return 2
    cmds[argv[1]](*argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
