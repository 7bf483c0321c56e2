#!/bin/sh
# Finding 2: switch on, off, on: a key the user reset while on dconf comes back under kvd with the
# value it had before (the move into kvd imports what dconf holds, but resets nothing dconf lacks),
# though the move back out does reset in dconf the keys kvd lacks.
. "$(dirname "$0")/lib.sh"
kvctl --system gnome enable >/dev/null; login
under_kvd gsettings set io.kvd.test text "set under kvd"
kvctl --system gnome disable >/dev/null; login
[ "$(dconf read /io/kvd/test/text)" = "'set under kvd'" ] || { echo "setup: move back failed" >&2; exit 2; }
under_dconf gsettings reset io.kvd.test text       # the user resets it while on dconf
kvctl --system gnome enable >/dev/null; login
got=$(under_kvd gsettings get io.kvd.test text)
[ "$got" = "'hello'" ] || defect "a key reset under dconf reads $got under kvd after the switch back on (expected the default 'hello')"
fine "the reset under dconf holds under kvd"
