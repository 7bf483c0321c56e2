#!/bin/sh
# Finding 4: one dconf folder kvd refuses as a domain (here 17 values of 1 MiB: over kvd's 16 MiB)
# makes the move fail at every login: the other folders are written or not depending on the hash
# order, the record is never written, and the session runs on kvd with the user's values missing.
. "$(dirname "$0")/lib.sh"
under_dconf gsettings set io.kvd.test int32 7
python3 -c '
import sys
print("[org/example/big]")
for i in range(17): print("k%d=%s" % (i, repr("x" * (1 << 20))))' | dconf load /
kvctl --system gnome enable >/dev/null
login || true; login || status=$?
got=$(under_kvd gsettings get io.kvd.test int32)
[ "${status:-0}" = 0 ] && [ "$got" = 7 ] || defect "after two logins: move status ${status:-0}, io.kvd.test int32 under kvd is $got (dconf: 7); $(grep -c 'domain org.example.big' "$dir/login.log") refusals of org.example.big logged"
fine "the move went through, naming what kvd refused"
