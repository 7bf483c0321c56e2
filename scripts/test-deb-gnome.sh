#!/usr/bin/env bash
# A GNOME machine moved to kvd and back with nothing lost, as issue-free as an admin sees it, in a
# throw-away root (an overlay of / in private mount and PID namespaces, as
# scripts/test-deb-gsettings.sh makes it; nothing reaches the machine): dpkg installs DEB; the
# site has dconf defaults and locks (/etc/dconf/db/site.d, its locks/ and a profile, compiled by
# `dconf update` for dconf's sake: kvd reads the keyfiles themselves); a user has a dconf database
# of changed values. Then, for every key of every installed schema, `gsettings list-recursively`
# and each key's writability (PyGObject: Gio.Settings.is_writable, what `gsettings writable` asks)
# must read the same three times: with dconf; after `kvctl --system gnome enable` and a new login
# (kvd); after `kvctl --system gnome disable` and another login (dconf again). A login is what
# systemd's user manager does: the environment from environment.d (systemd's own generator), then
# kvd-gnome-login.service's command (kvd-dconf-import --login).
# Usage: scripts/test-deb-gnome.sh DEB [--no-dconf-layer]   (as root; scripts/test-deb.sh runs it)
#   --no-dconf-layer: the system instance without dconf's files (--dconf-dir ''): must fail.
set -euo pipefail
deb=$(readlink -f "${1:?usage: scripts/test-deb-gnome.sh DEB [--no-dconf-layer]}")
layer_flag=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { printf 'test-deb-gnome: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "test-deb-gnome: skipped: needs root"; exit 0; }
command -v dconf >/dev/null && command -v gsettings >/dev/null && [ -x /usr/libexec/dconf-service ] ||
  fail "dconf, dconf-service and gsettings are needed (scripts/install-deps.sh installs them)"
schema_count=$(ls /usr/share/glib-2.0/schemas/*.gschema.xml 2>/dev/null | wc -l)
[ "$schema_count" -ge 20 ] || fail "only $schema_count schemas installed (scripts/install-deps.sh installs gsettings-desktop-schemas and more)"

work=$(mktemp -d /tmp/kvd-deb-gnome-XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$deb" "$work/kvd.deb"
printf '%s\n' "$layer_flag" > "$work/layer-flag"

cat > "$work/snapshot.py" <<'SNAPSHOT'
# Every key of every installed schema (and one relocatable path): its writability, as
# `gsettings writable` asks GLib. The values come from `gsettings list-recursively` beside it.
import sys
from gi.repository import Gio
source = Gio.SettingsSchemaSource.get_default()
fixed, _ = source.list_schemas(True)
objects = [(name, None) for name in sorted(fixed)]
objects.append(("org.gnome.desktop.app-folders.folder", "/org/gnome/desktop/app-folders/folders/Utilities/"))
objects.append(("org.gnome.settings-daemon.plugins.media-keys.custom-keybinding",
                "/org/gnome/settings-daemon/plugins/media-keys/custom-keybindings/custom0/"))
for name, path in objects:
    schema = source.lookup(name, True)
    settings = Gio.Settings.new_full(schema, None, path)
    for key in sorted(schema.list_keys()):
        print(name, path or "", key, settings.get_value(key).print_(True), settings.is_writable(key))
SNAPSHOT

# What runs inside the throw-away root, as root there.
cat > "$work/inside.sh" <<'INSIDE'
set -eu
fail() { printf 'test-deb-gnome: %s\n' "$*" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
dpkg -i /tmp/kvd.deb >/run/dpkg.log 2>&1 || { cat /run/dpkg.log >&2; fail "dpkg -i"; }

# The site's dconf policy, as a GNOME admin writes it.
mkdir -p /etc/dconf/profile /etc/dconf/db/site.d/locks
printf 'user-db:user\nsystem-db:site\n' > /etc/dconf/profile/user
cat > /etc/dconf/db/site.d/00-site <<'SITE'
# The site's defaults.
[org/gnome/desktop/interface]
clock-format='12h'
font-name='Cantarell 12'
enable-animations=false

[org/gnome/desktop/background]
picture-options='centered'
primary-color='#223344'

[org/gnome/desktop/screensaver]
lock-delay=uint32 30

[org/gnome/desktop/app-folders/folders/Utilities]
name='Site utilities'
SITE
cat > /etc/dconf/db/site.d/locks/00-site <<'LOCKS'
# Users may not change these.
/org/gnome/desktop/interface/clock-format
/org/gnome/desktop/screensaver/lock-delay
/org/gnome/desktop/lockdown/disable-command-line
LOCKS
dconf update || fail "dconf update"

# The system instance, as kvd-system.socket would start it.
mkdir -p /run/kvd
if [ "$(cat /tmp/layer-flag)" = --no-dconf-layer ]; then
  /usr/bin/kvd --system --dconf-dir '' >/run/kvd-system.log 2>&1 &
else
  /usr/bin/kvd --system >/run/kvd-system.log 2>&1 &
fi
tries=0
while [ ! -S /run/kvd/system.sock ]; do
  [ $tries -lt 200 ] || { cat /run/kvd-system.log >&2; fail "the system instance did not start"; }
  tries=$((tries + 1)); sleep 0.05
done

user=kvd-gnome-user
useradd --create-home --home-dir /home/$user --shell /bin/sh "$user"
uid=$(id -u "$user")
install -d -o "$user" -m 0700 "/run/user/$uid"
as_user() {
  runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME=/home/$user XDG_RUNTIME_DIR=/run/user/$uid \
    DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" "$@"
}
as_user dbus-daemon --session --fork --address="unix:path=/run/user/$uid/bus" >/dev/null 2>&1 || fail "the user's session bus"

# The user's own changed values, in dconf (the site's locked key refuses theirs, as dconf does).
as_user gsettings set org.gnome.desktop.interface color-scheme prefer-dark
as_user gsettings set org.gnome.desktop.interface font-name 'Noto Sans 11'
as_user gsettings set org.gnome.desktop.wm.preferences button-layout 'close:appmenu'
as_user gsettings set org.gnome.desktop.input-sources sources "[('xkb', 'us'), ('xkb', 'de')]"
as_user gsettings set org.gnome.desktop.background picture-options zoom
as_user gsettings set org.gnome.desktop.app-folders.folder:/org/gnome/desktop/app-folders/folders/Utilities/ apps "['a.desktop']"
keybinding=org.gnome.settings-daemon.plugins.media-keys.custom-keybinding:/org/gnome/settings-daemon/plugins/media-keys/custom-keybindings/custom0/
as_user gsettings set "$keybinding" name 'Terminal'
as_user gsettings set "$keybinding" binding '<Super>t'
as_user gsettings set org.gnome.settings-daemon.plugins.media-keys custom-keybindings \
  "['/org/gnome/settings-daemon/plugins/media-keys/custom-keybindings/custom0/']"
as_user gsettings set org.gnome.desktop.interface clock-format 24h 2>/dev/null && fail "dconf let the user write a locked key"

generator=/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator
[ -x "$generator" ] || fail "systemd's environment.d generator is missing"
grep -qx 'ExecStart=/usr/bin/kvd-dconf-import --login' /usr/lib/systemd/user/kvd-gnome-login.service ||
  fail "the installed kvd-gnome-login.service does not run kvd-dconf-import --login"
# A login: the session's environment from environment.d, then what kvd-gnome-login.service runs.
login() {
  session=$(as_user "$generator" | grep '^GSETTINGS_BACKEND=' || true)
  as_user env $session /usr/bin/kvd-dconf-import --login >>/run/login.log 2>&1 ||
    { cat /run/login.log >&2; fail "kvd-dconf-import --login ($session)"; }
}
snapshot() { # NAME: what the user's apps see through the session's backend
  as_user env $session gsettings list-recursively > "/run/$1.list" || fail "gsettings list-recursively ($1)"
  as_user env $session /usr/bin/python3 /tmp/snapshot.py > "/run/$1.keys" || fail "the writability of every key ($1)"
  [ "$(wc -l < "/run/$1.keys")" -ge 100 ] || fail "only $(wc -l < "/run/$1.keys") keys seen ($1)"
}
compare() { # A B
  for kind in list keys; do
    cmp -s "/run/$1.$kind" "/run/$2.$kind" || fail "$2 differs from $1 ($kind): $(diff "/run/$1.$kind" "/run/$2.$kind" | head -20)"
  done
}
session=""
snapshot dconf
grep -q "^org.gnome.desktop.interface  clock-format '12h' False$" /run/dconf.keys || fail "dconf did not apply the site: $(grep clock-format /run/dconf.keys)"

kvctl --system gnome enable >/dev/null || fail "kvctl --system gnome enable"
login
[ "$session" = GSETTINGS_BACKEND=kvd ] || fail "after enable, a login's environment has no GSETTINGS_BACKEND=kvd"
snapshot kvd
compare dconf kvd
as_user kvctl --json export org.gnome.desktop.interface - > /run/own.json || fail "kvctl export"
grep -q '"font-name"' /run/own.json || fail "the user's own font-name is not the user's in kvd: $(cat /run/own.json)"
! grep -q '"enable-animations"' /run/own.json || fail "the site's default enable-animations became the user's own in kvd"
echo "test-deb-gnome: after enable and a login, $(wc -l < /run/kvd.keys) keys of $(ls /usr/share/glib-2.0/schemas/*.gschema.xml | wc -l) schema files read and are writable under kvd as under dconf"
as_user env $session gsettings list-recursively org.gnome.desktop.interface >/dev/null
as_user env G_MESSAGES_DEBUG=GLib-GIO $session gsettings get org.gnome.desktop.interface color-scheme 2>&1 |
  grep -q 'Found default implementation kvd' || fail "GLib did not choose kvd after enable"

kvctl --system gnome disable >/dev/null || fail "kvctl --system gnome disable"
login
[ -z "$session" ] || fail "after disable, a login's environment still has $session"
snapshot back
compare dconf back
echo "test-deb-gnome: after disable and a login, every key reads and is writable under dconf as before"
INSIDE

"$root/scripts/throwaway-root.sh" "$work"
