#!/bin/sh
# Finding 9: while the switch is on, a value written to dconf directly (`dconf write`, dconf-editor,
# a session started before `enable`, any program of the user's without GSETTINGS_BACKEND=kvd) is
# reset by the move back at `disable`: the move resets in dconf every key kvd lacks, though kvd
# never held (nor reset) that key.
. "$(dirname "$0")/lib.sh"
kvctl --system gnome enable >/dev/null; login
dconf write /org/example/direct/k "'written to dconf while on kvd'"
under_dconf gsettings set io.kvd.test text "an older session's write"   # a session still on dconf
kvctl --system gnome disable >/dev/null; login
got1=$(dconf read /org/example/direct/k); got2=$(dconf read /io/kvd/test/text)
[ -n "$got1" ] && [ -n "$got2" ] || defect "the move back reset dconf values kvd never held: /org/example/direct/k now [$got1], /io/kvd/test/text now [$got2]"
fine "dconf's own values kept"
