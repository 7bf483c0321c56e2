#!/bin/sh
# attack/38b/04-mirror-flood-keeps-writes-refused.sh [BIN_DIR] — since 6137638 a user's kvd at its
# first login refuses every write ("the system instance's locks have not arrived yet") until its
# first Mirror arrives. Another local user (uid 65534) who keeps the system instance busy with
# Mirror calls of their own (finding 2, attack/38b/02-...) keeps it from arriving: the victim's
# `kvctl set` of a key nobody locks is refused for as long as the flood lasts (here 60 s, by 4
# processes of one uid, one connection each). Should: one user's calls delay another's first
# layer by a turn at most; or writes of keys the last layer cannot lock (none saved yet: none
# known) pass once the start's wait is over, as with no system instance.
# Control: `FLOOD=0 sh attack/38b/04-...` (no flood) has the write taken after ~20.5 s (measured).
. "$(dirname "$0")/lib.sh"
big_site_db
printf '/io/kvd/test/text\n' >"$d/db/site.d/locks/00-site"
start_system
cp "$(dirname "$0")/varlink.py" "$dir/varlink.py"
tries=0  # the system instance reads the 4 MiB keyfile after it listens: wait until it answers
until [ "$(sys get io.kvd.test text 2>&1 | grep -c 'no key')" = 1 ] && [ $tries -gt 0 ]; do tries=$((tries + 1)); sleep 1; [ $tries -lt 120 ] || exit 2; done
for i in $(seq 1 "${FLOOD:-4}"); do  # FLOOD=0: the control, no flood
    setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/python3 "$dir/varlink.py" mirror-flood "$dir/system.sock" 70 "p$i" >"$dir/flood$i.log" 2>&1 &
    pids="$pids $!"
done
sleep 2
t0=$(now_ms)
start_user v
accepted=""
while [ $(($(now_ms) - t0)) -lt 60000 ]; do
    if out=$(usr v set io.kvd.free a 1 2>&1); then accepted=$(($(now_ms) - t0)); break; fi
    sleep 1
done
echo "last answer: $(echo "$out" | cut -c1-120)"
if [ -z "$accepted" ]; then
    defect "another user's Mirror calls kept a first-login user's kvd refusing every write for 60 s (the flood's length)"
else
    ok "the victim's write was taken after $accepted ms"
fi
finish
