#!/bin/sh
# attack/38-06-write-before-first-sync.sh [BIN_DIR] — a user's kvd with no state yet (a first
# login) accepts a write to a key the site locks until its first Mirror from the system instance
# has arrived. With a big site database (a 4 MiB keyfile of ~300,000 keys, the most a file may
# hold) that takes seconds, and `kvctl set` / `gsettings set` of a locked key succeeds and reads
# back the user's value in that window (afterwards the lock masks it again). The user's kvd
# should refuse writes (or report not writable) until it has synced once, as it does when the
# system instance is down after a sync (its kept mirror). A race made wide on purpose; on a
# fast machine the window may close before the write (then this passes without the fix).
. "$(dirname "$0")/38-lib.sh"
/usr/bin/python3 -c "
out = ['[io/kvd/big]']
n = 0; size = 13
while size < 4190000:
    line = 'k%d=%d' % (n, n); out.append(line); size += len(line) + 1; n += 1
open('$d/db/site.d/big', 'w').write('\n'.join(out) + '\n')
"
printf "[io/kvd/test]\ntext='from site'\n" >"$d/db/site.d/00-site"
printf '/io/kvd/test/text\n' >"$d/db/site.d/locks/00-site"
start_system
start_user u
usr u set io.kvd.test text mine >/dev/null 2>&1 || true
got=$(usr u get io.kvd.test text 2>&1 || true)
[ "$got" = mine ] && defect "a first-login user's kvd took a write to a site-locked key before its first sync (reads [$got])" ||
    ok "the locked key was not written ([$got])"
finish
