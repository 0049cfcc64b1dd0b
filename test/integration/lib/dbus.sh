# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# A private dbus-daemon for a test (source after common.sh):
#
#   pg_dbus_daemon_start    starts one on a unix socket in a fresh temp dir, with a
#                           policy that lets anyone send, own and eavesdrop; sets
#                           PG_BUS_ADDR (its address) and PG_BUS_PID; stopped at exit.
#                           Skips the test (77) when dbus-daemon is not installed.

if [[ -n "${PG_DBUS_SH_LOADED:-}" ]]; then return 0; fi
PG_DBUS_SH_LOADED=1

pg_dbus_daemon_start() {
    command -v dbus-daemon >/dev/null 2>&1 || pg_skip "dbus-daemon not installed (package dbus)"
    local dir
    dir="$(pg_mktemp_dir dbus)"
    cat >"$dir/bus.conf" <<EOF_CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$dir/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOF_CONF
    dbus-daemon --config-file="$dir/bus.conf" --nofork --print-address=3 \
        3>"$dir/bus.address" 2>"$dir/bus.log" &
    PG_BUS_PID=$!
    pg_on_exit "pg_kill_wait $PG_BUS_PID 3"
    local i
    for ((i = 0; i < 100; i++)); do
        [[ -s "$dir/bus.address" ]] && break
        sleep 0.1
    done
    PG_BUS_ADDR="$(head -n1 "$dir/bus.address")"
    [[ -n "$PG_BUS_ADDR" ]] || pg_fail "dbus-daemon did not start: $(cat "$dir/bus.log")"
}
