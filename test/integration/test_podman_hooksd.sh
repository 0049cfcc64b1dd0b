#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# End to end, the CRI-O hooks.d path played by podman + runc:
#   private registry with authentication, private image pushed; tenant A pulls it with
#   its credentials and the pull is recorded (as CRI-O + kubelet would); then
#   - tenant A's container (right credentials annotation) runs;
#   - tenant B's containers are refused, with the reason in podman's error:
#       (1) no credentials annotation, (2) wrong credentials (hash of another password),
#       (3) tenant A's annotation copied into namespace team-b;
#   - a preloaded image (pulled without a record) runs under NeverVerifyPreloadedImages
#     and is refused under AlwaysVerify.
# Env (from ctest): PULLGATE_HOOK, PULLGATECTL.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/registry.sh
source "$HERE/lib/registry.sh"
# shellcheck source=lib/podman.sh
source "$HERE/lib/podman.sh"

T0=$SECONDS
pg_require_root
pg_require_cmd podman runc conmon docker-registry htpasswd skopeo umoci
pg_require_pullgate

pg_section "registry with authentication + private images"
PASS_A="tenant-a-pw-$RANDOM$RANDOM"
pg_registry_start tenant-a "$PASS_A"
pg_registry_setup_images

pg_section "isolated podman store"
pg_podman_init

STATE="$(pg_mktemp_dir state)"
chmod 0700 "$STATE"
CFG_PRELOADED="$PG_TMPDIR/config-preloaded.json"
CFG_ALWAYS="$PG_TMPDIR/config-always.json"
pg_write_config "$CFG_PRELOADED" "$STATE" NeverVerifyPreloadedImages none
pg_write_config "$CFG_ALWAYS" "$STATE" AlwaysVerify none
for c in "$CFG_PRELOADED" "$CFG_ALWAYS"; do
    if ! "$PULLGATECTL" --config "$c" check-config >"$PG_TMPDIR/check.out" 2>&1; then
        cat "$PG_TMPDIR/check.out" >&2
        pg_fail "pullgatectl check-config rejects $c"
    fi
done
HOOKS_PRELOADED="$(pg_podman_hooks_dir "$CFG_PRELOADED")"
HOOKS_ALWAYS="$(pg_podman_hooks_dir "$CFG_ALWAYS")"

pg_section "pulls"
# The anonymous pull must fail: the image really is private.
pg_expect_fail "anonymous pull of the private image is refused by the registry" \
    pg_podman_pull --quiet --tls-verify=false "$PG_IMG_APP"
UID_A="$(cat /proc/sys/kernel/random/uuid)"
pg_podman_pull_and_record "$STATE" "$PG_IMG_APP" team-a tenant-a "$PASS_A" regcred "$UID_A"
HASH_A="$PG_PULLED_HASH"
APP_ID="$PG_PULLED_ID"
# Preloaded: on the node before pullgate saw anything (pulled, not recorded).
pg_podman_pull --quiet --creds "tenant-a:$PASS_A" --tls-verify=false "$PG_IMG_PRELOADED" >/dev/null ||
    pg_fail "pull of the preloaded image failed"
pg_podman_probe_run "$PG_IMG_PRELOADED"
"$PULLGATECTL" --state-dir "$STATE" list >&2 || pg_check_fail "pullgatectl list failed"

CREDS_A="$(pg_creds_json "$PG_IMG_APP" team-a regcred "$UID_A" "$HASH_A")"
HASH_WRONG="$(pg_cred_hash tenant-a "not-the-password-$RANDOM")"
UID_B="$(cat /proc/sys/kernel/random/uuid)"
CREDS_B_WRONG="$(pg_creds_json "$PG_IMG_APP" team-b regcred "$UID_B" "$HASH_WRONG")"
pg_log "tenant A annotation: $CREDS_A"

# Cross-check with the CLI before going through the runtime.
pg_expect_ok "pullgatectl verify allows tenant A" \
    "$PULLGATECTL" --config "$CFG_PRELOADED" verify --image "$PG_IMG_APP" --image-ref "$APP_ID" \
    --namespace team-a --credentials "$CREDS_A"
pg_expect_fail "pullgatectl verify denies tenant B without credentials" \
    "$PULLGATECTL" --config "$CFG_PRELOADED" verify --image "$PG_IMG_APP" --image-ref "$APP_ID" \
    --namespace team-b

# expect_denied DESC NS CREDS IMAGE
expect_denied() {
    local desc="$1" ns="$2"
    if pg_expect_fail "$desc" pg_podman_run_as_tenant "$ns" "$3" "$4" echo SHOULD-NOT-RUN; then
        pg_expect_contains "$desc: the hook's reason is in podman's error" "$PG_OUT" "pullgate: denied"
        pg_expect_contains "$desc: the reason names namespace $ns" "$PG_OUT" "namespace $ns"
        [[ "$PG_OUT" != *SHOULD-NOT-RUN* ]] || pg_check_fail "$desc: the container process ran"
        printf '%s\n' "$PG_OUT" | grep -o 'pullgate: denied.*' | head -n1 | sed 's/^/       reason: /' >&2
    fi
}

pg_section "policy NeverVerifyPreloadedImages"
PG_HOOKS_DIR="$HOOKS_PRELOADED"
MARK="tenant-a-ran-$RANDOM"
if pg_expect_ok "tenant A's container (namespace team-a, its credentials) runs" \
    pg_podman_run_as_tenant team-a "$CREDS_A" "$PG_IMG_APP" echo "$MARK"; then
    pg_expect_contains "tenant A's container printed its marker" "$PG_OUT" "$MARK"
fi
pg_expect_ok "tenant A's container runs the image's default command" \
    pg_podman_run_as_tenant team-a "$CREDS_A" "$PG_IMG_APP" &&
    pg_expect_contains "default command output" "$PG_OUT" "pullgate-app-marker"

expect_denied "tenant B (1) without a credentials annotation is refused" team-b "" "$PG_IMG_APP"
expect_denied "tenant B (2) with wrong credentials is refused" team-b "$CREDS_B_WRONG" "$PG_IMG_APP"
expect_denied "tenant B (3) with tenant A's annotation copied is refused" team-b "$CREDS_A" "$PG_IMG_APP"

if pg_expect_ok "preloaded image (no record) runs under NeverVerifyPreloadedImages" \
    pg_podman_run_as_tenant team-b "" "$PG_IMG_PRELOADED"; then
    pg_expect_contains "preloaded image output" "$PG_OUT" "pullgate-preloaded-marker"
fi

pg_section "policy AlwaysVerify"
PG_HOOKS_DIR="$HOOKS_ALWAYS"
expect_denied "preloaded image (no record) is refused under AlwaysVerify" team-b "" "$PG_IMG_PRELOADED"
pg_expect_ok "tenant A's container still runs under AlwaysVerify" \
    pg_podman_run_as_tenant team-a "$CREDS_A" "$PG_IMG_APP" echo "$MARK" &&
    pg_expect_contains "tenant A's marker under AlwaysVerify" "$PG_OUT" "$MARK"
expect_denied "tenant B without credentials is refused under AlwaysVerify" team-b "" "$PG_IMG_APP"

pg_log "elapsed: $((SECONDS - T0)) s"
pg_summary
