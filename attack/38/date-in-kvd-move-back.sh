#!/bin/sh
# Finding 16: a date kvd holds under a GSettings path (a Swift app or kvctl wrote it) cannot go
# into dconf: the move back says "left out", yet succeeds, records "dconf", and resets dconf's own
# older value of that key (the reset of the keys kvd lacks counts the left-out key as lacking).
. "$(dirname "$0")/lib.sh"
dconf write /org/example/when/stamp "'dconf value'"
kvctl --system gnome enable >/dev/null; login
kvctl set org.example.when stamp -date 2026-01-01T00:00:00Z >/dev/null
kvctl --system gnome disable >/dev/null
status=0; login || status=$?
got=$(dconf read /org/example/when/stamp)
[ -n "$got" ] || defect "move back status $status, recorded $(kvctl get io.kvd.gnome settingsIn); dconf's value of the key kvd holds a date for is reset ([$got]), the date is gone from what the session sees"
fine "kept: $got"
