#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgatectl wire / unwire on files in a temporary directory (test_packaging runs it on a
# real containerd), and pullgatectl config-rollback:
#   - containerd 1.6 configuration (version 2) with comments, a handler with its own base spec
#     and a handler known only by its options table: --dry-run prints a diff and changes
#     nothing; wire gives every handler a base spec running the hook (made from `ctr oci
#     spec`, rlimits dropped; the handler's own spec keeps its hooks) and pod_annotations with
#     the configuration's annotation key, keeps the comments, backs up every file; a second
#     wire changes nothing; unwire brings back a configuration that means the original;
#   - version 3 (containerd 2.x), a file with no handler, pod_annotations with other keys;
#   - refused, file untouched: a marker of configuration management, version 1, imports, an
#     inline handler, dotted keys, a symbolic link, a group-writable file, not TOML, the CRI
#     plugin disabled;
#   - the hook gets the --config (made absolute) and hook socket of the pullgate-cri serving
#     criListen, never of another (one init adopted included);
#   - CRI-O: the drop-in and an administrators' hooks.d entry with the --config, then unwire;
#   - config-rollback: the keys an older release does not read leave the file (backup kept),
#     a dry run changes nothing; check-config fails on a missing HMAC key file.
set -uo pipefail

# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
pg_require_root
pg_require_cmd ctr diff python3
python3 -c 'import tomllib' 2>/dev/null || pg_skip "python3 without tomllib (3.11+)"

WORK="$(pg_mktemp_dir wire)"
chmod 0755 "$WORK"
HOOK=/usr/libexec/oci/hooks.d/pullgate-hook
CFG="$WORK/pullgate.json"
printf '{"credentialsAnnotation": "example.com/pull-creds"}\n' >"$CFG"
EMPTY_PROC="$WORK/proc" # no pullgate-cri, no containerd: only the files named here count
mkdir -p "$EMPTY_PROC"
wire() { "$PULLGATECTL" --config "$CFG" wire --proc-root "$EMPTY_PROC" --hook-path "$HOOK" "$@"; }
unwire() { "$PULLGATECTL" --config "$CFG" unwire --proc-root "$EMPTY_PROC" --hook-path "$HOOK" "$@"; }
sum() { sha256sum "$1" | cut -d' ' -f1; }

# check.py WHAT ARGS: the meaning of the files, read with Python's own TOML and JSON parsers.
cat >"$WORK/check.py" <<'EOF'
import json, sys, tomllib
what, args = sys.argv[1], sys.argv[2:]
def handlers(path, plugin="io.containerd.grpc.v1.cri"):
    return tomllib.load(open(path, "rb"))["plugins"][plugin]["containerd"]["runtimes"]
if what == "wired":  # CONFIG KEY HOOK CFG [PLUGIN]
    config, key, hook, cfg = args[:4]
    for name, h in handlers(config, *args[4:]).items():
        assert key in h.get("pod_annotations", []), (name, h)
        spec = json.load(open(h["base_runtime_spec"]))
        ours = [x for s in spec.get("hooks", {}).values() for x in s if x["path"] == hook]
        assert len(ours) == 1, (name, spec.get("hooks"))
        assert ours[0]["args"] == ["pullgate-hook", "--stage", "createRuntime", "--config", cfg], ours
        assert "rlimits" not in spec.get("process", {}), name
    print("ok")
elif what == "same":  # A B: the same TOML document
    a, b = (tomllib.load(open(p, "rb")) for p in args)
    assert a == b, (a, b)
elif what == "same-json":
    a, b = (json.load(open(p)) for p in args)
    assert a == b, (a, b)
elif what == "annotations":  # CONFIG HANDLER -> the list
    print(json.dumps(handlers(args[0])[args[1]].get("pod_annotations")))
EOF
check() { python3 "$WORK/check.py" "$@"; }

# ------------------------------------------------------------- containerd 1.6
pg_section "containerd 1.6 configuration: dry run, wire, again, unwire"
CD="$WORK/cd"
mkdir -p "$CD"
cat >"$CD/custom-spec.json" <<'EOF'
{"ociVersion": "1.0.2", "process": {"cwd": "/"},
 "hooks": {"prestart": [{"path": "/usr/local/bin/other-tool-hook", "args": ["other"]}]}}
EOF
cat >"$CD/config.toml" <<EOF
version = 2
# the administrator's comment
root = "$CD/root"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "pause:3.6"   # keep this comment too
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.custom]
      runtime_type = "io.containerd.runc.v2"
      base_runtime_spec = "$CD/custom-spec.json"
      pod_annotations = ["io.example/trace"] # tracing
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata.options]
      ConfigPath = "/etc/kata/configuration.toml"
EOF
cp "$CD/config.toml" "$WORK/original.toml"
cp "$CD/custom-spec.json" "$WORK/original-custom.json"
before="$(sum "$CD/config.toml")"

pg_expect_ok "wire --dry-run" wire --containerd-config "$CD/config.toml" --dry-run
pg_expect_contains "... prints a diff of the configuration" "$PG_OUT" "+      pod_annotations = [\"example.com/pull-creds\"]"
pg_expect_contains "... and of the base spec it would write" "$PG_OUT" "+++ $CD/pullgate-base-runtime-spec.json (wired)"
[[ "$(sum "$CD/config.toml")" == "$before" && ! -e "$CD/pullgate-base-runtime-spec.json" ]] &&
    pg_check_ok "... and changes nothing" || pg_check_fail "the dry run changed a file"

pg_expect_ok "wire" wire --containerd-config "$CD/config.toml"
pg_expect_contains "... says what to restart" "$PG_OUT" "systemctl restart containerd"
pg_expect_ok "every handler runs the hook with the --config, passes the configuration's key" \
    check wired "$CD/config.toml" example.com/pull-creds "$HOOK" "$CFG"
grep -q "# the administrator's comment" "$CD/config.toml" && grep -q "# keep this comment too" "$CD/config.toml" &&
    grep -q "# tracing" "$CD/config.toml" && pg_check_ok "the comments are kept" ||
    pg_check_fail "a comment was lost: $(cat "$CD/config.toml")"
cmp -s "$CD/config.toml.before-pullgate-wire" "$WORK/original.toml" &&
    cmp -s "$CD/custom-spec.json.before-pullgate-wire" "$WORK/original-custom.json" &&
    pg_check_ok "the changed files are backed up as they were" || pg_check_fail "backups missing or different"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["hooks"]["prestart"][0]["path"] == "/usr/local/bin/other-tool-hook"' \
    "$CD/custom-spec.json" && pg_check_ok "the handler's own spec keeps its other hook" ||
    pg_check_fail "custom-spec.json lost its hook"
[[ "$(check annotations "$CD/config.toml" custom)" == '["io.example/trace", "example.com/pull-creds"]' ]] &&
    pg_check_ok "pod_annotations keeps its other keys" ||
    pg_check_fail "pod_annotations: $(check annotations "$CD/config.toml" custom)"

wired="$(sum "$CD/config.toml")"
pg_expect_ok "wire again" wire --containerd-config "$CD/config.toml"
pg_expect_contains "... says there is nothing to change" "$PG_OUT" "nothing to change"
[[ "$(sum "$CD/config.toml")" == "$wired" && ! -e "$CD/config.toml.before-pullgate-wire.1" ]] &&
    pg_check_ok "... and changes nothing, makes no second backup" || pg_check_fail "the second wire changed something"

pg_expect_ok "unwire" unwire --containerd-config "$CD/config.toml"
pg_expect_ok "... the configuration means the original again" check same "$WORK/original.toml" "$CD/config.toml"
pg_expect_ok "... the handler's own spec is the original again" check same-json "$WORK/original-custom.json" "$CD/custom-spec.json"
[[ ! -e "$CD/pullgate-base-runtime-spec.json" && -e "$CD/pullgate-base-runtime-spec.json.before-pullgate-unwire" ]] &&
    pg_check_ok "... wire's own base spec is gone (kept as a backup)" || pg_check_fail "wire's base spec is still there"
pg_expect_ok "unwire again changes nothing" unwire --containerd-config "$CD/config.toml"
pg_expect_contains "... and says so" "$PG_OUT" "nothing to change"

# ------------------------------------------------------------- other layouts
pg_section "containerd 2.x (version 3), no handler, refusals"
V3="$WORK/v3"
mkdir -p "$V3"
cat >"$V3/config.toml" <<'EOF'
version = 3
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
EOF
pg_expect_ok "version 3 is wired" wire --containerd-config "$V3/config.toml"
pg_expect_ok "... under io.containerd.cri.v1.runtime" \
    check wired "$V3/config.toml" example.com/pull-creds "$HOOK" "$CFG" io.containerd.cri.v1.runtime

NONE="$WORK/none"
mkdir -p "$NONE"
printf 'version = 2\n' >"$NONE/config.toml"
pg_expect_ok "a configuration without handlers gets containerd's runc handler, wired" \
    wire --containerd-config "$NONE/config.toml"
pg_expect_ok "... which runs the hook" check wired "$NONE/config.toml" example.com/pull-creds "$HOOK" "$CFG"

LAST="$WORK/last"
mkdir -p "$LAST"
printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]' >"$LAST/config.toml"
pg_expect_ok "a handler header on the last line, no newline after it, is wired" \
    wire --containerd-config "$LAST/config.toml"
pg_expect_ok "... and runs the hook" check wired "$LAST/config.toml" example.com/pull-creds "$HOOK" "$CFG"

refused_case() { # NAME EXPECTED-WORDS: the file $R/NAME.toml is refused and left as it was
    local f="$WORK/refused/$1.toml" s
    s="$(sum "$f")"
    pg_expect_fail "refused: $1" wire --containerd-config "$f"
    pg_expect_contains "... saying why" "$PG_OUT" "$2"
    [[ "$(sum "$f")" == "$s" && ! -e "$f.before-pullgate-wire" ]] && pg_check_ok "... the file is untouched" ||
        pg_check_fail "$1: the file was changed"
}
mkdir -p "$WORK/refused"
R="$WORK/refused"
printf '# Managed by Ansible: local changes are overwritten\nversion = 2\n' >"$R/managed.toml"
printf '[plugins.cri]\n  sandbox_image = "x"\n' >"$R/version1.toml"
printf 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n' >"$R/imports.toml"
printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  runtimes = { runc = { runtime_type = "io.containerd.runc.v2" } }\n' >"$R/inline.toml"
printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  runtimes.runc.runtime_type = "io.containerd.runc.v2"\n' >"$R/dotted.toml"
printf 'version = 2\n[plugins\n' >"$R/not-toml.toml"
printf 'version = 2\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n' >"$R/cri-disabled.toml"
cp "$NONE/config.toml.before-pullgate-wire" "$R/group-writable.toml"
chmod g+w "$R/group-writable.toml"
cp "$NONE/config.toml.before-pullgate-wire" "$R/target.toml"
ln -s "$R/target.toml" "$R/symlink.toml"
refused_case managed "another tool manages it"
refused_case version1 "configuration version 1"
refused_case imports "imports other files"
refused_case inline "inline table"
refused_case dotted "dotted keys"
refused_case not-toml "not TOML"
refused_case cri-disabled "disabled"
refused_case group-writable "writable by group or others"
refused_case symlink "symbolic link"

# ---------------------------------------------------- which pullgate-cri the hook follows
pg_section "the hook follows the pullgate-cri serving criListen, nothing else"
# A pullgate-cri that does not serve criListen, even one init adopted (an orphan: someone's run by
# hand, a benchmark's) with a relative --config of its own: wire without --config gives the hook
# the default configuration, not that process's (which would deny every container: "not found").
STRAY_PROC="$WORK/proc-stray"
mkdir -p "$STRAY_PROC/777/ns"
echo pullgate-cri >"$STRAY_PROC/777/comm"
printf 'Name:\tpullgate-cri\nUid:\t0\t0\t0\t0\nPPid:\t1\n' >"$STRAY_PROC/777/status"
ln -s /proc/self/ns/mnt "$STRAY_PROC/777/ns/mnt"
ln -s / "$STRAY_PROC/777/root"
printf '%s\0' pullgate-cri --config base/pullgate.json --hook-socket /tmp/stray.sock >"$STRAY_PROC/777/cmdline"
printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n' >"$WORK/stray.toml"
pg_expect_ok "wire --dry-run beside a pullgate-cri init adopted, serving no criListen" \
    "$PULLGATECTL" wire --dry-run --proc-root "$STRAY_PROC" --hook-path "$HOOK" --containerd-config "$WORK/stray.toml"
pg_expect_contains "... the hook gets the default configuration" "$PG_OUT" "/etc/pullgate/config.json (dry run)"
[[ "$PG_OUT" != *base/pullgate.json* && "$PG_OUT" != */tmp/stray.sock* ]] &&
    pg_check_ok "... nothing of that process" || pg_check_fail "wire took the stray pullgate-cri's settings"
# The pullgate-cri serving the configuration's criListen (a listener on that socket; the fake
# /proc says it is pullgate-cri, with a relative --config in its working directory): its
# --config, made absolute, and its hook socket are the hook's.
mkdir -p "$WORK/cri-cwd/etc"
printf '{"criListen": "unix://%s/cri.sock"}\n' "$WORK" >"$WORK/cri-cwd/etc/cri.json"
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
time.sleep(60)' "$WORK/cri.sock" &
LISTENER=$!
pg_on_exit "kill $LISTENER 2>/dev/null"
pg_wait_file "$WORK/cri.sock" 10 || pg_check_fail "the listener did not start"
mkdir -p "$STRAY_PROC/$LISTENER/ns"
echo pullgate-cri >"$STRAY_PROC/$LISTENER/comm"
printf 'Name:\tpullgate-cri\nUid:\t0\t0\t0\t0\nPPid:\t4242\n' >"$STRAY_PROC/$LISTENER/status"
ln -s /proc/self/ns/mnt "$STRAY_PROC/$LISTENER/ns/mnt"
ln -s / "$STRAY_PROC/$LISTENER/root"
ln -s "$WORK/cri-cwd" "$STRAY_PROC/$LISTENER/cwd"
printf '%s\0' pullgate-cri --config etc/cri.json --hook-socket "$WORK/hook.sock" >"$STRAY_PROC/$LISTENER/cmdline"
pg_expect_ok "wire --dry-run --config naming criListen, served" \
    "$PULLGATECTL" --config "$WORK/cri-cwd/etc/cri.json" wire --dry-run --proc-root "$STRAY_PROC" \
    --hook-path "$HOOK" --containerd-config "$WORK/stray.toml"
pg_expect_contains "... the hook asks its hook socket" "$PG_OUT" "\"$WORK/hook.sock\""
[[ "$PG_OUT" != *"the running pullgate-cri reads"* ]] &&
    pg_check_ok "... its relative --config, read from its working directory, is this one" ||
    pg_check_fail "wire thinks pullgate-cri reads another file: $PG_OUT"
pg_expect_ok "wire --dry-run --hook-socket" \
    "$PULLGATECTL" --config "$WORK/cri-cwd/etc/cri.json" wire --dry-run --proc-root "$STRAY_PROC" \
    --hook-path "$HOOK" --containerd-config "$WORK/stray.toml" --hook-socket /run/pullgate/other.sock
[[ "$PG_OUT" == *'"/run/pullgate/other.sock"'* && "$PG_OUT" != *"$WORK/hook.sock"* ]] &&
    pg_check_ok "... --hook-socket wins over pullgate-cri's" || pg_check_fail "--hook-socket did not win"
kill "$LISTENER" 2>/dev/null
wait "$LISTENER" 2>/dev/null

# ---------------------------------------------------------------------- CRI-O
pg_section "CRI-O: the drop-in and the hooks.d entry"
CRIO="$WORK/crio"
mkdir -p "$CRIO/crio.conf.d" "$CRIO/hooks.d"
crio_wire() { wire --runtime cri-o --crio-config-dir "$CRIO/crio.conf.d" --hooks-dir "$CRIO/hooks.d" "$@"; }
crio_unwire() { unwire --runtime cri-o --crio-config-dir "$CRIO/crio.conf.d" --hooks-dir "$CRIO/hooks.d" "$@"; }
pg_expect_ok "wire --runtime cri-o" crio_wire
# The packaged example's directories, the administrators' one being --hooks-dir (where wire
# writes its entry: a directory CRI-O would not read would hold it in vain).
python3 - "$CRIO/crio.conf.d/10-pullgate.conf" "$PG_SOURCE_DIR/packaging/crio/crio.conf.d/10-pullgate.conf" "$CRIO/hooks.d" <<'EOF' &&
import sys, tomllib
a, b = (tomllib.load(open(p, "rb")) for p in sys.argv[1:3])
dirs = b["crio"]["runtime"]["hooks_dir"]
b["crio"]["runtime"]["hooks_dir"] = [sys.argv[3] if d == "/etc/containers/oci/hooks.d" else d for d in dirs]
assert a == b, (a, b)
EOF
    pg_check_ok "the drop-in lists the packaged example's directories, --hooks-dir for the administrators'" ||
    pg_check_fail "the drop-in differs from packaging/crio/crio.conf.d/10-pullgate.conf"
python3 - "$CRIO/hooks.d/pullgate.json" "$HOOK" "$CFG" <<'EOF' &&
import json, sys
e = json.load(open(sys.argv[1]))
assert e["hook"]["path"] == sys.argv[2] and e["hook"]["args"][-2:] == ["--config", sys.argv[3]], e
assert e["when"] == {"always": True} and e["stages"] == ["createRuntime"], e
EOF
    pg_check_ok "the administrators' hooks.d entry runs the hook with the --config" ||
    pg_check_fail "hooks.d entry: $(cat "$CRIO/hooks.d/pullgate.json")"
pg_expect_ok "wire --runtime cri-o again" crio_wire
pg_expect_contains "... changes nothing" "$PG_OUT" "nothing to change"
pg_expect_ok "unwire --runtime cri-o" crio_unwire
[[ ! -e "$CRIO/crio.conf.d/10-pullgate.conf" && ! -e "$CRIO/hooks.d/pullgate.json" ]] &&
    pg_check_ok "... removes both files" || pg_check_fail "unwire left CRI-O files behind"

# -------------------------------------------------------------- config-rollback
pg_section "config-rollback and check-config"
RB="$WORK/rollback.json"
# every key this release reads (check-config prints them all), as the packaged file spells them
"$PULLGATECTL" --config "$CFG" check-config >"$RB" || pg_fail "check-config"
python3 - "$RB" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["stateDir"] = "/var/lib/pullgate"; c["dbus"] = "none"
json.dump(c, open(sys.argv[1], "w"), indent=2)
EOF
cp "$RB" "$WORK/rollback.orig"
python3 -c 'import json,sys; sys.exit(len(json.load(open(sys.argv[1]))) < 19)' "$RB" ||
    pg_fail "check-config printed too few keys: $(cat "$RB")"
pg_expect_ok "config-rollback --to 0.9.0 --dry-run" "$PULLGATECTL" --config "$RB" config-rollback --to 0.9.0 --dry-run
pg_expect_contains "... names the keys it would move" "$PG_OUT" "policy"
cmp -s "$RB" "$WORK/rollback.orig" && pg_check_ok "... changes nothing" || pg_check_fail "the dry run changed the file"
pg_expect_ok "config-rollback --to 1.0.0-1 (a Debian version)" "$PULLGATECTL" --config "$RB" config-rollback --to 1.0.0-1
python3 - "$RB" "$PG_TESTDATA/config-keys/1.0.0" "$WORK/rollback.orig" <<'EOF' &&
import json, sys
now = json.load(open(sys.argv[1]))
known = {l.strip() for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")}
orig = json.load(open(sys.argv[3]))
assert set(now) == set(orig) & known, (set(now), known)
assert all(now[k] == orig[k] for k in now)
EOF
    pg_check_ok "... leaves exactly the keys release 1.0.0 reads, with their values" ||
    pg_check_fail "after config-rollback --to 1.0.0: $(cat "$RB")"
pg_expect_ok "config-rollback --to 0.9.0 moves every key" "$PULLGATECTL" --config "$RB" config-rollback --to 0.9.0
pg_expect_contains "... loudly, naming the backup" "$PG_OUT" "WARNING: moved them out of $RB"
python3 - "$RB" "$RB.before-rollback-to-0.9.0" <<'EOF' &&
import json, sys
assert json.load(open(sys.argv[1])) == {} and "policy" in json.load(open(sys.argv[2]))
EOF
    pg_check_ok "... the file is {} and the backup holds them" || pg_check_fail "after --to 0.9.0: $(cat "$RB")"
pg_expect_fail "config-rollback --to a path is refused" "$PULLGATECTL" --config "$RB" config-rollback --to '1.0.0-../../x'
pg_expect_fail "config-rollback without --to is refused" "$PULLGATECTL" --config "$RB" config-rollback

printf '{"hmacKeyFile": "%s/missing.key"}\n' "$WORK" >"$WORK/key.json"
pg_expect_fail "check-config: hmacKeyFile names a missing file" "$PULLGATECTL" --config "$WORK/key.json" check-config
pg_expect_contains "... says so" "$PG_OUT" "missing.key: not found"
head -c 32 /dev/urandom >"$WORK/group.key"
chmod 0640 "$WORK/group.key"
printf '{"hmacKeyFile": "%s/group.key"}\n' "$WORK" >"$WORK/key.json"
pg_expect_fail "check-config: a group-readable key file" "$PULLGATECTL" --config "$WORK/key.json" check-config
chmod 0600 "$WORK/group.key"
pg_expect_ok "check-config: a private key file" "$PULLGATECTL" --config "$WORK/key.json" check-config

pg_summary
