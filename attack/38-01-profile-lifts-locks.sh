#!/bin/sh
# attack/38-01-profile-lifts-locks.sh [BIN_DIR] — a user lifts every dconf site lock with their
# own DCONF_PROFILE: a name no profile has (`nosuch`, `../../etc/passwd`), or an absolute path
# to a profile file the user owns that names no system db. The site's lock on
# /io/kvd/test/text must hold for every user: their kvd must refuse the write.
. "$(dirname "$0")/38-lib.sh"
printf "[io/kvd/test]\ntext='from site'\n" >"$d/db/site.d/00-site"
printf '/io/kvd/test/text\n' >"$d/db/site.d/locks/00-site"
printf 'user-db:user\n' >"$dir/my-profile"
start_system
start_user plain
eventually 'locked' sh -c "'$bin/kvctl' --socket '$dir/plain.sock' source io.kvd.test text | head -1" >/dev/null
n=0
for profile in nosuch ../../etc/passwd "$dir/my-profile" "$d/profile/../../my-profile" \
    "$(head -c 10000 /dev/zero | tr '\0' a)"; do
    n=$((n + 1))
    start_user "u$n" "$profile"
    sleep 0.5
    usr "u$n" set io.kvd.test text mine >/dev/null 2>&1 || true
    got=$(usr "u$n" get io.kvd.test text 2>&1 || true)
    short=$(printf '%.40s' "$profile")
    if [ "$got" = "mine" ]; then
        defect "DCONF_PROFILE=$short: the site's lock lifts, the user's write is kept (got [$got])"
    else
        ok "DCONF_PROFILE=$short: lock holds ([$got])"
    fi
done
usr plain set io.kvd.test text mine >/dev/null 2>&1 || true
[ "$(usr plain get io.kvd.test text 2>&1 || true)" = "from site" ] && ok "no DCONF_PROFILE: lock holds" ||
    defect "no DCONF_PROFILE: the lock does not hold"
finish
