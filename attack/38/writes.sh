#!/bin/sh
# attack/38/writes.sh SCENARIO [dconf] — runs writes.py SCENARIO against a real kvd (lib.sh's),
# with GSETTINGS_BACKEND=kvd (or dconf, to compare). full_disk puts kvd's state on a 2 MiB tmpfs.
scenario=$1
. "$(dirname "$0")/lib.sh"
if [ "$scenario" = full_disk ]; then
    stop_kvd; mkdir "$dir/small"; mount -t tmpfs -o size=2m none "$dir/small"; start_kvd "$dir/small/state"
fi
export RESTART_KVD="kill $kvd_pid; while kill -0 $kvd_pid 2>/dev/null; do sleep 0.05; done; rm -f $dir/kvd.sock; \
 '$bin/kvd' --socket '$dir/kvd.sock' --state-dir '$dir/state' --system-socket '$dir/system.sock' --idle-exit 0 >/dev/null 2>>'$dir/kvd.log' & echo \$! > '$dir/restarted.pid'; \
 while [ ! -S '$dir/kvd.sock' ]; do sleep 0.05; done"
export CRASH_RESTART_KVD="kill -9 $kvd_pid; kill -CONT $kvd_pid 2>/dev/null; while kill -0 $kvd_pid 2>/dev/null; do sleep 0.05; done; rm -f $dir/kvd.sock; \
 '$bin/kvd' --socket '$dir/kvd.sock' --state-dir '$dir/state' --system-socket '$dir/system.sock' --idle-exit 0 >/dev/null 2>>'$dir/kvd.log' & echo \$! > '$dir/restarted.pid'; \
 while [ ! -S '$dir/kvd.sock' ]; do sleep 0.05; done"
export GSETTINGS_BACKEND=${2:-kvd}
/usr/bin/python3 "$here/writes.py" "$scenario" "$bin/kvctl" "$kvd_pid" 2>"$dir/py.log" || { status=$?; grep -v '^$' "$dir/py.log" | tail -5 >&2; exit $status; }
