#!/bin/sh
# Finding 7: the move at login runs `dconf dump /` / `dconf load /` (clib/tools/login.c), but the
# Debian package neither depends on nor recommends dconf-cli (packaging/deb/control.in takes only
# the shared libraries' packages): without it every login's move fails, and the session, on kvd
# after `enable`, shows none of the user's settings (see retry-overwrites-kvd-change.sh for what
# the retry then does).
root=$(cd "$(dirname "$0")/../.." && pwd)
if grep -q 'dconf-cli' "$root/packaging/deb/control.in" "$root/scripts/build-deb.sh"; then echo "OK: dconf-cli named"; exit 0; fi
echo "DEFECT: neither packaging/deb/control.in nor scripts/build-deb.sh names dconf-cli" >&2; exit 1
