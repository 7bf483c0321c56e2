# attack/38b/lib.sh — shared by attack/38b/*.sh (issue 38, second attack: WatchAll(current), the
# first-login wait, the dconf layer's fixes). Reuses attack/38-lib.sh (a real `kvd --system` on a
# dconf folder in /tmp, user kvds following it, kvctl on both) and adds timing and a site database
# as large as a keyfile may be. Source it with the build folder as $1 (default .build/debug).
# Each script exits 1 ("DEFECT: ...") while its defect is there, 0 once fixed, 2 when it cannot run.
. "$(cd "$(dirname "$0")/.." && pwd)/38-lib.sh"
now_ms() { date +%s%3N; }
# A keyfile of ~4 MiB (the most one file may hold: ~300,000 keys) in the site database.
big_site_db() { # [BYTES]
    /usr/bin/python3 - "$d/db/site.d/big" "${1:-4190000}" <<'PY'
import sys
path, limit = sys.argv[1], int(sys.argv[2])
out = ['[io/kvd/big]']
n = 0; size = 13
while size < limit:
    line = 'k%d=%d' % (n, n); out.append(line); size += len(line) + 1; n += 1
open(path, 'w').write('\n'.join(out) + '\n')
PY
}
