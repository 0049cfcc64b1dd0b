#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs everything pullgate's build, tests and demo need on Debian 12.
# Idempotent: when every package is already present it does nothing.
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake pkg-config libjansson-dev libssl-dev libdbus-1-dev
  # tests: unit, sanitizers, fuzzing, D-Bus
  check clang libclang-rt-14-dev llvm dbus python3
  # real components for integration tests and the demo
  runc podman containerd skopeo umoci docker-registry apache2-utils busybox-static
  python3-grpcio python3-grpc-tools uidmap slirp4netns fuse-overlayfs iptables
  # daemons: pullgate-cri (gRPC C core, protobuf-c), pullgate-webhook (libmicrohttpd, libcurl)
  libgrpc-dev protobuf-c-compiler libprotobuf-c-dev libmicrohttpd-dev libcurl4-openssl-dev
  python3-protobuf openssl
  # keyed annotations read independently in the tests (AES-SIV, HKDF: docs/annotation-hmac.md)
  python3-cryptography
  # webhook tests: manifest checks (YAML) and TLS calls as the API server makes them
  python3-yaml curl
  # packaging (cpio: test_packaging unpacks the RPM with rpm2cpio to check what it ships)
  debhelper devscripts lintian rpm rpmlint fakeroot cpio
  # pullgatectl doctor (pullgate-doctor): the kubelet's configuration is YAML (libyaml),
  # containerd's and CRI-O's are TOML (toml++, C++: Debian 12 packages no C TOML parser)
  libyaml-dev libtomlplusplus-dev g++
  # test_doctor: --json validated against docs/doctor.schema.json (python3-jsonschema), and
  # the pullgate-cri drop-in a fix writes checked with systemd-analyze verify (systemd; it
  # need not run)
  python3-jsonschema systemd
  # /metrics (test_metrics, the promtool checks of the exposition, the alert rules and
  # the dashboard): a real Prometheus and promtool, one package (19 MB download)
  prometheus
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The tests start their own Prometheus on a free port: the packaged service is not wanted.
if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
echo "install-deps: done"
