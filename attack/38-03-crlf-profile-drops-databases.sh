#!/bin/sh
# attack/38-03-crlf-profile-drops-databases.sh [BIN_DIR] — Swift's String.split(separator: "\n")
# does not split "\r\n" (one Character), so a file with Windows line endings is ONE line to
# DconfFiles. A CRLF profile `user-db:user\r\nsystem-db:site\r\n` is one line starting with
# `user-db:`: passed over, no system database, every site lock lifted, no problem in status
# (dconf strips the CR and reads system-db:site). A CRLF lock file starting with a `#` comment
# is one comment line: every lock in it lifted silently; a CRLF keyfile starting with a comment
# is silently empty.
. "$(dirname "$0")/38-lib.sh"
printf "[io/kvd/test]\ntext='from site'\n" >"$d/db/site.d/00-site"
printf '/io/kvd/test/text\n' >"$d/db/site.d/locks/00-site"
printf '# the site locks\r\n/io/kvd/test/flag\r\n' >"$d/db/site.d/locks/10-crlf-comment"
printf "# the site's real\r\n[io/kvd/test]\r\nreal=2.5\r\n" >"$d/db/site.d/20-crlf-keyfile"
printf 'user-db:user\r\nsystem-db:site\r\n' >"$d/profile/user"
start_system
start_user u
sleep 0.5
sys status >"$dir/status.out" 2>&1 || true
got=$(usr u source io.kvd.test text 2>&1 | head -1 || true)
case "$got" in
*locked*) ok "CRLF profile: site's lock holds" ;;
*) defect "CRLF profile: system-db:site dropped, /io/kvd/test/text not locked ([$got])" ;;
esac
# Read as dconf reads it (the fix): a CRLF profile is no problem.
! grep -q "problems:" "$dir/status.out" && ok "a CRLF profile is no problem" ||
    defect "status names a problem with the CRLF profile: $(grep -A3 problems "$dir/status.out" || true)"
printf 'user-db:user\nsystem-db:site\n' >"$d/profile/user"
sys reload >/dev/null 2>&1 || true
eventually "from site" usr u get io.kvd.test text >/dev/null
sys locks io.kvd.test | grep -q "^text " && ok "profile fixed: site read again" || defect "profile fixed: site not read"
got=$(sys locks io.kvd.test 2>&1 || true)
case "$got" in
*"flag "*) ok "CRLF lock file starting with a comment: lock holds" ;;
*) defect "CRLF lock file starting with a comment: /io/kvd/test/flag not locked, silently ([$got])" ;;
esac
got=$(usr u get io.kvd.test real 2>&1 || true)
[ "$got" = 2.5 ] && ok "CRLF keyfile starting with a comment applies" ||
    defect "CRLF keyfile starting with a comment: silently empty (real=[$got])"
sys status >"$dir/status2.out" 2>&1 || true
! grep -q "problems:" "$dir/status2.out" && ok "CRLF files are no problem" || defect "status shows a problem for a CRLF file"
# A site that worked: the profile saved again with CRLF (an editor's setting) drops every lock at once.
printf 'user-db:user\r\nsystem-db:site\r\n' >"$d/profile/user"
sys reload >/dev/null 2>&1 || true
sleep 0.5
got=$(sys locks io.kvd.test 2>&1 || true)
case "$got" in
*"text "*) ok "profile saved again with CRLF: locks kept" ;;
*) defect "profile saved again with CRLF at run time: every site lock lifted ([$got])" ;;
esac
finish
