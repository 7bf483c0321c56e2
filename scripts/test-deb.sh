#!/usr/bin/env bash
# The Debian package end to end, as `make test` runs it (as root): build dist/kvd_*.deb, check it
# with lintian (no errors), check its upgrades in a throw-away root (scripts/test-deb-upgrade.sh),
# and GSettings and libkvd from it in another (scripts/test-deb-gsettings.sh),
# install it with apt-get, use kvctl from /usr/bin as an ordinary user
# (kvctl starts /usr/bin/kvd for them), check what postinst set up, remove it (users' data and
# /var/lib/kvd stay), purge it (/var/lib/kvd goes). Exits non-zero at the first difference.
# Usage: scripts/test-deb.sh BIN_DIR   (a release build with --static-swift-stdlib)
set -euo pipefail
bin=${1:?usage: scripts/test-deb.sh BIN_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { printf 'test-deb: %s\n' "$*" >&2; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
  echo "test-deb: skipped: installing a package needs root"
  exit 0
fi
if dpkg-query -W -f='${Status}' kvd 2>/dev/null | grep -q "installed"; then
  echo "test-deb: skipped: a kvd package is installed on this machine; the test would replace it"
  exit 0
fi
for tool in dpkg-deb apt-get lintian runuser useradd; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs lintian)"
done

"$root/scripts/build-deb.sh" "$bin"
deb=$(ls "$root"/dist/kvd_*_amd64.deb | tail -n1)
echo "test-deb: lintian $deb"
lintian --fail-on error --suppress-tags maintainer-script-calls-systemctl "$deb" || fail "lintian reports errors"
# Upgrades (the admin's disabled sockets stay disabled, kvd-system.service is restarted), in a
# throw-away root that leaves this machine as it was.
"$root/scripts/test-deb-upgrade.sh" "$bin" "$deb" || fail "the upgrade test failed"
# libkvd and the GSettings backend as a user gets them (gsettings with GSETTINGS_BACKEND=kvd, a C
# program built with pkg-config kvd), in another throw-away root.
"$root/scripts/test-deb-gsettings.sh" "$deb" || fail "the GSettings and libkvd test failed"
# A GNOME machine with a site's dconf policy and a user's dconf values, moved to kvd and back
# (kvctl --system gnome), every key of every installed schema the same three times; and the same
# with the system instance's dconf layer off, which must fail (the test can fail).
"$root/scripts/test-deb-gnome.sh" "$deb" || fail "the GNOME machine test failed"
no_layer_log=$(mktemp /tmp/kvd-deb-gnome-no-layer-XXXXXX.log)
if "$root/scripts/test-deb-gnome.sh" "$deb" --no-dconf-layer >"$no_layer_log" 2>&1; then
  fail "the GNOME machine test passed with the system instance's dconf layer off"
fi
grep -q "kvd differs from dconf" "$no_layer_log" ||
  fail "the GNOME machine test without the dconf layer failed otherwise: $(tail -3 "$no_layer_log")"
rm -f "$no_layer_log"
echo "test-deb: and with the system instance's dconf layer off, it fails as it must"

user=kvd-deb-user
work=$(mktemp -d /tmp/kvd-deb-test-XXXXXX)
made_user="" saved_state=""
cleanup() {
  local status=$?
  set +e
  pkill -u "$user" -x kvd 2>/dev/null
  dpkg-query -W kvd >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq kvd >/dev/null 2>&1
  [ -n "$made_user" ] && userdel "$user" 2>/dev/null
  if [ -n "$saved_state" ]; then rm -rf /var/lib/kvd; mv "$work/var-lib-kvd" /var/lib/kvd; fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
# Purge removes /var/lib/kvd: a system instance's state already on this machine is set aside
# for the test and put back after it.
if [ -e /var/lib/kvd ]; then mv /var/lib/kvd "$work/var-lib-kvd"; saved_state=1; fi

if ! getent passwd "$user" >/dev/null; then
  useradd --system --no-create-home --shell /usr/sbin/nologin --user-group "$user"
  made_user=1
fi
chmod 0755 "$work"   # the user reaches its home inside
install -d -o "$user" -g "$user" -m 0700 "$work/home"

echo "test-deb: apt-get install $deb"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >/dev/null
[ -x /usr/bin/kvctl ] && [ -x /usr/bin/kvd ] && [ -x /usr/bin/habits ] && [ -x /usr/bin/kvctl-plist ] || fail "the programs are not in /usr/bin"
[ -f /usr/share/man/man1/kvctl.1.gz ] && [ -f /usr/share/man/man8/kvd.8.gz ] || fail "the man pages are not installed"
[ -f /usr/share/bash-completion/completions/kvctl ] || fail "the bash completion is not installed"
modules=$(pkg-config --variable=giomoduledir gio-2.0)
libdir=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for file in "$modules/libgiokvd.so" "$libdir/libkvd.so.0" "$libdir/pkgconfig/kvd.pc" /usr/include/kvd.h /usr/bin/kvd-dconf-import \
            /usr/share/man/man1/kvd-dconf-import.1.gz; do
  [ -e "$file" ] || fail "$file is not installed"
done
grep -q '^libgiokvd.so:' "$modules/giomodule.cache" || fail "gio-querymodules did not list the module"
/usr/bin/kvctl --version | grep -q '^kvctl ' || fail "kvctl --version"
getent group kvd-admin >/dev/null || fail "postinst did not make the group kvd-admin"
[ -L /etc/systemd/user/sockets.target.wants/kvd.socket ] || fail "postinst did not enable kvd.socket for every user"
[ -L /etc/systemd/system/sockets.target.wants/kvd-system.socket ] || fail "postinst did not enable kvd-system.socket"
for unit in /usr/lib/systemd/user/kvd.socket /usr/lib/systemd/user/kvd.service /usr/lib/systemd/user/kvd-gnome-login.service \
            /usr/lib/systemd/system/kvd-system.socket /usr/lib/systemd/system/kvd-system.service; do
  [ -f "$unit" ] || fail "$unit is missing"
done
grep -q '^ExecStart=/usr/bin/kvd' /usr/lib/systemd/user/kvd.service || fail "kvd.service does not start /usr/bin/kvd"

as_user() { runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME="$work/home" "$@"; }
as_user /usr/bin/kvctl set com.example.deb greeting "hello from the package" || fail "kvctl set as $user"
got=$(as_user /usr/bin/kvctl get com.example.deb greeting) || fail "kvctl get as $user"
[ "$got" = "hello from the package" ] || fail "kvctl get printed '$got'"
[ -f "$work/home/.config/kvd/kvd.wal" ] || [ -f "$work/home/.config/kvd/com.example.deb.json" ] || fail "no state in the user's ~/.config/kvd"
echo "test-deb: $user set and read a value with /usr/bin/kvctl (kvd started from /usr/bin)"
pkill -u "$user" -x kvd || true

mkdir -p /var/lib/kvd && echo kept > /var/lib/kvd/test-deb-marker
DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq kvd >/dev/null
[ ! -e /usr/bin/kvctl ] || fail "remove left /usr/bin/kvctl"
[ ! -e "$modules/libgiokvd.so" ] && ! grep -q libgiokvd "$modules/giomodule.cache" 2>/dev/null ||
  fail "remove left the GSettings module or its giomodule.cache line"
[ ! -e /etc/systemd/user/sockets.target.wants/kvd.socket ] || fail "remove left kvd.socket enabled"
[ -f /var/lib/kvd/test-deb-marker ] || fail "remove deleted /var/lib/kvd (only purge may)"
[ -d "$work/home/.config/kvd" ] || fail "remove deleted the user's settings"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq kvd >/dev/null
[ ! -e /var/lib/kvd ] || fail "purge left /var/lib/kvd"
[ -d "$work/home/.config/kvd" ] || fail "purge deleted the user's settings"
echo "test-deb: installed, used, removed and purged: fine"
