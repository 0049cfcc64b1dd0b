# SPDX-License-Identifier: Apache-2.0
# Installed by packaging/CMakeLists.txt (component "tools", the node package):
#  - systemd units for the hourly prune of unused pull records, and its script
#  - a tmpfiles.d entry creating the writable record directory 0700
#  - the D-Bus introspection XML when it exists

# systemd's directories. With prefix /usr, use what systemd.pc says (Debian 12:
# /lib/systemd/system); otherwise stay under the prefix so an unprivileged
# `cmake --install` to /usr/local or a staging prefix never writes outside it.
set(_pg_unitdir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
set(_pg_tmpfilesdir "${CMAKE_INSTALL_PREFIX}/lib/tmpfiles.d")
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  pkg_get_variable(_pg_pc_unitdir systemd systemdsystemunitdir)
  pkg_get_variable(_pg_pc_tmpfilesdir systemd tmpfilesdir)
  if(_pg_pc_unitdir)
    set(_pg_unitdir "${_pg_pc_unitdir}")
  endif()
  if(_pg_pc_tmpfilesdir)
    set(_pg_tmpfilesdir "${_pg_pc_tmpfilesdir}")
  endif()
endif()
set(PG_SYSTEMD_UNIT_DIR "${_pg_unitdir}" CACHE PATH "Where systemd units are installed")
set(PG_TMPFILES_DIR "${_pg_tmpfilesdir}" CACHE PATH "Where tmpfiles.d entries are installed")
set(PG_STATE_DIR "/var/lib/pullgate" CACHE PATH "The writable record directory (config stateDir default)")
set(PG_PRUNE_SCRIPT_DIR "${CMAKE_INSTALL_FULL_LIBEXECDIR}/pullgate")

configure_file(${CMAKE_CURRENT_SOURCE_DIR}/systemd/pullgate-prune.service.in
               ${CMAKE_CURRENT_BINARY_DIR}/pullgate-prune.service @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pullgate-prune.service
              ${CMAKE_CURRENT_SOURCE_DIR}/systemd/pullgate-prune.timer
  DESTINATION ${PG_SYSTEMD_UNIT_DIR} COMPONENT tools)
install(PROGRAMS ${CMAKE_CURRENT_SOURCE_DIR}/systemd/pullgate-prune
  DESTINATION ${PG_PRUNE_SCRIPT_DIR} COMPONENT tools)
# Run by the packages before removal (deb prerm, rpm %preun) and by hand: does the
# runtime or the kubelet still depend on pullgate? (docs/lifecycle.md)
install(PROGRAMS ${CMAKE_CURRENT_SOURCE_DIR}/pullgate-still-wired
  DESTINATION ${PG_PRUNE_SCRIPT_DIR} COMPONENT tools)

# pullgate-cri's unit, only when the daemon is built (the top CMakeLists adds cri/ after
# packaging/, so test the same condition it uses rather than the target).
if(PG_BUILD_CRI AND EXISTS ${PROJECT_SOURCE_DIR}/cri/CMakeLists.txt)
  configure_file(${CMAKE_CURRENT_SOURCE_DIR}/systemd/pullgate-cri.service.in
                 ${CMAKE_CURRENT_BINARY_DIR}/pullgate-cri.service @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pullgate-cri.service
    DESTINATION ${PG_SYSTEMD_UNIT_DIR} COMPONENT tools)
endif()

file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/pullgate.tmpfiles.conf
  "# pullgate: the writable pull record directory (kubelet image_manager layout).\n"
  "d ${PG_STATE_DIR} 0700 root root -\n")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pullgate.tmpfiles.conf
  DESTINATION ${PG_TMPFILES_DIR} RENAME pullgate.conf COMPONENT tools)

if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/dbus/dev.pullgate.PullGate1.xml)
  install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/dbus/dev.pullgate.PullGate1.xml
    DESTINATION ${CMAKE_INSTALL_DATADIR}/dbus-1/interfaces COMPONENT tools)
endif()

# What the docs cite, for a node or a cluster without the source tree (docs/metrics.md,
# docs/webhook.md): the alert rules as a plain Prometheus rules file (made from the
# PrometheusRule, which is installed too), the Grafana dashboard, and make-certs.sh with the
# template it fills in. Architecture-independent data: /usr/share/pullgate.
set(PG_SHARE_DIR ${CMAKE_INSTALL_DATADIR}/pullgate)
set(_pg_k8s ${CMAKE_CURRENT_SOURCE_DIR}/kubernetes)
add_custom_command(
  OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/pullgate-rules.yml
  COMMAND ${CMAKE_COMMAND} -DIN=${_pg_k8s}/prometheus-rules.yaml
          -DOUT=${CMAKE_CURRENT_BINARY_DIR}/pullgate-rules.yml -P ${CMAKE_CURRENT_SOURCE_DIR}/plain-rules.cmake
  DEPENDS ${_pg_k8s}/prometheus-rules.yaml ${CMAKE_CURRENT_SOURCE_DIR}/plain-rules.cmake
  COMMENT "plain Prometheus rules from the PrometheusRule"
  VERBATIM)
add_custom_target(pullgate-plain-rules ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/pullgate-rules.yml)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pullgate-rules.yml ${_pg_k8s}/prometheus-rules.yaml
  DESTINATION ${PG_SHARE_DIR}/prometheus COMPONENT tools)
install(FILES ${_pg_k8s}/grafana-dashboard.json DESTINATION ${PG_SHARE_DIR}/grafana
  RENAME pullgate-dashboard.json COMPONENT tools)
install(PROGRAMS ${_pg_k8s}/make-certs.sh DESTINATION ${PG_SHARE_DIR}/kubernetes COMPONENT tools)
install(FILES ${_pg_k8s}/mutatingwebhook.yaml.in DESTINATION ${PG_SHARE_DIR}/kubernetes
  COMPONENT tools)
