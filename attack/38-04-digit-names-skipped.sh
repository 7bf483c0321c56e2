#!/bin/sh
# attack/38-04-digit-names-skipped.sh [BIN_DIR] — a keyfile or lock file whose name is digits
# only (`db/site.d/00`, `db/site.d/locks/10`) is passed over silently as "vim's probe" (isQuiet),
# though `dconf update` reads it (seen: dconf list-locks shows a lock from locks/1). The lock
# the admin wrote lifts with no word in status. It should be read (dconf's names are dconf's),
# or at least named in status as skipped.
. "$(dirname "$0")/38-lib.sh"
printf "[io/kvd/test]\ntext='from site'\n" >"$d/db/site.d/00"
printf '/io/kvd/test/text\n' >"$d/db/site.d/locks/10"
start_system
start_user u
sleep 0.5
got=$(usr u get io.kvd.test text 2>&1 || true)
[ "$got" = "from site" ] && ok "keyfile db/site.d/00 applies" || defect "keyfile db/site.d/00 silently not read ([$got])"
got=$(sys locks io.kvd.test 2>&1 || true)
case "$got" in
*text*) ok "locks/10 read" ;;
*) defect "lock file locks/10 silently not read: /io/kvd/test/text not locked ([$got])" ;;
esac
sys status >"$dir/status.out" 2>&1 || true
grep -q "site.d/locks/10" "$dir/status.out" && ok "status names locks/10" || defect "status does not name locks/10 at all"
finish
