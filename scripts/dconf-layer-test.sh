#!/bin/sh
# scripts/dconf-layer-test.sh MODULE_DIR BIN_DIR — dconf's admin files through kvd, end to end:
# a real system kvd (from BIN_DIR) reading a dconf folder made here (--dconf-dir: a profile with
# two system databases, their keyfiles and a lock file), a user kvd following it, and the real
# `gsettings` with GSETTINGS_BACKEND=kvd (the module in MODULE_DIR, `make giokvd`) on
# clib/gio/tests' schema: the site's defaults read back, locked keys not writable, a change in the
# files seen without `dconf update`, a typo that keeps the lock. Then the same files are read by
# dconf itself (`dconf update` in a mount namespace where /etc/dconf is the test's copy) and every
# key must read the same and be as writable. DCONF_LAYER_OFF=1 starts kvd without the dconf layer
# (--dconf-dir ''): the checks must then fail (how the test was seen to fail).
set -eu
module_dir=$(cd "$1" && pwd)
bin=$(cd "$2" && pwd)
schemas_src=$(cd "$(dirname "$0")/../clib/gio/tests" && pwd)
dir=$(mktemp -d /tmp/kvd-dconf-layer.XXXXXX)
chmod 755 "$dir"
pids=""
system_pid=""
cleanup() {
    for pid in $pids; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM
fail() { echo "dconf-layer-test: FAIL: $*" >&2; for log in "$dir"/*.log; do echo "== $log" >&2; tail -20 "$log" >&2; done; exit 1; }
passed=0
check() { # WHAT EXPECTED ACTUAL
    [ "$2" = "$3" ] || fail "$1: expected [$2], got [$3]"
    passed=$((passed + 1))
    echo "ok $1"
}
wait_socket() { # PID SOCKET LOG
    tries=0
    while [ ! -S "$2" ]; do
        kill -0 "$1" 2>/dev/null && [ $tries -lt 400 ] || fail "kvd did not start ($3)"
        tries=$((tries + 1)); sleep 0.05
    done
}

# The site's dconf folder: the profile names local before site (local wins where both set a key).
d="$dir/dconf"
mkdir -p "$d/profile" "$d/db/local.d" "$d/db/site.d/locks" "$dir/etc"
printf 'user-db:user\nsystem-db:local\nsystem-db:site\n' >"$d/profile/user"
printf 'user-db:user\nsystem-db:site\n' >"$d/profile/kiosk"  # for users with DCONF_PROFILE=kiosk
cat >"$d/db/site.d/00-site" <<'EOF'
# the site's defaults
[io/kvd/test]
text='from site'
uint32=uint32 7
int16=int16 -5
real=2.5
strings=['x', 'y']
tuple=(3, 4.5, 'z')
maybe=@ms 'm'
variant=<5>
dict={'b': <2>}
int-dict={2: 'two'}
nested=[['q'], @as []]
flag=true
EOF
printf "[io/kvd/test]\ntext='from local'\nint32=7\nreal=1.5\n" >"$d/db/local.d/00-local"
printf '/io/kvd/test/text\n/io/kvd/test/flag\n' >"$d/db/site.d/locks/00-site"
keys="text uint32 int16 int32 real strings tuple maybe variant dict int-dict nested flag byte"

layer="--dconf-dir=$d"
[ "${DCONF_LAYER_OFF:-}" = 1 ] && layer="--dconf-dir="
start_system() {
    "$bin/kvd" --system --socket "$dir/system.sock" --state-dir "$dir/system-state" --config-dir "$dir/etc" "$layer" \
        2>>"$dir/system.log" &
    system_pid=$!
    pids="$pids $system_pid"
    wait_socket "$system_pid" "$dir/system.sock" system.log
}
start_system
"$bin/kvd" --socket "$dir/kvd.sock" --state-dir "$dir/state" --system-socket "$dir/system.sock" --idle-exit 0 \
    2>"$dir/kvd.log" &
pids="$pids $!"
wait_socket "$!" "$dir/kvd.sock" kvd.log
DCONF_PROFILE=kiosk "$bin/kvd" --socket "$dir/kiosk.sock" --state-dir "$dir/kiosk-state" \
    --system-socket "$dir/system.sock" --idle-exit 0 2>"$dir/kiosk.log" &
pids="$pids $!"
wait_socket "$!" "$dir/kiosk.sock" kiosk.log
mkdir "$dir/schemas"
glib-compile-schemas --strict --targetdir="$dir/schemas" "$schemas_src" || fail "glib-compile-schemas"
export KVD_SOCKET="$dir/kvd.sock" KVD_SYSTEM_SOCKET="$dir/system.sock" KVD_NO_AUTOSTART=1
export GSETTINGS_SCHEMA_DIR="$dir/schemas" GIO_EXTRA_MODULES="$module_dir" XDG_CONFIG_HOME="$dir/config" GIO_USE_VFS=local
kvctl() { "$bin/kvctl" "$@"; }
kvd_gsettings() { GSETTINGS_BACKEND=kvd gsettings "$@"; }
kiosk_gsettings() { KVD_SOCKET="$dir/kiosk.sock" GSETTINGS_BACKEND=kvd gsettings "$@"; }
eventually() { # WHAT EXPECTED COMMAND...: the command's output becomes EXPECTED within 5 s
    what=$1 expected=$2; shift 2
    tries=0
    while [ "$("$@" 2>&1)" != "$expected" ] && [ $tries -lt 100 ]; do tries=$((tries + 1)); sleep 0.05; done
    check "$what" "$expected" "$("$@" 2>&1)"
}

eventually "the site's defaults reach gsettings (local's value wins over site's)" 1.5 \
    kvd_gsettings get io.kvd.test real
check "a key site locks takes site's value, not local's (as dconf reads it)" "'from site'" \
    "$(kvd_gsettings get io.kvd.test text)"
check "a value only site sets" "uint32 7" "$(kvd_gsettings get io.kvd.test uint32)"
check "a user whose DCONF_PROFILE names the kiosk profile gets site's databases only" 2.5 \
    "$(kiosk_gsettings get io.kvd.test real)"
check "a tuple, in the tagged form" "(3, 4.5, 'z')" "$(kvd_gsettings get io.kvd.test tuple)"
check "a locked key is not writable" false "$(kvd_gsettings writable io.kvd.test text)"
check "an unlocked one is" true "$(kvd_gsettings writable io.kvd.test real)"
kvd_gsettings set io.kvd.test text "'mine'" 2>/dev/null || true
check "a write to a locked key changes nothing" "'from site'" "$(kvd_gsettings get io.kvd.test text)"
kvd_gsettings set io.kvd.test real 9.5
check "the user's own value of an unlocked key wins over the site's" 9.5 "$(kvd_gsettings get io.kvd.test real)"
kvd_gsettings reset io.kvd.test real
check "kvctl --system source names the keyfile and the lock file" \
    "value: drop-in file $d/db/site.d/00-site
lock: drop-in file $d/db/site.d/locks/00-site" "$(kvctl --system source io.kvd.test text 2>&1 | head -2)"
kvctl --system locks >"$dir/locks.out" 2>&1
grep -qx "io.kvd.test flag (file $d/db/site.d/locks/00-site)" "$dir/locks.out" || fail "kvctl --system locks: $(cat "$dir/locks.out")"
echo "ok kvctl --system locks lists dconf's locks with their file"

# The same files read by dconf itself, after `dconf update`, where it reads /etc/dconf.
cp -a "$d" "$dir/dconf-copy"
cat >"$dir/dconf.sh" <<EOF
set -e
mount --bind "$dir/dconf-copy" /etc/dconf
dconf update 2>/dev/null || dconf update
for key in $keys; do
    printf '%s %s %s\n' "\$key" "\$(GSETTINGS_BACKEND=dconf gsettings get io.kvd.test "\$key")" \
        "\$(GSETTINGS_BACKEND=dconf gsettings writable io.kvd.test "\$key")"
    printf 'kiosk-%s %s %s\n' "\$key" "\$(DCONF_PROFILE=kiosk GSETTINGS_BACKEND=dconf gsettings get io.kvd.test "\$key")" \
        "\$(DCONF_PROFILE=kiosk GSETTINGS_BACKEND=dconf gsettings writable io.kvd.test "\$key")"
done
EOF
if unshare --mount --propagation private sh "$dir/dconf.sh" >"$dir/dconf.out" 2>"$dir/dconf-update.log"; then
    for key in $keys; do
        line="$key $(kvd_gsettings get io.kvd.test "$key") $(kvd_gsettings writable io.kvd.test "$key")"
        check "as dconf reads it: $key" "$(grep "^$key " "$dir/dconf.out")" "$line"
        line="kiosk-$key $(kiosk_gsettings get io.kvd.test "$key") $(kiosk_gsettings writable io.kvd.test "$key")"
        check "as dconf reads it with DCONF_PROFILE=kiosk: $key" "$(grep "^kiosk-$key " "$dir/dconf.out")" "$line"
    done
else
    echo "skip: dconf itself could not be run in a mount namespace ($(tail -1 "$dir/dconf-update.log"))"
fi

# A change in the files is read without dconf update; a typo in a lock file keeps its locks.
printf "[io/kvd/test]\ntext='from local'\nint32=7\nreal=3.5\n" >"$d/db/local.d/00-local.new"
mv "$d/db/local.d/00-local.new" "$d/db/local.d/00-local"
eventually "a keyfile changed is read again" 3.5 kvd_gsettings get io.kvd.test real
printf '/io/kvd/test/text \n' >"$d/db/site.d/locks/00-site"
eventually "a typo in the lock file is a problem in status" 1 sh -c \
    "'$bin/kvctl' --system status | grep -c '$d/db/site.d/locks/00-site: line 1.*last good content still applies'"
check "and the lock holds" false "$(kvd_gsettings writable io.kvd.test text)"
printf '/io/kvd/test/flag\n' >"$d/db/site.d/locks/00-site"
eventually "a lock file fixed is read as it now is: its lock lifted" true kvd_gsettings writable io.kvd.test text
check "and local's value applies again" "'from local'" "$(kvd_gsettings get io.kvd.test text)"

# The last good content is kept durably: a lock file spoilt while the system instance is down
# keeps its lock after the restart.
kill "$system_pid"; wait "$system_pid" 2>/dev/null || true
rm -f "$dir/system.sock"
printf 'io/kvd/test/flag\n' >"$d/db/site.d/locks/00-site"
start_system
check "after a restart, a lock file spoilt meanwhile keeps its lock" \
    "flag (file $d/db/site.d/locks/00-site)" "$(kvctl --system locks io.kvd.test 2>&1 | grep flag || true)"
check "and users are told" false "$(kvd_gsettings writable io.kvd.test flag)"
"$bin/kvctl" --system status >"$dir/status.out" 2>&1 || true
grep -q "$d/db/site.d/locks/00-site: line 1.*last good content still applies" "$dir/status.out" ||
    fail "status after the restart: $(cat "$dir/status.out")"
echo "ok and status names it"
kill "$system_pid"; wait "$system_pid" 2>/dev/null || true
rm -f "$dir/system.sock"
printf 'user-db:user\nsystem-db:local\nsytem-db:site\n' >"$d/profile/user"
start_system
check "after a restart, a profile spoilt meanwhile keeps every dconf lock" \
    "flag (file $d/db/site.d/locks/00-site)" "$(kvctl --system locks io.kvd.test 2>&1 | grep flag || true)"

# dconf's files are watched with no kvd config folder at all (a make install machine), and a
# database made after start is watched: a file put in it later is read without a reload.
kill "$system_pid"; wait "$system_pid" 2>/dev/null || true
rm -f "$dir/system.sock"
printf 'user-db:user\nsystem-db:local\nsystem-db:site\nsystem-db:extra\n' >"$d/profile/user"
rmdir "$dir/etc"
start_system
check "no kvd config folder: dconf's locks still apply" false "$(kvd_gsettings writable io.kvd.test flag)"
printf "[io/kvd/test]\ntext='from local'\nint32=7\nreal=4.5\n" >"$d/db/local.d/00-local"
eventually "no kvd config folder: a keyfile changed is read again" 4.5 kvd_gsettings get io.kvd.test real
mkdir "$d/db/extra.d"
sleep 0.5
printf "[io/kvd/test]\nbyte=byte 0x2a\n" >"$d/db/extra.d/00-extra"
eventually "a database made after start: a file put in it later is read" "byte 0x2a" kvd_gsettings get io.kvd.test byte
echo "$passed passed, 0 failed"
