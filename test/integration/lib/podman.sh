# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Podman as a local stand-in for CRI-O's hooks.d path (Debian 12: podman 4.3 + runc).
#
#   pg_podman_init                     isolated store (--root/--runroot/--tmpdir in a temp dir),
#                                      probes storage driver (overlay, else vfs) and network
#   pg_podman ARGS...                  podman with the isolated global flags
#   pg_podman_hooks_dir CONFIG         writes a hooks.d dir whose JSON runs $PULLGATE_HOOK
#                                      --config CONFIG; prints the dir
#   pg_podman_image_id IMAGE           the storage image ID (what CRI-O puts in ImageRef)
#   pg_podman_pull_and_record STATE_DIR IMAGE NS USER PASS [SECRET_NAME] [SECRET_UID]
#                                      record-intent, podman pull --creds, record-pulled;
#                                      sets PG_PULLED_ID and PG_PULLED_HASH;
#                                      pullgatectl gets "${PG_CTL_OPTS[@]}" first
#   pg_creds_json IMAGE NS NAME UID HASH    a pullgate.dev/credentials value
#   pg_podman_run_as_tenant NS CREDS_JSON IMAGE [CMD...]
#                                      podman run with the CRI-O annotations; $PG_HOOKS_DIR must be set
#
# Requires lib/common.sh.
# shellcheck disable=SC2034  # PG_* variables are read by the sourcing scripts

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

declare -a PG_PODMAN_GLOBAL=()
declare -a PG_PODMAN_RUN_FLAGS=()
# Extra global options for pullgatectl's record-* calls (e.g. --config FILE for D-Bus signals).
declare -a PG_CTL_OPTS=()
PG_PODMAN_DIR=""
PG_HOOKS_DIR=""

pg_podman() {
    [[ ${#PG_PODMAN_GLOBAL[@]} -gt 0 ]] || { echo "pg_podman: pg_podman_init not run" >&2; return 125; }
    podman "${PG_PODMAN_GLOBAL[@]}" ${PG_HOOKS_DIR:+--hooks-dir "$PG_HOOKS_DIR"} "$@"
}

pg__podman_cleanup() {
    [[ -n "$PG_PODMAN_DIR" && -d "$PG_PODMAN_DIR" ]] || return 0
    # Remove containers (stops conmon), then unmount the store. Only ever with the
    # isolated --root/--runroot flags: never let these reach the host's default store.
    if [[ ${#PG_PODMAN_GLOBAL[@]} -gt 0 && "${PG_PODMAN_GLOBAL[*]}" == *"--root $PG_PODMAN_DIR/root"* ]]; then
        PG_HOOKS_DIR="" podman "${PG_PODMAN_GLOBAL[@]}" rm -af -t 0 >/dev/null 2>&1
        PG_HOOKS_DIR="" podman "${PG_PODMAN_GLOBAL[@]}" rmi -af >/dev/null 2>&1
    fi
    local m
    awk -v p="$PG_PODMAN_DIR" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
        while read -r m; do umount -l "$m" 2>/dev/null; done
    chmod -R u+rwX "$PG_PODMAN_DIR" 2>/dev/null
    rm -rf "$PG_PODMAN_DIR"
}

pg_podman_init() {
    pg_require_root
    pg_require_cmd podman runc conmon
    PG_PODMAN_DIR="$(pg_mktemp_dir podman)"
    mkdir -p "$PG_PODMAN_DIR"/{root,runroot,tmp,conf,hooks-empty}
    pg_on_exit "pg__podman_cleanup"

    # Keep the host's configuration out: our own containers.conf / storage.conf /
    # registries.conf (the loopback registry is reached with --tls-verify=false).
    cat >"$PG_PODMAN_DIR/conf/containers.conf" <<EOF
[containers]
log_driver = "k8s-file"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
tmp_dir = "$PG_PODMAN_DIR/tmp"
hooks_dir = ["$PG_PODMAN_DIR/hooks-empty"]
EOF
    cat >"$PG_PODMAN_DIR/conf/registries.conf" <<'EOF'
unqualified-search-registries = []
short-name-mode = "disabled"
EOF
    export CONTAINERS_CONF="$PG_PODMAN_DIR/conf/containers.conf"
    export CONTAINERS_REGISTRIES_CONF="$PG_PODMAN_DIR/conf/registries.conf"

    local driver
    for driver in ${PG_PODMAN_STORAGE_DRIVER:-overlay vfs}; do
        cat >"$PG_PODMAN_DIR/conf/storage.conf" <<EOF
[storage]
driver = "$driver"
graphroot = "$PG_PODMAN_DIR/root"
runroot = "$PG_PODMAN_DIR/runroot"
EOF
        export CONTAINERS_STORAGE_CONF="$PG_PODMAN_DIR/conf/storage.conf"
        PG_PODMAN_GLOBAL=(--root "$PG_PODMAN_DIR/root" --runroot "$PG_PODMAN_DIR/runroot"
            --tmpdir "$PG_PODMAN_DIR/tmp" --storage-driver "$driver"
            --runtime runc --cgroup-manager cgroupfs --events-backend file)
        if podman "${PG_PODMAN_GLOBAL[@]}" info >"$PG_PODMAN_DIR/info.txt" 2>&1; then
            PG_PODMAN_DRIVER="$driver"
            break
        fi
        awk -v p="$PG_PODMAN_DIR" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo |
            sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
        rm -rf "${PG_PODMAN_DIR:?}"/root/* "${PG_PODMAN_DIR:?}"/runroot/* "${PG_PODMAN_DIR:?}"/tmp/*
        PG_PODMAN_GLOBAL=()
    done
    [[ ${#PG_PODMAN_GLOBAL[@]} -gt 0 ]] || {
        sed 's/^/  podman info | /' "$PG_PODMAN_DIR/info.txt" >&2
        pg_skip "podman cannot initialise an isolated store here (overlay and vfs both failed)"
    }
    # --network none: the tests need no network, and it keeps podman away from the
    # host's CNI/netavark configuration and firewall.
    PG_PODMAN_RUN_FLAGS=(--rm --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --pull never
        --network none)
    pg_log "podman: isolated store in $PG_PODMAN_DIR (driver $PG_PODMAN_DRIVER)"
}

# pg_podman_probe_run IMAGE: run IMAGE once without hooks.
# Skips the test (77) when runc cannot run containers here at all.
pg_podman_probe_run() {
    local image="$1" out
    if out="$(PG_HOOKS_DIR="$PG_PODMAN_DIR/hooks-empty" pg_podman run "${PG_PODMAN_RUN_FLAGS[@]}" \
        "$image" echo probe-ok 2>&1)" && [[ "$out" == *probe-ok* ]]; then
        return 0
    fi
    printf '%s\n' "$out" | sed 's/^/  podman | /' >&2
    pg_skip "podman + runc cannot run a container on this machine (see output above)"
}

# pg_podman_hooks_dir CONFIG [STAGE]: a hooks.d directory with one pullgate JSON.
pg_podman_hooks_dir() {
    local cfg="$1" stage="${2:-${PG_HOOK_STAGE:-createRuntime}}" dir
    dir="$(pg_mktemp_dir hooks.d)"
    chmod 0755 "$dir"
    cat >"$dir/50-pullgate.json" <<EOF
{
  "version": "1.0.0",
  "hook": {
    "path": "$PULLGATE_HOOK",
    "args": ["pullgate-hook", "--stage", "$stage", "--config", "$cfg"],
    "timeout": 10
  },
  "when": { "always": true },
  "stages": ["$stage"]
}
EOF
    printf '%s\n' "$dir"
}

# pg_write_config FILE STATE_DIR POLICY [DBUS] [EXTRA_JSON_MEMBERS]
pg_write_config() {
    local file="$1" state="$2" policy="$3" dbus="${4:-none}" extra="${5:-}"
    cat >"$file" <<EOF
{
  "policy": "$policy",
  "stateDir": "$state",
  "readOnlyRecordDirs": [],
  "dbus": "$dbus"${extra:+,
  $extra}
}
EOF
}

# pg_podman_pull ARGS...: `podman pull` with the host's /var/lib/containers hidden
# (podman 4.3 writes its blob-info cache there even with --root).
pg_podman_pull() {
    [[ ${#PG_PODMAN_GLOBAL[@]} -gt 0 ]] || { echo "pg_podman_pull: pg_podman_init not run" >&2; return 125; }
    pg_hide_host_containers_cache podman "${PG_PODMAN_GLOBAL[@]}" pull "$@"
}

pg_podman_image_id() {
    pg_podman image inspect --format '{{.Id}}' "$1"
}

# pg_image_name IMAGE: the name with tag and digest removed (image is already normalized
# for registry-qualified references like 127.0.0.1:PORT/team-a/app:1.0).
pg_image_name() {
    local s="${1%%@*}" last
    last="${s##*/}"
    if [[ "$last" == *:* ]]; then
        s="${s%:*}"
    fi
    printf '%s\n' "$s"
}

# pg_cred_hash USER PASS
pg_cred_hash() {
    printf %s "$2" | "$PULLGATECTL" hash --username "$1" --password-stdin
}

pg_creds_json() {
    local name ns="$2" sname="$3" uid="$4" hash="$5"
    name="$(pg_image_name "$1")"
    printf '{"%s":{"kubernetesSecrets":[{"namespace":"%s","name":"%s","uid":"%s","credentialHash":"%s"}]}}' \
        "$name" "$ns" "$sname" "$uid" "$hash"
}

# pg_podman_pull_and_record STATE_DIR IMAGE NS USER PASS [SECRET_NAME] [SECRET_UID]
pg_podman_pull_and_record() {
    local state="$1" image="$2" ns="$3" user="$4" pass="$5" sname="${6:-regcred}" uid="${7:-}"
    [[ -n "$uid" ]] || uid="$(cat /proc/sys/kernel/random/uuid)"
    "$PULLGATECTL" "${PG_CTL_OPTS[@]}" --state-dir "$state" record-intent --image "$image" ||
        pg_fail "pullgatectl record-intent failed"
    pg_podman_pull --quiet --creds "$user:$pass" --tls-verify=false "$image" >/dev/null ||
        { "$PULLGATECTL" "${PG_CTL_OPTS[@]}" --state-dir "$state" record-failed --image "$image" || true
          pg_fail "podman pull $image failed"; }
    PG_PULLED_ID="$(pg_podman_image_id "$image")" || pg_fail "podman image inspect $image"
    PG_PULLED_HASH="$(pg_cred_hash "$user" "$pass")" || pg_fail "pullgatectl hash failed"
    PG_PULLED_UID="$uid"
    "$PULLGATECTL" "${PG_CTL_OPTS[@]}" --state-dir "$state" record-pulled --image "$image" --image-ref "$PG_PULLED_ID" \
        --secret "$ns/$sname/$uid:$PG_PULLED_HASH" || pg_fail "pullgatectl record-pulled failed"
    pg_log "pulled $image as $user (image ID $PG_PULLED_ID), recorded for secret $ns/$sname/$uid"
}

# podman parses --annotation as a CSV string slice: a value with commas or quotes (JSON)
# must be passed as one CSV-quoted field ("..." with inner quotes doubled).
pg_podman_csv_quote() {
    local s="${1//\"/\"\"}"
    printf '"%s"' "$s"
}

# pg_podman_run_as_tenant NS CREDS_JSON IMAGE [CMD...]
# Plays CRI-O: passes the keys CRI-O and the kubelet set as annotations. An empty
# CREDS_JSON means "no credentials annotation". Output: the container's output, or
# podman's error (with the hook's denial reason).
pg_podman_run_as_tenant() {
    local ns="$1" creds="$2" image="$3" id
    shift 3
    id="$(pg_podman_image_id "$image")" || return 125
    local -a ann=(
        --annotation io.container.manager=cri-o
        --annotation io.kubernetes.cri-o.ContainerType=container
        --annotation "io.kubernetes.pod.namespace=$ns"
        --annotation "io.kubernetes.pod.name=pod-$RANDOM"
        --annotation "io.kubernetes.pod.uid=$(cat /proc/sys/kernel/random/uuid)"
        --annotation io.kubernetes.container.name=app
        --annotation "io.kubernetes.cri-o.ImageName=$image"
        --annotation "io.kubernetes.cri-o.ImageRef=$id"
        --annotation "io.kubernetes.cri-o.Image=$image"
    )
    if [[ -n "$creds" ]]; then
        ann+=(--annotation "$(pg_podman_csv_quote "pullgate.dev/credentials=$creds")")
    fi
    pg_podman run "${PG_PODMAN_RUN_FLAGS[@]}" "${ann[@]}" "$image" "$@"
}
