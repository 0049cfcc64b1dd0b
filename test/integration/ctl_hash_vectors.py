#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Runs every credential-hash vector through `pullgatectl hash`.

Each vector is checked through
  - hash --username U --password-stdin [--email E]   (password with and without
    a trailing newline, which must be stripped once)
  - hash --username U --password-file F [--email E]
  - hash --dockerconfigjson F --image registry.example.com/x, with an entry
    for registry.example.com holding an `auth` (padded and unpadded base64),
    and one holding `username`/`password` fields.
Each must print exactly the vector's credentialHash.

Usage: ctl_hash_vectors.py PULLGATECTL CREDENTIAL_HASH_VECTORS_JSON
"""
import base64
import json
import os
import subprocess
import sys
import tempfile

IMAGE = "registry.example.com/x"
REGISTRY = "registry.example.com"


def run(cmd, stdin_bytes=b""):
    proc = subprocess.run(cmd, input=stdin_bytes, capture_output=True, timeout=60)
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), \
        proc.stderr.decode("utf-8", "replace")


def check(name, what, result, want):
    status, out, err = result
    ok = status == 0 and out == want + "\n"
    print("%s %-16s %-32s exit %d out %r%s" % ("ok  " if ok else "FAIL", name, what, status,
                                              out.strip(), "" if ok else " err %r" % err.strip()))
    return ok


def vector_bytes(vector):
    user = base64.b64decode(vector.get("username_base64", ""))
    password = base64.b64decode(vector.get("password_base64", ""))
    return user, password


def password_args(ctl, vector, user):
    args = [ctl, "hash", "--username", user]
    if vector.get("email"):
        args += ["--email", vector["email"].encode("utf-8")]
    return args


def write_private(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def dockerconfig_entries(vector, user, password):
    """(description, entry) pairs for the vector."""
    auth = base64.b64encode(user + b":" + password).decode("ascii")
    entries = [("dockerconfig auth padded", {"auth": auth}),
               ("dockerconfig auth unpadded", {"auth": auth.rstrip("=")})]
    try:
        fields = {"username": user.decode("utf-8"), "password": password.decode("utf-8")}
        entries.append(("dockerconfig username/password", fields))
    except UnicodeDecodeError:
        pass
    if vector.get("email"):
        for _, entry in entries:
            entry["email"] = vector["email"]
    if entries[0][1]["auth"] == entries[1][1]["auth"]:
        entries.pop(1)  # already unpadded
    return entries


def check_vector(ctl, vector, tmp):
    name, want = vector["name"], vector["credentialHash"]
    user, password = vector_bytes(vector)
    args = password_args(ctl, vector, user)
    results = [
        check(name, "--password-stdin", run(args + ["--password-stdin"], password), want),
        check(name, "--password-stdin (newline)",
              run(args + ["--password-stdin"], password + b"\n"), want)]
    password_file = os.path.join(tmp, "password")
    write_private(password_file, password + b"\n")
    results.append(check(name, "--password-file", run(args + ["--password-file", password_file]),
                         want))
    for what, entry in dockerconfig_entries(vector, user, password):
        config_file = os.path.join(tmp, "dockerconfig.json")
        write_private(config_file, json.dumps({"auths": {REGISTRY: entry}}).encode("utf-8"))
        cmd = [ctl, "hash", "--dockerconfigjson", config_file, "--image", IMAGE]
        results.append(check(name, what, run(cmd), want))
    return sum(results), len(results) - sum(results)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    ctl, vectors_path = argv[1], argv[2]
    with open(vectors_path, encoding="utf-8") as f:
        vectors = json.load(f)
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="pg-hash-") as tmp:
        for vector in vectors:
            p, f_ = check_vector(ctl, vector, tmp)
            passed += p
            failed += f_
    print("%d passed, %d failed" % (passed, failed))
    if passed + failed == 0:
        return 1
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
