# attack/38-lib.sh — shared by attack/38-*.sh (issue 38, the system instance's dconf layer):
# a real `kvd --system` on a dconf folder made in a temporary folder (--dconf-dir), user kvds
# following it, kvctl to ask both. Source it with BIN (kvd's and kvctl's folder) set.
# Each script exits 1 while the defect it reproduces is there ("DEFECT: ..."), 0 once fixed.
set -eu
bin=$(cd "${1:-.build/debug}" && pwd)
dir=$(mktemp -d /tmp/kvd-attack38.XXXXXX)
chmod 755 "$dir"
pids=""
system_pid=""
cleanup() {
    for pid in $pids; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM
defects=0
defect() { echo "DEFECT: $*"; defects=$((defects + 1)); }
ok() { echo "ok: $*"; }
finish() {
    if [ "$defects" -gt 0 ]; then
        for log in "$dir"/*.log; do echo "== $log"; tail -5 "$log"; done
        exit 1
    fi
    exit 0
}
wait_socket() { # PID SOCKET
    tries=0
    while [ ! -S "$2" ]; do
        kill -0 "$1" 2>/dev/null && [ $tries -lt 400 ] || { echo "kvd did not start: $2"; cat "$dir"/*.log; exit 2; }
        tries=$((tries + 1)); sleep 0.05
    done
}
d="$dir/dconf"
mkdir -p "$d/profile" "$d/db/site.d/locks" "$dir/etc"
printf 'user-db:user\nsystem-db:site\n' >"$d/profile/user"
start_system() {
    rm -f "$dir/system.sock"
    "$bin/kvd" --system --socket "$dir/system.sock" --state-dir "$dir/system-state" --config-dir "$dir/etc" \
        "--dconf-dir=${dconf_dir_arg:-$d}" 2>>"$dir/system.log" &
    system_pid=$!
    pids="$pids $system_pid"
    wait_socket "$system_pid" "$dir/system.sock"
}
stop_system() { kill "${1:-TERM}" -"$system_pid" 2>/dev/null || kill "-${1:-TERM}" "$system_pid"; wait "$system_pid" 2>/dev/null || true; }
start_user() { # NAME [DCONF_PROFILE]
    if [ -n "${2:-}" ]; then
        DCONF_PROFILE=$2 "$bin/kvd" --socket "$dir/$1.sock" --state-dir "$dir/$1-state" \
            --system-socket "$dir/system.sock" --idle-exit 0 2>"$dir/$1.log" &
    else
        env -u DCONF_PROFILE "$bin/kvd" --socket "$dir/$1.sock" --state-dir "$dir/$1-state" \
            --system-socket "$dir/system.sock" --idle-exit 0 2>"$dir/$1.log" &
    fi
    pids="$pids $!"
    wait_socket "$!" "$dir/$1.sock"
}
export KVD_NO_AUTOSTART=1
sys() { "$bin/kvctl" --socket "$dir/system.sock" --system "$@"; }
usr() { # NAME ARGS...
    name=$1; shift
    "$bin/kvctl" --socket "$dir/$name.sock" "$@"
}
eventually() { # EXPECTED COMMAND...: prints the output, waits up to 5 s for EXPECTED
    expected=$1; shift
    tries=0
    while [ "$("$@" 2>&1)" != "$expected" ] && [ $tries -lt 100 ]; do tries=$((tries + 1)); sleep 0.05; done
    "$@" 2>&1 || true
}
