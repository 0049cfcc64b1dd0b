#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fault injection against pullgatectl's record store:
#   - full disk: a 256 KiB tmpfs as state dir, filled; record-pulled must fail with a clear
#     error and exit 3, and every record acknowledged (exit 0) before must stay intact;
#   - read-only state dir (read-only bind mount): writes fail clearly, reads still work;
#   - unreadable records (a directory in place of a record, a record of another uid):
#     verify fails closed (deny, exit 1, the reason named), writes fail with exit 3;
#   - interrupted system calls: many concurrent record-pulled/verify runs stopped, continued
#     and hit by harmless signals (test/integration/fault_signals.py); nothing acknowledged is lost.
# Needs root (mount). Each step checks its outcome; any deviation fails the test.
set -euo pipefail

CTL=${PULLGATECTL:?PULLGATECTL must name the pullgatectl binary}
HERE=$(cd "$(dirname "$0")" && pwd)

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: needs root to mount a tmpfs and a read-only bind mount"
    exit 77
fi

WORK=$(mktemp -d /tmp/pg-faults.XXXXXX)
MOUNTS=()
cleanup() {
    local m
    for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
        m=${MOUNTS[$i]}
        mountpoint -q "$m" && umount -l "$m" || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

HASH=$(printf 'a%.0s' $(seq 64))
ref_of() { printf 'sha256:%064d' "$1"; }
image_of() { echo "registry.example.com/team-a/app$1:1.0"; }
name_of() { echo "registry.example.com/team-a/app$1"; }
creds_for() { # index, secret name
    printf '{"%s":{"kubernetesSecrets":[{"namespace":"team-a","name":"%s","uid":"uid-%s"}]}}' \
        "$(name_of "$1")" "$2" "$2"
}
ctl() { "$CTL" --dbus none "$@"; }

# expect_status WANT DESCRIPTION -- command...: runs it, keeps stdout/stderr in $OUT/$ERR.
expect_status() {
    local want=$1 what=$2 rc=0
    shift 3
    OUT=$("$@" 2>"$WORK/stderr") || rc=$?
    ERR=$(cat "$WORK/stderr")
    if [ "$rc" -ne "$want" ]; then
        fail "$what: exit $rc, expected $want (stdout: $OUT; stderr: $ERR)"
        return 1
    fi
    return 0
}

# verify_allows STATE INDEX SECRET: the acknowledged record still authorises its secret.
verify_allows() {
    expect_status 0 "verify app$2 with $3" -- ctl --state-dir "$1" --policy AlwaysVerify verify \
        --image "$(image_of "$2")" --image-ref "$(ref_of "$2")" --namespace team-a \
        --credentials "$(creds_for "$2" "$3")"
}

no_tmp_files() {
    local left
    left=$(find "$1" -name '*.tmp' | wc -l)
    [ "$left" -eq 0 ] || fail "$left temporary file(s) left in $1: $(find "$1" -name '*.tmp')"
}

# ------------------------------------------------------------ full disk

test_full_disk() {
    local mnt=$WORK/full st
    mkdir -p "$mnt"
    mount -t tmpfs -o size=256k,mode=0700 pg-faults "$mnt"
    MOUNTS+=("$mnt")
    st=$mnt/state
    local acknowledged=()
    for i in 1 2 3 4 5; do
        expect_status 0 "record app$i" -- ctl --state-dir "$st" record-pulled \
            --image "$(image_of "$i")" --image-ref "$(ref_of "$i")" \
            --secret "team-a/s$i/uid-s$i:$HASH" && acknowledged+=("$i:s$i")
    done
    # Fill every page; dd stops at ENOSPC.
    dd if=/dev/zero of="$mnt/filler" bs=4k status=none 2>/dev/null || true
    [ "$(df --output=avail -k "$mnt" | tail -1 | tr -d ' ')" -eq 0 ] || fail "tmpfs not full"

    # A new record and a merge into an existing one (which must keep its old content).
    for case in "6 s6" "1 late"; do
        set -- $case
        if expect_status 3 "record-pulled app$1 on a full disk" -- ctl --state-dir "$st" \
            record-pulled --image "$(image_of "$1")" --image-ref "$(ref_of "$1")" \
            --secret "team-a/$2/uid-$2:"; then
            grep -q "No space left on device" <<<"$ERR" &&
                pass "full disk: app$1 refused with: $ERR" ||
                fail "full disk: error does not say why: $ERR"
        fi
    done
    for entry in "${acknowledged[@]}"; do
        verify_allows "$st" "${entry%%:*}" "${entry#*:}" || true
    done
    # The refused merge must not have slipped in.
    expect_status 1 "refused merge is absent" -- ctl --state-dir "$st" --policy AlwaysVerify \
        verify --image "$(image_of 1)" --image-ref "$(ref_of 1)" --namespace team-a \
        --credentials "$(creds_for 1 late)" || true
    # The refused new record fails closed.
    if expect_status 1 "verify app6 (never recorded)" -- ctl --state-dir "$st" \
        --policy AlwaysVerify verify --image "$(image_of 6)" --image-ref "$(ref_of 6)" \
        --namespace team-a --credentials "$(creds_for 6 s6)"; then
        grep -q "^deny: no pull record" <<<"$OUT" && pass "full disk: app6 denied: $OUT" ||
            fail "app6: unexpected reason: $OUT"
    fi
    # Every file in the directory is still a valid record (list reports bad ones on stderr).
    expect_status 0 "list after ENOSPC" -- ctl --state-dir "$st" list --json || true
    [ -z "$ERR" ] || fail "list reported problems: $ERR"
    local n
    n=$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' <<<"$OUT")
    [ "$n" -eq 5 ] || fail "list shows $n records, expected 5"
    no_tmp_files "$st"
    # Space back: writing works again.
    rm -f "$mnt/filler"
    expect_status 0 "record after freeing space" -- ctl --state-dir "$st" record-pulled \
        --image "$(image_of 6)" --image-ref "$(ref_of 6)" --secret "team-a/s6/uid-s6:" &&
        verify_allows "$st" 6 s6 && pass "full disk: recovers once space is free"
    umount "$mnt"
}

# -------------------------------------------------------- read-only dir

test_read_only() {
    local st=$WORK/ro-state ro=$WORK/ro-view
    expect_status 0 "record before remount" -- ctl --state-dir "$st" record-pulled \
        --image "$(image_of 1)" --image-ref "$(ref_of 1)" --secret "team-a/s1/uid-s1:$HASH" ||
        return 0
    mkdir -p "$ro"
    mount --bind "$st" "$ro"
    MOUNTS+=("$ro")
    mount -o remount,bind,ro "$ro"
    for cmd in "record-pulled --image $(image_of 2) --image-ref $(ref_of 2)" \
        "record-intent --image $(image_of 2)" "record-failed --image $(image_of 2)"; do
        # shellcheck disable=SC2086
        if expect_status 3 "read-only: ${cmd%% *}" -- ctl --state-dir "$ro" $cmd; then
            grep -q "Read-only file system" <<<"$ERR" &&
                pass "read-only: ${cmd%% *} refused with: $ERR" ||
                fail "read-only: ${cmd%% *}: error does not say why: $ERR"
        fi
    done
    verify_allows "$ro" 1 s1 && pass "read-only: existing record still verifies"
    if expect_status 1 "read-only: unrecorded image" -- ctl --state-dir "$ro" \
        --policy AlwaysVerify verify --image "$(image_of 2)" --image-ref "$(ref_of 2)" \
        --namespace team-a --credentials "$(creds_for 2 s2)"; then
        pass "read-only: unrecorded image denied: $OUT"
    fi
    umount "$ro"
}

# --------------------------------------------------- unreadable records

record_path() { # state index
    printf '%s/pulled/sha256-%s' "$1" "$(printf '%s' "$(ref_of "$2")" | sha256sum | cut -c1-64)"
}

expect_closed_deny() { # state index secret pattern description
    if expect_status 1 "$5" -- ctl --state-dir "$1" --policy AlwaysVerify verify \
        --image "$(image_of "$2")" --image-ref "$(ref_of "$2")" --namespace team-a \
        --credentials "$(creds_for "$2" "$3")"; then
        grep -Eq "^deny: pull record store error \(failing closed\): .*$4" <<<"$OUT" &&
            pass "$5: $OUT" || fail "$5: reason does not name the problem: $OUT"
    fi
}

test_unreadable_records() {
    local st=$WORK/unreadable
    for i in 1 2; do
        expect_status 0 "record app$i" -- ctl --state-dir "$st" record-pulled \
            --image "$(image_of "$i")" --image-ref "$(ref_of "$i")" \
            --secret "team-a/s$i/uid-s$i:$HASH" || return 0
    done
    # A directory in place of the record of app3 (root bypasses chmod 000, not this).
    mkdir "$(record_path "$st" 3)"
    expect_closed_deny "$st" 3 s3 "not a regular file" "directory as record"
    if expect_status 3 "record-pulled over a directory" -- ctl --state-dir "$st" record-pulled \
        --image "$(image_of 3)" --image-ref "$(ref_of 3)" --secret "team-a/s3/uid-s3:"; then
        grep -q "not a regular file\|Is a directory" <<<"$ERR" &&
            pass "record-pulled over a directory refused: $ERR" ||
            fail "record-pulled over a directory: unclear error: $ERR"
    fi
    # A valid record that now belongs to another user.
    chown 4242:4242 "$(record_path "$st" 2)"
    expect_closed_deny "$st" 2 s2 "owned by uid 4242" "record of another uid"
    # The other record is unaffected.
    verify_allows "$st" 1 s1 && pass "unaffected record still verifies"
}

# ------------------------------------------------- interrupted syscalls

test_signals() {
    local st=$WORK/signals
    if python3 "$HERE/fault_signals.py" --ctl "$CTL" --state-dir "$st" \
        --processes "${FAULT_PROCESSES:-600}" --parallel 24; then
        pass "signals: no acknowledged write lost, no wrong decision"
    else
        fail "signals: see above"
    fi
    no_tmp_files "$st"
}

test_full_disk
test_read_only
test_unreadable_records
test_signals

if [ "$failures" -ne 0 ]; then
    echo "test_faults: $failures failure(s)"
    exit 1
fi
echo "test_faults: all fault cases handled"
