#!/bin/sh
# clib/gio/tests/run.sh MODULE_DIR BIN_DIR — the kvd GSettings backend end to end: a real system
# kvd and a user kvd (from BIN_DIR, with kvctl) on sockets in a temp folder, the test schema
# compiled there, and the real `gsettings` CLI and a PyGObject program (test_backend.py) with
# GSETTINGS_BACKEND=kvd and GIO_EXTRA_MODULES=MODULE_DIR. Every check that the backend was used
# looks at kvd itself (kvctl), since GLib falls back to its memory backend without a word.
set -eu
module_dir=$(cd "$1" && pwd)
bin=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/giokvd-test.XXXXXX)
pids=""
cleanup() {
    for pid in $pids; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM
fail() { echo "giokvd-test: FAIL: $*" >&2; for log in "$dir"/*.log; do echo "== $log" >&2; tail -20 "$log" >&2; done; exit 1; }
wait_socket() { # PID SOCKET LOG
    tries=0
    while [ ! -S "$2" ]; do
        kill -0 "$1" 2>/dev/null && [ $tries -lt 400 ] || fail "kvd did not start ($3)"
        tries=$((tries + 1)); sleep 0.05
    done
}
"$bin/kvd" --system --socket "$dir/system.sock" --state-dir "$dir/system-state" 2>"$dir/system.log" &
system_pid=$!; pids="$system_pid"
wait_socket "$system_pid" "$dir/system.sock" system.log
"$bin/kvd" --socket "$dir/kvd.sock" --state-dir "$dir/state" --system-socket "$dir/system.sock" --idle-exit 0 2>"$dir/kvd.log" &
kvd_pid=$!; pids="$pids $kvd_pid"
wait_socket "$kvd_pid" "$dir/kvd.sock" kvd.log

mkdir "$dir/schemas"
glib-compile-schemas --strict --targetdir="$dir/schemas" "$here" || fail "glib-compile-schemas"
export KVD_SOCKET="$dir/kvd.sock" KVD_SYSTEM_SOCKET="$dir/system.sock" KVD_NO_AUTOSTART=1
export GSETTINGS_SCHEMA_DIR="$dir/schemas" GIO_EXTRA_MODULES="$module_dir" GSETTINGS_BACKEND=kvd
export XDG_CONFIG_HOME="$dir/config" GIO_USE_VFS=local
kvctl() { "$bin/kvctl" "$@"; }
# python3-gi is for the Debian python3, which may not be the first python3 on PATH.
python=/usr/bin/python3; [ -x "$python" ] || python=python3
check() { # WHAT EXPECTED ACTUAL
    [ "$2" = "$3" ] || fail "$1: expected [$2], got [$3]"
    echo "ok $1"
}

# The module is the one GLib chose: a gsettings set lands in kvd, under the mapped domain and key.
gsettings set io.kvd.test color-scheme prefer-dark || fail "gsettings set"
check "gsettings set reaches kvd (org.gnome-style path -> domain io.kvd.test, key color-scheme)" \
    prefer-dark "$(kvctl get io.kvd.test color-scheme 2>&1)"
# Who made it: kvd names the gsettings program that connected through the module.
blame=$(kvctl --json blame io.kvd.test color-scheme 2>&1)
case "$blame" in
*'"program":"'"$(readlink -f "$(command -v gsettings)")"'"'*) echo "ok kvctl blame names gsettings" ;;
*) fail "kvctl blame of a gsettings set: $blame" ;;
esac
kvctl set io.kvd.test text from-kvctl
check "gsettings get of a kvctl set" "'from-kvctl'" "$(gsettings get io.kvd.test text)"
gsettings reset io.kvd.test text
kvctl get io.kvd.test text >/dev/null 2>&1 && fail "gsettings reset left the key in kvd"
check "gsettings reset deletes the key; the schema default shows" "'hello'" "$(gsettings get io.kvd.test text)"
gsettings reset io.kvd.test text || fail "a reset of a key kvd does not have"
check "gsettings writable" true "$(gsettings writable io.kvd.test text)"
gsettings list-recursively io.kvd.test > "$dir/list.out"
grep -qx "io.kvd.test color-scheme 'prefer-dark'" "$dir/list.out" || fail "list-recursively: $(cat "$dir/list.out")"
echo "ok gsettings list-recursively"

# Relocatable schemas at paths the mapping escapes ('.' '_' ':' and a leading '-').
gsettings set io.kvd.test.profile:/org/gnome/terminal/legacy/profiles:/:b1dcc9dd-5262/ name first
check "relocatable path with ':' -> escaped domain" first \
    "$(kvctl get org.gnome.terminal.legacy.profiles_3A._3Ab1dcc9dd-5262 name 2>&1)"
gsettings set io.kvd.test.profile:/a.b/c_d/-e/ name second
check "relocatable path with '.', '_' and a leading '-'" second "$(kvctl get a_2Eb.c_5Fd.-e name 2>&1)"
check "and read back through the mapping" "'second'" "$(gsettings get io.kvd.test.profile:/a.b/c_d/-e/ name)"
gsettings set io.kvd.test.profile:/_2D/ name third
check "a path that looks escaped is escaped again" third "$(kvctl get _5F2D name 2>&1)"
long=$(printf 'x%.0s' $(seq 1 200))
gsettings set "io.kvd.test.profile:/$long/$long/" name fourth
check "a path longer than a domain keeps the rest in the key" fourth "$(kvctl get "$long" "$long/name" 2>&1)"
check "and reads back" "'fourth'" "$(gsettings get "io.kvd.test.profile:/$long/$long/" name)"

# Every type of the test schema round-trips exactly, across processes (the second reads what
# kvd stored); the natural ones are kvd's own types, the rest the tagged form.
while IFS='|' read -r key value kvd_form; do
    [ -n "$key" ] || continue
    gsettings set io.kvd.test "$key" "$value" || fail "gsettings set $key $value"
    check "round trip of $key" "$value" "$(gsettings get io.kvd.test "$key")"
    check "kvd's form of $key" "$kvd_form" "$(kvctl --json get io.kvd.test "$key" 2>&1)"
done <<'TYPES'
flag|true|true
byte|byte 0xff|255
int16|int16 -32768|-32768
uint16|uint16 65535|65535
int32|-2147483648|-2147483648
uint32|uint32 4294967295|4294967295
int64|int64 -9223372036854775808|-9223372036854775808
uint64|uint64 9223372036854775807|9223372036854775807
real|-1.0000000000000002|-1.0000000000000002
text|"it's"|"it's"
object-path|objectpath '/a/b'|"/a/b"
signature|signature 'a(ii)'|"a(ii)"
strings|['x', 'y', '']|["x","y",""]
bytes|[byte 0x00, 0xff]|{"$data":"AP8="}
ints|[-1, 0, 1]|[-1,0,1]
nested|[['a', 'b'], []]|[["a","b"],[]]
dict|{'a': <int64 1>, 'b': <'two'>, 'c': <['x']>}|{"a":1,"b":"two","c":["x"]}
dict|{'a': <1>, 'b': <'two'>, 'c': <[true]>}|{"gvariant":"a{sv}","text":"{'a': <1>, 'b': <'two'>, 'c': <[true]>}"}
string-dict|{'a': 'b', 'c': 'd'}|{"a":"b","c":"d"}
int-dict|{1: 'one', 2: 'two'}|{"gvariant":"a{is}","text":"{1: 'one', 2: 'two'}"}
tuple|(-1, 1.5, 'y')|{"gvariant":"(ids)","text":"(-1, 1.5, 'y')"}
maybe|@ms 'z'|{"gvariant":"ms","text":"@ms 'z'"}
variant|<(1, 2)>|{"gvariant":"v","text":"<(1, 2)>"}
TYPES

# The module under valgrind (memory errors; GLib's own allocations make leak checks useless here).
if command -v valgrind >/dev/null; then
    for args in "set io.kvd.test tuple (5,0.5,'v')" "get io.kvd.test tuple" "reset io.kvd.test tuple" "list-recursively io.kvd.test"; do
        # shellcheck disable=SC2086
        valgrind -q --error-exitcode=9 gsettings $args >/dev/null 2>"$dir/valgrind.log" || fail "gsettings $args under valgrind: $(cat "$dir/valgrind.log")"
    done
    echo "ok gsettings with the module under valgrind"
fi

# A kvctl set reaches `gsettings monitor`: set fresh values until the monitor, once subscribed,
# prints one (it cannot say when it is ready); each is printed as it happens.
gsettings monitor io.kvd.test text > "$dir/monitor.out" 2>"$dir/monitor.log" &
monitor_pid=$!; pids="$pids $monitor_pid"
seen=""
for round in $(seq 1 100); do
    kvctl set io.kvd.test text "ping-$round"
    for wait in 1 2 3 4 5; do
        if grep -q "^text: 'ping-" "$dir/monitor.out"; then seen=1; break 2; fi
        sleep 0.02
    done
done
[ -n "$seen" ] || fail "gsettings monitor never saw a kvctl set"
kvctl set io.kvd.test text last-one
for wait in $(seq 1 250); do grep -q "^text: 'last-one'" "$dir/monitor.out" && break; sleep 0.02; done
grep -q "^text: 'last-one'" "$dir/monitor.out" || fail "gsettings monitor missed a kvctl set: $(cat "$dir/monitor.out")"
echo "ok a kvctl set reaches gsettings monitor"

# kvd restarts under a running app: the module's thread makes its watch again and announces
# what changed meanwhile.
kill "$kvd_pid"; wait "$kvd_pid" 2>/dev/null || true
"$bin/kvd" --socket "$dir/kvd.sock" --state-dir "$dir/state" --system-socket "$dir/system.sock" --idle-exit 0 2>>"$dir/kvd.log" &
kvd_pid=$!; pids="$pids $kvd_pid"
tries=0; until kvctl set io.kvd.test text after-restart 2>/dev/null; do
    [ $tries -lt 200 ] || fail "kvd did not come back"; tries=$((tries + 1)); sleep 0.05
done
for wait in $(seq 1 500); do grep -q "^text: 'after-restart'" "$dir/monitor.out" && break; sleep 0.02; done
grep -q "^text: 'after-restart'" "$dir/monitor.out" || fail "after a kvd restart, gsettings monitor saw nothing: $(cat "$dir/monitor.out")"
echo "ok a kvd restart: the watch is made again and the change announced"

# The system layer: an admin default shows; a lock makes the key not writable and a set fail.
gsettings reset io.kvd.test int32
kvctl --system set io.kvd.test int32 -int 7
check "an admin default shows" 7 "$(gsettings get io.kvd.test int32)"
kvctl --system lock io.kvd.test int32
check "a locked key is not writable" false "$(gsettings writable io.kvd.test int32)"
if gsettings set io.kvd.test int32 9 2>"$dir/locked.err"; then fail "gsettings set of a locked key succeeded"; fi
# as dconf: the set fails (g_settings_set returns FALSE) without a warning of the backend's
if grep -q "WARNING\|kvd GSettings backend" "$dir/locked.err"; then fail "a set of a locked key warned: $(cat "$dir/locked.err")"; fi
echo "ok a set of a locked key fails without a warning"
check "the locked value stays" 7 "$(gsettings get io.kvd.test int32)"
kvctl --system unlock io.kvd.test int32
check "unlocked, writable again" true "$(gsettings writable io.kvd.test int32)"
gsettings set io.kvd.test int32 9
check "and the user's value wins over the default" 9 "$(gsettings get io.kvd.test int32)"
# A lock without a value: the key reads as the schema default, even over the user's
# own value, and is not writable.
gsettings set io.kvd.test uint64 7
kvctl --system lock io.kvd.test uint64
check "a key locked without a value is not writable" false "$(gsettings writable io.kvd.test uint64)"
check "and reads as the schema default" "uint64 42" "$(gsettings get io.kvd.test uint64)"
if gsettings set io.kvd.test uint64 9 2>"$dir/locked.err"; then fail "gsettings set of a key locked without a value succeeded"; fi
kvctl --system unlock io.kvd.test uint64
check "unlocked, writable again" true "$(gsettings writable io.kvd.test uint64)"
check "and the user's value is back" "uint64 7" "$(gsettings get io.kvd.test uint64)"

# A domain over 2 MiB: kvd's first Watch reply comes in pieces of about 1 MiB; a fresh process
# reads a key of the last piece (keys are sent sorted: "name" after a0000..a2599) as stored.
"$python" - "$dir/big.keyfile" <<'KEYFILE'
import sys
with open(sys.argv[1], "w") as out:
    out.write("[io/kvd/big]\n")
    for i in range(2600):
        out.write(f"a{i:04d}='{'p' * 1024}'\n")
    out.write("name='from-the-last-piece'\n")
KEYFILE
"$module_dir/kvd-dconf-import" < "$dir/big.keyfile" 2>"$dir/import-big.log" || fail "kvd-dconf-import of a big domain: $(cat "$dir/import-big.log")"
check "a key in the last piece of a domain over 2 MiB" "'from-the-last-piece'" "$(gsettings get io.kvd.test.profile:/io/kvd/big/ name)"
kvctl delete io.kvd.big >/dev/null || fail "kvctl delete io.kvd.big"

# Writes that never wait for kvd (test_writes.py: kvd stopped with SIGSTOP, 10,000 set_int and a
# sync, a refused 17 MiB write reverted with changed and a warning, a locked key), then kvd killed
# with SIGKILL: what the syncs returned for is all there.
"$python" "$here/test_writes.py" "$bin/kvctl" "$kvd_pid" 2>"$dir/writes.err" || fail "test_writes.py: $(tail -5 "$dir/writes.err")"
grep -q "cannot write /io/kvd/test/text" "$dir/writes.err" || fail "the refused 17 MiB write was not reported: $(cat "$dir/writes.err")"
grep -q "WARNING.*int64\|cannot write /io/kvd/test/int64" "$dir/writes.err" && fail "a write of a locked key warned: $(cat "$dir/writes.err")"
echo "ok the refused write was reported (a warning), the locked one was not"
kill -9 "$kvd_pid"; wait "$kvd_pid" 2>/dev/null || true
"$bin/kvd" --socket "$dir/kvd.sock" --state-dir "$dir/state" --system-socket "$dir/system.sock" --idle-exit 0 2>>"$dir/kvd.log" &
kvd_pid=$!; pids="$pids $kvd_pid"
wait_restarted() {
    tries=0; until kvctl get io.kvd.test flag >/dev/null 2>&1 || kvctl domains >/dev/null 2>&1; do
        [ $tries -lt 200 ] || fail "kvd did not come back"; tries=$((tries + 1)); sleep 0.05
    done
}
wait_restarted
check "after SIGKILL: the burst's last value" 109999 "$(kvctl get io.kvd.test int32)"
check "after SIGKILL: the last synced write of another key" after-fork "$(kvctl get io.kvd.test text)"

# A PyGObject program: delay-apply as one Apply, an own write announced once, a lock or unlock
# announced as writable-changed, changes from kvctl in the app's main context.
"$python" "$here/test_backend.py" "$bin/kvctl" || fail "test_backend.py"

# Issue 38: 1,500 relocatable objects under ulimit -n 1024, one stream for all (at most 8 sockets).
"$python" "$here/test_many.py" "$bin/kvctl" || fail "test_many.py"
# And a fresh process's first read of 1,500 domains: the stream's start has them all (at most 3
# requests, counted by strace), a domain over the budget read apart, the system layer's in it.
"$python" "$here/test_first_read.py" "$bin/kvctl" || fail "test_first_read.py"

# dconf settings moved over: dconf (its service on a private session bus), `dconf dump /`,
# kvd-dconf-import; GSETTINGS_BACKEND=kvd then reads what dconf had, with its types.
if command -v dbus-run-session >/dev/null && command -v dconf >/dev/null; then
    mkdir -m 0700 "$dir/run"
    XDG_RUNTIME_DIR="$dir/run" GSETTINGS_BACKEND=dconf dbus-run-session -- sh -c '
        dconf write /io/kvd/test/int32 123 && dconf write /io/kvd/test/tuple "(7, 0.25, \"d\")" &&
        dconf write /io/kvd/test/dict "{\"k\": <uint32 3>}" && dconf write /io/kvd/moved/some_key "uint32 9" &&
        dconf write /io/kvd/moved/other "[\"x\"]" && dconf write /top-level "true" && dconf dump /' > "$dir/dconf.dump" 2>"$dir/dconf.log" ||
        fail "dconf on a private bus: $(cat "$dir/dconf.log")"
    "$module_dir/kvd-dconf-import" < "$dir/dconf.dump" 2>"$dir/import.log" || fail "kvd-dconf-import: $(cat "$dir/import.log")"
    check "dconf -> kvd: an int32" 123 "$(gsettings get io.kvd.test int32)"
    check "dconf -> kvd: a tuple" "(7, 0.25, 'd')" "$(gsettings get io.kvd.test tuple)"
    check "dconf -> kvd: an a{sv} with a uint32" "{'k': <uint32 3>}" "$(gsettings get io.kvd.test dict)"
    # Keys no schema describes keep their type: natural when kvd's type says it, else tagged.
    check "dconf -> kvd: keys without a schema" '{"gvariant":"u","text":"uint32 9"} ["x"]' \
        "$(kvctl --json get io.kvd.moved some_key) $(kvctl --json get io.kvd.moved other)"
    check "dconf -> kvd: a key at the root" true "$(kvctl get _ top-level)"
    # And back, as the README says: every key of the schema through gsettings into dconf.
    XDG_RUNTIME_DIR="$dir/run" dbus-run-session -- sh -c '
        GSETTINGS_BACKEND=kvd gsettings list-recursively io.kvd.test | while read -r schema key value; do
            GSETTINGS_BACKEND=dconf gsettings set "$schema" "$key" "$value" || exit 1; done' 2>"$dir/back.log" ||
        fail "kvd -> dconf: $(cat "$dir/back.log")"
    GSETTINGS_BACKEND=kvd gsettings list-recursively io.kvd.test > "$dir/kvd.list"
    XDG_RUNTIME_DIR="$dir/run" GSETTINGS_BACKEND=dconf dbus-run-session -- gsettings list-recursively io.kvd.test > "$dir/dconf.list"
    cmp -s "$dir/kvd.list" "$dir/dconf.list" || fail "kvd -> dconf: $(diff "$dir/kvd.list" "$dir/dconf.list")"
    echo "ok kvd -> dconf: every key of the schema the same in both"
    # And back with nothing lost, schema or not: kvd-dconf-import --export into a fresh dconf
    # gives every key dconf had, with its value and its type.
    mkdir -m 0700 "$dir/run-back"
    XDG_RUNTIME_DIR="$dir/run-back" XDG_CONFIG_HOME="$dir/config-back" GSETTINGS_BACKEND=dconf dbus-run-session -- sh -c '
        "$0" --export / > "$1" && dconf load / < "$1" && dconf dump /' "$module_dir/kvd-dconf-import" "$dir/export.keyfile" \
        > "$dir/dconf-back.dump" 2>"$dir/export.log" || fail "kvd-dconf-import --export | dconf load: $(cat "$dir/export.log")"
    "$python" - "$dir/dconf.dump" "$dir/dconf-back.dump" <<'COMPARE' || fail "kvd -> dconf with --export lost something"
import configparser, sys
def read(path):
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str
    parser.read(path)
    return {(group, key): parser[group][key] for group in parser.sections() for key in parser[group]}
before, after = read(sys.argv[1]), read(sys.argv[2])
lost = {k: (v, after.get(k)) for k, v in before.items() if after.get(k) != v}
if lost or not before:
    print(f"dconf had, and got back: {lost}", file=sys.stderr)
    sys.exit(1)
print(f"ok kvd -> dconf with kvd-dconf-import --export: all {len(before)} keys dconf had, with their types")
COMPARE
else
    echo "giokvd-test: dbus-run-session or dconf missing: skipped the dconf import"
fi

# kvd unreachable: reads give the schema defaults, a write fails and says so, nothing hangs.
kill "$kvd_pid"; wait "$kvd_pid" 2>/dev/null || true
export KVD_SOCKET="$dir/nothing-here.sock"
check "kvd unreachable: the schema default" "'hello'" "$(timeout 20 gsettings get io.kvd.test text)"
status=0; timeout 20 gsettings set io.kvd.test text lost 2>"$dir/unreachable.err" || status=$?
[ $status -ne 124 ] || fail "gsettings set hung with kvd unreachable"
grep -q "cannot write /io/kvd/test/text" "$dir/unreachable.err" || fail "a failed write was not reported: $(cat "$dir/unreachable.err")"
echo "ok kvd unreachable: a write is reported (status $status)"
"$python" "$here/test_backend.py" --unreachable || fail "test_backend.py --unreachable"
# An app writing in a loop while kvd is away: each write is reverted, one warning says why.
result=$("$python" - 2>"$dir/unreachable-loop.err" <<'LOOP'
from gi.repository import Gio
settings = Gio.Settings.new("io.kvd.test")
for i in range(1000):
    settings.set_int("int32", i)
Gio.Settings.sync()
print(settings.get_int("int32"))
LOOP
)
check "kvd unreachable: 1,000 writes in a loop reverted to the default" 42 "$result"
check "and warned of once" 1 "$(grep -c 'WARNING.*cannot write /io/kvd/test/int32' "$dir/unreachable-loop.err")"
echo "giokvd-test: passed"
