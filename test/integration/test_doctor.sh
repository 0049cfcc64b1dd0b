#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgatectl doctor on a node in a temp dir (docs/lifecycle.md "Check a node", pullgatectl(8)):
#   real: containerd 1.6 (its own config, socket and base_runtime_spec with the hook and
#         pod_annotations: lib/cri_node.sh) and pullgate-cri in front of it with its hook socket
#         and /metrics (criMetricsListen: doctor's status section);
#   fake: /proc (--proc-root) holding a "kubelet" (cmdline, status, exe -> a script printing its
#         version, cwd, root) and a mirror of the real pullgate-cri's; the kubelet's config YAML
#         and kubeadm flags file; a systemd unit directory (--systemd-dir) with the packaged
#         pullgate-cri.service; CRI-O hooks.d directories and crio.conf.
# All checks pass when wired. Then each wiring is broken one at a time: its check fails (or warns:
# an unkeyed node, no kubelet, audit mode) with a fix, and where doctor prints a command the test
# runs it as printed (lib/fake_systemctl.py stands in for systemctl: it verifies units and drop-ins
# with systemd-analyze verify and restarts the node's pullgate-cri, containerd or kubelet
# stand-in) and doctor must then find the node repaired: the runtime's wiring (the hook in a base
# spec or a handler, pod_annotations, the hook's --config and socket, CRI-O's hooks.d) through
# `pullgatectl wire`, restarting the real containerd; where the fix is the administrator's
# decision doctor prints no command. --json is validated against docs/doctor.schema.json; every
# warning and failure names an anchor of docs/lifecycle.md and no path of the source tree.
# A kubelet or a containerd started with a relative --config is read through its own working
# directory, whatever file is planted in doctor's. Of two pullgate-cri the one serving criListen
# counts; one in a mount namespace of its own (the packaged unit's) counts when init started it.
# Env (from ctest): PULLGATE_HOOK, PULLGATECTL, PG_BUILD_DIR; PULLGATE_CRI overrides the binary.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/registry.sh
source "$HERE/lib/registry.sh"
# shellcheck source=lib/cri_node.sh
source "$HERE/lib/cri_node.sh"
# The node's pullgate-cri stopped: TERM, then waiting until it is gone, a zombie included (one
# the fake systemctl started is no child of ours: init reaps it in its own time).
proxy_stop() {
    local pid="$PG_PROXY_PID" i state
    [[ -n "$pid" ]] || return 0
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 1000; i++)); do
        state="$(cut -d')' -f2 "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f2)"
        [[ -z "$state" || "$state" == Z ]] && break
        sleep 0.01
    done
    wait "$pid" 2>/dev/null
    PG_PROXY_PID=""
}

T0=$SECONDS
: "${PULLGATE_CRI:=${PG_BUILD_DIR:-}/cri/pullgate-cri}"
[[ -x "$PULLGATE_CRI" ]] || pg_skip "pullgate-cri not built ('$PULLGATE_CRI')"
[[ -x "$(dirname "$PULLGATECTL")/pullgate-doctor" ]] || pg_skip "pullgate-doctor not built (PG_BUILD_DOCTOR=OFF)"
UNIT_IN="${PG_BUILD_DIR:-}/packaging/pullgate-cri.service"
[[ -f "$UNIT_IN" ]] || pg_skip "the configured pullgate-cri.service is not in the build tree ($UNIT_IN)"
pg_node_require
pg_require_pullgate
pg_require_cmd systemd-analyze
"$PG_PY" -c 'import jsonschema' 2>/dev/null || pg_skip "python3-jsonschema not installed for $PG_PY"

W="$(pg_mktemp_dir doctor)"
chmod 0755 "$W"
CFG="$W/config.json"
STATE="$W/state"
KEY="$W/annotation.key"
METRICS_PORT="$(pg_free_port)"
mkdir -m 0700 "$STATE"
head -c 48 /dev/urandom >"$KEY"
chmod 0600 "$KEY"
CRI_ENDPOINTS="{}" # once known: pullgate-cri's own endpoints in the file, as on a packaged node
write_cfg() { # [KEY=JSON-VALUE]...: the node's configuration with these keys changed
    "$PG_PY" - "$CFG" "$STATE" "$KEY" "$METRICS_PORT" "$CRI_ENDPOINTS" "$@" <<'PY'
import json, os, sys
path, state, key, port, endpoints = sys.argv[1:6]
cfg = {"stateDir": state, "readOnlyRecordDirs": [], "dbus": "none", "runtime": "containerd",
       "hmacKeyFile": key, "criMetricsListen": "127.0.0.1:" + port}
cfg.update(json.loads(endpoints))
for kv in sys.argv[6:]:
    k, v = kv.split("=", 1)
    cfg[k] = json.loads(v)
with open(path + ".tmp", "w") as f:
    json.dump(cfg, f)
os.chmod(path + ".tmp", 0o644)
os.replace(path + ".tmp", path)
PY
}
write_cfg

pg_section "a node: containerd with the hook, pullgate-cri in front"
pg_node_containerd_setup "$CFG"
PG_PROXY_SOCK="$(pg_mktemp_dir cri-run)/cri.sock"
CRI_ENDPOINTS="{\"criListen\": \"unix://$PG_PROXY_SOCK\", \"criRuntimeEndpoint\": \"unix://$PG_CD_SOCK\"}"
write_cfg
pg_node_containerd_start || pg_fail "containerd did not start"
pg_node_proxy_start || pg_fail "pullgate-cri did not start"
CD_CONFIG="$PG_CD_DIR/config.toml"
BASE_SPEC="$PG_CD_DIR/base-spec.json"

# ---- the node's systemd: the packaged unit, started as the test starts pullgate-cri
UNITS="$W/systemd"
mkdir -p "$UNITS" "$W/fakebin"
sed "s|^ExecStart=.*|ExecStart=$PULLGATE_CRI --config $CFG --listen unix://$PG_PROXY_SOCK --runtime-endpoint unix://$PG_CD_SOCK --hook-socket $PG_HOOK_SOCK|" \
    "$UNIT_IN" >"$UNITS/pullgate-cri.service"
KPID=4242
PROC="$W/proc"
FLAGS="$W/kubeadm-flags.env"
KCONFIG="$W/kubelet-config.yaml"
export FAKE_NODE="$W/node.json"
"$PG_PY" - "$FAKE_NODE" <<PY
import json, sys
json.dump({"unit_dir": "$UNITS", "pid_file": "$W/pullgate-cri.pid", "cri_log": "$PG_CD_DIR/pullgate-cri.log",
           "cri_socket": "$PG_PROXY_SOCK", "hook_socket": "$PG_HOOK_SOCK", "proc": "$PROC", "kubelet_pid": $KPID,
           "kubelet_flags": "$FLAGS", "containerd_pid_file": "$W/containerd.pid",
           "containerd_socket": "$PG_CD_SOCK", "containerd_log": "$PG_CD_DIR/containerd.log",
           "crio_config_dir": "$W/crio.conf.d",
           "log": "$W/systemctl.log"}, open(sys.argv[1], "w"))
PY
printf '#!/bin/sh\nexec %s %s "$@"\n' "$PG_PY" "$HERE/lib/fake_systemctl.py" >"$W/fakebin/systemctl"
chmod 0755 "$W/fakebin/systemctl"
ln -s "$PULLGATECTL" "$W/fakebin/pullgatectl" # the fixes name it as the packages install it
echo "$PG_PROXY_PID" >"$W/pullgate-cri.pid"
echo "$PG_CD_PID" >"$W/containerd.pid"
# containerd as the fake systemctl left it (a restart from a fix): the test's cleanup stops that one.
containerd_from_pidfile() { PG_CD_PID="$(cat "$W/containerd.pid")"; }
PATH="$W/fakebin:$PATH" systemctl daemon-reload || pg_fail "the node's pullgate-cri.service does not verify"
# pullgate-cri as the fake systemctl left it (its pid file): the test's cleanup stops that one.
proxy_from_pidfile() { PG_PROXY_PID="$(cat "$W/pullgate-cri.pid")"; mirror_cri; }
# pullgate-cri started by the test with other arguments: ARGS... (PROXY_WRAP: a command that
# execs it, e.g. unshare)
PROXY_WRAP=()
proxy_start_with() {
    proxy_stop
    rm -f "$PG_PROXY_SOCK" "$PG_HOOK_SOCK"
    "${PROXY_WRAP[@]}" "$PULLGATE_CRI" "$@" >>"$PG_CD_DIR/pullgate-cri.log" 2>&1 &
    PG_PROXY_PID=$!
    echo "$PG_PROXY_PID" >"$W/pullgate-cri.pid"
    local i
    for ((i = 0; i < 200; i++)); do
        [[ -S "$PG_PROXY_SOCK" && -S "$PG_HOOK_SOCK" ]] && break
        sleep 0.05
    done
    mirror_cri
}

# ---- the fake /proc: a kubelet and a mirror of pullgate-cri
mkdir -p "$PROC/$KPID" "$W/bin" "$W/kubelet-cwd"
KUBELET_BIN="$W/bin/kubelet"
set_kubelet_version() { # VERSION
    printf '#!/bin/sh\n[ "$1" = --version ] && echo "Kubernetes %s"\n' "$1" >"$KUBELET_BIN"
    chmod 0755 "$KUBELET_BIN"
}
set_kubelet_version v1.33.2
ln -sfn "$KUBELET_BIN" "$PROC/$KPID/exe"
echo kubelet >"$PROC/$KPID/comm"
printf 'Name:\tkubelet\nUid:\t0\t0\t0\t0\n' >"$PROC/$KPID/status"
# The doctor's own mount namespace and root: a process on the node's filesystem, not in a container.
mkdir -p "$PROC/$KPID/ns"
ln -sfn /proc/self/ns/mnt "$PROC/$KPID/ns/mnt"
ln -sfn / "$PROC/$KPID/root"
ln -sfn "$W/kubelet-cwd" "$PROC/$KPID/cwd"
set_kubelet_cmdline() { # ARGS...
    printf '%s\0' /usr/bin/kubelet --config="$KCONFIG" "$@" >"$PROC/$KPID/cmdline"
}
set_kubelet_cmdline --v=2
printf 'KUBELET_KUBEADM_ARGS="--v=2"\n' >"$FLAGS"
write_kubelet_config() { # RUNTIME_ENDPOINT IMAGE_ENDPOINT [EXTRA YAML] [FILE]
    cat >"${4:-$KCONFIG}" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: $1
imageServiceEndpoint: "$2"
${3:-}
EOF
}
# The recommended setup: images through pullgate-cri, the runtime service direct.
write_kubelet_config "unix://$PG_CD_SOCK" "unix://$PG_PROXY_SOCK"
MIRROR_PID=""
mirror_cri() { # the real pullgate-cri's cmdline, or a rewritten one: ARGS...
    [[ -n "$MIRROR_PID" ]] && rm -rf "${PROC:?}/$MIRROR_PID"
    MIRROR_PID="$PG_PROXY_PID"
    mkdir -p "$PROC/$PG_PROXY_PID/ns"
    echo pullgate-cri >"$PROC/$PG_PROXY_PID/comm"
    printf 'Name:\tpullgate-cri\nUid:\t0\t0\t0\t0\n%s' "${MIRROR_STATUS:-}" >"$PROC/$PG_PROXY_PID/status"
    ln -sfn "${MIRROR_MNT:-/proc/self/ns/mnt}" "$PROC/$PG_PROXY_PID/ns/mnt"
    ln -sfn / "$PROC/$PG_PROXY_PID/root"
    ln -sfn "$(readlink "/proc/$PG_PROXY_PID/cwd")" "$PROC/$PG_PROXY_PID/cwd"
    if (($#)); then printf '%s\0' "$@" >"$PROC/$PG_PROXY_PID/cmdline"; else
        cp "/proc/$PG_PROXY_PID/cmdline" "$PROC/$PG_PROXY_PID/cmdline"
    fi
}
mirror_cri

# The hook socket named: with no pullgate-cri running doctor would ask the default,
# /run/pullgate/hook.sock, which another pullgate-cri on this machine may serve.
# The hook its `wire` fixes put in: the build's (the installed one's path is the default).
DOCTOR_ARGS=(--proc-root "$PROC" --timeout-ms 3000 --systemd-dir "$UNITS"
    --kubelet-flags-file "$FLAGS" --hook-socket "$PG_HOOK_SOCK" --hook-path "$PULLGATE_HOOK")
CD_ARGS=(--containerd-config "$CD_CONFIG") # unset: the running containerd's, from --proc-root
SCHEMA="$PG_SOURCE_DIR/docs/doctor.schema.json"
LIFECYCLE="$PG_SOURCE_DIR/docs/lifecycle.md"
OUT=""
STATUS=0
DOCTOR_PROBLEM=""
SUMMARY=""
declare -A LEVEL DETAIL FIX COMMAND
# One python for every run (a coprocess: an interpreter's start per doctor run is most of what
# reading its output costs): given "STATUS FILE", it prints one line per check and END.
cat >"$W/parse_out.py" <<'PY'
import json, re, sys
flat = lambda s: s.replace("\t", " ").replace("\n", " ")
def parse(status, out):
    try:
        doc = json.loads(out)
    except ValueError:
        print(f"PROBLEM\tnot JSON (exit {status}): {flat(out[:300])!r}")
        return
    problem = ""
    for x in doc["checks"]:
        if x["level"] != "ok" and not x["fix"]:
            problem = problem or f"{x['name']} is a {x['level']} without a fix"
        if x["level"] != "ok" and not x["doc"].endswith("/lifecycle.md#doctor-" + x["name"]):
            problem = problem or f"{x['name']}: doc {x['doc']!r}"
        if re.search(r"(^|[\s(`'\"])(packaging|hooks|docs|tools|cri|test)/", x["fix"] + " " + x["command"]):
            problem = problem or f"{x['name']}: a source-tree path in its fix: {x['fix']} | {x['command']}"
        print("\t".join([x["name"], x["level"], flat(x["detail"]), flat(x["fix"]), flat(x["command"])]))
    failed = any(x["level"] == "failure" for x in doc["checks"])
    if doc["ok"] == failed or status != (1 if failed else 0) or doc["exitStatus"] != status:
        problem = problem or f"exit {status} with ok={doc['ok']}, exitStatus={doc['exitStatus']}"
    s = doc["summary"]
    print(f"SUMMARY\t{s['ok']}/{s['warnings']}/{s['failures']}")
    print(f"PROBLEM\t{flat(problem)}")
for line in sys.stdin:
    status, path = line.rstrip("\n").split(" ", 1)
    parse(int(status), open(path).read())
    print("END", flush=True)
PY
coproc PARSER { "$PG_PY" -u "$W/parse_out.py"; }
pg_on_exit "kill $PARSER_PID"
# parse_out: the last --json, read once: every check's level, detail, fix and command; the
# summary; and what must hold whatever the checks say (a fix for every warning and failure, its
# documentation anchor, no source-tree path in a fix or command, the exit status that follows
# from the levels) into DOCTOR_PROBLEM.
parse_out() {
    LEVEL=() DETAIL=() FIX=() COMMAND=()
    local name level detail fix command
    printf '%s\n' "$OUT" >"$W/out.json"
    printf '%s %s\n' "$STATUS" "$W/out.json" >&"${PARSER[1]}"
    while IFS=$'\t' read -r -u "${PARSER[0]}" name level detail fix command; do
        case "$name" in
        END) break ;;
        PROBLEM) DOCTOR_PROBLEM="$level" ;;
        SUMMARY) SUMMARY="$level" ;;
        *) LEVEL[$name]="$level" DETAIL[$name]="$detail" FIX[$name]="$fix" COMMAND[$name]="$command" ;;
        esac
    done
}
doctor() { # runs doctor --json; OUT, STATUS and what parse_out reads
    STATUS=0
    DOCTOR_PROBLEM="" SUMMARY=""
    OUT="$("$PULLGATECTL" --config "$CFG" doctor --json "${DOCTOR_ARGS[@]}" "${CD_ARGS[@]}" "$@" 2>"$W/doctor.err")" || STATUS=$?
    if ((STATUS > 1)); then
        pg_log "doctor exited $STATUS; its stderr:"
        head -c 4000 "$W/doctor.err" >&2
    fi
    parse_out
}
# expect CHECK ok|warn|fail [TEXT]: the check's level (and TEXT in its detail), and what
# parse_out checks of the whole run.
expect() {
    local name="$1" want="$2" text="${3:-}" why=""
    local -A levels=([ok]=ok [warn]=warning [fail]=failure)
    PG_CHECKS=$((PG_CHECKS + 1))
    if [[ -n "$DOCTOR_PROBLEM" ]]; then
        why="$DOCTOR_PROBLEM"
    elif [[ -z "${LEVEL[$name]:-}" ]]; then
        why="no check $name"
    elif [[ "${LEVEL[$name]}" != "${levels[$want]}" ]]; then
        why="$name is ${LEVEL[$name]}: ${DETAIL[$name]} | fix: ${FIX[$name]} | run: ${COMMAND[$name]}"
    elif [[ -n "$text" && "${DETAIL[$name]}" != *"$text"* ]]; then
        why="$name: '$text' not in '${DETAIL[$name]}'"
    fi
    if [[ -z "$why" ]]; then
        pg_log "ok   - $name $want${text:+ ($text)}"
    else
        PG_FAILURES=$((PG_FAILURES + 1))
        pg_log "FAIL - $name: $why"
    fi
}
# command_of CHECK: the command doctor printed for it in the last run ("" when none).
command_of() { printf '%s' "${COMMAND[$1]:-}"; }
# run_fix CHECK: runs the command doctor printed for CHECK, as printed, with the node's systemctl.
run_fix() {
    local cmd
    cmd="$(command_of "$1")"
    PG_CHECKS=$((PG_CHECKS + 1))
    if [[ -z "$cmd" ]]; then
        PG_FAILURES=$((PG_FAILURES + 1))
        pg_log "FAIL - $1: doctor printed no command"
        return 1
    fi
    if PATH="$W/fakebin:$PATH" bash -c "$cmd" >"$W/fix.out" 2>&1; then
        [[ "$cmd" != *"restart containerd"* ]] || containerd_from_pidfile
        pg_log "ok   - $1: ran its fix: $cmd"
    else
        PG_FAILURES=$((PG_FAILURES + 1))
        pg_log "FAIL - $1: its fix failed: $cmd"
        sed 's/^/       | /' "$W/fix.out" >&2
        return 1
    fi
}
# no_command CHECK WHY: doctor printed no command for it (WHY: what only the administrator can
# decide), only the fix in words.
no_command() {
    [[ -z "$(command_of "$1")" ]] && pg_check_ok "$1: no command, the fix in words ($2)" ||
        pg_check_fail "$1: a command where the fix is the administrator's: $(command_of "$1")"
}
# expect_levels DESC OK WARN FAIL: every check at its level: the counts, and exit 0 unless FAIL > 0.
expect_levels() {
    local desc="$1" want="$2/$3/$4" name
    doctor
    PG_CHECKS=$((PG_CHECKS + 1))
    if [[ -z "$DOCTOR_PROBLEM" && "$SUMMARY" == "$want" && "$STATUS" == "$(($4 > 0 ? 1 : 0))" ]]; then
        pg_log "ok   - ok/warnings/failures $SUMMARY, exit $STATUS ($desc)"
    else
        PG_FAILURES=$((PG_FAILURES + 1))
        pg_log "FAIL - ok/warnings/failures ${SUMMARY:-?} (want $want), exit $STATUS ($desc) $DOCTOR_PROBLEM:"
        for name in "${!LEVEL[@]}"; do
            printf '    %-8s %s %s | %s | %s\n' "${LEVEL[$name]}" "$name" "${DETAIL[$name]}" \
                "${FIX[$name]}" "${COMMAND[$name]}" >&2
        done
    fi
}
expect_all_ok() { expect_levels "$1" 13 0 0; }
# valid_json DESC: the last --json is kept; all of them are validated against
# docs/doctor.schema.json at the end, in one go (validate_all).
JSON_KEPT=()
valid_json() {
    printf '%s\n' "$OUT" >"$W/kept-${#JSON_KEPT[@]}.json"
    JSON_KEPT+=("$1")
}
validate_all() {
    local i result
    for ((i = 0; i < ${#JSON_KEPT[@]}; i++)); do printf '%s\n' "$W/kept-$i.json"; done |
        "$PG_PY" -c 'import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
for path in sys.stdin.read().split():
    try:
        jsonschema.validate(json.load(open(path)), schema)
        print("ok")
    except Exception as e:
        print(str(e).replace("\n", " ")[:600])' "$SCHEMA" >"$W/schema.out" 2>&1
    i=0
    while read -r result; do
        if [[ "$result" == ok ]]; then
            pg_check_ok "--json validates against doctor.schema.json (${JSON_KEPT[i]})"
        else
            pg_check_fail "--json does not validate (${JSON_KEPT[i]}): $result"
        fi
        i=$((i + 1))
    done <"$W/schema.out"
    ((i == ${#JSON_KEPT[@]})) || pg_check_fail "the schema check stopped: $(tail -c 600 "$W/schema.out")"
}

pg_section "wired: every check passes"
expect_all_ok "containerd node"
valid_json "all ok"
"$PG_PY" - "$OUT" "$(cat "$PG_BUILD_DIR/include/pullgate/version.h" | sed -n 's/.*PG_VERSION_STRING "\(.*\)".*/\1/p')" <<'PY' >"$W/status.out" 2>&1 &&
import json, sys
s = json.loads(sys.argv[1])["status"]
assert s["available"] and s["version"] == sys.argv[2], s
assert s["pulledRecords"] == 0 and s["pullIntents"] == 0 and s["denialsLastHour"] == 0, s
assert 0 <= s["uptimeSeconds"] < 600 and s["lastPruneTime"] is None, s
PY
    pg_check_ok "status from pullgate-cri's metrics: version, uptime, records, denials, no prune yet" ||
    pg_check_fail "status: $(cat "$W/status.out")"
"$PULLGATECTL" --config "$CFG" doctor "${DOCTOR_ARGS[@]}" "${CD_ARGS[@]}" >"$W/text.out" 2>&1
TEXT="$(cat "$W/text.out")"
pg_expect_contains "text: a check mark per check" "$TEXT" "  ✔ hook-socket: pullgate-cri decides for $CFG"
[[ "$(grep -c '^  [✔‼✘] ' "$W/text.out")" == 13 ]] && pg_check_ok "text: 13 check lines" ||
    pg_check_fail "text: $(grep -c '^  [✔‼✘] ' "$W/text.out") check lines"
[[ "$(grep -E '^(configuration|store|runtime wiring|pullgate-cri|kubelet|key)$' "$W/text.out" | tr '\n' ,)" == "configuration,store,runtime wiring,pullgate-cri,kubelet,key," ]] &&
    pg_check_ok "text: six groups, in order" || pg_check_fail "text: groups: $(grep -vE '^ ' "$W/text.out" | tr '\n' ,)"
pg_expect_contains "text: a summary line" "$TEXT" "13 checks: 13 ✔, 0 ‼, 0 ✘; exit 0"
pg_expect_contains "text: the status section" "$TEXT" "status (pullgate-cri, http://127.0.0.1:$METRICS_PORT/metrics)"
pg_expect_contains "text: records on disk" "$TEXT" "on disk: 0 pulled records, 0 pull intents"
expect runtime ok "containerd"
expect crio-namespaced-auth ok "the runtime is containerd"
expect kubelet ok "RuntimeService direct to unix://$PG_CD_SOCK"
expect kubelet-policy ok "KubeletEnsureSecretPulledImages off"
# Every check's anchor exists in docs/lifecycle.md (GitHub's slug of "#### doctor: NAME").
for name in config state-dir record-dirs hmac-key runtime cri-proxy hook-socket kubelet \
    kubelet-policy hook pod-annotations same-config crio-namespaced-auth; do
    grep -qx "#### doctor: $name" "$LIFECYCLE" || pg_check_fail "docs/lifecycle.md has no anchor doctor-$name"
done
pg_check_ok "docs/lifecycle.md has an anchor for each of the 13 checks"

pg_section "configuration, state directory, key: each fix, run as printed, repairs the node"
write_cfg polcy='"AlwaysVerify"'
doctor
expect config fail "polcy"
# Audit mode and an unkeyed node (the webhook runs --unkeyed-annotations): supported modes,
# warnings. The file changed: pullgate-cri (which loaded it at start) answers "not mine"; its
# fix, a restart, cures it.
write_cfg mode='"audit"' hmacKeyFile='""'
doctor
expect hook-socket fail "the file changed since pullgate-cri started"
run_fix hook-socket
proxy_from_pidfile
expect_levels "audit and unkeyed: warnings, exit 0" 11 2 0
expect config warn "mode audit"
expect hmac-key warn "hmacKeyFile is not set"
valid_json "warnings"
chmod 0755 "$STATE"
doctor
expect state-dir fail "mode 0755"
run_fix state-dir
mkdir -m 0700 "$STATE/pulled" 2>/dev/null
chmod 0777 "$STATE/pulled"
doctor
expect state-dir fail "writable by group or others"
valid_json "failures with commands"
run_fix state-dir
mkdir -p "$W/kubelet-records"
chmod 0777 "$W/kubelet-records"
write_cfg readOnlyRecordDirs="[\"$W/kubelet-records\"]" # the key back, a kubelet directory
chmod 0644 "$KEY"
doctor
expect record-dirs fail "writable by group or others"
expect hmac-key fail "$KEY"
run_fix record-dirs
run_fix hmac-key
run_fix hook-socket
proxy_from_pidfile
expect_all_ok "record directory and key repaired, pullgate-cri restarted"

pg_section "pullgate-cri and the runtime"
proxy_stop
rm -rf "${PROC:?}/$MIRROR_PID" # the process is gone from /proc too
MIRROR_PID=""
doctor
expect cri-proxy fail "no pullgate-cri process runs"
expect hook-socket fail "nothing answers"
expect runtime ok
run_fix cri-proxy
proxy_from_pidfile
expect_all_ok "pullgate-cri started by its fix"
mirror_cri "$PULLGATE_CRI" --config "$CFG" --listen "unix://$PG_PROXY_SOCK" \
    --runtime-endpoint "unix://$W/no-runtime.sock" --hook-socket "$PG_HOOK_SOCK"
doctor
expect runtime fail "unix://$W/no-runtime.sock"
# pullgate-cri started with another configuration file: the drop-in fix gives it this one.
cp "$CFG" "$W/other.json"
proxy_start_with --config "$W/other.json" --listen "unix://$PG_PROXY_SOCK" \
    --runtime-endpoint "unix://$PG_CD_SOCK" --hook-socket "$PG_HOOK_SOCK"
doctor
expect same-config fail "pullgate-cri reads $W/other.json"
expect hook-socket fail "pullgate-cri loaded another file"
DROPIN_CMD="$(command_of same-config)"
pg_expect_contains "the drop-in clears the unit's ExecStart= first" "$DROPIN_CMD" "ExecStart=\\nExecStart=%s"
run_fix same-config
proxy_from_pidfile
grep -q "^ExecStart=$" "$UNITS/pullgate-cri.service.d/50-pullgate-config.conf" &&
    pg_check_ok "drop-in written, verified by systemd-analyze (daemon-reload)" ||
    pg_check_fail "no drop-in with an empty ExecStart= in $UNITS/pullgate-cri.service.d"
expect_all_ok "pullgate-cri restarted by the drop-in's fix"
# The same drop-in without its empty ExecStart= line is what systemd refuses.
sed '/^ExecStart=$/d' "$UNITS/pullgate-cri.service.d/50-pullgate-config.conf" >"$W/bad.conf"
mv "$W/bad.conf" "$UNITS/pullgate-cri.service.d/50-pullgate-config.conf"
PATH="$W/fakebin:$PATH" systemctl daemon-reload 2>"$W/reload.err" &&
    pg_check_fail "a drop-in without the empty ExecStart= was accepted" ||
    pg_check_ok "a drop-in without the empty ExecStart= is refused: $(grep -m1 -o 'more than one ExecStart=.*' "$W/reload.err")"
rm -r "$UNITS/pullgate-cri.service.d"
PATH="$W/fakebin:$PATH" systemctl daemon-reload || pg_check_fail "the unit alone does not verify"

pg_section "which pullgate-cri: the one serving criListen, in the mount namespace its unit gives it"
# Another pullgate-cri beside it, a service (init's child) reading another file and serving other
# sockets: the node's is the one the kubelet reaches, the one serving criListen.
DPID=4646
mkdir -p "$PROC/$DPID/ns"
echo pullgate-cri >"$PROC/$DPID/comm"
printf 'Name:\tpullgate-cri\nUid:\t0\t0\t0\t0\nPPid:\t1\n' >"$PROC/$DPID/status"
ln -sfn /proc/self/ns/mnt "$PROC/$DPID/ns/mnt"
ln -sfn / "$PROC/$DPID/root"
ln -sfn / "$PROC/$DPID/cwd"
printf '%s\0' /usr/bin/pullgate-cri --config "$W/other.json" --listen "unix://$W/decoy.sock" \
    --hook-socket "$W/decoy-hook.sock" >"$PROC/$DPID/cmdline"
expect_all_ok "two pullgate-cri: the one serving criListen counts, not the service beside it"
rm -rf "${PROC:?}/$DPID"
# As the packaged unit runs it: a mount namespace of its own (PrivateTmp=, ProtectSystem=), init
# its parent. The namespace is real (unshare); the fake /proc says init started it, as systemd does.
PROXY_WRAP=(unshare --mount --propagation private)
proxy_start_with --config "$CFG" --listen "unix://$PG_PROXY_SOCK" \
    --runtime-endpoint "unix://$PG_CD_SOCK" --hook-socket "$PG_HOOK_SOCK"
PROXY_WRAP=()
[[ "$(readlink "/proc/$PG_PROXY_PID/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ]] &&
    pg_check_ok "pullgate-cri runs in a mount namespace of its own" ||
    pg_check_fail "unshare gave pullgate-cri no mount namespace of its own"
MIRROR_MNT="/proc/$PG_PROXY_PID/ns/mnt" MIRROR_STATUS=$'PPid:\t1\n' mirror_cri
expect_all_ok "pullgate-cri in a mount namespace of its own, started by init"
# The same process with another parent than init is not taken for the node's: a container's
# processes live in mount namespaces of their own too.
MIRROR_MNT="/proc/$PG_PROXY_PID/ns/mnt" MIRROR_STATUS=$'PPid:\t'"$$"$'\n' mirror_cri
doctor
expect same-config fail "it answers the hook \"not mine\""
mirror_cri # the same pullgate-cri, seen as one in doctor's mount namespace from here on

pg_section "the kubelet"
write_kubelet_config "unix://$PG_CD_SOCK" "unix://$PG_CD_SOCK"
doctor
expect kubelet fail "not pullgate-cri"
run_fix kubelet
doctor
expect kubelet ok "images through pullgate-cri"
write_kubelet_config "unix://$PG_PROXY_SOCK" "unix://$PG_PROXY_SOCK"
doctor
expect kubelet ok "runtime and image service endpoints are pullgate-cri"
# The flag wins over the file: kubeadm's flags file sets it, the fix edits that file.
printf 'KUBELET_KUBEADM_ARGS="--image-service-endpoint=unix://%s --v=2"\n' "$PG_CD_SOCK" >"$FLAGS"
PATH="$W/fakebin:$PATH" systemctl restart kubelet
doctor
expect kubelet fail "pulls through unix://$PG_CD_SOCK"
run_fix kubelet
doctor
expect kubelet ok
printf 'KUBELET_KUBEADM_ARGS="--v=2"\n' >"$FLAGS"
set_kubelet_cmdline --v=2
# A relative --config is the kubelet's, in its own working directory: a file planted in doctor's
# working directory (here by an unprivileged user) answers for nothing.
write_kubelet_config "unix://$PG_CD_SOCK" "unix://$PG_CD_SOCK" "" "$W/kubelet-cwd/kubelet.yaml"
PLANT="$W/plant"
mkdir -p "$PLANT"
chmod 1777 "$PLANT"
write_kubelet_config "unix://$PG_PROXY_SOCK" "unix://$PG_PROXY_SOCK" "" "$PLANT/kubelet.yaml"
chown 65534:65534 "$PLANT/kubelet.yaml"
PLANTED_SUM="$(sha256sum <"$PLANT/kubelet.yaml")"
printf '%s\0' /usr/bin/kubelet --config=kubelet.yaml --v=2 >"$PROC/$KPID/cmdline"
pushd "$PLANT" >/dev/null || pg_fail "cd $PLANT"
doctor
expect kubelet fail "pulls through unix://$PG_CD_SOCK"
chown 0:0 "$PLANT/kubelet.yaml" # even a file of root's there is not the kubelet's
doctor
expect kubelet fail "pulls through unix://$PG_CD_SOCK"
pg_expect_contains "its fix edits the kubelet's own file" "$(command_of kubelet)" "$W/kubelet-cwd/kubelet.yaml"
run_fix kubelet
doctor
expect kubelet ok "images through pullgate-cri"
popd >/dev/null || pg_fail "popd"
grep -q "^imageServiceEndpoint: unix://$PG_PROXY_SOCK" "$W/kubelet-cwd/kubelet.yaml" &&
    [[ "$(sha256sum <"$PLANT/kubelet.yaml")" == "$PLANTED_SUM" ]] &&
    pg_check_ok "the kubelet's own file was repaired, the planted one left alone" ||
    pg_check_fail "the fix edited the wrong file"
chown 65534 "$W/kubelet-cwd/kubelet.yaml"
doctor
expect kubelet fail "owned by uid 65534, not root"
chown 0 "$W/kubelet-cwd/kubelet.yaml"
ln -sfn "$W/kubelet-cwd/kubelet.yaml" "$W/kubelet-cwd/link.yaml"
printf '%s\0' /usr/bin/kubelet --config=link.yaml >"$PROC/$KPID/cmdline"
doctor
expect kubelet fail "is a symbolic link"
set_kubelet_cmdline --v=2
write_kubelet_config "unix://$PG_CD_SOCK" "unix://$PG_PROXY_SOCK"
# A node without a kubelet (yet): warnings, exit 0.
mv "$PROC/$KPID" "$W/kubelet-away"
expect_levels "no kubelet: warnings, exit 0" 11 2 0
expect kubelet warn "no kubelet runs"
expect kubelet-policy warn "no kubelet process runs"
doctor --kubelet-version v1.35.0
expect kubelet-policy ok "KubeletEnsureSecretPulledImages on (default: beta since 1.35)"
mv "$W/kubelet-away" "$PROC/$KPID"
set_kubelet_version v1.32.4
doctor
expect kubelet-policy ok "no KEP-2535 check"
set_kubelet_version v1.34.1
write_kubelet_config "unix://$PG_CD_SOCK" "unix://$PG_PROXY_SOCK" "featureGates:
  KubeletEnsureSecretPulledImages: true
imagePullCredentialsVerificationPolicy: AlwaysVerify"
doctor
expect kubelet-policy ok "on (featureGates), policy AlwaysVerify"
set_kubelet_cmdline --feature-gates=KubeletEnsureSecretPulledImages=false,Other=true
doctor
expect kubelet-policy ok "off (--feature-gates)"
set_kubelet_cmdline --v=2
chmod 0775 "$KUBELET_BIN"
doctor
expect kubelet-policy fail "not run"
chmod 0755 "$KUBELET_BIN"
printf 'Name:\tkubelet\nUid:\t1000\t1000\t1000\t1000\n' >"$PROC/$KPID/status"
doctor
# A "kubelet" not running as root is not the node's: its argv proves nothing, its binary never runs.
expect kubelet warn "no kubelet runs"
expect kubelet-policy warn "no kubelet process runs"
printf 'Name:\tkubelet\nUid:\t0\t0\t0\t0\n' >"$PROC/$KPID/status"
# A container's "kubelet" (root, no user namespace; the host's /proc lists it) whose argv
# points at pullgate-cri and whose binary, in its image, leaves a marker when run: it is not
# the node's kubelet, so nothing of it counts and nothing of it is run.
mv "$PROC/$KPID" "$W/kubelet-away"
CPID=4343
mkdir -p "$PROC/$CPID/ns"
echo kubelet >"$PROC/$CPID/comm"
printf 'Name:\tkubelet\nUid:\t0\t0\t0\t0\n' >"$PROC/$CPID/status"
printf '%s\0' /usr/bin/kubelet --image-service-endpoint="unix://$PG_PROXY_SOCK" \
    --container-runtime-endpoint="unix://$PG_PROXY_SOCK" >"$PROC/$CPID/cmdline"
printf 'mnt:[1]\n' >"$PROC/$CPID/ns/mnt" # another mount namespace than the doctor's
printf '#!/bin/sh\ntouch "%s"\necho "Kubernetes v1.34.0"\n' "$W/container-kubelet-ran" >"$W/bin/ctr-kubelet"
chmod 0755 "$W/bin/ctr-kubelet"
ln -sfn "$W/bin/ctr-kubelet" "$PROC/$CPID/exe"
doctor
expect kubelet warn "no kubelet runs"
expect kubelet-policy warn "no kubelet process runs"
if [[ -e "$W/container-kubelet-ran" ]]; then
    pg_check_fail "the doctor ran a container's \"kubelet\" binary"
else
    pg_check_ok "a container's \"kubelet\" binary is never run"
fi
rm -rf "${PROC:?}/$CPID"
mv "$W/kubelet-away" "$PROC/$KPID"
printf 'a: &x [1]\nb: *x\n' >"$KCONFIG"
doctor
expect kubelet fail "aliases are not accepted"
write_kubelet_config "unix://$PG_CD_SOCK" "unix://$PG_PROXY_SOCK"
expect_all_ok "kubelet restored"

pg_section "the hook in containerd: each fix is pullgatectl wire, run as printed"
cp "$BASE_SPEC" "$W/base-spec.orig"
cp "$CD_CONFIG" "$W/config.toml.orig"
"$PG_PY" - "$BASE_SPEC" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); s["hooks"] = {}; json.dump(s, open(sys.argv[1], "w"))
PY
doctor
expect hook fail "runs no pullgate-hook"
expect same-config fail "runs no pullgate-hook"
pg_expect_contains "the hook's fix is wire, with the files doctor read" "$(command_of hook)" \
    "wire --containerd-config $CD_CONFIG --hook-path $PULLGATE_HOOK --hook-socket $PG_HOOK_SOCK && systemctl restart containerd"
CD_PID_BEFORE="$PG_CD_PID"
run_fix hook
[[ "$PG_CD_PID" != "$CD_PID_BEFORE" ]] && cri_direct --timeout 5 version >/dev/null 2>&1 &&
    pg_check_ok "containerd restarted by the fix, and answers" || pg_check_fail "containerd was not restarted"
[[ -f "$BASE_SPEC.before-pullgate-wire" ]] && pg_check_ok "wire kept a backup of the base spec" ||
    pg_check_fail "no backup of $BASE_SPEC"
expect_all_ok "the hook put back by wire"
chmod 0666 "$BASE_SPEC"
doctor
expect hook fail "writable by group or others"
no_command hook "a spec others could write: its contents first"
chmod 0644 "$BASE_SPEC"
"$PG_PY" - "$BASE_SPEC" "$W/other.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
args = s["hooks"]["createRuntime"][0]["args"]
args[args.index("--config") + 1] = sys.argv[2]
json.dump(s, open(sys.argv[1], "w"))
PY
doctor
expect same-config fail "the hook reads $W/other.json"
run_fix same-config
expect_all_ok "the hook given this configuration by wire"
"$PG_PY" - "$BASE_SPEC" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
args = s["hooks"]["createRuntime"][0]["args"]
args[args.index("--config") + 1] = "config.json"
json.dump(s, open(sys.argv[1], "w"))
PY
pushd "$W" >/dev/null || pg_fail "cd $W" # a relative --config of the hook is never resolved here
doctor
expect same-config fail "the hook's --config config.json is relative"
run_fix same-config
popd >/dev/null || pg_fail "popd"
expect_all_ok "the hook's relative --config replaced by wire"
"$PG_PY" - "$BASE_SPEC" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
args = s["hooks"]["createRuntime"][0]["args"]
args[args.index("--daemon-socket") + 1] = "/run/pullgate/elsewhere.sock"
json.dump(s, open(sys.argv[1], "w"))
PY
doctor
expect same-config fail "the hook asks /run/pullgate/elsewhere.sock"
run_fix same-config
expect_all_ok "the hook given pullgate-cri's socket by wire"
sed -i '/pod_annotations/d' "$CD_CONFIG"
doctor
expect pod-annotations fail "does not pass pullgate.dev/credentials"
run_fix pod-annotations
grep -q '^ *pod_annotations = \["pullgate.dev/credentials"\]' "$CD_CONFIG" &&
    pg_check_ok "wire put pod_annotations back" || pg_check_fail "no pod_annotations in $CD_CONFIG"
expect_all_ok "pod_annotations put back by wire"
cp "$W/config.toml.orig" "$CD_CONFIG"
sed -i 's|pod_annotations = \["pullgate.dev/credentials"\]|pod_annotations = ["pullgate.dev/credentials", "io.*"]|' "$CD_CONFIG"
# runtime "auto" in a copy of the configuration: the node's file stays the one pullgate-cri read
"$PG_PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); c["runtime"]="auto"; json.dump(c, open(sys.argv[2], "w"))' "$CFG" "$W/auto.json"
CFG="$W/auto.json" doctor --runtime containerd
expect pod-annotations fail "a pod could forge its identity"
no_command pod-annotations "which patterns a node needs is the administrator's"
cp "$W/config.toml.orig" "$CD_CONFIG"
cat >>"$CD_CONFIG" <<'TOML'
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]
      runtime_type = "io.containerd.kata.v2"
      pod_annotations = ["pullgate.dev/credentials"]
TOML
doctor
expect hook fail "runtime handler kata has no base_runtime_spec"
run_fix hook
grep -q "base_runtime_spec = \"$PG_CD_DIR/pullgate-base-runtime-spec.json\"" "$CD_CONFIG" &&
    pg_check_ok "wire gave the kata handler a base spec made from ctr oci spec" ||
    pg_check_fail "no base spec for kata in $CD_CONFIG"
expect_all_ok "the kata handler wired"
cp "$W/config.toml.orig" "$CD_CONFIG"
printf 'version = 2\n[plugins\n' >"$CD_CONFIG"
doctor
expect hook fail "containerd: $CD_CONFIG"
no_command hook "a file wire cannot parse"
cp "$W/config.toml.orig" "$CD_CONFIG"
chmod 0666 "$CD_CONFIG"
doctor
expect hook fail "writable by group or others (mode 0666): not read"
no_command hook "a file others could write"
chmod 0644 "$CD_CONFIG"
# No handler at all: the hook's fix, and pod-annotations only points at it.
printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "runc"\n' >"$W/no-handlers.toml"
doctor --containerd-config "$W/no-handlers.toml"
expect hook fail "defines no runtime handler"
expect pod-annotations fail "no runtime handler"
[[ "${FIX[hook]:-}" != "${FIX[pod-annotations]:-}" && "${FIX[pod-annotations]:-}" == "see hook"* ]] &&
    pg_check_ok "pod-annotations does not repeat hook's fix" || pg_check_fail "pod-annotations repeats hook's fix"
pg_expect_contains "the fix wires the file doctor was named" "$(command_of hook)" "--containerd-config $W/no-handlers.toml"
run_fix hook
doctor --containerd-config "$W/no-handlers.toml"
expect hook ok "every runtime handler of $W/no-handlers.toml (1)"
expect pod-annotations ok
# A wrong --containerd-config: named once, and the option is the fix.
doctor --containerd-config "$W/nope.toml"
expect hook fail "containerd: $W/nope.toml: no such file"
expect pod-annotations fail "cannot be checked"
D="${DETAIL[hook]:-}"
[[ "${D/"$W/nope.toml"/}" != "$D" && "${D/"$W/nope.toml"/}" != *"$W/nope.toml"* && "${FIX[hook]:-}" == *--containerd-config* ]] &&
    pg_check_ok "a wrong --containerd-config: the path once, the option as the fix" ||
    pg_check_fail "a wrong --containerd-config: ${DETAIL[hook]:-} | ${FIX[hook]:-}"

pg_section "the running containerd's --config, as containerd opened it"
# A containerd (in the fake /proc) started with a relative --config: its own working directory's
# file counts; one planted in doctor's working directory answers for nothing.
CDPID=4545
mkdir -p "$PROC/$CDPID/ns" "$W/cd-cwd"
echo containerd >"$PROC/$CDPID/comm"
printf 'Name:\tcontainerd\nUid:\t0\t0\t0\t0\nPPid:\t1\n' >"$PROC/$CDPID/status"
ln -sfn /proc/self/ns/mnt "$PROC/$CDPID/ns/mnt"
ln -sfn / "$PROC/$CDPID/root"
ln -sfn "$W/cd-cwd" "$PROC/$CDPID/cwd"
printf '%s\0' /usr/bin/containerd --config config.toml >"$PROC/$CDPID/cmdline"
sed '/pod_annotations/d' "$W/config.toml.orig" >"$W/cd-cwd/config.toml" # containerd's: unwired
cp "$W/config.toml.orig" "$PLANT/config.toml"                          # planted: wired
CD_ARGS=()
pushd "$PLANT" >/dev/null || pg_fail "cd $PLANT"
doctor
expect pod-annotations fail "does not pass"
pg_expect_contains "... in containerd's own file, found through its working directory" "${FIX[pod-annotations]:-}" \
    "every runtime handler of $W/cd-cwd/config.toml"
ln -sfn "$W" "$PROC/$CDPID/root" # its root is not the node's: its paths name nothing here
doctor
expect hook fail "process $CDPID runs in another root directory"
no_command hook "which file containerd reads is not known"
popd >/dev/null || pg_fail "popd"
rm -rf "${PROC:?}/$CDPID" "$PLANT/config.toml"
CD_ARGS=(--containerd-config "$CD_CONFIG")

pg_section "the hook in CRI-O"
HOOKS_A="$W/hooks-usr"
HOOKS_B="$W/hooks-etc"
mkdir -p "$HOOKS_A" "$HOOKS_B"
hooks_entry() { # FILE [WHEN JSON]
    "$PG_PY" - "$1" "$PULLGATE_HOOK" "$CFG" "$PG_HOOK_SOCK" "${2:-}" <<'PY'
import json, sys
path, hook, cfg, sock, when = sys.argv[1:6]
json.dump({"version": "1.0.0",
           "hook": {"path": hook, "args": ["pullgate-hook", "--stage", "createRuntime",
                                           "--config", cfg, "--daemon-socket", sock]},
           "when": json.loads(when) if when else {"always": True},
           "stages": ["createRuntime"]}, open(path, "w"))
PY
}
hooks_entry "$HOOKS_A/pullgate.json"
CRIO=(--runtime cri-o --crio-hooks-dir "$HOOKS_A" --crio-hooks-dir "$HOOKS_B")
doctor "${CRIO[@]}"
expect hook ok "$HOOKS_A/pullgate.json runs pullgate-hook"
expect pod-annotations ok "CRI-O passes every pod annotation"
expect same-config ok
hooks_entry "$HOOKS_B/pullgate.json" '{"annotations": {"x": "y"}}'
doctor "${CRIO[@]}"
expect hook fail "\"when\" is not {\"always\": true}"
no_command hook "an administrator's entry wire does not overwrite"
rm "$HOOKS_B/pullgate.json"
echo '{not json' >"$HOOKS_A/zz-other.json"
doctor "${CRIO[@]}"
expect hook fail "CRI-O then loads no hook of that directory"
rm "$HOOKS_A/zz-other.json"
# hooks_dir from crio.conf and crio.conf.d (the last file that sets it wins)
mkdir -p "$W/crio.conf.d"
printf '[crio.runtime]\nhooks_dir = ["%s"]\n' "$HOOKS_B" >"$W/crio.conf"
printf '[crio.runtime]\nhooks_dir = ["%s", "%s"]\n' "$HOOKS_B" "$HOOKS_A" >"$W/crio.conf.d/10-pullgate.conf"
CRIO_CONF=(--runtime cri-o --crio-config "$W/crio.conf" --crio-config-dir "$W/crio.conf.d")
doctor "${CRIO_CONF[@]}"
expect hook ok "hooks_dir: $HOOKS_B, $HOOKS_A"
expect crio-namespaced-auth ok "CRI-O's namespaced auth is on (namespaced_auth_dir unset"
rm "$W/crio.conf.d/10-pullgate.conf"
doctor "${CRIO_CONF[@]}"
expect hook fail "no hooks.d entry in CRI-O's hooks_dir runs pullgate-hook"
pg_expect_contains "the fix is wire for CRI-O, with the directories doctor read" "$(command_of hook)" \
    "wire --runtime cri-o --crio-config-dir $W/crio.conf.d --hooks-dir $HOOKS_B"
run_fix hook
doctor "${CRIO_CONF[@]}"
expect hook ok "$HOOKS_B/pullgate.json runs pullgate-hook"
expect same-config ok
rm "$W/crio.conf.d/10-pullgate.conf" "$HOOKS_B/pullgate.json"
# CRI-O's namespaced auth (crio.image.namespaced_auth_dir), as pullgate-cri reads it
printf '[crio.image]\nnamespaced_auth_dir = "/srv/auth"\n' >"$W/crio.conf.d/20-auth.conf"
doctor "${CRIO_CONF[@]}"
expect crio-namespaced-auth ok "is on (namespaced_auth_dir = \"/srv/auth\""
printf '[crio.image]\nnamespaced_auth_dir = ""\n' >"$W/crio.conf.d/30-off.conf"
doctor "${CRIO_CONF[@]}"
expect crio-namespaced-auth ok "is off"
printf '[crio.image\n' >"$W/crio.conf.d/40-broken.conf"
doctor "${CRIO_CONF[@]}"
expect crio-namespaced-auth fail "cannot be read"
rm "$W/crio.conf.d/"*.conf

pg_section "status without metrics"
"$PG_PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); c["criMetricsListen"]="none"; json.dump(c, open(sys.argv[2], "w"))' "$CFG" "$W/no-metrics.json"
OUT="$("$PULLGATECTL" --config "$W/no-metrics.json" doctor --json "${DOCTOR_ARGS[@]}" "${CD_ARGS[@]}" 2>/dev/null)"
valid_json "status not available"
"$PG_PY" -c 'import json,sys; s=json.loads(sys.argv[1])["status"]; sys.exit(0 if not s["available"] and "none" in s["reason"] else 1)' "$OUT" &&
    pg_check_ok "criMetricsListen none: status not available, with the reason" || pg_check_fail "status: $OUT"

pg_section "usage"
PG_CHECKS=$((PG_CHECKS + 1))
if "$PULLGATECTL" --policy AlwaysVerify doctor >/dev/null 2>"$W/usage.err"; then
    PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - doctor accepted --policy"
else
    [[ $? == 2 ]] && pg_log "ok   - doctor refuses global overrides other than --config (exit 2)" ||
        { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - doctor --policy: wrong exit status"; }
fi
pg_expect_fail "doctor --runtime bogus" "$PULLGATECTL" doctor --runtime bogus
pg_expect_ok "doctor --help" "$PULLGATECTL" doctor --help
pg_expect_contains "doctor --help names the checks" "$PG_OUT" "base_runtime_spec"

validate_all
proxy_stop # before the common cleanup, which would wait for init to reap it
pg_log "test_doctor: $((SECONDS - T0)) s ($(grep -c '^containerd restarted' "$W/systemctl.log") containerd restarts by the fixes: $(awk '/^containerd restarted/ { t += $4 } END { printf "%.1f", t }' "$W/systemctl.log") s)"
pg_summary
