#!/usr/bin/env bash
# The package's upgrades, in a throw-away root: an overlay of / in a private mount namespace
# (nothing reaches the machine's /etc, /var or dpkg database), where dpkg installs a package one
# version older than DEB (the same tree, rebuilt with a lower version), the admin disables
# kvd-system.socket and, globally, kvd.socket, and dpkg upgrades to DEB. Checks that the upgrade
# enables nothing again (deb-systemd-helper's state keeps the admin's choice), that it asks
# systemd to restart kvd-system.service if it runs (try-restart), that a first install enables
# both sockets and starts the system one, that remove disables them and a new install enables them
# again, that a socket disabled before remove stays disabled until purge; and the same upgrade
# from a package made with 0.1.0's maintainer scripts (Tests/Packaging/deb-0.1.0), which kept no state.
#
# systemd is not PID 1 here: the root gets /run/systemd/system (so the scripts act as on a
# systemd machine) and a systemctl on PATH that records what would change running units
# (daemon-reload, start, try-restart, ...) and runs the real systemctl, offline, for what only
# reads or changes unit files (preset, enable, disable, is-enabled). A /usr/sbin/policy-rc.d (build
# machines and containers have one that forbids starting anything) is taken away in that root.
# Usage: scripts/test-deb-upgrade.sh BIN_DIR DEB   (as root; scripts/test-deb.sh runs it)
set -euo pipefail
bin=${1:?usage: scripts/test-deb-upgrade.sh BIN_DIR DEB}
deb=$(readlink -f "${2:?usage: scripts/test-deb-upgrade.sh BIN_DIR DEB}")
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { printf 'test-deb-upgrade: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "test-deb-upgrade: skipped: needs root"; exit 0; }
command -v unshare >/dev/null || fail "unshare is missing (util-linux)"

work=$(mktemp -d /tmp/kvd-deb-upgrade-XXXXXX)
trap 'rm -rf "$work"' EXIT
version=$(dpkg-deb -f "$deb" Version)
older="${version}~old"
dpkg --compare-versions "$older" lt "$version" || fail "$older does not sort before $version"
# old.deb: this tree's scripts; legacy.deb: 0.1.0's (Tests/Packaging/deb-0.1.0), which kept no state.
KVD_DEB_VERSION=$older KVD_DEB_DIR=$work "$root/scripts/build-deb.sh" "$bin" >/dev/null
mv "$work/kvd_${older}_amd64.deb" "$work/old.deb"
KVD_DEB_VERSION=$older KVD_DEB_DIR=$work KVD_DEB_SCRIPTS=$root/Tests/Packaging/deb-0.1.0 "$root/scripts/build-deb.sh" "$bin" >/dev/null
mv "$work/kvd_${older}_amd64.deb" "$work/legacy.deb"
cp "$deb" "$work/new.deb"

# What runs inside the throw-away root, as root there.
cat > "$work/inside.sh" <<'INSIDE'
set -eu
fail() { printf 'test-deb-upgrade: %s\n' "$*" >&2; exit 1; }
calls=/run/systemctl-calls
system_link=/etc/systemd/system/sockets.target.wants/kvd-system.socket
user_link=/etc/systemd/user/sockets.target.wants/kvd.socket
export DEBIAN_FRONTEND=noninteractive PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
dpkg_quietly() { dpkg "$@" >/run/dpkg.log 2>&1 || { cat /run/dpkg.log >&2; fail "dpkg $*"; }; }
install_deb() { dpkg_quietly -i "$1"; }
enabled() { [ -L "$system_link" ] && [ -L "$user_link" ]; }
disabled() { [ ! -e "$system_link" ] && [ ! -L "$system_link" ] && [ ! -e "$user_link" ] && [ ! -L "$user_link" ]; }
asked() { grep -qx -- "$1" "$calls"; }
admin_disables() { /usr/bin/systemctl --root=/ disable kvd-system.socket 2>/dev/null; /usr/bin/systemctl --root=/ --global disable kvd.socket 2>/dev/null; }

if dpkg-query -W kvd >/dev/null 2>&1; then dpkg_quietly --purge kvd; fi
# From a kvd whose scripts kept no deb-systemd-helper state.
install_deb /tmp/legacy.deb
enabled || fail "0.1.0's scripts did not enable the sockets"
admin_disables
echo kvd-system.service > /run/active-units
: > "$calls"
install_deb /tmp/new.deb
disabled || fail "the upgrade from 0.1.0's scripts enabled again the sockets the admin disabled"
asked "try-restart kvd-system.service" || fail "the upgrade from 0.1.0's scripts did not restart kvd-system.service: $(cat $calls)"
dpkg_quietly --purge kvd
: > /run/active-units
: > "$calls"

install_deb /tmp/old.deb
enabled || fail "a first install did not enable kvd-system.socket and kvd.socket"
asked "start kvd-system.socket" || fail "a first install did not start kvd-system.socket: $(cat $calls)"
asked "try-restart kvd-system.service" && fail "a first install restarted kvd-system.service"

admin_disables
disabled || fail "the admin's systemctl disable left links"
: > "$calls"
echo kvd-system.service > /run/active-units
install_deb /tmp/new.deb
disabled || fail "the upgrade enabled again the sockets the admin disabled"
asked "try-restart kvd-system.service" || fail "the upgrade did not restart kvd-system.service: $(cat $calls)"
echo "test-deb-upgrade: an upgrade kept both sockets disabled and restarted kvd-system.service"

/usr/bin/systemctl --root=/ enable kvd-system.socket 2>/dev/null
/usr/bin/systemctl --root=/ --global enable kvd.socket 2>/dev/null
install_deb /tmp/new.deb
enabled || fail "reinstalling disabled the sockets the admin enabled again"

: > "$calls"
dpkg_quietly --remove kvd
disabled || fail "remove left a socket enabled"
asked "stop kvd-system.socket kvd-system.service" || fail "remove did not stop the system instance: $(cat $calls)"
install_deb /tmp/new.deb
enabled || fail "installing after remove did not enable the sockets"

admin_disables
dpkg_quietly --remove kvd
install_deb /tmp/new.deb
disabled || fail "installing after remove enabled the sockets the admin had disabled"
dpkg_quietly --purge kvd
[ -z "$(ls -A /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-user-helper-enabled 2>/dev/null | grep kvd)" ] ||
  fail "purge left deb-systemd-helper's state"
install_deb /tmp/new.deb
enabled || fail "installing after purge did not enable the sockets"
dpkg_quietly --purge kvd
echo "test-deb-upgrade: remove, install again and purge keep or forget the admin's choice as they should"
INSIDE

# A systemctl that records what would change running units, and runs the real one (offline, on
# the root's unit files) for the rest; is-active answers from /run/active-units.
cat > "$work/systemctl" <<'STUB'
#!/bin/sh
for argument; do
  case $argument in
    preset | enable | disable | is-enabled | --version) exec /usr/bin/systemctl --root=/ "$@" ;;
  esac
done
words=$(printf '%s ' "$@" | sed -e 's/--system //g; s/--quiet //g; s/ $//')
case $words in
  "is-active -- "*) grep -qx -- "${words#is-active -- }" /run/active-units 2>/dev/null; exit ;;
esac
printf '%s\n' "$words" >> /run/systemctl-calls
STUB
chmod 0755 "$work/systemctl"

unshare --mount --propagation private /bin/bash -euo pipefail -c '
  work=$1
  layers=$work/layers
  mkdir -p "$layers"
  mount -t tmpfs kvd-upgrade "$layers"
  mkdir "$layers/upper" "$layers/work" "$layers/root"
  mount -t overlay kvd-upgrade -o "lowerdir=/,upperdir=$layers/upper,workdir=$layers/work" "$layers/root"
  r=$layers/root
  mount --rbind /dev "$r/dev"
  mount -t proc proc "$r/proc"
  mount -t tmpfs tmpfs "$r/run"
  mount -t tmpfs tmpfs "$r/tmp"
  # dpkg'"'"'s database as a copy: another dpkg run on this machine meanwhile would change the
  # overlay'"'"'s lower layer under it (the kernel then answers "Stale file handle").
  mount -t tmpfs tmpfs "$r/var/lib/dpkg"
  cp -a /var/lib/dpkg/. "$r/var/lib/dpkg/"
  mkdir -p "$r/run/systemd/system"
  : > "$r/run/systemctl-calls"
  install -m 0755 "$work/systemctl" "$r/usr/local/sbin/systemctl"
  rm -f "$r/usr/sbin/policy-rc.d"  # a build machine'"'"'s "start nothing"; here, a machine that does
  rm -f "$r/var/lib/man-db/auto-update"  # no man-db index rebuilt after each dpkg run
  cp "$work/legacy.deb" "$work/old.deb" "$work/new.deb" "$work/inside.sh" "$r/tmp/"
  chroot "$r" /bin/sh /tmp/inside.sh
' kvd-upgrade "$work"
