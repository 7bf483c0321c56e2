#!/bin/sh
# attack/38b/03-editor-backup-overrides-edit.sh [BIN_DIR] — since c17af50 the system instance reads
# every non-hidden name in a dconf database's folder, editors' backups too (`00-site~`, which kvd
# passed over before), and a later name wins: `00-site~` sorts after `00-site`, so the backup an
# editor leaves (emacs by default, vim with 'backup') overrides the admin's edit with the OLD
# values, and `kvctl --system status` says nothing. dconf does the same (checked: `dconf update`
# then `dconf read` gives the backup's value), but the admin switched to kvd precisely so that
# "no `dconf update` is needed": they see their edit not taken, with no hint why.
# Should: a backup or package leftover that overrides a value of the file it backs up is named
# in status (a problem, or a warning saying which file wins), or is not read. Status lists
# both files as applied, nothing more.
. "$(dirname "$0")/lib.sh"
printf "[io/kvd/test]\ntext='old'\n" >"$d/db/site.d/00-site"
start_system
cp "$d/db/site.d/00-site" "$d/db/site.d/00-site~"             # what the editor keeps
printf "[io/kvd/test]\ntext='new'\n" >"$d/db/site.d/00-site"  # the admin's edit
sys reload >/dev/null 2>&1 || true
start_user u
got=$(eventually new usr u get io.kvd.test text)
status=$(sys status 2>&1 || true)
echo "a user reads [$got]"
# The files applied are listed one a line: a fix says more than that of the backup.
if [ "$got" = new ] || echo "$status" | grep '00-site~' | grep -Eqi 'backup|overrid|wins|leftover'; then
    ok "the edit is taken, or status names the backup"
else
    defect "the editor's backup 00-site~ overrides the admin's edit of 00-site (a user reads [$got]), and status only lists both files as applied"
fi
finish
