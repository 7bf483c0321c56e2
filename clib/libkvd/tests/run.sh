#!/bin/sh
# clib/libkvd/tests/run.sh TEST_PROGRAM BIN_DIR — libkvd's end-to-end test: starts a real kvd (from
# BIN_DIR, with kvctl beside it) on a socket in a temp folder, runs TEST_PROGRAM against it, then
# again under valgrind (leaks and memory errors fail; the 16 MiB values are left out there), then,
# as root, the check of /tmp/kvd-<uid> as another user (setpriv). Stops what it started.
set -eu
program=$1
bin=$2
dir=$(mktemp -d /tmp/libkvd-test.XXXXXX)
kvd_pid=""
cleanup() {
    if [ -n "$kvd_pid" ]; then kill "$kvd_pid" 2>/dev/null || true; wait "$kvd_pid" 2>/dev/null || true; fi
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM
"$bin/kvd" --socket "$dir/kvd.sock" --state-dir "$dir/state" --idle-exit 0 2>"$dir/kvd.log" &
kvd_pid=$!
tries=0
while [ ! -S "$dir/kvd.sock" ]; do
    if ! kill -0 "$kvd_pid" 2>/dev/null || [ $tries -ge 400 ]; then
        echo "libkvd-test: kvd did not start:" >&2; cat "$dir/kvd.log" >&2; exit 1
    fi
    tries=$((tries + 1)); sleep 0.05
done
export KVD_SOCKET="$dir/kvd.sock" KVD_BIN="$bin/kvd" KVCTL_BIN="$bin/kvctl" LIBKVD_TEST_DIR="$dir"
export KVD_STATE_DIR="$dir/autostate"  # the state of the kvds the test autostarts
echo "libkvd-test: $program"
"$program"
# Who made it: kvd names the C program that wrote through libkvd (before valgrind's run rewrites it).
blame=$("$bin/kvctl" --json blame org.libkvd.types Theme 2>&1)
case "$blame" in
*'"program":"'"$(readlink -f "$program")"'"'*) echo "ok kvctl blame names the libkvd program" ;;
*) echo "libkvd-test: kvctl blame does not name $program: $blame" >&2; exit 1 ;;
esac
if command -v valgrind >/dev/null; then
    echo "libkvd-test: under valgrind"
    LIBKVD_TEST_SMALL=1 valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect "$program"
else
    echo "libkvd-test: valgrind not installed; skipped the valgrind run"
fi
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    # /tmp/kvd-<uid> of a user who has no runtime folder: another user's, or open to others, is
    # refused; missing, it is made with mode 0700.
    user=64123
    folder=/tmp/kvd-$user
    runner=$(mktemp -d /tmp/libkvd-runner.XXXXXX)
    chmod 0755 "$runner"
    cp "$program" "$(dirname "$program")"/libkvd.so.0 "$runner/"
    as_user() {
        setpriv --reuid $user --regid $user --clear-groups env -u KVD_SOCKET -u XDG_RUNTIME_DIR "$runner/$(basename "$program")" --unsafe-folder
    }
    rm -rf "$folder" && mkdir -m 0700 "$folder"  # root's
    as_user || { echo "libkvd-test: a socket folder of another user was not refused" >&2; rm -rf "$runner" "$folder"; exit 1; }
    chown $user "$folder" && chmod 0755 "$folder"
    as_user || { echo "libkvd-test: a socket folder with mode 0755 was not refused" >&2; rm -rf "$runner" "$folder"; exit 1; }
    rm -rf "$folder"
    status=0; as_user || status=$?
    made=$(stat -c '%u %a' "$folder" 2>/dev/null || echo none)
    rm -rf "$runner" "$folder"
    if [ $status -ne 3 ] || [ "$made" != "$user 700" ]; then
        echo "libkvd-test: a missing socket folder was not made with mode 0700 (status $status, folder: $made)" >&2; exit 1
    fi
    echo "ok socket_folder_checks (as uid $user)"
fi
echo "libkvd-test: passed"
