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
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir "$dir/schemas" "$dir/home"
glib-compile-schemas --targetdir="$dir/schemas" "$root/clib/gio/tests"
t0=$(now_ms)
start_user u
t1=$(now_ms)
# The real gsettings through the GSettings module, as an app of the first login reads.
HOME="$dir/home" XDG_CONFIG_HOME="$dir/home/.config" GSETTINGS_BACKEND=kvd GIO_EXTRA_MODULES="$root/.build/clib/gio" \
    GSETTINGS_SCHEMA_DIR="$dir/schemas" KVD_SOCKET="$dir/u.sock" timeout 30 gsettings get io.kvd.test text >"$dir/gsettings.out" 2>&1 &
gs=$!
got=$(timeout 30 "$bin/kvctl" --socket "$dir/u.sock" get io.kvd.test text 2>&1 || true)
t2=$(now_ms)
wait $gs || true
echo "gsettings (the module) read: $(tr '\n' ' ' <"$dir/gsettings.out" | cut -c1-200)"
echo "socket after $((t1 - t0)) ms; first read answered after $((t2 - t1)) ms more: [$got]"
if [ $((t2 - t1)) -gt 3000 ]; then
    defect "a first-login user's kvd answered its first read only after $((t2 - t1)) ms (the GSettings module gives up at 3000 ms and reads schema defaults)"
else
    ok "the first read was answered in $((t2 - t1)) ms"
fi
finish
