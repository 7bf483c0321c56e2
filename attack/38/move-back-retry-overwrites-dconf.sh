#!/bin/sh
# Finding 10 (the reverse of finding 1): the move back fails after dconf was written (here kvd
# refuses its record: the admin locks io.kvd.gnome movingSince, which the record removes; a crash or kill -9 of
# kvd-dconf-import between the two does the same); the session is on dconf, the user changes a
# value there; the next login's retry must not load kvd's older value over it.
. "$(dirname "$0")/lib.sh"
under_dconf gsettings set io.kvd.test text "in dconf"
kvctl --system gnome enable >/dev/null; login
under_kvd gsettings set io.kvd.test int32 42
under_kvd gsettings reset io.kvd.test text          # makes the move back reset a key in dconf
kvctl --system gnome disable >/dev/null
kvctl --system lock io.kvd.gnome movingSince >/dev/null
if login; then echo "setup: the move back did not fail" >&2; exit 2; fi
kvctl --system unlock io.kvd.gnome movingSince >/dev/null
[ "$(dconf read /io/kvd/test/int32)" = 42 ] || { echo "setup: the failed move back wrote nothing to dconf" >&2; exit 2; }
under_dconf gsettings set io.kvd.test int32 50       # the user's change in the dconf session that follows
login || true
got=$(dconf read /io/kvd/test/int32)
[ "$got" = 50 ] || defect "the value set under dconf after a failed move back (50) was overwritten by kvd's older one ($got)"
[ "$(kvctl get io.kvd.gnome settingsIn)" = dconf ] || defect "the retry did not record the move back"
[ -z "$(dconf read /io/kvd/test/text)" ] || defect "the reset under kvd did not reach dconf"
fine "the change under dconf survived the retry"
