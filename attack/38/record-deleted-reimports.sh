#!/bin/sh
# Finding 3: the user's own record (io.kvd.gnome settingsIn) deleted, or set to something else
# (garbage, a wrong type): the next login imports dconf's stale values again over every change
# made under kvd since the move.
. "$(dirname "$0")/lib.sh"
under_dconf gsettings set io.kvd.test int32 7
kvctl --system gnome enable >/dev/null; login
under_kvd gsettings set io.kvd.test int32 99
case "${1:-delete}" in
delete) kvctl delete io.kvd.gnome settingsIn >/dev/null ;;
garbage) kvctl set io.kvd.gnome settingsIn garbage >/dev/null ;;
type) kvctl set io.kvd.gnome settingsIn -int 1 >/dev/null ;;
esac
login || true
got=$(under_kvd gsettings get io.kvd.test int32)
[ "$got" = 99 ] || defect "settingsIn ${1:-delete}d: the next login overwrote kvd's 99 with dconf's stale $got"
fine "kvd's value kept"
