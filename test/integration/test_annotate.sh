#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Namespace-bound annotations end to end (docs/annotation-hmac.md):
#   pullgatectl annotate (signed) -> verify allows in its namespace; the same annotation in
#   another namespace, verbatim or with its namespace fields rewritten, is denied with the
#   annotation-signature reason; an unsigned annotation is denied once hmacKeyFile is set and
#   allowed without it; the same through pullgate-hook with synthetic CRI-O bundles.
set -euo pipefail

: "${PULLGATECTL:?PULLGATECTL must name the pullgatectl binary}"
: "${PULLGATE_HOOK:?PULLGATE_HOOK must name the pullgate-hook binary}"
HERE=$(cd "$(dirname "$0")" && pwd)

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: the HMAC key and the records must be root-owned as on a node; run as root"
    exit 77
fi

WORK=$(mktemp -d /tmp/pg-annotate.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# shellcheck source=lib/hardening.sh
. "$HERE/lib/hardening.sh"

STATE=$WORK/state
KEY=$WORK/annotation.key
CONFIG=$WORK/config.json
NOKEY_CONFIG=$WORK/config-nokey.json
head -c 32 /dev/urandom >"$KEY"
chmod 0400 "$KEY"
hook_config "$CONFIG" "$STATE" "\"hmacKeyFile\":\"$KEY\""
hook_config "$NOKEY_CONFIG" "$STATE"
CTL=("$PULLGATECTL" --dbus none)

run_status 0 "record the pull" -- "${CTL[@]}" --config "$CONFIG" record-pulled \
    --image "$(image_of 1)" --image-ref "$(ref_of 1)" --secret "team-a/regcred/uid-a:$HASH_A"

# ------------------------------------------------------------ annotate
run_status 0 "annotate (signed)" -- "${CTL[@]}" annotate --namespace team-a \
    --image "$(image_of 1)" --secret "team-a/regcred/uid-a:$HASH_A" --hmac-key-file "$KEY"
SIGNED=$OUT
grep -Eq '"hmac":"[0-9a-f]{64}"' <<<"$SIGNED" && pass "annotate prints a MAC: $SIGNED" ||
    fail "annotate printed no MAC: $SIGNED"
run_status 0 "annotate (unsigned)" -- "${CTL[@]}" annotate --namespace team-a \
    --image "$(image_of 1)" --secret "team-a/regcred/uid-a:$HASH_A"
UNSIGNED=$OUT
grep -q hmac <<<"$UNSIGNED" && fail "unsigned annotation has a MAC: $UNSIGNED"
# The key file rules apply to the producer too.
chmod 0644 "$KEY"
run_status 3 "annotate with a world-readable key" -- "${CTL[@]}" annotate --namespace team-a \
    --image "$(image_of 1)" --hmac-key-file "$KEY" && pass "world-readable key refused: $ERR"
chmod 0400 "$KEY"
run_status 2 "annotate with a foreign-namespace secret" -- "${CTL[@]}" annotate \
    --namespace team-a --image "$(image_of 1)" --secret "team-b/x/y:" --hmac-key-file "$KEY" &&
    pass "foreign-namespace credential refused"
# An attacker's copy for team-b: namespace fields rewritten, MAC kept.
REPLAYED=${SIGNED//\"team-a\"/\"team-b\"}

# verify_expect CONFIG NAMESPACE CREDENTIALS WANT(allow|deny) [REASON] DESCRIPTION
verify_expect() {
    local cfg=$1 ns=$2 creds=$3 want=$4 reason=$5 what=$6 status=0
    [ "$want" = allow ] || status=1
    run_status "$status" "$what" -- "${CTL[@]}" --config "$cfg" verify --json \
        --image "$(image_of 1)" --image-ref "$(ref_of 1)" --namespace "$ns" \
        --credentials "$creds" || return 0
    if [ -n "$reason" ] && ! grep -q "\"reason\": *\"$reason\"" <<<"$OUT"; then
        fail "$what: reason is not $reason: $OUT"
        return 0
    fi
    pass "$what: $OUT"
}

verify_expect "$CONFIG" team-a "$SIGNED" allow secret-match "signed, own namespace"
verify_expect "$CONFIG" team-b "$SIGNED" deny "" "signed, copied verbatim to team-b"
verify_expect "$CONFIG" team-b "$REPLAYED" deny annotation-signature \
    "signed, replayed into team-b with namespaces rewritten"
verify_expect "$CONFIG" team-a "$UNSIGNED" deny annotation-signature "unsigned, key configured"
verify_expect "$NOKEY_CONFIG" team-a "$UNSIGNED" allow secret-match "unsigned, no key"
verify_expect "$NOKEY_CONFIG" team-a "$SIGNED" allow secret-match "signed, no key (hmac ignored)"
# Without the key the replay works: the attack this feature closes.
verify_expect "$NOKEY_CONFIG" team-b "$REPLAYED" allow "" "replay without a key (the attack)"

# ---------------------------------------------------------------- hook
hook_expect() { # config namespace credentials want(allow|deny) pattern description
    local bundle=$WORK/bundle-$RANDOM$RANDOM
    crio_bundle "$bundle" "$2" "$(image_of 1)" "$(ref_hex 1)" "$3"
    run_hook "$1" "$bundle" "ctr-${bundle##*-}"
    if [ "$4" = allow ]; then
        [ "$STATUS" -eq 0 ] && pass "hook: $6" || fail "hook: $6: exit $STATUS: $ERR"
    elif [ "$STATUS" -ne 0 ] && grep -Eq "^pullgate: denied container ctr-[0-9]+ \(namespace $2, .*$5" \
        <<<"$ERR"; then
        pass "hook: $6: $ERR"
    else
        fail "hook: $6: expected a denial matching /$5/, got exit $STATUS: $ERR"
    fi
}

hook_expect "$CONFIG" team-a "$SIGNED" allow "" "signed annotation, own namespace"
hook_expect "$CONFIG" team-b "$REPLAYED" deny "does not verify|signature" \
    "replayed annotation in team-b"
hook_expect "$CONFIG" team-a "$UNSIGNED" deny "signature|hmac" "unsigned annotation"
hook_expect "$NOKEY_CONFIG" team-a "$UNSIGNED" allow "" "unsigned annotation without a key"

finish test_annotate
