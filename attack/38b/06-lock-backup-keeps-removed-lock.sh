#!/bin/sh
# attack/38b/06-lock-backup-keeps-removed-lock.sh [BIN_DIR] — the lock side of finding 4: the admin
# removes a lock from `locks/00-site`; the editor's backup `locks/00-site~` (read since c17af50)
# still names it, so the key stays locked for every user, and `kvctl --system status` only lists
# both files as applied. No lock lifts by accident, but the admin cannot lift one on purpose and
# is not told why. (dconf does the same after `dconf update`.) Should: status names the backup
# that keeps a lock its own file no longer has, or backups are not read.
. "$(dirname "$0")/lib.sh"
printf "[io/kvd/test]\ntext='site'\n" >"$d/db/site.d/00-site"
printf '/io/kvd/test/text\n' >"$d/db/site.d/locks/00-site"
start_system
cp "$d/db/site.d/locks/00-site" "$d/db/site.d/locks/00-site~"  # what the editor keeps
printf '# the lock of text lifted on purpose\n' >"$d/db/site.d/locks/00-site"
sys reload >/dev/null 2>&1 || true
start_user u
tries=0
until usr u set io.kvd.test text mine >/dev/null 2>&1 || [ $tries -ge 20 ]; do tries=$((tries + 1)); sleep 0.25; done
got=$(usr u get io.kvd.test text 2>&1 || true)
status=$(sys status 2>&1 || true)
echo "a user's write, then read: [$got]"
if [ "$got" = mine ] || echo "$status" | grep 'locks/00-site~' | grep -Eqi 'backup|overrid|keeps|leftover'; then
    ok "the lock lifted, or status names the backup that keeps it"
else
    defect "the editor's backup locks/00-site~ keeps the lock the admin removed from locks/00-site (a user reads [$got]); status only lists both files as applied"
fi
finish
