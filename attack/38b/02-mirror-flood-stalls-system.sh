#!/bin/sh
# attack/38b/02-mirror-flood-stalls-system.sh [BIN_DIR] — any local user (uid 65534 here; the victim uid 1000) can make
# the system instance unresponsive for everyone: on a site with a large dconf database (one 4 MiB
# keyfile, the most a file may hold), each `io.kvd.System.Mirror` call builds the caller's whole
# layer on the loop thread before anything else is served. A user who connects, calls Mirror, and
# hangs up, in a loop (well within --max-connections-per-uid: one connection at a time), keeps
# the loop busy: another user's `kvctl --system get` and every user kvd's first Mirror (hence
# their first-login wait, and their writes, refused until it arrives) wait behind it.
# Should: a Mirror's snapshot made once per profile and shared, or made in turns, so one user's
# calls never delay another's reads by more than a turn.
. "$(dirname "$0")/lib.sh"
big_site_db "${SIZE:-4190000}"  # SIZE=40000 FLOODERS=32: a small site, more connections
printf "[io/kvd/test]\ntext='from site'\n" >"$d/db/site.d/00-site"
start_system
cp "$(dirname "$0")/varlink.py" "$dir/varlink.py"
victim() { setpriv --reuid 1000 --regid 1000 --clear-groups timeout 60 "$bin/kvctl" --socket "$dir/system.sock" --system get io.kvd.test text; }
# The system instance reads the 4 MiB keyfile after it listens (tens of seconds in a debug build):
# wait until it answers a read at once, so what follows measures the flood only.
base=99999; tries=0
while [ "$base" -gt 1000 ] && [ $tries -lt 30 ]; do
    t0=$(now_ms); victim >/dev/null 2>&1 || true; t1=$(now_ms)
    base=$((t1 - t0)); tries=$((tries + 1))
done
[ "$base" -le 1000 ] || { echo "the system instance never answered a read at once ($base ms)"; exit 2; }
echo "a read with nobody else: $base ms"
for i in $(seq 1 "${FLOODERS:-2}"); do
    setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/python3 "$dir/varlink.py" mirror-flood "$dir/system.sock" 40 "p$i" >"$dir/flood$i.log" 2>&1 &
    pids="$pids $!"
done
sleep 3
worst=0
for i in 1 2 3; do
    t0=$(now_ms); got=$(victim 2>&1 || true); t1=$(now_ms)
    echo "a read during the flood: $((t1 - t0)) ms [$(echo "$got" | cut -c1-60)]"
    [ $((t1 - t0)) -gt "$worst" ] && worst=$((t1 - t0))
done
if [ "$worst" -gt 2000 ] && [ "$worst" -gt $((base * 10)) ]; then
    defect "another user's Mirror calls held a read of the system instance for $worst ms (alone: $base ms)"
else
    ok "reads during the flood took at most $worst ms (alone: $base ms)"
fi
cat "$dir"/flood*.log
finish
