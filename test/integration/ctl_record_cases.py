#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Runs every case of kubelet-record-cases.json through pullgatectl.

The kubelet's record-merge, RecordImagePulled, RecordPullIntent, prune and
image-name cases (test/data/README.md), each as pullgatectl commands against a
fresh writable record directory:

- "pulled": records placed in pulled/ (kubelet format), "intents": the
  kubelet's intent files placed in pulling/ (no pullgate reference count);
- "steps": pullgatectl commands run in order, each with its exit status
  ("exit"), and for `verify --json` the reason code ("reason"); "@inUse" in a
  prune command is a file listing the step's "inUse" imageRefs; "stdout" is
  the expected output;
- "expect": "records" (imageRef -> the record's credentialMapping, compared
  exactly, lists in order, and "lastUpdated": "refreshed" / "unchanged"),
  "presentRecords" / "absentRecords" (imageRefs), "intents" / "absentIntents"
  (images, the kubelet's pulling/ file name), "intentFiles" (file name ->
  the image the intent file must hold).

A case with "divergence" ("<id>: why") is one pullgate answers differently from
the kubelet on purpose; its id must be listed in docs/interfaces.md.

Usage: ctl_record_cases.py PULLGATECTL RECORD_CASES_JSON [CASE_NAME...]
"""
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile


def file_name(key):
    return "sha256-" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def write_file(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(data)


def parse_time(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def build_state(case, root):
    state = os.path.join(root, "state")
    os.mkdir(state, 0o700)
    for sub in ("pulled", "pulling"):
        os.mkdir(os.path.join(state, sub), 0o700)
    for record in case.get("pulled", []):
        write_file(os.path.join(state, "pulled", file_name(record["imageRef"])),
                   json.dumps(record, separators=(",", ":")) + "\n")
    for image in case.get("intents", []):
        intent = {"kind": "ImagePullIntent", "apiVersion": "kubelet.config.k8s.io/v1alpha1",
                  "image": image}
        write_file(os.path.join(state, "pulling", file_name(image)),
                   json.dumps(intent, separators=(",", ":")) + "\n")
    config = os.path.join(root, "config.json")
    write_file(config, json.dumps({"stateDir": state, "readOnlyRecordDirs": [], "dbus": "none"}))
    return state, config


def run_step(ctl, config, root, index, st):
    """None, or what went wrong."""
    args = list(st["args"])
    if "@inUse" in args:
        path = os.path.join(root, "in-use-%d" % index)
        write_file(path, "".join(ref + "\n" for ref in st.get("inUse", [])))
        args[args.index("@inUse")] = path
    proc = subprocess.run([ctl, "--config", config] + args, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    seen = "step %d %s: exit %d, stdout %r, stderr %r" % (
        index, " ".join(st["args"][:1]), proc.returncode, proc.stdout.strip(), proc.stderr.strip())
    if proc.returncode != st.get("exit", 0):
        return seen
    if "stdout" in st and proc.stdout.strip() != st["stdout"]:
        return seen
    if "reason" in st:
        try:
            reason = json.loads(proc.stdout).get("reason")
        except ValueError:
            return seen
        if reason != st["reason"]:
            return seen
    return None


def check_record(state, ref, want, started):
    path = os.path.join(state, "pulled", file_name(ref))
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError) as e:
        return "record of %s: %s" % (ref, e)
    if record.get("imageRef") != ref:
        return "record of %s names %r" % (ref, record.get("imageRef"))
    got = record.get("credentialMapping", {})
    if got != want["credentialMapping"]:
        return "record of %s: credentialMapping %s, want %s" % (
            ref, json.dumps(got, sort_keys=True), json.dumps(want["credentialMapping"], sort_keys=True))
    refreshed = parse_time(record["lastUpdatedTime"]) >= started
    if (want.get("lastUpdated") == "refreshed") != refreshed:
        return "record of %s: lastUpdatedTime %s, want %s" % (
            ref, record["lastUpdatedTime"], want.get("lastUpdated"))
    return None


def check_expect(state, expect, started):
    for ref, want in expect.get("records", {}).items():
        problem = check_record(state, ref, want, started)
        if problem:
            return problem
    pulled = os.path.join(state, "pulled")
    for ref in expect.get("presentRecords", []):
        if not os.path.exists(os.path.join(pulled, file_name(ref))):
            return "record of %s is missing" % ref
    for ref in expect.get("absentRecords", []):
        if os.path.exists(os.path.join(pulled, file_name(ref))):
            return "record of %s is still there" % ref
    pulling = os.path.join(state, "pulling")
    for image in expect.get("intents", []):
        if not os.path.exists(os.path.join(pulling, file_name(image))):
            return "intent for %s is missing" % image
    for image in expect.get("absentIntents", []):
        if os.path.exists(os.path.join(pulling, file_name(image))):
            return "intent for %s is still there" % image
    for name, image in expect.get("intentFiles", {}).items():
        try:
            with open(os.path.join(pulling, name), encoding="utf-8") as f:
                intent = json.load(f)
        except (OSError, ValueError) as e:
            return "intent file %s: %s" % (name, e)
        if intent.get("kind") != "ImagePullIntent" or intent.get("image") != image:
            return "intent file %s holds %r" % (name, intent)
    return None


def run_case(ctl, case):
    """None, or what went wrong."""
    with tempfile.TemporaryDirectory(prefix="pg-record-case-") as root:
        os.chmod(root, 0o700)
        state, config = build_state(case, root)
        # Whole seconds: lastUpdatedTime is written without a fraction, from time(2), whose
        # coarse clock may be a tick behind this one; "unchanged" records are years older.
        started = (datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) -
                   datetime.timedelta(seconds=1))
        for i, st in enumerate(case["steps"]):
            problem = run_step(ctl, config, root, i, st)
            if problem:
                return problem
        return check_expect(state, case.get("expect", {}), started)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    ctl, cases_path, only = argv[1], argv[2], set(argv[3:])
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "docs", "interfaces.md"), encoding="utf-8") as f:
        interfaces = f.read()
    passed = failed = 0
    for case in cases:
        if only and case["name"] not in only:
            continue
        try:
            problem = run_case(ctl, case)
        except (OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
            problem = "harness error: %s" % e
        divergence = case.get("divergence")
        if not problem and divergence and ("`%s`" % divergence.split(":", 1)[0]) not in interfaces:
            problem = "divergence %r is not listed in docs/interfaces.md" % divergence.split(":")[0]
        print("%s %s%s" % ("FAIL" if problem else "ok  ", case["name"],
                           ": " + problem if problem else ""))
        passed += not problem
        failed += bool(problem)
    print("%d passed, %d failed" % (passed, failed))
    if passed + failed == 0:
        print("no case ran", file=sys.stderr)
        return 1
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
