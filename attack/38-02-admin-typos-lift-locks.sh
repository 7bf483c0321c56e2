#!/bin/sh
# attack/38-02-admin-typos-lift-locks.sh [BIN_DIR] — an admin's first lock file (no last good
# content yet) with a typo an admin makes: a Windows line ending (CRLF), a trailing space,
# a UTF-8 byte order mark, a `#` comment after the path. CRLF and the comment lock a bogus key
# (`text\r\n`, `real # the site decides`) with no problem in status; the space and the BOM are
# named in status but lock nothing, there being no last good content yet. Each time the key the
# admin meant to lock is writable by every user from the start. A CRLF keyfile fails as a whole
# (attack/38-03: Swift does not split "\r\n"). The lock should hold, or the typo be an error
# that holds something back.
. "$(dirname "$0")/38-lib.sh"
printf "[io/kvd/test]\ntext='from site'\nflag=true\nint32=1\nreal=1.0\n" >"$d/db/site.d/00-site"
printf '/io/kvd/test/text\r\n' >"$d/db/site.d/locks/10-crlf"
printf '/io/kvd/test/flag \n' >"$d/db/site.d/locks/20-space"
printf '\357\273\277/io/kvd/test/int32\n' >"$d/db/site.d/locks/30-bom"
printf '/io/kvd/test/real # the site decides\n' >"$d/db/site.d/locks/40-comment"
start_system
start_user u
eventually 'from site' usr u get io.kvd.test text >/dev/null
for case in "text crlf" "flag space" "int32 bom" "real comment"; do
    set -- $case
    got=$(usr u source io.kvd.test "$1" 2>&1 | head -1 || true)
    case "$got" in
    *locked*) ok "$2: /io/kvd/test/$1 locked" ;;
    *) defect "$2 in a lock file: /io/kvd/test/$1 is not locked for users ([$got])" ;;
    esac
done
sys status >"$dir/status.out" 2>&1 || true
# A CRLF file reads line by line (finding 1): no problem. The other typos are named in status.
grep -q "10-crlf:" "$dir/status.out" && defect "status names the CRLF lock file as a problem" || ok "a CRLF lock file is no problem"
for name in 20-space 30-bom 40-comment; do
    case $name in
    30-bom) grep -q "$name:" "$dir/status.out" && defect "status names the BOM lock file" || ok "a BOM is skipped" ;;
    *) grep -q "$name: line 1" "$dir/status.out" && ok "status names $name" || defect "status does not name $name" ;;
    esac
done
# The keyfile reader forgives CR: a keyfile with CRLF lines applies.
printf "[io/kvd/test]\r\nint16=int16 3\r\n" >"$d/db/site.d/50-crlf-keyfile"
sys reload >/dev/null 2>&1 || true
[ "$(eventually 3 usr u get io.kvd.test int16)" = 3 ] && ok "a CRLF keyfile applies" || defect "a CRLF keyfile does not apply"
finish
