#!/bin/sh
# attack/38-05-budget-starves-locks.sh [BIN_DIR] — every drop-in and dconf file shares one
# 32 MiB budget, read in order (kvd's own, then the user profile's databases in order, keyfiles
# before locks). A careless admin's big keyfiles in an earlier database (dumps just under 4 MiB in
# site.d) use it up, and the next database's lock file fails ("together pass 32 MiB"): at the
# first start (no last good content) its lock is not applied. A lock file of 20 bytes should not
# lose to values (locks first, or a budget of their own).
. "$(dirname "$0")/38-lib.sh"
# 8 dumps of 4,194,298 bytes each (under the 4 MiB a file may hold) and the 31-byte 00-site
# leave 17 bytes of the 32 MiB: the 18-byte lock file does not fit.
pad=$(head -c $((4194298 - 19)) /dev/zero | tr '\0' a)
for n in a b c d e f g h; do
    { printf '[io/kvd/pad]\nk%s=%s\n' "$n" "'$pad'"; } >"$d/db/site.d/$n-dump"
done
printf "[io/kvd/test]\ntext='from site'\n" >"$d/db/site.d/00-site"
printf '/io/kvd/test/text\n' >"$d/db/site.d/locks/00-site"
start_system
got=$(sys locks io.kvd.test 2>&1 || true)
case "$got" in
*text*) ok "site's lock applies" ;;
*) defect "site's lock not applied after big keyfiles in site.d ([$got]): $(sys status 2>&1 | grep -m1 'locks/00-site' || true)" ;;
esac
finish
