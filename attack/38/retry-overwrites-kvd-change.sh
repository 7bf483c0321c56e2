#!/bin/sh
# Finding 1: a move into kvd that failed at one login (here: kvd-dconf-import finds no `dconf`,
# as on a machine without dconf-cli) still leaves the session on kvd; what the user changes under
# kvd then is overwritten with dconf's older value by the retry at the next login. With the
# argument `unreachable`, the first login's move fails because kvd cannot be reached instead.
. "$(dirname "$0")/lib.sh"
under_dconf gsettings set io.kvd.test int32 7
kvctl --system gnome enable >/dev/null
mkdir "$dir/nodconf"; for tool in env sed; do ln -s "$(command -v $tool)" "$dir/nodconf/"; done
if [ "${1:-}" = unreachable ]; then failing="env KVD_SOCKET=$dir/nowhere.sock"; else failing="env PATH=$dir/nodconf"; fi
if $failing /bin/sh -c "$(command -v env) -u GSETTINGS_BACKEND GSETTINGS_BACKEND=kvd '$module_dir/kvd-dconf-import' --login" 2>>"$dir/login.log"; then echo "setup: the move did not fail" >&2; exit 2; fi
session_backend=$(env -u GSETTINGS_BACKEND "$generator" | sed -n 's/^GSETTINGS_BACKEND=//p')
[ "$session_backend" = kvd ] || { echo "setup: session not on kvd" >&2; exit 2; }
under_kvd gsettings set io.kvd.test int32 99      # the user's change in the session that follows
login || true                                    # the next login, dconf-cli now there
got=$(under_kvd gsettings get io.kvd.test int32)
[ "$got" = 99 ] || defect "the value set under kvd after a failed move (99) was overwritten by dconf's older one ($got)"
fine "the change under kvd survived the retry"
