#!/bin/sh
# attack/38b/01-first-login-reads-stall.sh [BIN_DIR] — a user's first login on a site with a large
# dconf database (one 4 MiB keyfile, the most a file may hold). Since 6137638 a user's kvd with no
# saved layer waits at start for the system instance's first Mirror, 3 s and then up to 10 s more,
# and serves nobody meanwhile: its socket takes connections, no call is answered. The GSettings
# module gives up after 3 s (GIOKVD_TIMEOUT_MS): every app of the first login reads schema
# defaults and its writes are reverted "kvd cannot be reached". Should: answer reads at once
# (from the user's store, the layer missing), refusing only writes until the layer arrives, as
# the commit's own message says ("refuses writes until it arrives").
. "$(dirname "$0")/lib.sh"
big_site_db
printf "[io/kvd/test]\ntext='from site'\n" >"$d/db/site.d/00-site"
printf '/io/kvd/test/text\n' >"$d/db/site.d/locks/00-site"
start_system
t0=$(now_ms)
start_user u
t1=$(now_ms)
got=$(timeout 30 "$bin/kvctl" --socket "$dir/u.sock" get io.kvd.test text 2>&1 || true)
t2=$(now_ms)
echo "socket after $((t1 - t0)) ms; first read answered after $((t2 - t1)) ms more: [$got]"
if [ $((t2 - t1)) -gt 3000 ]; then
    defect "a first-login user's kvd answered its first read only after $((t2 - t1)) ms (the GSettings module gives up at 3000 ms and reads schema defaults)"
else
    ok "the first read was answered in $((t2 - t1)) ms"
fi
finish
