#!/bin/sh
# clib/gio/tests/switch.sh MODULE_DIR BIN_DIR — the machine's switch (kvctl --system gnome) and
# the move at login (kvd-dconf-import --login), end to end: a real user kvd, dconf with its
# service on a private session bus, the real gsettings, and the real /etc paths the switch
# writes, in a private mount namespace whose /etc is an overlay (nothing of the machine changes).
# A "login" is what systemd's user manager does: the environment from environment.d (systemd's
# own generator), then kvd-gnome-login.service's command. Needs root (the namespace); run by
# `make giokvd-test`.
set -eu
if [ "$(id -u)" != 0 ]; then echo "switch.sh: SKIPPED: needs root for a private /etc"; exit 0; fi
if [ -z "${KVD_SWITCH_INSIDE:-}" ]; then
    exec unshare --mount --propagation private env KVD_SWITCH_INSIDE=1 "$0" "$@"
fi
module_dir=$(cd "$1" && pwd)
bin=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
dir=$(mktemp -d /tmp/giokvd-switch.XXXXXX)
kvd_pid=""
system_pid=""
bus_pid=""
cleanup() {
    for pid in $kvd_pid $system_pid; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    [ -z "$bus_pid" ] || kill "$bus_pid" 2>/dev/null || true
    umount /etc 2>/dev/null || true
    umount "$dir/etc" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM
fail() { echo "switch-test: FAIL: $*" >&2; for log in "$dir"/*.log; do echo "== $log" >&2; tail -20 "$log" >&2; done; exit 1; }
check() { # WHAT EXPECTED ACTUAL
    [ "$2" = "$3" ] || fail "$1: expected [$2], got [$3]"
    echo "ok $1"
}
mkdir "$dir/etc"
mount -t tmpfs none "$dir/etc"
mkdir "$dir/etc/upper" "$dir/etc/work"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$dir/etc/upper,workdir=$dir/etc/work" /etc
rm -f /etc/environment.d/50-kvd-gnome.conf /etc/systemd/user/default.target.d/50-kvd-gnome.conf

wait_socket() { # PID SOCKET
    tries=0
    while [ ! -S "$2" ]; do
        kill -0 "$1" 2>/dev/null && [ $tries -lt 400 ] || fail "kvd did not start ($2)"
        tries=$((tries + 1)); sleep 0.05
    done
}
"$bin/kvd" --system --socket "$dir/system.sock" --state-dir "$dir/system-state" 2>"$dir/system.log" &
system_pid=$!
wait_socket "$system_pid" "$dir/system.sock"
"$bin/kvd" --socket "$dir/kvd.sock" --state-dir "$dir/state" --system-socket "$dir/system.sock" --idle-exit 0 2>"$dir/kvd.log" &
kvd_pid=$!
wait_socket "$kvd_pid" "$dir/kvd.sock"
mkdir "$dir/schemas"
glib-compile-schemas --strict --targetdir="$dir/schemas" "$here" || fail "glib-compile-schemas"
export KVD_SOCKET="$dir/kvd.sock" KVD_SYSTEM_SOCKET="$dir/system.sock" KVD_NO_AUTOSTART=1 GSETTINGS_SCHEMA_DIR="$dir/schemas" GIO_EXTRA_MODULES="$module_dir"
export HOME="$dir/home" XDG_CONFIG_HOME="$dir/home/.config" XDG_RUNTIME_DIR="$dir/run" GIO_USE_VFS=local
mkdir -p "$HOME" "$XDG_RUNTIME_DIR"
# The session bus, started with this environment, so that the dconf service it starts writes the
# test's database (never the machine's user's).
bus=$(dbus-daemon --session --fork --print-address=1 --print-pid=1 2>"$dir/bus.log") || fail "dbus-daemon"
export DBUS_SESSION_BUS_ADDRESS=$(echo "$bus" | sed -n 1p)
bus_pid=$(echo "$bus" | sed -n 2p)
unset GSETTINGS_BACKEND DCONF_PROFILE
kvctl() { "$bin/kvctl" "$@"; }
generator=/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator
[ -x "$generator" ] || fail "systemd's environment.d generator is missing ($generator)"
# A login: the session's environment as systemd's user manager makes it from environment.d, then
# what kvd-gnome-login.service runs (its ExecStart, checked below); prints the session's backend.
login() {
    session_backend=$(env -u GSETTINGS_BACKEND "$generator" | sed -n 's/^GSETTINGS_BACKEND=//p')
    env ${session_backend:+GSETTINGS_BACKEND=$session_backend} "$module_dir/kvd-dconf-import" --login 2>>"$dir/login.log" ||
        fail "kvd-dconf-import --login (GSETTINGS_BACKEND=${session_backend:-unset}): $(tail -3 "$dir/login.log")"
}
# What the user's apps see: every key of the test schema through the session's backend.
seen() { GSETTINGS_BACKEND=${session_backend:-dconf} gsettings list-recursively io.kvd.test; }

# The unit the switch makes every login want runs the move, and systemd takes it as it is.
grep -qx 'ExecStart=@BINDIR@/kvd-dconf-import --login' "$root/systemd/kvd-gnome-login.service" ||
    fail "kvd-gnome-login.service does not run kvd-dconf-import --login"
mkdir "$dir/units"
sed -e "s|@BINDIR@|$module_dir|g" -e "s|@DOCDIR@|$root|g" "$root/systemd/kvd-gnome-login.service" > "$dir/units/kvd-gnome-login.service"
SYSTEMD_LOG_LEVEL=notice systemd-analyze verify "$dir/units/kvd-gnome-login.service" > "$dir/verify.log" 2>&1 ||
    fail "systemd-analyze verify kvd-gnome-login.service: $(cat "$dir/verify.log")"
echo "ok systemd-analyze verify kvd-gnome-login.service"

# Before: the user's values in dconf, with and without a schema.
GSETTINGS_BACKEND=dconf gsettings set io.kvd.test int32 7
GSETTINGS_BACKEND=dconf gsettings set io.kvd.test text "from dconf"
GSETTINGS_BACKEND=dconf gsettings set io.kvd.test tuple "(1, 0.5, 'x')"
dconf write /io/kvd/noschema/count "uint32 9"
# A value of the user's under a key the administrator locks (dconf keeps it, hidden).
GSETTINGS_BACKEND=dconf gsettings set io.kvd.test uint32 5
kvctl --system lock io.kvd.test uint32 >/dev/null || fail "kvctl --system lock"
# And one in a folder with nothing else (kvd's Get and List then answer NotFound for its domain).
dconf write /io/kvd/lonely/k "'mine'"
kvctl --system lock io.kvd.lonely k >/dev/null || fail "kvctl --system lock"
session_backend=""
seen | grep -v '^io.kvd.test uint32 ' > "$dir/before.list"
grep -q "int32 7" "$dir/before.list" || fail "dconf did not take the values: $(cat "$dir/before.list")"

kvctl --system gnome enable > "$dir/enable.out" || fail "kvctl --system gnome enable"
check "enable: the session environment" "GSETTINGS_BACKEND=kvd" "$(grep -v '^#' /etc/environment.d/50-kvd-gnome.conf | grep .)"
check "enable: every login wants the move" "Wants=kvd-gnome-login.service" \
    "$(grep '^Wants=' /etc/systemd/user/default.target.d/50-kvd-gnome.conf)"
check "enable: the files are readable by every user's manager" "644 644" \
    "$(stat -c %a /etc/environment.d/50-kvd-gnome.conf) $(stat -c %a /etc/systemd/user/default.target.d/50-kvd-gnome.conf)"
kvctl --system gnome status | grep -q "kvd for new sessions" || fail "gnome status after enable: $(kvctl --system gnome status)"

login
check "login after enable: the session uses kvd" kvd "$session_backend"
check "login after enable: kvd recorded the move" kvd "$(kvctl get io.kvd.gnome settingsIn)"
seen | grep -v '^io.kvd.test uint32 ' > "$dir/kvd.list"
cmp -s "$dir/before.list" "$dir/kvd.list" || fail "after the move into kvd: $(diff "$dir/before.list" "$dir/kvd.list")"
echo "ok login after enable: every key reads as it did under dconf"
check "a key without a schema kept its type" '{"gvariant":"u","text":"uint32 9"}' "$(kvctl --json get io.kvd.noschema count)"
check "the dconf file is left as it was" "7" "$(dconf read /io/kvd/test/int32)"
grep -q "key uint32: locked by the administrator; left out" "$dir/login.log" || fail "the locked key was not named: $(cat "$dir/login.log")"
check "a locked key is not writable under kvd" false "$(GSETTINGS_BACKEND=kvd gsettings writable io.kvd.test uint32)"

# Under kvd: a change and a reset; and another app's own domain (a Swift app's), which is kvd's only.
kvctl set com.example.app greeting hi >/dev/null
GSETTINGS_BACKEND=kvd gsettings set io.kvd.test int32 42
GSETTINGS_BACKEND=kvd gsettings reset io.kvd.test text
login
check "a second login moves nothing again (the change under kvd stays)" "42" "$(GSETTINGS_BACKEND=kvd gsettings get io.kvd.test int32)"

kvctl --system gnome disable > "$dir/disable.out" || fail "kvctl --system gnome disable"
[ ! -e /etc/environment.d/50-kvd-gnome.conf ] || fail "disable left the session environment"
[ -e /etc/systemd/user/default.target.d/50-kvd-gnome.conf ] || fail "disable removed the move at login (it is needed to move back)"
kvctl --system gnome status | grep -q "dconf for new sessions" || fail "gnome status after disable: $(kvctl --system gnome status)"
GSETTINGS_BACKEND=kvd seen | grep -v '^io.kvd.test uint32 ' > "$dir/under-kvd.list"
login
check "login after disable: the session uses dconf" "" "$session_backend"
check "login after disable: kvd recorded the move back" dconf "$(kvctl get io.kvd.gnome settingsIn)"
seen | grep -v '^io.kvd.test uint32 ' > "$dir/back.list"
cmp -s "$dir/under-kvd.list" "$dir/back.list" || fail "after the move back: $(diff "$dir/under-kvd.list" "$dir/back.list")"
echo "ok login after disable: every key reads under dconf as it did under kvd"
check "the change under kvd is in dconf" "42" "$(dconf read /io/kvd/test/int32)"
check "the reset under kvd is a reset in dconf" "" "$(dconf read /io/kvd/test/text)"
check "a key without a schema came back with its type" "uint32 9" "$(dconf read /io/kvd/noschema/count)"
check "the user's value under the lock stays in dconf" "uint32 5" "$(dconf read /io/kvd/test/uint32)"
check "and the one alone in its folder" "'mine'" "$(dconf read /io/kvd/lonely/k)"
[ -z "$(dconf read /io/kvd/gnome/settingsIn)" ] || fail "kvd's own record went into dconf"
[ -z "$(dconf read /com/example/app/greeting)" ] || fail "another app's kvd domain went into dconf"
echo "ok kvd's record and other apps' domains stay out of dconf"
kvctl set com.example.app greeting newer >/dev/null

# Back on: what changed under dconf meanwhile comes in.
GSETTINGS_BACKEND=dconf gsettings set io.kvd.test int32 43
login
check "a login while off moves nothing" "42" "$(kvctl get io.kvd.test int32)"
kvctl --system gnome enable >/dev/null
login
check "enable again: dconf's newer value moves into kvd" "43" "$(GSETTINGS_BACKEND=kvd gsettings get io.kvd.test int32)"
check "and another app's domain, changed in kvd meanwhile, keeps its value" newer "$(kvctl get com.example.app greeting)"
echo "switch-test: all passed"
