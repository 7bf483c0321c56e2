#!/usr/bin/env bash
# Installs what building and testing kvd needs and this machine lacks: libsystemd-dev (the
# daemon links libsystemd), systemd's tools (systemd-socket-activate, systemd-analyze) and the
# Python varlink client (an independent check of the protocol). Quiet when all is there.
set -euo pipefail
export PATH="/opt/swift/usr/bin:$PATH"
need=()
pkg-config --exists libsystemd 2>/dev/null || need+=(libsystemd-dev pkg-config)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v systemd-socket-activate >/dev/null || need+=(systemd)
if ((${#need[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! python3 -c 'import varlink' 2>/dev/null; then
  echo "installing the Python varlink package"
  python3 -m pip install -q varlink 2>/dev/null || python3 -m pip install -q --break-system-packages varlink
fi
command -v swift >/dev/null || { echo "swift not found: install the Swift toolchain (see README)" >&2; exit 1; }
