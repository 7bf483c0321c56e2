#!/bin/sh
# Finding 13: kvd's record of the move is read through the system layer: a system default for
# io.kvd.gnome settingsIn (an admin's drop-in or `kvctl --system set` made from a template user's
# domains, which hold it) = "kvd" makes every user's first login skip the move: their dconf values
# never come into kvd. With `lock` instead: the record can never be written, so every login moves
# dconf's values in again, over the user's changes under kvd.
. "$(dirname "$0")/lib.sh"
under_dconf gsettings set io.kvd.test int32 7
kvctl --system gnome enable >/dev/null
case "${1:-default}" in
default)
    kvctl --system set io.kvd.gnome settingsIn kvd >/dev/null
    login || true
    got=$(under_kvd gsettings get io.kvd.test int32)
    [ "$got" = 7 ] || defect "with a system default settingsIn=kvd the move never ran: int32 under kvd is $got (dconf: 7); $(tail -1 "$dir/login.log")" ;;
lock)
    kvctl --system lock io.kvd.gnome settingsIn >/dev/null
    login || true
    under_kvd gsettings set io.kvd.test int32 99
    login || true
    got=$(under_kvd gsettings get io.kvd.test int32)
    [ "$got" = 99 ] || defect "with settingsIn locked, each login moves again: kvd's 99 overwritten by dconf's $got" ;;
esac
fine "the record is the user's own"
