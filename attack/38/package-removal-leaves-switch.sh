#!/bin/sh
# Finding 12: removing (or purging) the kvd package while the switch is on leaves
# /etc/environment.d/50-kvd-gnome.conf (GSETTINGS_BACKEND=kvd) and the default.target drop-in
# wanting a unit that is gone: every GSettings app of every session then warns "Can't find module
# 'kvd' specified in GSETTINGS_BACKEND" and falls back to dconf, whose values are those from
# before the switch; kvd-dconf-import is gone, so the values set under kvd never move back.
root=$(cd "$(dirname "$0")/../.." && pwd)
if grep -q '50-kvd-gnome' "$root/packaging/deb/prerm" "$root/packaging/deb/postrm"; then echo "OK: the maintainer scripts handle the switch"; exit 0; fi
schema=$(gsettings list-schemas | head -1); key=$(gsettings list-keys "$schema" | head -1)
out=$(env -u GIO_EXTRA_MODULES GSETTINGS_BACKEND=kvd gsettings get "$schema" "$key" 2>&1 >/dev/null | grep . | head -1)
echo "DEFECT: packaging/deb/prerm and postrm never name 50-kvd-gnome.conf; a session after removal: $out" >&2; exit 1
