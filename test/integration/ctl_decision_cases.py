#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Runs every case of decision-cases.json through `pullgatectl verify`.

For each case: a fresh writable record directory and a read-only one built as
the test data README describes (dirs 0700, files 0600,
pulled/sha256-<sha256(imageRef)>, pulling/sha256-<sha256(image)>, "@now"
replaced by the current UTC time), a config file with the case's policy,
allowlist, pinnedImages and credentialTTL, then
`pullgatectl --config F verify --json ...` (request aliases/hints as --alias/--hint);
the exit status (0 allow, 1 deny) must match `expect` and the reason code
`expectReason`, so that a deny from a store or configuration error never passes
for a policy deny. A case with "expectConfigError" must be refused by
`pullgatectl check-config` (exit 2). A case ported from the kubelet's tests
("kubelet": its answer in "expect") must answer as the kubelet does, or name a
"divergence" ("<id>: why") whose id docs/interfaces.md lists, and differ.

Usage: ctl_decision_cases.py PULLGATECTL DECISION_CASES_JSON [CASE_NAME...]
"""
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile

INTENT_API_VERSION = "kubelet.config.k8s.io/v1alpha1"


def record_file_name(key):
    return "sha256-" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_record_dir(path):
    os.mkdir(path, 0o700)
    for sub in ("pulling", "pulled"):
        os.mkdir(os.path.join(path, sub), 0o700)
    for d in (path, os.path.join(path, "pulling"), os.path.join(path, "pulled")):
        os.chmod(d, 0o700)


def write_file(path, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def with_now(record, now):
    record = dict(record)
    if record.get("lastUpdatedTime") == "@now":
        record["lastUpdatedTime"] = now
    return record


def write_pulled(dir_path, record, now):
    record = with_now(record, now)
    name = record_file_name(record["imageRef"])
    write_file(os.path.join(dir_path, "pulled", name), json.dumps(record))


def write_intent(dir_path, image):
    intent = {"kind": "ImagePullIntent", "apiVersion": INTENT_API_VERSION, "image": image}
    write_file(os.path.join(dir_path, "pulling", record_file_name(image)), json.dumps(intent))


def raw_file_parts(entry):
    """(imageRef, content) of a rawPulledFiles entry."""
    if isinstance(entry, (list, tuple)) and len(entry) == 2:
        return entry[0], entry[1]
    if isinstance(entry, dict) and "imageRef" in entry:
        for key in ("content", "data", "text", "raw"):
            if key in entry:
                return entry["imageRef"], entry[key]
    raise ValueError("unrecognised rawPulledFiles entry: %r" % (entry,))


def write_raw(dir_path, entry, now):
    image_ref, content = raw_file_parts(entry)
    if isinstance(content, str):
        content = content.replace("@now", now)
    else:
        content = json.dumps(content).replace("@now", now)
    write_file(os.path.join(dir_path, "pulled", record_file_name(image_ref)), content)


def write_index(dir_path, index):
    if not index:
        return
    sub = os.path.join(dir_path, "pullgate-images")
    os.mkdir(sub, 0o700)
    for key, ref in index.items():
        write_file(os.path.join(sub, record_file_name(key)),
                   json.dumps({"image": key, "imageRef": ref}, separators=(",", ":")))


def build_case_dirs(case, root, now):
    state = os.path.join(root, "state")
    read_only = os.path.join(root, "kubelet")
    make_record_dir(state)
    make_record_dir(read_only)
    for record in case.get("pulled", []):
        write_pulled(state, record, now)
    for record in case.get("readOnlyPulled", []):
        write_pulled(read_only, record, now)
    for image in case.get("intents", []):
        write_intent(state, image)
    for image in case.get("readOnlyIntents", []):
        write_intent(read_only, image)
    for entry in case.get("rawPulledFiles", []):
        write_raw(state, entry, now)
    write_index(state, case.get("imageIndex"))
    return state, read_only


def write_config(case, root, state, read_only):
    cfg = case.get("config", {})
    config = {
        "policy": cfg.get("policy", "NeverVerifyPreloadedImages"),
        "allowlist": cfg.get("allowlist", []),
        "pinnedImages": cfg.get("pinnedImages", []),
        "credentialTTL": cfg.get("credentialTTL", "0s"),
        "stateDir": state,
        "readOnlyRecordDirs": [read_only],
        "dbus": "none",
    }
    path = os.path.join(root, "config.json")
    write_file(path, json.dumps(config))
    return path


def verify_command(ctl, config_path, request):
    cmd = [ctl, "--config", config_path, "verify",
           "--image", request["image"],
           "--image-ref", request.get("imageRef") or "",
           "--namespace", request["namespace"]]
    if request.get("credentials") is not None:
        cmd += ["--credentials", request["credentials"]]
    for alias in request.get("aliases", []):
        cmd += ["--alias", alias]
    for hint in request.get("hints", []):
        cmd += ["--hint", hint]
    if request.get("podUid") is not None:
        cmd += ["--pod-uid", request["podUid"]]
    return cmd + ["--json"]


def kubelet_check(case, interfaces_text):
    """None, or why the case's answer and the kubelet's do not fit."""
    kubelet = case.get("kubelet")
    if kubelet is None:
        return None
    ours = "config-error" if case.get("expectConfigError") else case["expect"]
    divergence = case.get("divergence")
    if divergence is None:
        if kubelet["expect"] != ours:
            return "the kubelet answers %s, this case %s, and no divergence is named" % (
                kubelet["expect"], ours)
        return None
    if kubelet["expect"] == ours:
        return "a divergence that answers as the kubelet"
    slug = divergence.split(":", 1)[0]
    if interfaces_text is not None and ("`%s`" % slug) not in interfaces_text:
        return "divergence %r is not listed in docs/interfaces.md" % slug
    return None


def run_config_error_case(ctl, config_path):
    proc = subprocess.run([ctl, "--config", config_path, "check-config"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    detail = "check-config exit %d, stderr %r" % (proc.returncode, proc.stderr.strip())
    return proc.returncode == 2 and "allowlist" in proc.stderr, detail


def run_case(ctl, case):
    """Returns (passed, detail)."""
    now = now_rfc3339()
    with tempfile.TemporaryDirectory(prefix="pg-decision-") as root:
        os.chmod(root, 0o700)
        state, read_only = build_case_dirs(case, root, now)
        config_path = write_config(case, root, state, read_only)
        if case.get("expectConfigError"):
            return run_config_error_case(ctl, config_path)
        proc = subprocess.run(verify_command(ctl, config_path, case["request"]),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=60)
    expect = case["expect"]
    want_status = 0 if expect == "allow" else 1
    out = proc.stdout.strip()
    detail = "exit %d, stdout %r, stderr %r" % (proc.returncode, out, proc.stderr.strip())
    try:
        result = json.loads(out)
    except ValueError:
        return False, "not JSON: " + detail
    ok = (proc.returncode == want_status and result.get("allow") == (expect == "allow")
          and result.get("reason") == case["expectReason"])
    return ok, detail


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    ctl, cases_path, only = argv[1], argv[2], set(argv[3:])
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    interfaces = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                              "interfaces.md")
    with open(interfaces, encoding="utf-8") as f:
        interfaces_text = f.read()
    passed = failed = 0
    for case in cases:
        if only and case["name"] not in only:
            continue
        misfit = kubelet_check(case, interfaces_text)
        try:
            ok, detail = run_case(ctl, case)
        except (OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
            ok, detail = False, "harness error: %s" % e
        if misfit:
            ok, detail = False, "kubelet: %s; %s" % (misfit, detail)
        status = "ok  " if ok else "FAIL"
        print("%s %-45s expect %-5s %-22s %s" % (status, case["name"], case["expect"],
                                                case.get("expectReason"), detail))
        passed += ok
        failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    if passed + failed == 0:
        print("no case ran", file=sys.stderr)
        return 1
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
