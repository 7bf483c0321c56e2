#!/bin/sh
# Finding 17: dconf lockdown (an admin's /etc/dconf/db/local.d/locks/) stops holding once the
# switch is on: the move neither carries dconf's locks into kvd's system layer nor refuses, and
# nothing else does, so under kvd every user can change what the administrator locked in dconf
# (screen lock, USB, proxy...). The same goes for GDM's greeter (DCONF_PROFILE=gdm, its banner and
# user list settings), whose user manager reads /etc/environment.d too.
. "$(dirname "$0")/lib.sh"
mkdir -p /etc/dconf/profile /etc/dconf/db/local.d/locks
printf 'user-db:user\nsystem-db:local\n' > /etc/dconf/profile/user
printf '[io/kvd/test]\nflag=true\n' > /etc/dconf/db/local.d/00-lockdown
printf '/io/kvd/test/flag\n' > /etc/dconf/db/local.d/locks/00-lockdown
dconf compile /etc/dconf/db/local /etc/dconf/db/local.d
export DCONF_PROFILE=user
[ "$(under_dconf gsettings writable io.kvd.test flag)" = false ] || { echo "setup: dconf does not lock the key" >&2; exit 2; }
kvctl --system gnome enable >/dev/null; login || true
writable=$(under_kvd gsettings writable io.kvd.test flag)
under_kvd gsettings set io.kvd.test flag false 2>/dev/null || true
got=$(under_kvd gsettings get io.kvd.test flag)
[ "$writable" = false ] && [ "$got" = true ] || defect "a key dconf's system database locks is writable under kvd ($writable) and the user changed it to $got"
fine "dconf's lock holds under kvd"
