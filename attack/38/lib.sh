# attack/38/lib.sh — sourced by the attack scripts of issue 38 (the machine's GNOME switch, the
# move at login, the asynchronous writes). The setup of clib/gio/tests/switch.sh: a private mount
# namespace whose /etc is an overlay, a real system and user kvd, a private session bus with dconf,
# the real gsettings. Each script exits 1 ("DEFECT") when the defect it names is present, 0 when
# the product behaves as it should. Usage: sh attack/38/NAME.sh (root; builds must exist:
# swift build --product kvd/kvctl, make giokvd).
set -eu
if [ "$(id -u)" != 0 ]; then echo "needs root for a private /etc"; exit 2; fi
if [ -z "${KVD_ATTACK_INSIDE:-}" ]; then
    exec unshare --mount --propagation private env KVD_ATTACK_INSIDE=1 sh "$0" "$@"
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
module_dir=$root/.build/clib/gio
bin=$(PATH=/opt/swift/usr/bin:$PATH && cd "$root" && swift build --show-bin-path)
dir=$(mktemp -d /tmp/kvd-attack38.XXXXXX)
kvd_pid=""; system_pid=""; bus_pid=""
cleanup() {
    restarted=$(cat "$dir/restarted.pid" 2>/dev/null || true)
    for pid in $kvd_pid $system_pid $restarted; do kill -CONT "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    for pid in $restarted; do while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done; done  # not this shell's child
    [ -z "$bus_pid" ] || kill "$bus_pid" 2>/dev/null || true
    umount "$dir/small" 2>/dev/null || true
    umount /etc 2>/dev/null || true
    umount "$dir/etc" 2>/dev/null || true
    [ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT INT TERM
defect() { echo "DEFECT: $*" >&2; [ -f "$dir/login.log" ] && { echo "== login.log" >&2; tail -8 "$dir/login.log" | cut -c1-300 >&2; }; exit 1; }
fine() { echo "OK (no defect): $*"; exit 0; }
mkdir "$dir/etc"
mount -t tmpfs none "$dir/etc"
mkdir "$dir/etc/upper" "$dir/etc/work"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$dir/etc/upper,workdir=$dir/etc/work" /etc
rm -f /etc/environment.d/50-kvd-gnome.conf /etc/systemd/user/default.target.d/50-kvd-gnome.conf
wait_socket() { tries=0; while [ ! -S "$2" ]; do kill -0 "$1" 2>/dev/null && [ $tries -lt 400 ] || { echo "kvd did not start" >&2; exit 2; }; tries=$((tries + 1)); sleep 0.05; done; }
start_system() {
    "$bin/kvd" --system --socket "$dir/system.sock" --state-dir "$dir/system-state" 2>>"$dir/system.log" &
    system_pid=$!; wait_socket "$system_pid" "$dir/system.sock"
}
start_kvd() { # [STATE_DIR]
    "$bin/kvd" --socket "$dir/kvd.sock" --state-dir "${1:-$dir/state}" --system-socket "$dir/system.sock" --idle-exit 0 2>>"$dir/kvd.log" &
    kvd_pid=$!; wait_socket "$kvd_pid" "$dir/kvd.sock"
}
stop_kvd() { kill "$kvd_pid" 2>/dev/null || true; wait "$kvd_pid" 2>/dev/null || true; rm -f "$dir/kvd.sock"; kvd_pid=""; }
start_system
start_kvd
mkdir "$dir/schemas"
glib-compile-schemas --strict --targetdir="$dir/schemas" "$root/clib/gio/tests"
export KVD_SOCKET="$dir/kvd.sock" KVD_SYSTEM_SOCKET="$dir/system.sock" KVD_NO_AUTOSTART=1 GSETTINGS_SCHEMA_DIR="$dir/schemas" GIO_EXTRA_MODULES="$module_dir"
export HOME="$dir/home" XDG_CONFIG_HOME="$dir/home/.config" XDG_RUNTIME_DIR="$dir/run" GIO_USE_VFS=local
mkdir -p "$HOME" "$XDG_RUNTIME_DIR"
bus=$(dbus-daemon --session --fork --print-address=1 --print-pid=1 2>"$dir/bus.log")
export DBUS_SESSION_BUS_ADDRESS=$(echo "$bus" | sed -n 1p)
bus_pid=$(echo "$bus" | sed -n 2p)
unset GSETTINGS_BACKEND DCONF_PROFILE
kvctl() { "$bin/kvctl" "$@"; }
generator=/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator
# A login as switch.sh makes it: the environment from environment.d, then the unit's command.
# Sets session_backend; returns the command's status (does not stop the script).
login() {
    session_backend=$(env -u GSETTINGS_BACKEND "$generator" | sed -n 's/^GSETTINGS_BACKEND=//p')
    env ${session_backend:+GSETTINGS_BACKEND=$session_backend} "$module_dir/kvd-dconf-import" --login 2>>"$dir/login.log"
}
under_kvd() { GSETTINGS_BACKEND=kvd "$@"; }
under_dconf() { GSETTINGS_BACKEND=dconf "$@"; }
