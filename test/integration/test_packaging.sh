#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packaging end to end (needs root; changes the machine and restores it):
#   1. builds the .debs of the current tree (packaging/build-deb.sh) and installs them;
#   2. checks the installed paths, the library SONAME link, pkg-config and a program built
#      against libpullgate-dev, the tmpfiles directory, check-config of the packaged config;
#   3. runs podman WITHOUT --hooks-dir (so its default /usr/share/containers/oci/hooks.d, where
#      the package put pullgate.json) on a locally built busybox image, playing CRI-O with
#      annotations: under AlwaysVerify (set by editing /etc/pullgate/config.json) the installed
#      hook denies a container without credentials and allows it with the right ones;
#   4. reinstalls the same .deb: the edited conffile survives;
#   4b. a containerd node through its lifecycle, running the documented command blocks as
#      written: containerd 1.6 as the node's service with a configuration of its own, a
#      registry with htpasswd auth, the packaged pullgate-cri in a mount namespace of its own
#      (as its unit runs it); the README's five installation commands (install.md's, the same
#      text): the package, `pullgatectl wire`, pullgate-cri, the kubelet's image service (its
#      configuration file; no kubelet runs), doctor exiting 0 (a tenant's container runs, one
#      without credentials is denied, a second wire changes nothing, doctor and
#      pullgate-still-wired name containerd's configuration unasked); then lifecycle.md's: roll
#      back to the previous release's .deb (built here from packaging/previous-release's commit)
#      with a configuration that spells every key of this release (containers still start, this
#      release's records are read); upgrade from it (its records are read); uninstall
#      (containers start without pullgate);
#   5. removes pullgate from a node wired as docs/lifecycle.md describes (a containerd config
#      whose base spec runs the hook, a hooks.d entry, the kubelet at pullgate-cri): the prerm
#      warns about each and a container from the base spec left behind fails; then, after the
#      documented procedure, the check is silent, the removal warns about nothing and a
#      container starts (runc with a bundle built from containerd's configuration, as containerd
#      builds one, and podman with its default hooks directories);
#   6. purges: everything is gone except /var/lib/pullgate (the records);
#   7. builds the RPMs (packaging/build-rpm.sh) and compares `rpm -qlp` with the expected list;
#      the plain Prometheus rules file of both packages passes `promtool check rules`.
# Exit 77 (skip) when a tool is missing, or when pullgate is already installed on this machine
# (the test would overwrite and purge an administrator's installation).
# PG_SKIP_PACKAGING=1 skips it; PG_PACKAGING_SKIP_PODMAN=1 skips step 3 only.
set -uo pipefail

# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/podman.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/podman.sh"
# shellcheck source=lib/registry.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/registry.sh"
# shellcheck source=lib/cri_node.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cri_node.sh"
# shellcheck source=../../packaging/stage-tree.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../packaging/stage-tree.sh"

[[ "${PG_SKIP_PACKAGING:-0}" != 1 ]] || pg_skip "PG_SKIP_PACKAGING=1"
pg_require_root
command -v dpkg-buildpackage >/dev/null 2>&1 || pg_skip "dpkg-buildpackage not installed (apt-get install dpkg-dev debhelper)"
command -v rpmbuild >/dev/null 2>&1 || pg_skip "rpmbuild not installed (apt-get install rpm)"
pg_require_cmd dh dpkg dpkg-deb pkg-config cc python3
for p in pullgate libpullgate1 libpullgate-dev; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed\|config-files'; then
        pg_skip "package $p is already on this machine; not overwriting it"
    fi
done
[[ ! -e /etc/pullgate ]] || pg_skip "/etc/pullgate exists without the package; not touching it"

SRC="$PG_SOURCE_DIR"
WORK="$(pg_mktemp_dir pkg)"
V="$(pg_project_version "$SRC")"
read -r PREV_V PREV_COMMIT < <(grep -v '^#' "$SRC/packaging/previous-release")
MULTIARCH="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"
STATE_EXISTED=0
[[ -e /var/lib/pullgate ]] && STATE_EXISTED=1

# Whatever happens, leave the machine as it was: purge our packages, and remove
# /var/lib/pullgate only if this test created it.
pg__pkg_cleanup() {
    local p
    for p in libpullgate-dev pullgate libpullgate1; do
        if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'installed\|config-files'; then
            dpkg -P "$p" >/dev/null 2>&1
        fi
    done
    if [[ "$STATE_EXISTED" == 0 ]]; then
        rm -rf /var/lib/pullgate
    fi
    rm -rf /etc/pullgate
}
pg_on_exit pg__pkg_cleanup

# -------------------------------------------------------------- 1. build
# The .rpm is built in the background meanwhile (its own copy of the tree and temp dirs; it
# reads nothing the .deb steps change): the two builds' single-threaded steps (packing,
# lintian, rpmlint) overlap. Section 7 waits for it.
bash "$SRC/packaging/build-rpm.sh" "$WORK/rpm" >"$WORK/build-rpm.log" 2>&1 &
RPM_BUILD_PID=$!
pg_on_exit "kill $RPM_BUILD_PID; wait $RPM_BUILD_PID"
# The previous release's .deb, for the upgrade and the rollback (4b), from git history.
OLD_BUILD_PID=""
if git -C "$SRC" cat-file -e "$PREV_COMMIT^{commit}" 2>/dev/null; then
    mkdir -p "$WORK/old-src"
    git -C "$SRC" archive "$PREV_COMMIT" | tar -x -C "$WORK/old-src"
    # Only installed and run here, never linted: unoptimised, no stripping, no debug symbol
    # packages.
    DEB_BUILD_OPTIONS="nocheck noopt nostrip noautodbgsym" \
        bash "$WORK/old-src/packaging/build-deb.sh" "$WORK/old-deb" >"$WORK/build-old-deb.log" 2>&1 &
    OLD_BUILD_PID=$!
    pg_on_exit "kill $OLD_BUILD_PID 2>/dev/null; wait $OLD_BUILD_PID 2>/dev/null"
else
    pg_log "NOT RUN: upgrade from and rollback to $PREV_V: its commit $PREV_COMMIT is not in this clone (a shallow clone? git fetch --unshallow)"
fi
T_BUILD=$SECONDS
pg_section "build the .debs"
# make -j2: every later step waits for these .debs; the two builds beside them wait for nothing.
if ! DEB_BUILD_OPTIONS="nocheck parallel=2" bash "$SRC/packaging/build-deb.sh" "$WORK/deb" \
    >"$WORK/build-deb.log" 2>&1; then
    tail -40 "$WORK/build-deb.log" >&2
    pg_fail "packaging/build-deb.sh failed"
fi
pg_check_ok "dpkg-buildpackage -us -uc -b"
deb() { ls "$WORK"/deb/"$1"_*.deb 2>/dev/null | head -n 1; }
for p in pullgate libpullgate1 libpullgate-dev; do
    [[ -n "$(deb "$p")" ]] || pg_fail "no $p .deb was built"
done
if command -v lintian >/dev/null 2>&1; then
    lint="$(lintian --fail-on error,warning "$WORK"/deb/*.changes 2>&1)"
    rc=$?
    if ((rc == 0)); then pg_check_ok "lintian: no errors or warnings"; else
        pg_check_fail "lintian reports problems"
        printf '%s\n' "$lint" | sed 's/^/       | /' >&2
    fi
fi

pg_log "the .debs took $((SECONDS - T_BUILD)) s to build"
# The shipped rules file, as the package holds it: promtool takes it as it is.
mkdir -p "$WORK/deb-x"
dpkg-deb -x "$(deb pullgate)" "$WORK/deb-x"
pg_expect_ok ".deb: promtool check rules usr/share/pullgate/prometheus/pullgate-rules.yml" \
    promtool check rules "$WORK/deb-x/usr/share/pullgate/prometheus/pullgate-rules.yml"
for f in grafana/pullgate-dashboard.json kubernetes/make-certs.sh; do
    [[ -s "$WORK/deb-x/usr/share/pullgate/$f" ]] && pg_check_ok ".deb holds usr/share/pullgate/$f" ||
        pg_check_fail ".deb lacks usr/share/pullgate/$f"
done

# ------------------------------------------------------------ 2. install
pg_section "install and check paths"
pg_expect_ok "dpkg -i pullgate libpullgate1 libpullgate-dev" \
    dpkg -i "$(deb libpullgate1)" "$(deb pullgate)" "$(deb libpullgate-dev)"

HOOK=/usr/libexec/oci/hooks.d/pullgate-hook
HOOK_JSON=/usr/share/containers/oci/hooks.d/pullgate.json
CONFIG=/etc/pullgate/config.json
LIBDIR=/usr/lib/$MULTIARCH
INSTALLED=(
    "$HOOK" "$HOOK_JSON" "$CONFIG" /usr/bin/pullgatectl /usr/bin/pullgate-cri
    /usr/libexec/oci/hooks.d/pullgate-hook-local
    /usr/bin/pullgate-webhook /usr/share/man/man8/pullgate-webhook.8.gz
    /lib/systemd/system/pullgate-cri.service /usr/share/man/man8/pullgate-cri.8.gz
    /usr/libexec/pullgate/pullgate-prune /usr/libexec/pullgate/pullgate-doctor
    /usr/libexec/pullgate/pullgate-still-wired /usr/lib/tmpfiles.d/pullgate.conf
    /usr/libexec/pullgate/pullgate-wire /usr/libexec/pullgate/pullgate-config-rollback
    /usr/share/pullgate/prometheus/pullgate-rules.yml /usr/share/pullgate/prometheus/prometheus-rules.yaml
    /usr/share/pullgate/grafana/pullgate-dashboard.json /usr/share/pullgate/kubernetes/make-certs.sh
    /usr/share/pullgate/kubernetes/mutatingwebhook.yaml.in
    /lib/systemd/system/pullgate-prune.service /lib/systemd/system/pullgate-prune.timer
    /usr/share/man/man8/pullgatectl.8.gz /usr/share/man/man8/pullgate-hook.8.gz
    /usr/share/man/man5/pullgate.json.5.gz
    /usr/share/dbus-1/interfaces/dev.pullgate.PullGate1.xml
    "$LIBDIR/libpullgate.so.$V" "$LIBDIR/libpullgate.so.1" "$LIBDIR/libpullgate.so"
    /usr/include/pullgate/pullgate.h /usr/include/pullgate/version.h "$LIBDIR/pkgconfig/pullgate.pc"
    "$LIBDIR/cmake/Pullgate/PullgateConfig.cmake"
    # the docs the man pages, README.Debian and hooks/containerd's README send you to, uncompressed
    /usr/share/doc/pullgate/design.md /usr/share/doc/pullgate/kubelet-setup.md
    /usr/share/doc/pullgate/lifecycle.md /usr/share/doc/pullgate/logging.md
    /usr/share/doc/pullgate/install.md /usr/share/doc/pullgate/webhook.md
    /usr/share/doc/pullgate/metrics.md /usr/share/doc/pullgate/doctor.schema.json
    /usr/share/doc/pullgate/annotation-hmac.md /usr/share/doc/pullgate/annotation-producer.md
    /usr/share/doc/pullgate/examples/containerd/README.md
    /usr/share/doc/pullgate/examples/containerd/config.toml.snippet
    /usr/share/doc/pullgate/examples/containerd/base-runtime-spec.json.example
    /usr/share/doc/pullgate/examples/crio.conf.d/10-pullgate.conf
)
for f in "${INSTALLED[@]}"; do
    if [[ -e "$f" ]]; then pg_check_ok "installed: $f"; else pg_check_fail "missing: $f"; fi
done
[[ -x "$HOOK" ]] && pg_check_ok "hook is executable" || pg_check_fail "hook not executable"
if ldd /usr/bin/pullgate-cri 2>&1 | grep -q 'not found'; then
    pg_check_fail "pullgate-cri: libraries not found: $(ldd /usr/bin/pullgate-cri 2>&1 | grep 'not found' | xargs)"
else
    pg_check_ok "pullgate-cri: every library it links is installed (package dependencies)"
fi
if ldd /usr/bin/pullgate-webhook 2>&1 | grep -q 'not found'; then
    pg_check_fail "pullgate-webhook: libraries not found: $(ldd /usr/bin/pullgate-webhook 2>&1 | grep 'not found' | xargs)"
elif /usr/bin/pullgate-webhook --version | grep -q '^pullgate-webhook '; then
    pg_check_ok "pullgate-webhook: its libraries are installed and it runs"
else
    pg_check_fail "pullgate-webhook --version: $(/usr/bin/pullgate-webhook --version 2>&1)"
fi
grep -qx 'ExecStart=/usr/bin/pullgate-cri' /lib/systemd/system/pullgate-cri.service &&
    pg_check_ok "pullgate-cri.service runs /usr/bin/pullgate-cri" ||
    pg_check_fail "pullgate-cri.service: $(grep ExecStart /lib/systemd/system/pullgate-cri.service)"
if [[ "$(readlink "$LIBDIR/libpullgate.so.1")" == "libpullgate.so.$V" ]]; then
    pg_check_ok "SONAME link libpullgate.so.1 -> libpullgate.so.$V"
else
    pg_check_fail "libpullgate.so.1 -> '$(readlink "$LIBDIR/libpullgate.so.1")'"
fi
soname="$(objdump -p "$LIBDIR/libpullgate.so.$V" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')"
[[ "$soname" == libpullgate.so.1 ]] && pg_check_ok "SONAME is libpullgate.so.1" ||
    pg_check_fail "SONAME is '$soname'"
hook_path="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hook"]["path"])' "$HOOK_JSON")"
[[ "$hook_path" == "$HOOK" ]] && pg_check_ok "hooks.d JSON names $HOOK" ||
    pg_check_fail "hooks.d JSON names '$hook_path'"
pg_expect_ok "packaged config passes check-config" pullgatectl --config "$CONFIG" check-config
pg_expect_ok "pkg-config --modversion pullgate" pkg-config --modversion pullgate
[[ "$PG_OUT" == "$V" ]] && pg_check_ok "pkg-config version $V" || pg_check_fail "pkg-config says '$PG_OUT'"
[[ -x /usr/share/pullgate/kubernetes/make-certs.sh ]] && pg_check_ok "make-certs.sh is executable" ||
    pg_check_fail "/usr/share/pullgate/kubernetes/make-certs.sh is not executable"
for b in pullgatectl pullgate-cri pullgate-webhook /usr/libexec/oci/hooks.d/pullgate-hook \
    /usr/libexec/oci/hooks.d/pullgate-hook-local /usr/libexec/pullgate/pullgate-doctor \
    /usr/libexec/pullgate/pullgate-wire /usr/libexec/pullgate/pullgate-config-rollback; do
    got="$("$b" --version 2>&1 | head -n1 | awk '{print $2}')"
    [[ "$got" == "$V" ]] && pg_check_ok "$b --version: $V" || pg_check_fail "$b --version says '$got', not $V"
done
[[ "$(dpkg-query -W -f='${Version}' pullgate)" == "$V-1" ]] && pg_check_ok "the package is $V-1" ||
    pg_check_fail "the package is $(dpkg-query -W -f='${Version}' pullgate), not $V-1"
cat >"$WORK/ver.c" <<'EOF'
#include <pullgate/pullgate.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    char h[PG_HASH_HEX_LEN + 1];
    if (pg_credential_hash("user", "pass", NULL, h, NULL) != PG_OK) return 1;
    printf("%s %s\n", pg_version(), h);
    return strcmp(pg_version(), PG_VERSION_STRING) != 0;
}
EOF
# shellcheck disable=SC2046
if cc -o "$WORK/ver" "$WORK/ver.c" $(pkg-config --cflags --libs pullgate) 2>"$WORK/cc.log" &&
    "$WORK/ver" >"$WORK/ver.out"; then
    pg_check_ok "a program built with pkg-config against libpullgate-dev runs: $(cat "$WORK/ver.out")"
else
    pg_check_fail "building/running against libpullgate-dev: $(cat "$WORK/cc.log")"
fi
if [[ -d /var/lib/pullgate && "$(stat -c %a /var/lib/pullgate)" == 700 ]]; then
    pg_check_ok "/var/lib/pullgate exists with mode 0700 (tmpfiles.d)"
else
    pg_check_fail "/var/lib/pullgate missing or not 0700"
fi
for page in pullgatectl pullgate-hook pullgate-cri pullgate-webhook pullgate.json; do
    if man -w "$page" >/dev/null 2>&1; then pg_check_ok "man $page"; else pg_check_fail "man $page not found"; fi
done

# --------------------------------------------- 3. the installed hook, via podman
# Edit the packaged configuration: AlwaysVerify, records in a private directory
# (the machine's /var/lib/pullgate is left alone), no D-Bus.
set_config() { # POLICY
    local state="$WORK/state"
    mkdir -p "$state"
    chmod 0700 "$state"
    python3 - "$CONFIG" "$1" "$state" <<'EOF'
import json, sys
path, policy, state = sys.argv[1:4]
cfg = json.load(open(path))
cfg.update({"policy": policy, "stateDir": state, "readOnlyRecordDirs": [], "dbus": "none"})
with open(path, "w") as f:
    json.dump(cfg, f, indent=2)
    f.write("\n")
EOF
}

if [[ "${PG_PACKAGING_SKIP_PODMAN:-0}" == 1 ]]; then
    pg_log "PG_PACKAGING_SKIP_PODMAN=1: not running podman"
elif ! command -v podman >/dev/null 2>&1 || ! command -v conmon >/dev/null 2>&1 || ! command -v umoci >/dev/null 2>&1 ||
    ! command -v skopeo >/dev/null 2>&1; then
    pg_log "podman/umoci/skopeo missing: skipping the podman part"
else
    pg_section "podman with its default hooks dir runs the installed hook"
    set_config AlwaysVerify
    pg_expect_ok "edited config passes check-config" pullgatectl check-config
    pg_podman_init
    # Podman's own default hooks directories: drop the helper's private hooks_dir.
    sed -i '/^hooks_dir/d' "$CONTAINERS_CONF"
    PG_HOOKS_DIR=""
    IMAGE=localhost/pullgate-pkgtest:1.0
    pg_image_build "$WORK/layout" v1 pkgtest-ok
    pg_image_archive "$WORK/layout" v1 "$WORK/image.tar" "$IMAGE"
    pg_podman load -q -i "$WORK/image.tar" >/dev/null || pg_fail "podman load"
    ID="$(pg_podman_image_id "$IMAGE")" || pg_fail "podman image inspect"
    NS=team-a
    UID_A="$(cat /proc/sys/kernel/random/uuid)"
    export PULLGATECTL=/usr/bin/pullgatectl
    HASH="$(pg_cred_hash alice s3cret)" || pg_fail "pullgatectl hash"
    pullgatectl record-intent --image "$IMAGE" || pg_fail "record-intent"
    pullgatectl record-pulled --image "$IMAGE" --image-ref "$ID" \
        --secret "$NS/regcred/$UID_A:$HASH" || pg_fail "record-pulled"
    if [[ -n "$(ls -A "$WORK/state/pulled" 2>/dev/null)" ]]; then
        pg_check_ok "the pull is recorded in the configured stateDir"
    else
        pg_check_fail "no pulled record in $WORK/state/pulled"
    fi

    pg_expect_fail "AlwaysVerify: container without credentials is denied" \
        pg_podman_run_as_tenant "$NS" "" "$IMAGE"
    pg_expect_contains "denial names pullgate" "$PG_OUT" "pullgate: denied container"
    pg_expect_fail "AlwaysVerify: a team-b pod presenting team-a's secret is denied" \
        pg_podman_run_as_tenant team-b "$(pg_creds_json "$IMAGE" "$NS" regcred "$UID_A" "$HASH")" "$IMAGE"
    WRONG="$(pg_cred_hash alice wrong-password)" || pg_fail "pullgatectl hash"
    pg_expect_fail "AlwaysVerify: other credentials are denied" \
        pg_podman_run_as_tenant "$NS" "$(pg_creds_json "$IMAGE" "$NS" other "$(cat /proc/sys/kernel/random/uuid)" "$WRONG")" "$IMAGE"
    pg_expect_ok "AlwaysVerify: container with the recorded credentials runs" \
        pg_podman_run_as_tenant "$NS" "$(pg_creds_json "$IMAGE" "$NS" regcred "$UID_A" "$HASH")" "$IMAGE"
    pg_expect_contains "container output" "$PG_OUT" "pkgtest-ok"
    pg_expect_ok "non-Kubernetes container (no CRI-O annotations) runs" \
        pg_podman run "${PG_PODMAN_RUN_FLAGS[@]}" "$IMAGE"
fi

# -------------------------------------------------------- 4. conffile
pg_section "reinstall keeps the edited conffile"
set_config AlwaysVerify
python3 - "$CONFIG" <<'EOF'
import json, sys
cfg = json.load(open(sys.argv[1])); cfg["logLevel"] = "debug"
json.dump(cfg, open(sys.argv[1], "w"), indent=2)
EOF
sum_before="$(sha256sum "$CONFIG" | cut -d' ' -f1)"
pg_expect_ok "dpkg -i pullgate again" env DEBIAN_FRONTEND=noninteractive dpkg -i "$(deb pullgate)"
sum_after="$(sha256sum "$CONFIG" 2>/dev/null | cut -d' ' -f1)"
[[ -n "$sum_after" && "$sum_before" == "$sum_after" ]] && pg_check_ok "edited $CONFIG survived" ||
    pg_check_fail "$CONFIG changed by the reinstall"
grep -qx /etc/pullgate/config.json <(dpkg-query -W -f='${Conffiles}\n' pullgate | awk 'NF { print $1 }') &&
    pg_check_ok "$CONFIG is a conffile" || pg_check_fail "$CONFIG is not a conffile"

# -------------------------------- 4b. a containerd node through its lifecycle (lifecycle.md)
# The documented command blocks, run as written: each line of the block marked
# <!-- lifecycle-test: NAME --> (the installation's in README.md, the others in
# docs/lifecycle.md), from the directory holding both releases' .debs. There is no systemd
# here: `systemctl` below plays it for containerd and pullgate-cri (the node's services,
# children of init; pullgate-cri in a mount namespace of its own, as its unit's PrivateTmp= and
# ProtectSystem= give it) and for the kubelet (none runs: its configuration file is checked),
# and pullgate-cri is started again after each package operation, as the package's scripts
# have systemd do on a node.
lifecycle_block() { # NAME [FILE]
    awk -v m="<!-- lifecycle-test: $1 -->" '
        $0 == m { found = 1; next }
        found && /^```/ { if (inside) exit; inside = 1; next }
        inside { print }' "${2:-$SRC/docs/lifecycle.md}"
}
# run_block NAME [LINE_REGEX REASON]: every command line of the block (BLOCK_FILE: the file
# holding it, default lifecycle.md); a line matching LINE_REGEX may fail (REASON says why here).
# BLOCK_OUT gets everything they printed.
run_block() {
    local name="$1" allow="${2:-}" why="${3:-}" line rc n=0
    BLOCK_OUT=""
    pushd "$DEBS" >/dev/null || pg_fail "cd $DEBS"
    while IFS= read -r line; do
        [[ -z "${line//[[:space:]]/}" || "$line" =~ ^[[:space:]]*# ]] && continue
        n=$((n + 1))
        pg_log "[$name] \$ $line"
        eval "$line" </dev/null >"$WORK/block.out" 2>&1
        rc=$?
        sed 's/^/       > /' "$WORK/block.out" >&2
        BLOCK_OUT+="$(cat "$WORK/block.out")"$'\n'
        if ((rc == 0)); then
            pg_check_ok "[$name] $line"
        elif [[ -n "$allow" && "$line" =~ $allow ]]; then
            pg_log "[$name] exit $rc, as expected here: $why"
        else
            pg_check_fail "[$name] exit $rc: $line"
        fi
    done < <(lifecycle_block "$name" "${BLOCK_FILE:-}")
    popd >/dev/null || true
    ((n > 0)) || pg_check_fail "${BLOCK_FILE:-docs/lifecycle.md} has no block '$name'"
}

CRI_PID=""
RUN_PULLGATE_EXISTED=0
[[ -e /run/pullgate ]] && RUN_PULLGATE_EXISTED=1
service_cri_stop() {
    [[ -n "$CRI_PID" ]] && pg_kill_wait "$CRI_PID" 12
    CRI_PID=""
    return 0
}
service_cri_start() { # as pullgate-cri.service: ExecStart=/usr/bin/pullgate-cri, a child of init
    service_cri_stop
    [[ -x /usr/bin/pullgate-cri ]] || { echo "pullgate-cri is not installed" >&2; return 1; }
    CRI_PID="$( (setsid unshare --mount --propagation private /usr/bin/pullgate-cri \
        >>"$WORK/pullgate-cri.log" 2>&1 </dev/null & echo $!) )"
    local i
    for ((i = 0; i < 100; i++)); do
        [[ -S "$PG_PROXY_SOCK" && -S /run/pullgate/hook.sock ]] && cri --timeout 2 version >/dev/null 2>&1 &&
            return 0
        kill -0 "$CRI_PID" 2>/dev/null || break
        sleep 0.1
    done
    tail -n 20 "$WORK/pullgate-cri.log" >&2
    return 1
}
node_containerd_restart() { # its shims, and so its containers, keep running
    local old="$PG_CD_PID" i
    pg_node_containerd_kill
    for ((i = 0; i < 100; i++)); do
        kill -0 "$old" 2>/dev/null || break
        sleep 0.1
    done
    PG_NODE_AS_SERVICE=1 pg_node_containerd_start
}
# The kubelet: none runs here; what it would read at its restart must be a KubeletConfiguration.
kubelet_restart() {
    "$PG_PY" - "$KUBELET_CONFIG" <<'EOF2'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
assert isinstance(c, dict) and c.get("kind") == "KubeletConfiguration", c
print("(no kubelet here) its configuration reads: image service",
      c.get("imageServiceEndpoint") or c.get("containerRuntimeEndpoint"))
EOF2
}
systemctl() { # the part of systemd the blocks use
    case "$*" in
    "restart containerd") node_containerd_restart ;;
    "restart kubelet") kubelet_restart ;;
    "enable --now pullgate-cri" | "restart pullgate-cri") service_cri_start ;;
    "disable --now pullgate-cri") service_cri_stop ;;
    *) echo "the test's systemctl does not play '$*'" >&2; return 1 ;;
    esac
}
KUBELET_CONFIG=/var/lib/kubelet/config.yaml
KUBELET_DIR_MADE=0
node_cleanup() {
    service_cri_stop
    ((RUN_PULLGATE_EXISTED)) || rm -rf /run/pullgate
    ((KUBELET_DIR_MADE == 0)) || rm -rf /var/lib/kubelet
}
pkg_version() { dpkg-query -W -f='${Version}' pullgate 2>/dev/null; }
pod_in() { # NS [ANNOTATION]: a pod through the kubelet's endpoint
    pg_node_run_pod "$@" || { pg_node_show_log; pg_check_fail "RunPodSandbox ($1)"; return 1; }
}

# What the installed pullgatectl decides, under NeverVerifyPreloadedImages, for a pod without
# credentials (team-b) of the image team-a pulled: with its image ID, without it (containerd),
# and another tag of the same name without an image ID. "<reason> <allow>" a line.
preloaded_verdicts() {
    local ref image id spec
    ref="$("$PG_PY" - "$NODE_STATE" "${IMG_APP%:*}" <<'EOF2'
import glob, json, sys
state, name = sys.argv[1:3]
for path in sorted(glob.glob(state + "/pulled/sha256-*")):
    rec = json.load(open(path))
    if any(key.endswith(name.split("/", 1)[1]) for key in rec.get("credentialMapping", {})):
        print(rec["imageRef"])
        break
EOF2
)"
    for spec in "$IMG_APP $ref" "$IMG_APP -" "${IMG_APP%:*}:2.0 -"; do
        read -r image id <<<"$spec"
        [[ "$id" == - ]] && id=""
        pullgatectl --policy NeverVerifyPreloadedImages verify --image "$image" --image-ref "$id" \
            --namespace team-b --json |
            "$PG_PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["reason"], d["allow"])'
    done
}

NODE_OK=1
if [[ "${PG_PACKAGING_SKIP_NODE:-0}" == 1 ]]; then
    NODE_OK=0
    pg_log "NOT RUN: the node lifecycle (PG_PACKAGING_SKIP_NODE=1)"
else
    for c in containerd ctr containerd-shim-runc-v2 runc docker-registry htpasswd skopeo umoci unshare; do
        command -v "$c" >/dev/null 2>&1 || { NODE_OK=0; pg_log "NOT RUN: the node lifecycle: $c is missing"; }
    done
    # The installation edits the kubelet's configuration file: never an existing kubelet's.
    [[ ! -e /var/lib/kubelet ]] ||
        { NODE_OK=0; pg_log "NOT RUN: the node lifecycle: /var/lib/kubelet exists (a kubelet's node: not touched)"; }
    "$PG_PY" -c 'import grpc, grpc_tools.protoc' 2>/dev/null ||
        { NODE_OK=0; pg_log "NOT RUN: the node lifecycle: python3-grpcio / python3-grpc-tools missing"; }
fi
if ((NODE_OK)); then
    T_NODE=$SECONDS
    pg_section "a containerd node: registry, containerd as a service with its own --config"
    DEBS="$WORK/debs"
    mkdir -p "$DEBS"
    cp "$(deb pullgate)" "$DEBS/"
    PASS_A="tenant-a-pw-$RANDOM$RANDOM"
    pg_registry_start tenant-a "$PASS_A"
    LAYOUT="$(pg_mktemp_dir node-layout)/layout"
    pg_image_build "$LAYOUT" app "app-marker"
    pg_image_build "$LAYOUT" app2 "app2-marker"
    pg_image_push "$LAYOUT" app team-a/app:1.0
    pg_image_push "$LAYOUT" app2 team-a/app2:1.0
    IMG_APP="$PG_REG_HOST/team-a/app:1.0"
    IMG_APP2="$PG_REG_HOST/team-a/app2:1.0"
    NODE_STATE="$WORK/nodestate"
    mkdir -p "$NODE_STATE"
    chmod 0700 "$NODE_STATE"
    pg_node_containerd_setup "$CONFIG" "$PG_REG_HOST"
    # A node before pullgate: its runc handler has no base spec and passes no annotation.
    sed -i '/base_runtime_spec\|pod_annotations/d' "$PG_CD_DIR/config.toml"
    rm -f "$PG_CD_DIR/base-spec.json"
    PG_NODE_AS_SERVICE=1 pg_node_containerd_start || pg_fail "containerd did not start (log above)"
    pg_on_exit node_cleanup
    PG_PROXY_SOCK=/run/pullgate/cri.sock # criListen's default: the kubelet's image endpoint
    # This release's configuration, every key spelled out (as the packaged file does), for
    # this node: records in a private directory, containerd's socket, no D-Bus, no metrics port.
    pullgatectl check-config >"$WORK/full.json" || pg_fail "check-config of the packaged configuration"
    "$PG_PY" - "$WORK/full.json" "$CONFIG" "$NODE_STATE" "$PG_CD_SOCK" <<'EOF2'
import json, sys
full, path, state, sock = sys.argv[1:5]
cfg = json.load(open(full))
cfg.update({"policy": "AlwaysVerify", "stateDir": state, "readOnlyRecordDirs": [], "dbus": "none",
            "criRuntimeEndpoint": "unix://" + sock, "criMetricsListen": "none", "mode": "enforce"})
with open(path, "w") as f:
    json.dump(cfg, f, indent=2)
    f.write("\n")
EOF2
    pg_log "/etc/pullgate/config.json: $(tr -d '\n ' <"$CONFIG" | cut -c1-300)..."

    # The kubelet's configuration before pullgate (no kubelet runs here): images from containerd.
    mkdir -p /var/lib/kubelet && KUBELET_DIR_MADE=1
    printf 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix://%s\n' \
        "$PG_CD_SOCK" >"$KUBELET_CONFIG"

    pg_section "install as the README says: the package, wire, pullgate-cri, the kubelet, doctor"
    [[ "$(lifecycle_block install "$SRC/README.md")" == "$(lifecycle_block install "$SRC/docs/install.md")" ]] &&
        pg_check_ok "README.md's installation block is docs/install.md's" ||
        pg_check_fail "README.md's and docs/install.md's installation blocks differ"
    pg_expect_ok "a node without pullgate: dpkg -r pullgate (its configuration stays)" dpkg -r pullgate
    cd_before="$(sha256sum "$PG_CD_DIR/config.toml" | cut -d' ' -f1)"
    BLOCK_FILE="$SRC/README.md" run_block install
    pg_expect_contains "wire found the running containerd's configuration unasked" "$BLOCK_OUT" \
        "containerd configuration: $PG_CD_DIR/config.toml (the running containerd's)"
    grep -qx "imageServiceEndpoint: unix:///run/pullgate/cri.sock" "$KUBELET_CONFIG" &&
        pg_check_ok "the kubelet's image service is pullgate-cri's socket" ||
        pg_check_fail "$KUBELET_CONFIG: $(tr '\n' ' ' <"$KUBELET_CONFIG")"
    pg_expect_contains "doctor found pullgate-cri, in its own mount namespace, reading this configuration" \
        "$BLOCK_OUT" "✔ same-config: the hook and pullgate-cri read /etc/pullgate/config.json"
    pg_expect_contains "doctor: no ✘, exit 0" "$BLOCK_OUT" ", 0 ✘; exit 0"
    [[ -f "$PG_CD_DIR/config.toml.before-pullgate-wire" && -f "$PG_CD_DIR/pullgate-base-runtime-spec.json" ]] &&
        pg_check_ok "wire backed up containerd's configuration and wrote the base spec beside it" ||
        pg_check_fail "no backup or no base spec in $PG_CD_DIR"
    [[ "$(sha256sum "$PG_CD_DIR/config.toml.before-pullgate-wire" | cut -d' ' -f1)" == "$cd_before" ]] &&
        pg_check_ok "... the backup is the file as it was" || pg_check_fail "the backup differs from the original"

    pg_section "pods: a tenant with its credentials runs, a pod without is denied"
    HASH_A="$(pg_cred_hash tenant-a "$PASS_A")" || pg_fail "pullgatectl hash"
    UID_A="$(cat /proc/sys/kernel/random/uuid)"
    ANN_A="$(pullgatectl annotate --namespace team-a --image "$IMG_APP" --secret "team-a/regcred/$UID_A:$HASH_A")" ||
        pg_fail "pullgatectl annotate"
    ANN_A2="$(pullgatectl annotate --namespace team-a --image "$IMG_APP2" --secret "team-a/regcred/$UID_A:$HASH_A")" ||
        pg_fail "pullgatectl annotate"
    pod_in team-a "$ANN_A"
    export PG_CRI_PASS="$PASS_A"
    cri pull --image "$IMG_APP" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_CFG" >/dev/null ||
        { pg_node_show_log; pg_fail "PullImage through pullgate-cri"; }
    [[ -n "$(ls -A "$NODE_STATE/pulled" 2>/dev/null)" ]] && pg_check_ok "pullgate-cri $V recorded the pull" ||
        pg_check_fail "no record in $NODE_STATE/pulled"
    expect_runs "team-a with its credentials ($V)" "$IMG_APP"
    pod_in team-b
    expect_denied "team-b without credentials ($V)" "$IMG_APP"

    pg_section "wire again changes nothing; doctor and pullgate-still-wired find containerd's configuration"
    wired_sum="$(sha256sum "$PG_CD_DIR/config.toml" | cut -d' ' -f1)"
    pg_expect_ok "pullgatectl wire (again)" pullgatectl wire
    pg_expect_contains "... nothing to change" "$PG_OUT" "nothing to change"
    [[ "$(sha256sum "$PG_CD_DIR/config.toml" | cut -d' ' -f1)" == "$wired_sum" &&
        ! -e "$PG_CD_DIR/config.toml.before-pullgate-wire.1" ]] &&
        pg_check_ok "... containerd's configuration is untouched" || pg_check_fail "the second wire changed it"
    run_block check
    pg_expect_contains "doctor names the running containerd's configuration without flags" "$BLOCK_OUT" \
        "runtime handler of $PG_CD_DIR/config.toml"
    pg_expect_contains "pullgate-still-wired names it without being told" "$BLOCK_OUT" \
        "(in $PG_CD_DIR/config.toml) runs pullgate-hook"

    if [[ -n "$OLD_BUILD_PID" ]]; then
        pg_section "roll back to $PREV_V with a configuration that spells every key of $V"
        if ! wait "$OLD_BUILD_PID"; then
            tail -40 "$WORK/build-old-deb.log" >&2
            pg_fail "building the previous release's .deb ($PREV_COMMIT) failed"
        fi
        OLD_BUILD_PID=""
        cp "$WORK"/old-deb/pullgate_"$PREV_V"-*.deb "$DEBS/" || pg_fail "no pullgate $PREV_V .deb built"
        records_before="$(ls "$NODE_STATE/pulled" | sort)"
        verdicts_new="$(preloaded_verdicts)"
        [[ "$verdicts_new" != *preloaded* && "$verdicts_new" != *True* ]] &&
            pg_check_ok "$V: an image pulled with credentials is denied, never preloaded ($(tr '\n' ' ' <<<"$verdicts_new"))" ||
            pg_check_fail "$V: $(tr '\n' ' ' <<<"$verdicts_new")"
        run_block rollback
        [[ "$(pkg_version)" == "$PREV_V-1" ]] && pg_check_ok "pullgate $PREV_V-1 is installed" ||
            pg_check_fail "installed: $(pkg_version)"
        pg_expect_contains "... its pullgatectl reads the configuration" "$BLOCK_OUT" \
            "the configuration is one pullgatectl $PREV_V"
        if [[ "$BLOCK_OUT" == *"does not read these keys"* ]]; then
            pg_check_ok "the downgrade moved aside the keys $PREV_V does not read: $(grep -o 'does not read these keys[^:]*: .*' <<<"$BLOCK_OUT" | head -n1)"
        else
            pg_log "every key of $V is one $PREV_V reads: nothing was moved aside"
        fi
        systemctl restart pullgate-cri || pg_fail "pullgate-cri $PREV_V does not start with the configuration"
        pg_check_ok "pullgate-cri $PREV_V starts with the configuration"
        [[ "$(ls "$NODE_STATE/pulled" | sort)" == "$records_before" ]] && pg_check_ok "the records are kept" ||
            pg_check_fail "the records changed with the rollback"
        # The store $V wrote (its name index, credential index, credential times) read by
        # $PREV_V: never more than $V allows (docs/lifecycle.md, "Roll back").
        verdicts_old="$(preloaded_verdicts)"
        [[ -n "$verdicts_old" && "$verdicts_old" == "$verdicts_new" ]] &&
            pg_check_ok "$PREV_V decides as $V on the store $V wrote ($(tr '\n' ' ' <<<"$verdicts_old"))" ||
            pg_check_fail "$PREV_V: $(tr '\n' ' ' <<<"$verdicts_old"), $V: $(tr '\n' ' ' <<<"$verdicts_new")"
        pod_in team-a "$ANN_A"
        expect_runs "team-a's container starts under $PREV_V on the record $V wrote" "$IMG_APP"
        pod_in team-b
        expect_denied "team-b without credentials is denied under $PREV_V" "$IMG_APP"
        pod_in team-a "$ANN_A2"
        cri pull --image "$IMG_APP2" --username tenant-a --password-env PG_CRI_PASS --pod-config "$POD_CFG" >/dev/null ||
            pg_check_fail "PullImage through pullgate-cri $PREV_V"
        expect_runs "team-a's second image, pulled under $PREV_V" "$IMG_APP2"

        # RPM: `dnf downgrade` runs this package's %preun (with $1 = 1) after the older
        # package's files are in place; pullgate-config-rollback, which the older release does
        # not ship, is still this release's. Played here with the RPM's own %preun text on the
        # node as it is now (the older pullgatectl installed) and this release's
        # pullgate-config-rollback where the RPM would leave it; "futureKey" stands for a key
        # the older release does not read.
        pg_section "the RPM's %preun in a downgrade, played on this node"
        if ! wait "$RPM_BUILD_PID"; then
            tail -40 "$WORK/build-rpm.log" >&2
            pg_fail "packaging/build-rpm.sh failed"
        fi
        RPM_BUILD_PID=""
        PREUN="$(rpm -qp --scripts "$WORK"/rpm/pullgate-"$V"-*.rpm 2>/dev/null |
            awk '/^preuninstall scriptlet/ { on = 1; next } /^[a-z]+ (scriptlet|program)/ { on = 0 } on')"
        ROLLBACK_BIN=/usr/libexec/pullgate/pullgate-config-rollback
        cp "$CONFIG" "$WORK/config.before-rpm"
        "$PG_PY" - "$CONFIG" <<'EOF2'
import json, sys
c = json.load(open(sys.argv[1])); c["futureKey"] = True
json.dump(c, open(sys.argv[1], "w"), indent=2)
EOF2
        if [[ -e "$ROLLBACK_BIN" ]]; then
            pg_check_fail "$PREV_V ships $ROLLBACK_BIN: the RPM play needs its own copy there"
        elif [[ -z "$PREUN" ]]; then
            pg_check_fail "no %preun in the $V RPM"
        else
            pg_expect_fail "$PREV_V refuses a key it does not know (the outage a rollback must avoid)" \
                pullgatectl check-config
            pg_expect_contains "... naming it" "$PG_OUT" 'unknown key "futureKey"'
            install -m 0755 "$WORK/deb-x$ROLLBACK_BIN" "$ROLLBACK_BIN"
            pg_expect_ok "the $V RPM's %preun with \$1 = 1" sh -c "$PREUN" preun 1
            pg_expect_contains "... moved the key $PREV_V does not read, loudly" "$PG_OUT" \
                "release $PREV_V does not read these keys of /etc/pullgate/config.json: futureKey"
            pg_expect_ok "... and $PREV_V's pullgatectl reads the configuration" pullgatectl check-config
            [[ -e "$CONFIG.before-rollback-to-$PREV_V" ]] && pg_check_ok "... keeping the file as it was" ||
                pg_check_fail "no $CONFIG.before-rollback-to-$PREV_V"
            rm -f "$ROLLBACK_BIN" "$CONFIG.before-rollback-to-$PREV_V"
        fi
        cp "$WORK/config.before-rpm" "$CONFIG"

        pg_section "upgrade from $PREV_V to $V"
        cp "$(deb pullgate)" "$DEBS/"
        run_block upgrade 'doctor' "no systemd here: the previous release's pullgate-cri, still running on the file it read before the rollback's rewrite, answers \"not mine\" until the test restarts it (a node's postinst has systemd do that first)"
        [[ "$(pkg_version)" == "$V-1" ]] && pg_check_ok "pullgate $V-1 is installed" ||
            pg_check_fail "installed: $(pkg_version)"
        systemctl restart pullgate-cri || pg_fail "pullgate-cri $V does not start after the upgrade"
        pod_in team-a "$ANN_A2"
        expect_runs "under $V, the record $PREV_V wrote lets team-a's second image run" "$IMG_APP2"
        pod_in team-a "$ANN_A"
        expect_runs "under $V, team-a's first image still runs" "$IMG_APP"
        pod_in team-b
        expect_denied "under $V, team-b without credentials is denied" "$IMG_APP2"
    fi
    unset PG_CRI_PASS

    pg_section "uninstall in the documented order"
    PG_PROXY_SOCK="$PG_CD_SOCK" # step 1: the kubelet back at the runtime's socket
    run_block uninstall
    ! grep -q imageServiceEndpoint "$KUBELET_CONFIG" && pg_check_ok "the kubelet's images back to containerd" ||
        pg_check_fail "$KUBELET_CONFIG still names an image service endpoint"
    pg_expect_contains "pullgate-still-wired found nothing after unwire" "$BLOCK_OUT" "nothing names pullgate any more"
    [[ "$BLOCK_OUT" != *WARNING* ]] && pg_check_ok "the removal warned about nothing" ||
        pg_check_fail "a WARNING during the documented uninstall"
    [[ "$(dpkg-query -W -f='${Status}' pullgate 2>/dev/null)" == *config-files* ]] &&
        pg_check_ok "pullgate is removed" || pg_check_fail "pullgate: $(dpkg-query -W -f='${Status}' pullgate)"
    pod_in team-b
    expect_runs "a pod without credentials starts: pullgate is out of the way" "$IMG_APP"
    pg_log "the node lifecycle took $((SECONDS - T_NODE)) s"
    service_cri_stop
    pg_node_containerd_kill
    pg_registry_stop
    pg_expect_ok "reinstall pullgate for what follows" env DEBIAN_FRONTEND=noninteractive dpkg -i "$(deb pullgate)"
fi

# ------------------------------------- 5. removal from a wired node (docs/lifecycle.md)
pg_section "removal from a wired node, then by the documented procedure"
# The node's wiring, in $WORK (the machine's own runtime configuration is left alone): a
# containerd configuration whose runc handler's base_runtime_spec runs the installed hook, the
# kubelet's configuration pointing at pullgate-cri, and a hooks.d entry for the hook (what the
# DaemonSet writes to /etc/containers/oci/hooks.d). runc, given a bundle built from that
# containerd configuration, stands in for containerd (which cannot be pointed at the package's
# paths from here without touching the machine's own configuration).
WIRED="$WORK/wired"
mkdir -p "$WIRED/containerd" "$WIRED/hooks.d"
python3 - "$WIRED/containerd/base.json" "$HOOK" <<'EOF2'
import json, sys
json.dump({"ociVersion": "1.0.2", "hooks": {"createRuntime": [{"path": sys.argv[2],
           "args": ["pullgate-hook", "--stage", "createRuntime"], "timeout": 10}]}},
          open(sys.argv[1], "w"))
EOF2
cat >"$WIRED/containerd/config.toml" <<EOF2
version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  base_runtime_spec = "$WIRED/containerd/base.json"
  pod_annotations = ["pullgate.dev/credentials"]
EOF2
printf 'kind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix:///run/pullgate/cri.sock\nimageServiceEndpoint: unix:///run/pullgate/cri.sock\n' \
    >"$WIRED/kubelet-config.yaml"
cp "$HOOK_JSON" "$WIRED/hooks.d/pullgate.json"
export PULLGATE_CONTAINERD_CONFIG="$WIRED/containerd/config.toml"
export PULLGATE_HOOKS_DIRS="$WIRED/hooks.d /usr/share/containers/oci/hooks.d"
export PULLGATE_KUBELET_FILES="$WIRED/kubelet-config.yaml"
STILL=/usr/libexec/pullgate/pullgate-still-wired
pg_expect_fail "pullgate-still-wired on the wired node: exit 1" "$STILL"
pg_expect_contains "... names containerd's base spec" "$PG_OUT" "base_runtime_spec $WIRED/containerd/base.json"
pg_expect_contains "... names the hooks.d entry" "$PG_OUT" "$WIRED/hooks.d/pullgate.json runs pullgate-hook"
pg_expect_contains "... names the kubelet" "$PG_OUT" "$WIRED/kubelet-config.yaml points at pullgate-cri"
[[ "$PG_OUT" != *"/usr/share/containers/oci/hooks.d/pullgate.json"* ]] &&
    pg_check_ok "... not the package's own hooks.d entry" || pg_check_fail "it warned about the packaged entry"

# Removed without the procedure: the removal warns loudly, and goes on.
pg_expect_ok "dpkg -r pullgate on the wired node (it warns, it does not refuse)" dpkg -r pullgate
pg_expect_contains "the removal warns about the base spec" "$PG_OUT" "pullgate: WARNING: containerd's base_runtime_spec"
pg_expect_contains "the removal warns about the kubelet" "$PG_OUT" "points at pullgate-cri"
pg_expect_contains "the removal says it goes on anyway" "$PG_OUT" "removing pullgate anyway"
# containerd builds each container's config.json from the runc handler's base_runtime_spec; runc
# then runs its hooks. The same here: a bundle from the effective containerd configuration.
RUNC="$(command -v runc || true)"
BUSYBOX="$(command -v busybox || true)"
cd_container() { # ID: runs /bin/true in a bundle built as containerd builds one; runc's output
    local id="$1" b="$WIRED/bundle-$1"
    mkdir -p "$b/rootfs/bin"
    cp "$BUSYBOX" "$b/rootfs/bin/busybox" && ln -sf busybox "$b/rootfs/bin/true"
    (cd "$b" && "$RUNC" spec) || return 1
    python3 - "$b" "$PULLGATE_CONTAINERD_CONFIG" <<'EOF2' || return 1
import json, sys, tomllib
bundle, cd_config = sys.argv[1:3]
handler = tomllib.load(open(cd_config, "rb"))["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["runc"]
base = json.load(open(handler["base_runtime_spec"])) if handler.get("base_runtime_spec") else {}
spec = json.load(open(bundle + "/config.json"))
spec["root"] = {"path": bundle + "/rootfs", "readonly": True}
spec["process"].update({"terminal": False, "args": ["/bin/true"]})
spec["process"].pop("rlimits", None)
spec["hooks"] = base.get("hooks", {})
json.dump(spec, open(bundle + "/config.json", "w"))
EOF2
    timeout 60 "$RUNC" --root "$WIRED/runc" run --bundle "$b" "$id" </dev/null
    local rc=$?
    "$RUNC" --root "$WIRED/runc" delete -f "$id" >/dev/null 2>&1
    return $rc
}
RUNC_OK=0
if [[ -n "$RUNC" && -n "$BUSYBOX" ]] && file -L "$BUSYBOX" | grep -q "statically linked"; then
    RUNC_OK=1
    pg_expect_fail "a container from containerd's base spec left naming the removed hook fails" \
        cd_container "pkgtest-left-$$"
    pg_expect_contains "... at the hook runc cannot find" "$PG_OUT" "pullgate-hook"
else
    pg_log "runc or a static busybox missing: no container started around the removal"
fi

# Now by the procedure: reinstall, then kubelet back to the runtime, the hook out of the
# runtime's configuration, the check, then the package.
pg_expect_ok "reinstall pullgate" env DEBIAN_FRONTEND=noninteractive dpkg -i "$(deb pullgate)"
sed -i 's|unix:///run/pullgate/cri.sock|unix:///run/containerd/containerd.sock|' "$WIRED/kubelet-config.yaml"
sed -i '/base_runtime_spec\|pod_annotations/d' "$WIRED/containerd/config.toml"
rm "$WIRED/hooks.d/pullgate.json"
pg_expect_ok "pullgate-still-wired after the procedure: exit 0, nothing to say" "$STILL"
[[ -z "$PG_OUT" ]] && pg_check_ok "... silent" || pg_check_fail "still-wired says: $PG_OUT"
pg_expect_ok "dpkg -r pullgate after the procedure" dpkg -r pullgate
[[ "$PG_OUT" != *WARNING* ]] && pg_check_ok "the removal warns about nothing" ||
    pg_check_fail "the removal warned: $PG_OUT"
[[ ! -e "$HOOK" && ! -e "$HOOK_JSON" ]] && pg_check_ok "the hook and its hooks.d entry are gone" ||
    pg_check_fail "the hook or its entry survived dpkg -r"
if ((RUNC_OK)); then
    pg_expect_ok "a container from containerd's configuration starts after the documented removal" \
        cd_container "pkgtest-after-$$"
fi
if [[ "${PG_PACKAGING_SKIP_PODMAN:-0}" != 1 && ${#PG_PODMAN_GLOBAL[@]} -gt 0 && -n "${ID:-}" ]]; then
    pg_expect_ok "podman (CRI-O's stand-in) starts a container after the removal, default hooks dirs" \
        pg_podman run "${PG_PODMAN_RUN_FLAGS[@]}" "$IMAGE"
    pg_expect_contains "its output" "$PG_OUT" "pkgtest-ok"
fi
unset PULLGATE_CONTAINERD_CONFIG PULLGATE_HOOKS_DIRS PULLGATE_KUBELET_FILES

# ----------------------------------------------------------- 6. purge
pg_section "purge removes everything but the records"
touch /var/lib/pullgate/.pullgate-pkgtest
pg_expect_ok "dpkg -P libpullgate-dev pullgate libpullgate1" dpkg -P libpullgate-dev pullgate libpullgate1
for f in "${INSTALLED[@]}" /etc/pullgate /usr/libexec/pullgate; do
    if [[ -e "$f" || -L "$f" ]]; then pg_check_fail "left after purge: $f"; fi
done
pg_check_ok "purge removed the package files and /etc/pullgate"
if [[ -e /var/lib/pullgate/.pullgate-pkgtest ]]; then
    pg_check_ok "/var/lib/pullgate and its contents survive purge"
else
    pg_check_fail "purge removed /var/lib/pullgate or its contents"
fi
rm -f /var/lib/pullgate/.pullgate-pkgtest

# ------------------------------------------------------------- 7. RPM
pg_section "RPM"
if [[ -n "$RPM_BUILD_PID" ]] && ! wait "$RPM_BUILD_PID"; then
    tail -40 "$WORK/build-rpm.log" >&2
    pg_fail "packaging/build-rpm.sh failed"
fi
pg_check_ok "rpmbuild -bb"
ev() { rpm --eval "$1"; }
libdir="$(ev %_libdir)"
unitdir="$(ev '%{?_unitdir}')"; [[ -n "$unitdir" ]] || unitdir=/usr/lib/systemd/system
tmpfilesdir="$(ev '%{?_tmpfilesdir}')"; [[ -n "$tmpfilesdir" ]] || tmpfilesdir=/usr/lib/tmpfiles.d
sort >"$WORK/rpm-expected" <<EOF
/etc/pullgate
/etc/pullgate/config.json
/usr/bin/pullgate-cri
/usr/bin/pullgatectl
/usr/bin/pullgate-webhook
$unitdir/pullgate-cri.service
$unitdir/pullgate-prune.service
$unitdir/pullgate-prune.timer
$tmpfilesdir/pullgate.conf
/usr/libexec/oci
/usr/libexec/oci/hooks.d
/usr/libexec/oci/hooks.d/pullgate-hook
/usr/libexec/oci/hooks.d/pullgate-hook-local
/usr/libexec/pullgate
/usr/libexec/pullgate/pullgate-config-rollback
/usr/libexec/pullgate/pullgate-doctor
/usr/libexec/pullgate/pullgate-prune
/usr/libexec/pullgate/pullgate-still-wired
/usr/libexec/pullgate/pullgate-wire
/usr/share/containers
/usr/share/containers/oci
/usr/share/containers/oci/hooks.d
/usr/share/containers/oci/hooks.d/pullgate.json
/usr/share/dbus-1/interfaces/dev.pullgate.PullGate1.xml
/usr/share/pullgate
/usr/share/pullgate/grafana
/usr/share/pullgate/grafana/pullgate-dashboard.json
/usr/share/pullgate/kubernetes
/usr/share/pullgate/kubernetes/make-certs.sh
/usr/share/pullgate/kubernetes/mutatingwebhook.yaml.in
/usr/share/pullgate/prometheus
/usr/share/pullgate/prometheus/prometheus-rules.yaml
/usr/share/pullgate/prometheus/pullgate-rules.yml
/usr/share/licenses/pullgate
/usr/share/doc/pullgate
/usr/share/doc/pullgate/annotation-hmac.md
/usr/share/doc/pullgate/annotation-producer.md
/usr/share/doc/pullgate/examples
/usr/share/doc/pullgate/examples/containerd
/usr/share/doc/pullgate/examples/containerd/README.md
/usr/share/doc/pullgate/examples/containerd/base-runtime-spec.json.example
/usr/share/doc/pullgate/examples/containerd/config.toml.snippet
/usr/share/doc/pullgate/examples/crio.conf.d
/usr/share/doc/pullgate/examples/crio.conf.d/10-pullgate.conf
/usr/share/doc/pullgate/design.md
/usr/share/doc/pullgate/doctor.schema.json
/usr/share/doc/pullgate/install.md
/usr/share/doc/pullgate/kubelet-setup.md
/usr/share/doc/pullgate/lifecycle.md
/usr/share/doc/pullgate/logging.md
/usr/share/doc/pullgate/metrics.md
/usr/share/doc/pullgate/webhook.md
/usr/share/licenses/pullgate/LICENSE
/usr/share/man/man5/pullgate.json.5
/usr/share/man/man8/pullgate-cri.8
/usr/share/man/man8/pullgate-hook.8
/usr/share/man/man8/pullgate-webhook.8
/usr/share/man/man8/pullgatectl.8
$libdir/libpullgate.so.1
$libdir/libpullgate.so.$V
/usr/include/pullgate
/usr/include/pullgate/pullgate.h
/usr/include/pullgate/version.h
$libdir/libpullgate.so
$libdir/pkgconfig/pullgate.pc
$libdir/cmake/Pullgate
$libdir/cmake/Pullgate/PullgateConfig.cmake
$libdir/cmake/Pullgate/PullgateConfigVersion.cmake
$libdir/cmake/Pullgate/PullgateTargets.cmake
$libdir/cmake/Pullgate/PullgateTargets-relwithdebinfo.cmake
EOF
for r in "$WORK"/rpm/*.rpm; do rpm -qlp "$r" 2>/dev/null; done |
    grep -v '^/usr/lib/\.build-id' | sed -E 's/\.(gz|bz2|xz|zst)$//' | sort >"$WORK/rpm-actual"
if diff -u "$WORK/rpm-expected" "$WORK/rpm-actual" >"$WORK/rpm.diff"; then
    pg_check_ok "rpm -qlp lists exactly the expected $(wc -l <"$WORK/rpm-expected") paths"
else
    pg_check_fail "rpm -qlp differs from the expected list"
    sed 's/^/       | /' "$WORK/rpm.diff" >&2
fi
mkdir -p "$WORK/rpm-x"
(cd "$WORK/rpm-x" && rpm2cpio "$WORK"/rpm/pullgate-[0-9]*.rpm | cpio -idm --quiet) ||
    pg_check_fail "rpm2cpio | cpio of the pullgate RPM"
pg_expect_ok ".rpm: promtool check rules usr/share/pullgate/prometheus/pullgate-rules.yml" \
    promtool check rules "$WORK/rpm-x/usr/share/pullgate/prometheus/pullgate-rules.yml"
if rpm -qp --queryformat '%{VERSION}\n' "$WORK"/rpm/pullgate-[0-9]*.rpm 2>/dev/null | grep -qx "$V"; then
    pg_check_ok "the RPM is version $V"
else
    pg_check_fail "the RPM's version is not $V"
fi
if rpm -qcp "$WORK"/rpm/pullgate-[0-9]*.rpm 2>/dev/null | grep -qx /etc/pullgate/config.json; then
    pg_check_ok "config.json is %config in the RPM"
else
    pg_check_fail "config.json is not %config in the RPM"
fi
if command -v rpmlint >/dev/null; then
    # Only the filters documented in pullgate.rpmlintrc are accepted.
    if rpmlint -r "$PG_SOURCE_DIR/packaging/rpm/pullgate.rpmlintrc" "$WORK"/rpm/*.rpm \
        >"$WORK/rpmlint.out" 2>&1 && grep -q ' 0 errors, 0 warnings' "$WORK/rpmlint.out"; then
        pg_check_ok "rpmlint: no errors or warnings"
    else
        pg_check_fail "rpmlint reports problems"
        sed 's/^/       | /' "$WORK/rpmlint.out" >&2
    fi
else
    pg_log "rpmlint not installed: rpmlint check not run"
fi

pg_summary
