#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pullgatectl end to end: exit statuses, --help of every command, the record
# flows (record-intent/record-pulled/record-failed, list, show, prune, verify),
# check-config, and fail-closed handling of a corrupt record.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/common.sh
source "$here/lib/common.sh"

[[ -n "${PULLGATECTL:-}" && -x "${PULLGATECTL:-}" ]] ||
    pg_skip "pullgatectl not built (PULLGATECTL='${PULLGATECTL:-}')"
[[ -x /usr/bin/python3 ]] || pg_skip "/usr/bin/python3 not installed"

CTL="$PULLGATECTL"
WORK="$(pg_mktemp_dir ctl)"
STATE="$WORK/state"
CONFIG="$WORK/config.json"
printf '{"stateDir":"%s","readOnlyRecordDirs":[],"dbus":"none"}\n' "$STATE" >"$CONFIG"

IMAGE=registry.example.com/team-a/app:1.0
REF=sha256:1111111111111111111111111111111111111111111111111111111111111111
REF2=sha256:2222222222222222222222222222222222222222222222222222222222222222
UID_A=7c1f0000-0000-0000-0000-00000000000a
HASH_A=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
HASH_B=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb

OUT="" ERR="" STATUS=0
# expect_status WANT DESC CMD...: runs CMD (stdin from /dev/null unless
# redirected by the caller), keeps stdout in $OUT and stderr in $ERR.
expect_status() {
    local want="$1" desc="$2"
    shift 2
    PG_CHECKS=$((PG_CHECKS + 1))
    STATUS=0
    OUT="$("$@" 2>"$WORK/stderr")" || STATUS=$?
    ERR="$(cat "$WORK/stderr")"
    if [[ "$STATUS" == "$want" ]]; then
        pg_log "ok   - $desc"
        return 0
    fi
    PG_FAILURES=$((PG_FAILURES + 1))
    pg_log "FAIL - $desc: exit $STATUS, wanted $want"
    printf 'stdout: %s\nstderr: %s\n' "$OUT" "$ERR" | sed 's/^/       | /' >&2
    return 0
}
# contains DESC HAYSTACK NEEDLE
contains() { pg_expect_contains "$@" || true; }
ctl() { "$CTL" --config "$CONFIG" "$@"; }
creds_json() { # NS NAME UID HASH
    printf '{"registry.example.com/team-a/app":{"kubernetesSecrets":[{"namespace":"%s","name":"%s","uid":"%s","credentialHash":"%s"}]}}' "$@"
}
record_path() { # DIR KIND KEY
    printf '%s/%s/sha256-%s' "$1" "$2" "$(printf %s "$3" | sha256sum | cut -d' ' -f1)"
}

pg_section "usage, help, version"
expect_status 2 "no command is a usage error" "$CTL"
contains "usage error names the program" "$ERR" "pullgatectl: "
expect_status 2 "unknown command" "$CTL" frobnicate
expect_status 2 "unknown global option" "$CTL" --frobnicate list
expect_status 2 "unknown command option" ctl list --frobnicate
expect_status 2 "missing option argument" ctl show --image-ref
expect_status 2 "stray operand" ctl list extra
expect_status 0 "--help" "$CTL" --help
contains "--help lists commands" "$OUT" "record-pulled"
expect_status 0 "-h" "$CTL" -h
expect_status 0 "--version" "$CTL" --version
contains "--version prints the version" "$OUT" "1."
for cmd in hash record-intent record-pulled record-failed verify list show prune check-config doctor; do
    expect_status 0 "$cmd --help" "$CTL" "$cmd" --help
    contains "$cmd --help prints a usage" "$OUT" "Usage: pullgatectl"
done
expect_status 0 "--help works with a broken config" "$CTL" --config /nonexistent/config.json verify --help

pg_section "configuration"
expect_status 2 "explicit missing config file" "$CTL" --config "$WORK/missing.json" check-config
echo '{"polcy":"AlwaysVerify"}' >"$WORK/badkey.json"
expect_status 2 "check-config with an unknown key" "$CTL" --config "$WORK/badkey.json" check-config
contains "the error names the key" "$ERR" "polcy"
echo '{"policy":"Sometimes"}' >"$WORK/badvalue.json"
expect_status 2 "check-config with a bad value" "$CTL" --config "$WORK/badvalue.json" check-config
contains "the error names the key" "$ERR" "policy"
expect_status 0 "check-config prints the effective config" \
    "$CTL" --config "$CONFIG" --policy AlwaysVerify check-config --allowlist 'registry.example.com/infra/*'
/usr/bin/python3 - "$OUT" "$STATE" <<'PY' || { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - check-config JSON"; }
import json, sys
cfg = json.loads(sys.argv[1])
assert cfg["policy"] == "AlwaysVerify", cfg
assert cfg["stateDir"] == sys.argv[2], cfg
assert cfg["allowlist"] == ["registry.example.com/infra/*"], cfg
PY
expect_status 2 "bad --policy" "$CTL" --config "$CONFIG" --policy Sometimes check-config
expect_status 2 "bad --credential-ttl" "$CTL" --config "$CONFIG" --credential-ttl soon check-config

pg_section "hash"
expect_status 2 "hash without a password source" "$CTL" hash --username alice
expect_status 2 "no password option on the command line" "$CTL" hash --username alice --password s3cret
H="$(printf 's3cret\n' | "$CTL" hash --username alice --password-stdin)"
contains "hash of a known vector" "$H" "84e602bef66066d26999b4f32a2afb963a80f8384d3cdf9145038d3c3da62d2b"
head -c 200000 /dev/zero | tr '\0' x >"$WORK/bigpassword"
expect_status 2 "an oversized password is refused" "$CTL" hash --username a --password-file "$WORK/bigpassword"
echo '{"auths":{"other.example.com":{"auth":"YTpi"}}}' >"$WORK/dockerconfig.json"
expect_status 0 "dockerconfigjson without a matching entry" \
    "$CTL" hash --dockerconfigjson "$WORK/dockerconfig.json" --image registry.example.com/x
[[ -z "$OUT" ]] || { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - no hash expected, got $OUT"; }
contains "a note on stderr" "$ERR" "no entry"
echo 'not json' >"$WORK/broken-dockerconfig.json"
expect_status 2 "invalid dockerconfigjson" \
    "$CTL" hash --dockerconfigjson "$WORK/broken-dockerconfig.json" --image registry.example.com/x

pg_section "record flows"
expect_status 2 "record-intent without --image" ctl record-intent
expect_status 0 "record-intent" ctl record-intent --image "$IMAGE"
[[ -f "$(record_path "$STATE" pulling "$IMAGE")" ]] ||
    { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - intent file missing"; }
expect_status 1 "an intent alone makes the image verified (deny)" \
    ctl verify --image "$IMAGE" --image-ref "$REF" --namespace team-a
contains "deny prefix" "$OUT" "deny: "
expect_status 2 "record-pulled: malformed --secret" \
    ctl record-pulled --image "$IMAGE" --image-ref "$REF" --secret team-a/regcred
expect_status 2 "record-pulled: bad hash" \
    ctl record-pulled --image "$IMAGE" --image-ref "$REF" --secret "team-a/regcred/$UID_A:ABC"
expect_status 2 "record-pulled: malformed --service-account" \
    ctl record-pulled --image "$IMAGE" --image-ref "$REF" --service-account team-a/default
expect_status 2 "record-pulled without --image-ref" ctl record-pulled --image "$IMAGE"
expect_status 0 "record-pulled with a secret and a service account" \
    ctl record-pulled --image "$IMAGE" --image-ref "$REF" --secret "team-a/regcred/$UID_A:$HASH_A" \
    --service-account team-a/puller/sa-uid-1
[[ -f "$(record_path "$STATE" pulled "$REF")" ]] ||
    { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - pulled record missing"; }
expect_status 0 "record-intent + record-failed" ctl record-intent --image other.example.com/y:1
expect_status 0 "record-failed" ctl record-failed --image other.example.com/y:1

pg_section "verify"
expect_status 0 "matching secret: allow" ctl verify --image "$IMAGE" --image-ref "$REF" \
    --namespace team-a --credentials "$(creds_json team-a regcred "$UID_A" "$HASH_A")"
contains "allow prefix" "$OUT" "allow: "
expect_status 1 "other tenant's secret: deny" ctl verify --image "$IMAGE" --image-ref "$REF" \
    --namespace team-b --credentials "$(creds_json team-b regcred uid-b "$HASH_B")"
expect_status 1 "no credentials: deny" ctl verify --image "$IMAGE" --image-ref "$REF" --namespace team-a
expect_status 0 "global option after the command" "$CTL" verify --image "$IMAGE" --image-ref "$REF" \
    --namespace team-b --config "$CONFIG" --policy NeverVerify
creds_json team-a regcred "$UID_A" "$HASH_A" >"$WORK/creds.json"
expect_status 0 "--credentials-file" ctl verify --image "$IMAGE" --image-ref "$REF" \
    --namespace team-a --credentials-file "$WORK/creds.json"
expect_status 0 "--credentials-file -" ctl verify --image "$IMAGE" --image-ref "$REF" \
    --namespace team-a --credentials-file - <"$WORK/creds.json"
expect_status 1 "--json deny" ctl verify --image "$IMAGE" --image-ref "$REF" --namespace team-a --json
/usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["allow"] is False and d["reason"] and "message" in d, d' "$OUT" ||
    { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - verify --json output: $OUT"; }
expect_status 1 "invalid credentials JSON: deny (fail closed)" ctl verify --image "$IMAGE" \
    --image-ref "$REF" --namespace team-a --credentials '{not json'
expect_status 2 "verify without --namespace" ctl verify --image "$IMAGE" --image-ref "$REF"
mkdir -p "$WORK/writable-by-all" && chmod 0777 "$WORK/writable-by-all"
expect_status 1 "unusable store: deny (fail closed), not an error" "$CTL" --config "$CONFIG" \
    --state-dir "$WORK/writable-by-all" verify --image "$IMAGE" --image-ref "$REF" --namespace team-a
contains "unusable store: the reason names the store" "$OUT" "deny: pull record store error"

pg_section "list and show"
expect_status 0 "list" ctl list
contains "list shows the imageRef" "$OUT" "$REF"
contains "list shows the image name" "$OUT" "registry.example.com/team-a/app"
expect_status 0 "list --json" ctl list --json
/usr/bin/python3 - "$OUT" "$REF" "$STATE" <<'PY' || { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - list --json"; }
import json, sys
records = json.loads(sys.argv[1])
assert isinstance(records, list) and len(records) == 1, records
r = records[0]
assert r["imageRef"] == sys.argv[2] and r["kind"] == "ImagePulledRecord", r
assert r["dir"].rstrip("/") == sys.argv[3], r
m = r["credentialMapping"]["registry.example.com/team-a/app"]
assert m["kubernetesSecrets"][0]["name"] == "regcred", m
assert m["kubernetesServiceAccounts"][0]["name"] == "puller", m
PY
expect_status 0 "show" ctl show --image-ref "$REF"
contains "show names the secret" "$OUT" "team-a/regcred"
expect_status 0 "show --json" ctl show --image-ref "$REF" --json
contains "show --json is the record" "$OUT" '"credentialMapping"'
expect_status 2 "show of an unknown imageRef" ctl show --image-ref "$REF2"
expect_status 2 "show without --image-ref" ctl show

pg_section "prune"
ctl record-pulled --image registry.example.com/team-a/old:1 --image-ref "$REF2" --node-accessible
printf '%s\n' "$REF" >"$WORK/in-use"
expect_status 2 "prune without --in-use" ctl prune
expect_status 2 "prune with a bad --before" ctl prune --in-use "$WORK/in-use" --before yesterday
expect_status 0 "prune --before 1h keeps fresh records" ctl prune --in-use "$WORK/in-use" --before 1h
[[ "$OUT" == 0 ]] || { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - pruned '$OUT', wanted 0"; }
expect_status 2 "an empty in-use list is refused" ctl prune --in-use - </dev/null
expect_status 0 "prune keeps in-use records" ctl prune --in-use "$WORK/in-use"
[[ "$OUT" == 1 ]] || { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - pruned '$OUT', wanted 1"; }
expect_status 2 "the pruned record is gone" ctl show --image-ref "$REF2"
expect_status 0 "the in-use record stays" ctl show --image-ref "$REF"
expect_status 0 "prune --allow-empty" ctl prune --in-use - --allow-empty </dev/null
[[ "$OUT" == 1 ]] || { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - pruned '$OUT', wanted 1"; }

pg_section "prune refreshes the read-only directories' names caches"
# A kubelet-like directory: a record written by pullgatectl into another state directory.
KDIR="$WORK/kubelet"
"$CTL" --state-dir "$KDIR" --config "$CONFIG" record-pulled --image "$IMAGE" --image-ref "$REF2" \
    --node-accessible >/dev/null
touch -d '-1 minute' "$KDIR/pulled" # a directory changed within 2 s is not cached
expect_status 0 "prune with a read-only directory" \
    "$CTL" --config "$CONFIG" --read-only-dir "$KDIR" prune --in-use - --allow-empty </dev/null
cache="$(record_path "$STATE" pullgate-dircache "$KDIR")"
PG_CHECKS=$((PG_CHECKS + 1))
if [[ "$(stat -c %s "$cache" 2>/dev/null)" == $((512 + 64 + 72)) ]]; then
    pg_log "ok   - its names cache is written (one record, one name)"
else
    PG_FAILURES=$((PG_FAILURES + 1))
    pg_log "FAIL - no names cache of one record at $cache"
fi

pg_section "store errors"
ctl record-pulled --image "$IMAGE" --image-ref "$REF" --secret "team-a/regcred/$UID_A:$HASH_A"
corrupt="$(record_path "$STATE" pulled "$REF")"
printf '{"kind":"ImagePulledRecord","garbage' >"$corrupt"
chmod 0600 "$corrupt"
expect_status 3 "show of a corrupt record: store error" ctl show --image-ref "$REF"
expect_status 3 "list with a corrupt record: store error" ctl list
contains "list reports the bad file" "$ERR" "$(basename "$corrupt")"
expect_status 1 "verify against a corrupt record: deny (fail closed)" ctl verify --image "$IMAGE" \
    --image-ref "$REF" --namespace team-a --credentials "$(creds_json team-a regcred "$UID_A" "$HASH_A")"
mkdir -p "$WORK/notadir-parent"
: >"$WORK/notadir-parent/file"
expect_status 3 "record-intent into an unusable state dir" \
    ctl --state-dir "$WORK/notadir-parent/file" record-intent --image "$IMAGE"

pg_section "read-only commands create nothing"
# list, show, verify and check-config only read: a missing stateDir stays missing (it
# holds no records), and verify decides exactly as with an empty one.
FRESH="$WORK/fresh/state"
printf '{"stateDir":"%s","readOnlyRecordDirs":[],"dbus":"none"}\n' "$FRESH" >"$WORK/fresh.json"
fctl() { "$CTL" --config "$WORK/fresh.json" "$@"; }
expect_status 0 "list with a missing stateDir" fctl list
expect_status 0 "list --json with a missing stateDir" fctl list --json
[[ "$OUT" == "[]" ]] || { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - list --json: '$OUT'"; }
expect_status 2 "show with a missing stateDir: no such record" fctl show --image-ref "$REF"
expect_status 0 "verify with a missing stateDir: an image nobody pulled is preloaded" \
    fctl verify --image "$IMAGE" --image-ref "$REF" --namespace team-a
expect_status 1 "verify with a missing stateDir under AlwaysVerify: deny" \
    fctl --policy AlwaysVerify verify --image "$IMAGE" --image-ref "$REF" --namespace team-a
expect_status 0 "check-config with a missing stateDir" fctl check-config
if [[ -e "$WORK/fresh" ]]; then
    PG_CHECKS=$((PG_CHECKS + 1)); PG_FAILURES=$((PG_FAILURES + 1))
    pg_log "FAIL - a read-only command created $(find "$WORK/fresh" | head -3 | xargs)"
else
    PG_CHECKS=$((PG_CHECKS + 1)); pg_log "ok   - nothing was created for the missing stateDir"
fi
expect_status 0 "record-intent creates it (a writing command)" fctl record-intent --image "$IMAGE"
[[ -d "$FRESH/pulling" ]] || { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - record-intent created no $FRESH/pulling"; }

pg_section "record-pulled validates the image ID like verify"
# The README's old quick start: "sha256:6f1c..." is no image ID; verify refuses it, so
# record-pulled must not write a record under it.
expect_status 1 "verify refuses a malformed imageRef" \
    ctl verify --image "$IMAGE" --image-ref 'sha256:6f1c...' --namespace team-a
contains "verify names the rule" "$OUT" "well-formed image ID"
expect_status 2 "record-pulled refuses the same imageRef" \
    ctl record-pulled --image "$IMAGE" --image-ref 'sha256:6f1c...' --node-accessible
contains "record-pulled names the rule" "$ERR" "well-formed image ID"
[[ ! -e "$(record_path "$STATE" pulled 'sha256:6f1c...')" ]] ||
    { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - a record was written for sha256:6f1c..."; }
expect_status 2 "record-pulled refuses an upper-case ID" ctl record-pulled --image "$IMAGE" \
    --image-ref "SHA256:${REF#sha256:}" --node-accessible
expect_status 0 "record-pulled accepts a bare 64-hex ID" ctl record-pulled --image "$IMAGE" \
    --image-ref "${REF2#sha256:}" --node-accessible
expect_status 0 "record-pulled accepts a repo digest" ctl record-pulled --image "$IMAGE" \
    --image-ref "registry.example.com/team-a/app@$REF2" --node-accessible

pg_section "configuration errors exit 2, as pullgatectl(8) says"
cp "$CONFIG" "$WORK/insecure.json"
chmod 0666 "$WORK/insecure.json"
expect_status 2 "a config writable by others is refused with exit 2" \
    "$CTL" --config "$WORK/insecure.json" check-config
contains "the error says why" "$ERR" "writable by group or others"
expect_status 2 "... for every command that reads it" "$CTL" --config "$WORK/insecure.json" list
ln -s "$CONFIG" "$WORK/symlink.json"
expect_status 2 "a symlinked config is refused with exit 2" "$CTL" --config "$WORK/symlink.json" check-config

pg_section "the packaged config and the docs spell out every default"
# pullgate.json(5): "The defaults, which the packaged file spells out". check-config of an
# empty file prints every key the library knows with its default (pg_config_to_json).
echo '{}' >"$WORK/empty.json"
expect_status 0 "check-config of {}" "$CTL" --config "$WORK/empty.json" check-config
DEFAULTS="$OUT"
/usr/bin/python3 - "$DEFAULTS" "$PG_SOURCE_DIR" <<'PY' || { PG_FAILURES=$((PG_FAILURES + 1)); pg_log "FAIL - packaged config/README/man page vs the library's defaults"; }
import json, re, sys
defaults = json.loads(sys.argv[1])
src = sys.argv[2]
# The built-in stateDir is ${localstatedir}/lib/pullgate of this build; the packages' is /var.
assert defaults["stateDir"].endswith("/var/lib/pullgate"), defaults["stateDir"]
defaults["stateDir"] = "/var/lib/pullgate"
packaged = json.load(open(src + "/packaging/config.json"))
# The packaged file is a conffile: it spells out the default of every key the first release
# read (test/data/config-keys/1.0.0) and never changes, so an upgrade never asks an
# administrator who edited it; a key added later takes its default when absent.
first = [l.strip() for l in open(src + "/test/data/config-keys/1.0.0") if l.strip() and not l.startswith("#")]
assert sorted(packaged) == sorted(first), ("packaging/config.json: not the first release's keys",
                                          sorted(set(first) ^ set(packaged)))
assert all(packaged[k] == defaults[k] for k in packaged), ("packaging/config.json differs from the defaults",
                              {k: (packaged.get(k), defaults.get(k)) for k in packaged if packaged.get(k) != defaults.get(k)})
readme = open(src + "/README.md").read()
block = re.search(r"## Configuration.*?```json\n(.*?)```", readme, re.S).group(1)
assert json.loads(block) == defaults, ("README's configuration block", block)
table = set(re.findall(r"^\| `(\w+)` \|", readme.split("## Configuration", 1)[1].split("\n## ", 1)[0], re.M))
assert table == set(defaults), ("README's key table", sorted(set(defaults) ^ table))
man = open(src + "/docs/man/pullgate.json.5").read()
ex = re.search(r"The defaults \(the packaged file.*?\):\n\.PP\n\.EX\n(.*?)\.EE", man, re.S).group(1)
assert json.loads(ex.replace("\\-", "-")) == defaults, ("pullgate.json(5) defaults block", ex)
for key in defaults:
    assert re.search(r"^\.BR %s " % key, man, re.M), ("pullgate.json(5) documents no key", key)
PY
PG_CHECKS=$((PG_CHECKS + 1))

pg_section "no libdbus link"
# monitor loads libdbus with dlopen like the notifier: every other command maps none of
# libdbus's libraries (libsystemd, libgcrypt, liblzma, ...).
command -v readelf >/dev/null || pg_fail "readelf (binutils) not installed"
needed="$(readelf -d "$CTL" | awk '/\(NEEDED\)/ { print $NF }')"
contains "readelf -d lists the NEEDED libraries" "$needed" "libc.so"
if grep -q libdbus <<<"$needed"; then
    PG_CHECKS=$((PG_CHECKS + 1)); PG_FAILURES=$((PG_FAILURES + 1))
    pg_log "FAIL - pullgatectl has a NEEDED libdbus entry: $needed"
else
    PG_CHECKS=$((PG_CHECKS + 1)); pg_log "ok   - pullgatectl has no NEEDED libdbus"
fi
if command -v ldd >/dev/null && ! ldd "$CTL" | grep -q libdbus; then
    pg_check_ok "pullgatectl maps no libdbus at start (ldd)"
else
    pg_check_fail "ldd shows libdbus for pullgatectl (or ldd is missing)"
fi

echo "$((PG_CHECKS - PG_FAILURES)) passed, $PG_FAILURES failed"
[[ "$PG_FAILURES" -eq 0 ]]
