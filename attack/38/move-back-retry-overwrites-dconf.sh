#!/bin/sh
# Finding 10 (the reverse of finding 1): the move back fails after `dconf load` (here a `dconf
# reset` that fails, as on a crash or kill -9 of kvd-dconf-import between the two); the session is
# on dconf, the user changes a value there; the next login's retry loads kvd's older value over it.
. "$(dirname "$0")/lib.sh"
under_dconf gsettings set io.kvd.test text "in dconf"
kvctl --system gnome enable >/dev/null; login
under_kvd gsettings set io.kvd.test int32 42
under_kvd gsettings reset io.kvd.test text          # makes the move back reset a key in dconf
kvctl --system gnome disable >/dev/null
mkdir "$dir/fake"; real=$(command -v dconf)
printf '#!/bin/sh\n[ "$1" = reset ] && { kill -9 $PPID; exit 1; }\nexec %s "$@"\n' "$real" > "$dir/fake/dconf"; chmod +x "$dir/fake/dconf"
if PATH="$dir/fake:$PATH" login; then echo "setup: the move back did not fail" >&2; exit 2; fi
[ "$(dconf read /io/kvd/test/int32)" = 42 ] || { echo "setup: dconf load did not run" >&2; exit 2; }
under_dconf gsettings set io.kvd.test int32 50       # the user's change in the dconf session that follows
login || true
got=$(dconf read /io/kvd/test/int32)
[ "$got" = 50 ] || defect "the value set under dconf after a failed move back (50) was overwritten by kvd's older one ($got)"
fine "the change under dconf survived the retry"
