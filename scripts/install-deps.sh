#!/usr/bin/env bash
# Installs what building and testing kvd needs and this machine lacks: libsystemd-dev (the
# daemon links libsystemd), libcurl4-openssl-dev (the etcd client links libcurl), systemd's
# tools (systemd-socket-activate, systemd-analyze), mandoc (the man pages' lint), zsh and fish
# (the completion tests), bubblewrap (the sandboxed-app tests), gcc, meson, ninja, valgrind and abigail-tools (libkvd's build, test and ABI check), the Python varlink client (an independent
# check of the protocol), and etcd (server and etcdctl: the fleet's tests start their own
# members on high ports). Quiet when all is there.
set -euo pipefail
export PATH="/opt/swift/usr/bin:$PATH"
need=()
pkg-config --exists libsystemd 2>/dev/null || need+=(libsystemd-dev pkg-config)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v systemd-socket-activate >/dev/null || need+=(systemd)
pkg-config --exists libcurl 2>/dev/null || need+=(libcurl4-openssl-dev)  # KVFleet's HTTP client
command -v etcd >/dev/null || need+=(etcd-server)
command -v etcdctl >/dev/null || need+=(etcd-client)
command -v lintian >/dev/null || need+=(lintian)           # make test checks the .deb
command -v objdump >/dev/null || need+=(binutils)          # build-deb.sh: strip, objdump
command -v mandoc >/dev/null || need+=(mandoc)  # scripts/check-man.sh lints the man pages
command -v zsh >/dev/null || need+=(zsh)        # the completion tests load kvctl's zsh and fish scripts
command -v fish >/dev/null || need+=(fish)
command -v bwrap >/dev/null || need+=(bubblewrap)  # make sandbox-test runs clients in a Flatpak-like sandbox
command -v setfacl >/dev/null || need+=(acl)  # the drop-in tests give a folder an access control list
command -v cc >/dev/null || need+=(gcc)              # libkvd, the C client library (clib/)
command -v valgrind >/dev/null || need+=(valgrind)  # make libkvd-test runs its test under valgrind
command -v meson >/dev/null || need+=(meson)         # clib/ builds with meson (clib/meson.build)
command -v ninja >/dev/null || need+=(ninja-build)   # and ninja
command -v abidiff >/dev/null && command -v abidw >/dev/null || need+=(abigail-tools)  # make abi-check (libkvd's ABI)
pkg-config --exists gio-2.0 gio-unix-2.0 2>/dev/null || need+=(libglib2.0-dev)  # libgiokvd.so, the GSettings backend (clib/gio/)
command -v gsettings >/dev/null && command -v gio-querymodules >/dev/null && command -v glib-compile-schemas >/dev/null || need+=(libglib2.0-bin)  # its tests, make install
/usr/bin/python3 -c 'import gi' 2>/dev/null || need+=(python3-gi)  # its PyGObject test
[ -x /usr/libexec/dconf-service ] || need+=(dconf-service)  # dconf beside kvd (README: moving settings over)
command -v dconf >/dev/null || need+=(dconf-cli)
[ -e "$(pkg-config --variable=giomoduledir gio-2.0 2>/dev/null)/libdconfsettings.so" ] || need+=(dconf-gsettings-backend)
command -v dbus-run-session >/dev/null || need+=(dbus-daemon)  # dconf-service on a private session bus
command -v dpkg-source >/dev/null || need+=(dpkg-dev)  # make giokvd-glib-suite: apt-get source glib2.0
command -v msgfmt >/dev/null || need+=(gettext)       # and its l10n test's catalog
# Schemas of real GNOME apps for the GNOME-machine test (scripts/test-deb-gnome.sh): the desktop's,
# GTK's and GNOME Settings Daemon's (relocatable custom keybindings), without the programs (no recommends).
schemas=()
[ -e /usr/share/glib-2.0/schemas/org.gnome.desktop.interface.gschema.xml ] || schemas+=(gsettings-desktop-schemas)
[ -e /usr/share/glib-2.0/schemas/org.gtk.Settings.FileChooser.gschema.xml ] || schemas+=(libgtk-3-common)
[ -e /usr/share/glib-2.0/schemas/org.gnome.settings-daemon.plugins.media-keys.gschema.xml ] || schemas+=(gnome-settings-daemon-common)
if ((${#need[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${need[*]}"
  $sudo apt-get update -qq
  # Debian's etcd-server starts a member on 127.0.0.1:2379 when installed; the tests do not want
  # it. A policy-rc.d that forbids starting services covers installs without systemd (here
  # systemd is not PID 1); where systemd runs, the unit is disabled and stopped afterwards.
  policy=/usr/sbin/policy-rc.d
  added_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null && $sudo chmod 755 "$policy" && added_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null || status=$?
  [ -z "$added_policy" ] || $sudo rm -f "$policy"
  [ "${status:-0}" -eq 0 ] || exit "$status"
  if [ -d /run/systemd/system ] && systemctl list-unit-files etcd.service >/dev/null 2>&1; then
    $sudo systemctl disable --now etcd.service >/dev/null 2>&1 || true
  fi
fi
if ((${#schemas[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${schemas[*]} (schemas only)"
  ((${#need[@]})) || $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${schemas[@]}" >/dev/null
fi
if ! python3 -c 'import varlink' 2>/dev/null; then
  echo "installing the Python varlink package"
  python3 -m pip install -q varlink 2>/dev/null || python3 -m pip install -q --break-system-packages varlink
fi
command -v swift >/dev/null || { echo "swift not found: install the Swift toolchain (see README)" >&2; exit 1; }
