#!/bin/sh
# attack/38b/05-module-after-restart.sh [BIN_DIR] — the GSettings module's cache after the user's kvd
# is killed (-9) and started again while the site changed: an app (restart-reader.py, the real
# module in PyGObject) has read io.kvd.test text (site default 'v1') and not touched the relocatable
# /io/kvd/first/b/ (the user's own 'b1', kept from the stream's current state); kvd is killed, the
# admin changes the site's keyfile (text 'v2') and the user's b changes in kvd's store (kvctl, once
# kvd is back); the module makes its stream again. Expected: the app reads 'v2' and hears it
# announced, and b, touched after, reads 'b2' with no request.
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
printf "[io/kvd/test]\ntext='v1'\n" >"$d/db/site.d/00-site"
start_system
start_user u
usr u set io.kvd.first.b name b1 >/dev/null
mkdir "$dir/schemas" "$dir/home"
glib-compile-schemas --targetdir="$dir/schemas" "$root/clib/gio/tests"
mkfifo "$dir/in"
HOME="$dir/home" XDG_CONFIG_HOME="$dir/home/.config" GSETTINGS_BACKEND=kvd GIO_EXTRA_MODULES="$root/.build/clib/gio" \
    GSETTINGS_SCHEMA_DIR="$dir/schemas" KVD_SOCKET="$dir/u.sock" KVD_SYSTEM_SOCKET="$dir/system.sock" \
    timeout 60 /usr/bin/python3 "$(dirname "$0")/restart-reader.py" <"$dir/in" >"$dir/app.out" 2>"$dir/app.log" &
app=$!; pids="$pids $app"
exec 3>"$dir/in"
sleep 1
user_pid=$(echo $pids | awk '{print $2}')
kill -9 "$user_pid"; wait "$user_pid" 2>/dev/null || true
printf "[io/kvd/test]\ntext='v2'\n" >"$d/db/site.d/00-site"
sleep 1
rm -f "$dir/u.sock"
start_user u
usr u set io.kvd.first.b name b2 >/dev/null
sleep 3
echo read >&3; sleep 0.5
echo touch-b >&3; sleep 0.5
echo read >&3; sleep 0.5
echo quit >&3; exec 3>&-
wait "$app" 2>/dev/null || true
cat "$dir/app.out"
last=$(tail -1 "$dir/app.out")
case "$last" in
    "text=v2 b=b2 heard="*text=v2*) ok "after the restart the app reads v2 (announced) and b2" ;;
    *) defect "after kvd's restart the app reads [$last] (expected text=v2, announced, and b=b2)" ;;
esac
finish
