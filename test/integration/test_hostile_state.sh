#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hostile record directories: symlinks (pulled/ itself, one record, the state dir), hard links,
# wrong owner or mode (record, pulled/, state dir), a FIFO or a character device in place of a
# record, a sparse 1 GiB record. For each: `pullgatectl verify` and the hook deny with the reason
# (fail closed), `record-pulled` refuses (exit 3) rather than write through the trap, nothing
# outside the state dir is followed or modified (a "victim" directory of valid records and a
# file is fingerprinted before and after), and nothing hangs (every run under `timeout`).
set -euo pipefail

: "${PULLGATECTL:?PULLGATECTL must name the pullgatectl binary}"
: "${PULLGATE_HOOK:?PULLGATE_HOOK must name the pullgate-hook binary}"
HERE=$(cd "$(dirname "$0")" && pwd)

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: needs root (records must be root-owned, chown and mknod are part of the cases)"
    exit 77
fi

WORK=$(mktemp -d /tmp/pg-hostile.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# shellcheck source=lib/hardening.sh
. "$HERE/lib/hardening.sh"

CTL=("$PULLGATECTL" --dbus none)
VICTIM=$WORK/victim

record_name() { printf 'sha256-%s' "$(printf '%s' "$(ref_of "$1")" | sha256sum | cut -c1-64)"; }

# Something to protect: a valid record directory and an ordinary file, outside every state dir.
make_victim() {
    run_status 0 "victim record" -- "${CTL[@]}" --state-dir "$VICTIM" record-pulled \
        --image "$(image_of 1)" --image-ref "$(ref_of 1)" --secret "team-a/s1/uid-s1:$HASH_A"
    echo "precious" >"$VICTIM/precious.txt"
    chmod 600 "$VICTIM/precious.txt"
}

fingerprint() { # content, mode, owner, links and size of everything under the victim
    (cd "$VICTIM" && find . -printf '%p %m %u %n %s %y\n' | sort &&
        find . -type f -exec sha256sum {} + | sort)
}

# A fresh state dir $WORK/NAME holding a valid record of app1 for team-a/s1; sets st.
fresh_state() {
    st=$WORK/$1
    run_status 0 "fresh state $1" -- "${CTL[@]}" --state-dir "$st" record-pulled \
        --image "$(image_of 1)" --image-ref "$(ref_of 1)" --secret "team-a/s1/uid-s1:$HASH_A" ||
        true
}

# expect_denied CASE STATE PATTERN: verify and the hook both deny app1 for s1, naming PATTERN.
expect_denied() {
    local name=$1 st=$2 pattern=$3
    run_status any "$name: verify" -- "${CTL[@]}" --state-dir "$st" --policy AlwaysVerify verify \
        --image "$(image_of 1)" --image-ref "$(ref_of 1)" --namespace team-a \
        --credentials "$(creds_for 1 team-a s1)" || return 0
    if [ "$STATUS" -eq 1 ] && grep -Eq "^deny: .*$pattern" <<<"$OUT"; then
        pass "$name: verify: $OUT"
    elif [ "$STATUS" -eq 3 ] && grep -Eq "cannot open the record store: .*$pattern" <<<"$ERR"; then
        # Fails closed, but as "store error" (exit 3) rather than a deny line: see the report.
        pass "$name: verify fails closed (exit 3): $ERR"
    else
        fail "$name: verify did not deny with the reason /$pattern/ (exit $STATUS: $OUT $ERR)"
    fi
    local cfg=$WORK/$name.hook.json bundle=$WORK/$name.bundle
    hook_config "$cfg" "$st"
    crio_bundle "$bundle" team-a "$(image_of 1)" "$(ref_hex 1)" "$(creds_for 1 team-a s1)"
    run_hook "$cfg" "$bundle" "ctr-$name"
    if [ "$STATUS" -ne 0 ] && [ "$STATUS" -ne 124 ] &&
        grep -Eq "^pullgate: denied container ctr-$name \(namespace team-a, .*$pattern" <<<"$ERR"; then
        pass "$name: hook denies"
    else
        fail "$name: hook did not deny with the reason /$pattern/ (exit $STATUS: $ERR)"
    fi
}

# expect_write_refused CASE STATE [WANT]: record-pulled must not write through the trap
# (exit WANT, default 3: a store error).
expect_write_refused() {
    run_status "${3:-3}" "$1: record-pulled" -- "${CTL[@]}" --state-dir "$2" record-pulled \
        --image "$(image_of 1)" --image-ref "$(ref_of 1)" --secret "team-a/intruder/uid-x:" &&
        pass "$1: record-pulled refused: $ERR"
    return 0
}

# ------------------------------------------------------------------ cases

case_pulled_symlink() {
    fresh_state pulled-symlink
    rm -rf "$st/pulled"
    ln -s "$VICTIM/pulled" "$st/pulled"
    expect_denied pulled-symlink "$st" "symbolic link"
    expect_write_refused pulled-symlink "$st"
}

case_record_symlink() {
    local rec
    fresh_state record-symlink
    rec=$(record_name 1)
    ln -sf "$VICTIM/pulled/$rec" "$st/pulled/$rec" # a valid record, elsewhere
    expect_denied record-symlink "$st" "symbolic link"
    expect_write_refused record-symlink "$st"
    ln -sf "$VICTIM/precious.txt" "$st/pulled/$rec" # not a record at all
    expect_denied record-symlink-file "$st" "symbolic link"
    expect_write_refused record-symlink-file "$st"
}

case_state_dir_symlink() {
    ln -s "$VICTIM" "$WORK/state-link"
    expect_denied state-dir-symlink "$WORK/state-link" "symbolic link"
    expect_write_refused state-dir-symlink "$WORK/state-link"
}

case_hard_link() {
    local rec
    fresh_state hard-link
    rec=$(record_name 1)
    ln -f "$VICTIM/pulled/$rec" "$st/pulled/$rec"
    expect_denied hard-link "$st" "hard link"
    expect_write_refused hard-link "$st"
    rm -f "$st/pulled/$rec" # our own alias: the victim must end with one link again
}

case_modes_and_owners() {
    local rec
    fresh_state record-group-writable
    rec=$st/pulled/$(record_name 1)
    chmod 620 "$rec"
    expect_denied record-group-writable "$st" "writable by group or others"
    expect_write_refused record-group-writable "$st"

    fresh_state record-world-writable
    chmod 606 "$st/pulled/$(record_name 1)"
    expect_denied record-world-writable "$st" "writable by group or others"

    fresh_state record-foreign-owner
    chown 4242:4242 "$st/pulled/$(record_name 1)"
    expect_denied record-foreign-owner "$st" "owned by uid 4242"
    expect_write_refused record-foreign-owner "$st"

    fresh_state pulled-world-writable
    chmod 777 "$st/pulled"
    expect_denied pulled-world-writable "$st" "writable by group or others"
    expect_write_refused pulled-world-writable "$st"

    fresh_state pulled-foreign-owner
    chown 4242 "$st/pulled"
    expect_denied pulled-foreign-owner "$st" "owned by uid 4242"

    fresh_state state-group-writable
    chmod 770 "$st"
    expect_denied state-group-writable "$st" "writable by group or others"
    expect_write_refused state-group-writable "$st"
}

case_special_files() {
    local rec
    fresh_state fifo
    rec=$st/pulled/$(record_name 1)
    rm -f "$rec"
    mkfifo -m 600 "$rec" # a reader that blocked on it would hang the container start
    expect_denied fifo "$st" "not a regular file"
    expect_write_refused fifo "$st"
    [ -p "$rec" ] || fail "fifo: replaced by a write that should have been refused"

    fresh_state char-device
    rec=$st/pulled/$(record_name 1)
    rm -f "$rec"
    mknod -m 600 "$rec" c 1 3 # /dev/null's numbers
    expect_denied char-device "$st" "not a regular file"
    expect_write_refused char-device "$st"

    fresh_state huge
    rec=$st/pulled/$(record_name 1)
    truncate -s 1G "$rec" # sparse: costs no space, would cost 1 GiB of memory to read
    local start=$SECONDS
    expect_denied huge "$st" "larger than the limit"
    expect_write_refused huge "$st"
    [ $((SECONDS - start)) -le 10 ] || fail "huge: took $((SECONDS - start)) s"
    [ "$(stat -c %s "$rec")" -eq $((1 << 30)) ] || fail "huge: the file was modified"
}

make_victim
before=$(fingerprint)
case_pulled_symlink
case_record_symlink
case_state_dir_symlink
case_hard_link
case_modes_and_owners
case_special_files
after=$(fingerprint)
if [ "$before" = "$after" ]; then
    pass "nothing outside the state dirs was modified"
else
    fail "the victim directory changed:"
    diff <(echo "$before") <(echo "$after") || true
fi
# The victim is still a valid record directory whose record authorises s1.
run_status 0 "victim still verifies" -- "${CTL[@]}" --state-dir "$VICTIM" --policy AlwaysVerify verify \
    --image "$(image_of 1)" --image-ref "$(ref_of 1)" --namespace team-a \
    --credentials "$(creds_for 1 team-a s1)" && pass "victim record intact"
finish test_hostile_state
