#!/bin/sh
# attack/38-07-profile-typo-first-start.sh [BIN_DIR] — a profile typo at the first start (no
# profile read good yet, no kept content): a UTF-8 byte order mark before `user-db:user`
# (Notepad), or `system-db: site` with a space. kvd makes it one problem at DCONF ("nothing in it
# is read") and, there being no last good content, applies no dconf file at all: every site lock
# is off until the profile is fixed. dconf reads `system-db:site` after a BOM line. The
# promise "a typo in the profile never lifts a database's locks" holds only after a good read.
# Should: at the first start, read the databases the profile names that can be read (site), or
# every database in DCONF/db, rather than none.
. "$(dirname "$0")/38-lib.sh"
printf "[io/kvd/test]\ntext='from site'\n" >"$d/db/site.d/00-site"
printf '/io/kvd/test/text\n' >"$d/db/site.d/locks/00-site"
n=0
for profile in '\357\273\277user-db:user\nsystem-db:site\n' 'user-db:user\nsystem-db: site\n'; do
    n=$((n + 1))
    printf "$profile" >"$d/profile/user"
    rm -rf "$dir/system-state"
    start_system
    got=$(sys locks io.kvd.test 2>&1 || true)
    problem=$(sys status 2>&1 | grep -c 'profile' || true)
    case "$got" in
    *text*) ok "profile $n: site's lock applies" ;;
    *) defect "profile $n ($([ $n = 1 ] && echo 'a BOM' || echo 'system-db: site')): no dconf lock applies at the first start ([$got]; $problem problem line(s))" ;;
    esac
    stop_system
done
finish
