# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# A private registry with authentication on 127.0.0.1, and test images built
# locally (no network): Debian's docker-registry (distribution 2.8) + htpasswd
# (bcrypt), images made with umoci from busybox-static, pushed with skopeo.
#
#   pg_registry_start [USER] [PASS]   sets PG_REG_HOST (127.0.0.1:PORT), PG_REG_PORT,
#                                     PG_REG_USER, PG_REG_PASS, PG_REG_PID
#                                     (PG_REG_EXTRA_USERS=("user:pass" ...) adds more users)
#   pg_registry_stop                  kill + wait (also registered as an exit cleanup)
#   pg_registry_start_open            a second registry WITHOUT authentication; sets
#                                     PG_OPEN_REG_HOST, PG_OPEN_REG_PID (stopped at exit)
#   pg_image_push_open LAYOUT TAG REPO:TAG   push to the open registry, no credentials
#   pg_image_build LAYOUT TAG MARKER  OCI layout LAYOUT:TAG, busybox rootfs, /etc/pg-marker = MARKER
#   pg_image_push LAYOUT TAG REPO:TAG push oci:LAYOUT:TAG to docker://$PG_REG_HOST/REPO:TAG
#   pg_image_archive LAYOUT TAG OUT   an oci-archive (for `podman load`, `ctr images import`)
#
# Requires lib/common.sh.
# shellcheck disable=SC2034  # PG_* variables are read by the sourcing scripts

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PG_REG_PID=""
PG_REG_DIR=""
PG_OPEN_REG_PID=""
declare -a PG_REG_EXTRA_USERS=()

pg_registry_start() {
    local user="${1:-tenant-a}" pass="${2:-s3cret-A-$RANDOM$RANDOM}" port i
    pg_require_cmd docker-registry htpasswd
    PG_REG_DIR="$(pg_mktemp_dir registry)"
    mkdir -p "$PG_REG_DIR/storage"
    htpasswd -Bbc "$PG_REG_DIR/htpasswd" "$user" "$pass" >/dev/null 2>&1 ||
        pg_fail "htpasswd -B failed"
    local extra
    for extra in "${PG_REG_EXTRA_USERS[@]}"; do
        htpasswd -Bb "$PG_REG_DIR/htpasswd" "${extra%%:*}" "${extra#*:}" >/dev/null 2>&1 ||
            pg_fail "htpasswd -B (extra user) failed"
    done

    for i in 1 2 3; do
        port="$(pg_free_port)" || pg_fail "no free port"
        cat >"$PG_REG_DIR/config.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
  formatter: text
storage:
  filesystem:
    rootdirectory: $PG_REG_DIR/storage
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
http:
  addr: 127.0.0.1:$port
  secret: pullgate-test-$RANDOM$RANDOM
  headers:
    X-Content-Type-Options: [nosniff]
auth:
  htpasswd:
    realm: pullgate-test-registry
    path: $PG_REG_DIR/htpasswd
health:
  storagedriver:
    enabled: false
EOF
        docker-registry serve "$PG_REG_DIR/config.yml" >"$PG_REG_DIR/registry.log" 2>&1 &
        PG_REG_PID=$!
        if pg_wait_port "$port" 15 && kill -0 "$PG_REG_PID" 2>/dev/null; then
            break
        fi
        pg_kill_wait "$PG_REG_PID" 2
        PG_REG_PID=""
    done
    [[ -n "$PG_REG_PID" ]] || {
        sed 's/^/  registry | /' "$PG_REG_DIR/registry.log" >&2
        pg_fail "docker-registry did not start"
    }
    pg_on_exit "pg_registry_stop"
    PG_REG_PORT="$port"
    PG_REG_HOST="127.0.0.1:$port"
    PG_REG_USER="$user"
    PG_REG_PASS="$pass"
    # Authentication must be on: anonymous requests get 401.
    if command -v curl >/dev/null 2>&1; then
        local code
        code="$(curl -s -o /dev/null -w '%{http_code}' "http://$PG_REG_HOST/v2/")"
        [[ "$code" == 401 ]] || pg_fail "registry answers $code without credentials (expected 401)"
        code="$(curl -s -o /dev/null -w '%{http_code}' -u "$user:$pass" "http://$PG_REG_HOST/v2/")"
        [[ "$code" == 200 ]] || pg_fail "registry answers $code with credentials (expected 200)"
    fi
    pg_log "registry on $PG_REG_HOST (htpasswd auth, user $user), pid $PG_REG_PID"
}

pg_registry_stop() {
    if [[ -n "$PG_REG_PID" ]]; then
        pg_kill_wait "$PG_REG_PID" 5
        PG_REG_PID=""
    fi
}

# pg_image_build LAYOUT TAG MARKER: a small busybox image in an OCI layout.
# No entrypoint; cmd: /bin/sh -c 'echo MARKER' (a default run prints MARKER).
pg_image_build() {
    local layout="$1" tag="$2" marker="$3" bundle busybox
    pg_require_cmd umoci
    busybox="$(command -v busybox 2>/dev/null || true)"
    [[ -x /bin/busybox ]] && busybox=/bin/busybox
    [[ -n "$busybox" ]] || pg_skip "busybox-static not installed"
    file -L "$busybox" 2>/dev/null | grep -q 'statically linked' ||
        { ldd "$busybox" 2>&1 | grep -q 'not a dynamic' || pg_skip "$busybox is not static (need busybox-static)"; }

    [[ -d "$layout" ]] || umoci init --layout "$layout" || pg_fail "umoci init"
    umoci new --image "$layout:$tag" || pg_fail "umoci new"
    bundle="$(pg_mktemp_dir bundle)"
    rmdir "$bundle"
    umoci unpack --image "$layout:$tag" "$bundle" >/dev/null || pg_fail "umoci unpack"
    mkdir -p "$bundle/rootfs/bin" "$bundle/rootfs/etc" "$bundle/rootfs/tmp" \
        "$bundle/rootfs/proc" "$bundle/rootfs/sys" "$bundle/rootfs/dev"
    chmod 1777 "$bundle/rootfs/tmp"
    cp "$busybox" "$bundle/rootfs/bin/busybox"
    local a
    for a in sh sleep true echo cat ls id hostname; do
        ln -sf busybox "$bundle/rootfs/bin/$a"
    done
    printf '%s\n' "$marker" >"$bundle/rootfs/etc/pg-marker"
    printf 'root:x:0:0:root:/:/bin/sh\n' >"$bundle/rootfs/etc/passwd"
    printf 'root:x:0:\n' >"$bundle/rootfs/etc/group"
    umoci repack --image "$layout:$tag" "$bundle" >/dev/null || pg_fail "umoci repack"
    umoci config --image "$layout:$tag" \
        --config.cmd /bin/sh --config.cmd -c --config.cmd "echo $marker" \
        --config.env PATH=/bin --config.workingdir / >/dev/null ||
        pg_fail "umoci config"
    umoci gc --layout "$layout" >/dev/null 2>&1 || true
    rm -rf "$bundle"
}

# pg_skopeo ARGS...: skopeo, kept away from the host's /var/lib/containers (see
# pg_hide_host_containers_cache in common.sh).
pg_skopeo() {
    pg_hide_host_containers_cache skopeo --tmpdir "$PG_TMPDIR" "$@"
}

# pg_image_push LAYOUT TAG REPO:TAG [USER PASS]
pg_image_push() {
    local layout="$1" tag="$2" dest="$3" user="${4:-$PG_REG_USER}" pass="${5:-$PG_REG_PASS}"
    pg_require_cmd skopeo
    pg_skopeo copy --quiet --insecure-policy \
        --dest-creds "$user:$pass" --dest-tls-verify=false \
        "oci:$layout:$tag" "docker://$PG_REG_HOST/$dest" >&2 ||
        pg_fail "skopeo copy to $PG_REG_HOST/$dest failed"
    pg_log "pushed $PG_REG_HOST/$dest"
}

# pg_image_archive LAYOUT TAG OUT [NAME]: oci-archive for `podman load` / `ctr images import`.
pg_image_archive() {
    local layout="$1" tag="$2" out="$3" name="${4:-}"
    if [[ -n "$name" ]]; then
        pg_skopeo copy --quiet --insecure-policy \
            "oci:$layout:$tag" "oci-archive:$out:$name" >&2 || pg_fail "skopeo oci-archive"
    else
        pg_skopeo copy --quiet --insecure-policy \
            "oci:$layout:$tag" "oci-archive:$out" >&2 || pg_fail "skopeo oci-archive"
    fi
}

# pg_registry_setup_images: build + push the standard test images.
#   PG_IMG_APP       = $PG_REG_HOST/team-a/app:1.0          (private, pulled with creds)
#   PG_IMG_PRELOADED = $PG_REG_HOST/team-a/preloaded:1.0    (pulled without recording)
pg_registry_setup_images() {
    PG_LAYOUT="$(pg_mktemp_dir oci-layout)/layout"
    pg_image_build "$PG_LAYOUT" app "pullgate-app-marker"
    pg_image_build "$PG_LAYOUT" preloaded "pullgate-preloaded-marker"
    pg_image_push "$PG_LAYOUT" app team-a/app:1.0
    pg_image_push "$PG_LAYOUT" preloaded team-a/preloaded:1.0
    PG_IMG_APP="$PG_REG_HOST/team-a/app:1.0"
    PG_IMG_PRELOADED="$PG_REG_HOST/team-a/preloaded:1.0"
}

# pg_registry_start_open: a second registry on 127.0.0.1 with no authentication at all
# (images pulled from it carry no credentials: the kubelet's nodePodsAccessible case).
pg_registry_start_open() {
    local dir port i
    pg_require_cmd docker-registry
    dir="$(pg_mktemp_dir registry-open)"
    mkdir -p "$dir/storage"
    for i in 1 2 3; do
        port="$(pg_free_port)" || pg_fail "no free port"
        cat >"$dir/config.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $dir/storage
  cache:
    blobdescriptor: inmemory
http:
  addr: 127.0.0.1:$port
  secret: pullgate-test-$RANDOM$RANDOM
health:
  storagedriver:
    enabled: false
EOF
        docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 &
        PG_OPEN_REG_PID=$!
        if pg_wait_port "$port" 15 && kill -0 "$PG_OPEN_REG_PID" 2>/dev/null; then
            break
        fi
        pg_kill_wait "$PG_OPEN_REG_PID" 2
        PG_OPEN_REG_PID=""
    done
    [[ -n "$PG_OPEN_REG_PID" ]] || {
        sed 's/^/  registry | /' "$dir/registry.log" >&2
        pg_fail "docker-registry (open) did not start"
    }
    # shellcheck disable=SC2016  # expanded at exit: the pid of the time
    pg_on_exit 'pg_kill_wait "$PG_OPEN_REG_PID" 5'
    PG_OPEN_REG_HOST="127.0.0.1:$port"
    pg_log "open registry on $PG_OPEN_REG_HOST (no authentication), pid $PG_OPEN_REG_PID"
}

# pg_image_push_open LAYOUT TAG REPO:TAG
pg_image_push_open() {
    pg_skopeo copy --quiet --insecure-policy --dest-tls-verify=false \
        "oci:$1:$2" "docker://$PG_OPEN_REG_HOST/$3" >&2 ||
        pg_fail "skopeo copy to $PG_OPEN_REG_HOST/$3 failed"
    pg_log "pushed $PG_OPEN_REG_HOST/$3"
}
