#!/bin/sh
# Finding 5: `kvctl --system gnome enable` run under a strict umask (077, as hardened root shells
# have) on a machine without /etc/environment.d makes that folder (and
# /etc/systemd/user/default.target.d) mode 0700: users' managers cannot read them, so no session
# gets GSETTINGS_BACKEND=kvd and no move runs, while `status` says "kvd for new sessions".
. "$(dirname "$0")/lib.sh"
rm -rf /etc/environment.d /etc/systemd/user/default.target.d
(umask 077; kvctl --system gnome enable >/dev/null)
modes="$(stat -c %a /etc/environment.d) $(stat -c %a /etc/systemd/user/default.target.d)"
seen=$(setpriv --reuid=65534 --regid=65534 --clear-groups env -i "$generator" 2>/dev/null | sed -n 's/^GSETTINGS_BACKEND=//p')
status=$(kvctl --system gnome status | head -1)
[ "$seen" = kvd ] || defect "folders made with modes $modes; a user's environment generator sees GSETTINGS_BACKEND='$seen'; status says: $status"
fine "folders $modes, users see kvd"
