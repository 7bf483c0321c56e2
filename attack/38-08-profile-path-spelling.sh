#!/bin/sh
# attack/38-08-profile-path-spelling.sh [BIN_DIR] — DCONF_PROFILE as a path to a site profile
# is matched as a string against "DCONF/profile/": `DCONF/profile//kiosk`, `DCONF/./profile/kiosk`,
# or a --dconf-dir (KVD_DCONF_DIR) given with a trailing slash, name the kiosk profile's file as
# dconf opens it (dconf applies its databases and locks), but kvd gives such a user no system
# database at all: the site's lock lifts. Should: the path resolved (or compared after
# normalising `//`, `/./` and the root's trailing slash), or at least the `user` profile.
. "$(dirname "$0")/38-lib.sh"
printf 'user-db:user\nsystem-db:site\n' >"$d/profile/kiosk"
printf "[io/kvd/test]\ntext='from site'\n" >"$d/db/site.d/00-site"
printf '/io/kvd/test/text\n' >"$d/db/site.d/locks/00-site"
check_user() { # NAME PROFILE WHAT
    start_user "$1" "$2"
    sleep 0.5
    usr "$1" set io.kvd.test text mine >/dev/null 2>&1 || true
    got=$(usr "$1" get io.kvd.test text 2>&1 || true)
    [ "$got" = "from site" ] && ok "$3: lock holds" || defect "$3: the site's lock lifts (reads [$got])"
}
start_system
check_user a "$d/profile/kiosk" "DCONF_PROFILE=DCONF/profile/kiosk"
check_user b "$d/profile//kiosk" "DCONF_PROFILE=DCONF/profile//kiosk"
check_user c "$d/./profile/kiosk" "DCONF_PROFILE=DCONF/./profile/kiosk"
stop_system
dconf_dir_arg="$d/"
start_system
check_user e "$d/profile/kiosk" "--dconf-dir DCONF/ (trailing slash), DCONF_PROFILE=DCONF/profile/kiosk"
finish
