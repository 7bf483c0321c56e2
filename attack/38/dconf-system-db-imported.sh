#!/bin/sh
# Finding 14: on a machine with a dconf system database (an /etc/dconf/profile/user naming
# system-db:local: site defaults), the move into kvd imports `dconf dump /`, which prints the
# system database's values too: the site's defaults become each user's own values in kvd, so a
# later change of the defaults (in kvd's system layer or dconf's) never reaches them.
. "$(dirname "$0")/lib.sh"
mkdir -p /etc/dconf/profile /etc/dconf/db/local.d
printf 'user-db:user\nsystem-db:local\n' > /etc/dconf/profile/user
printf '[io/kvd/test]\nreal=0.25\n' > /etc/dconf/db/local.d/00-site
dconf compile /etc/dconf/db/local /etc/dconf/db/local.d
export DCONF_PROFILE=user
[ "$(dconf read /io/kvd/test/real)" = 0.25 ] || { echo "setup: the site default is not seen" >&2; exit 2; }
kvctl --system gnome enable >/dev/null; login || true
got=$(kvctl get io.kvd.test real 2>/dev/null || echo none)
[ "$got" = none ] || defect "the dconf site default io.kvd.test real=0.25 became the user's own value in kvd ($got)"
fine "site defaults stay out of the user's values"
