#!/bin/sh
# Tried: a dconf key at the root (/rootkey) and one in a folder named like an escape (/_2D/k)
# go into kvd and come back (on, a change under kvd, off).
. "$(dirname "$0")/lib.sh"
dconf write /rootkey "uint32 5"
dconf write /_2D/k "'esc'"
kvctl --system gnome enable >/dev/null; login
in_kvd="$(kvctl --json get _ rootkey) $(kvctl get _5F2D k)"
kvctl set _5F2D k changed >/dev/null
kvctl --system gnome disable >/dev/null
login
a=$(dconf read /rootkey); b=$(dconf read /_2D/k)
[ "$a" = "uint32 5" ] && [ "$b" = "'changed'" ] || defect "in kvd: $in_kvd; after on, a change under kvd, off: /rootkey [$a], /_2D/k [$b]"
fine "root and escaped-looking keys round-trip"
