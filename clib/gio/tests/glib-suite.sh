#!/bin/sh
# clib/gio/tests/glib-suite.sh MODULE_DIR BIN_DIR — GLib's own GSettings test (gio/tests/gsettings.c
# of Debian's glib2.0 source, the version this machine runs) built against the installed GLib and
# run test by test with GSETTINGS_BACKEND=kvd on a real kvd, then on GLib's memory backend: every
# test that passes on memory must pass on kvd. The source is fetched at test time with its own
# deb-src list into .build/glib-source (apt's state there too; nothing of the system's apt config
# changes, and nothing of GLib's enters the repository).
set -eu
module_dir=$(cd "$1" && pwd)
bin=$(cd "$2" && pwd)
cache=$(pwd)/.build/glib-source
version=$(dpkg-query -W -f='${source:Version}' libglib2.0-0 2>/dev/null || dpkg-query -W -f='${Version}' libglib2.0-0t64)
. /etc/os-release
src=$(ls -d "$cache"/glib2.0-*/ 2>/dev/null | head -1 || true)
if [ ! -f "$cache/.version" ] || [ "$(cat "$cache/.version")" != "$version" ] || [ -z "$src" ]; then
    rm -rf "$cache" && mkdir -p "$cache/lists/partial" "$cache/archives/partial"
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb-src\nURIs: http://deb.debian.org/debian-security\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$VERSION_CODENAME" "$VERSION_CODENAME" "$VERSION_CODENAME" > "$cache/glib.sources"
    apt_opts="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$cache -o Dir::State::Lists=$cache/lists -o Dir::Cache::Archives=$cache/archives -o APT::Sandbox::User=root"
    # shellcheck disable=SC2086
    apt-get -qq $apt_opts update
    # shellcheck disable=SC2086
    (cd "$cache" && apt-get -qq $apt_opts source "glib2.0=$version" >/dev/null)
    echo "$version" > "$cache/.version"
    src=$(ls -d "$cache"/glib2.0-*/ | head -1)
fi
tests="$src/gio/tests"
work=$(mktemp -d /tmp/glib-gsettings.XXXXXX)
kvd_pid=""
cleanup() {
    if [ -n "$kvd_pid" ]; then kill "$kvd_pid" 2>/dev/null || true; wait "$kvd_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT INT TERM
[ -z "${GLIB_SUITE_KEEP:-}" ] || trap - EXIT
# Built as GLib's gio/tests/meson.build builds it; the test makes its schemas itself, in its
# working folder, from SRCDIR (the unpacked source, only read).
cd "$work"
mkdir -p de/LC_MESSAGES
msgfmt -o de/LC_MESSAGES/test.mo "$tests/de.po"
cc -O1 -g -o gsettings-test "$tests/gsettings.c" -DG_LOG_DOMAIN='"GLib-GIO"' -UG_DISABLE_ASSERT \
    -I"$tests" -I"$(pkg-config --variable=includedir glib-2.0)/glib-2.0/glib" -DSRCDIR="\"$tests\"" -DTEST_LOCALE_PATH="\"$work\"" \
    -DGLIB_MKENUMS="\"$(command -v glib-mkenums)\"" -DGLIB_COMPILE_SCHEMAS="\"$(command -v glib-compile-schemas)\"" \
    $(pkg-config --cflags --libs gio-2.0 gmodule-2.0) 2>"$work/cc.log" || { cat "$work/cc.log" >&2; exit 1; }
"$bin/kvd" --socket "$work/kvd.sock" --state-dir "$work/state" --idle-exit 0 2>"$work/kvd.log" &
kvd_pid=$!
while [ ! -S "$work/kvd.sock" ]; do kill -0 "$kvd_pid" || exit 1; sleep 0.05; done
export KVD_SOCKET="$work/kvd.sock" KVD_NO_AUTOSTART=1
GSETTINGS_BACKEND=kvd GIO_EXTRA_MODULES="$module_dir" ./gsettings-test -l | grep '^/' > tests.txt
passed=0; on_memory=0; total=0; memory_only=""
while read -r t; do
    total=$((total + 1))
    memory=0; kvd=0
    GSETTINGS_BACKEND=memory timeout 20 ./gsettings-test -p "$t" >/dev/null 2>&1 || memory=$?
    GSETTINGS_BACKEND=kvd GIO_EXTRA_MODULES="$module_dir" timeout 20 ./gsettings-test -p "$t" >"$work/out.log" 2>&1 || kvd=$?
    [ $kvd -eq 0 ] || echo "exit status $kvd" >> "$work/out.log"
    if [ $kvd -eq 0 ]; then passed=$((passed + 1)); fi
    if [ $memory -eq 0 ]; then on_memory=$((on_memory + 1)); fi
    if [ $memory -eq 0 ] && [ $kvd -ne 0 ]; then memory_only="$memory_only $t"; echo "FAIL on kvd only: $t"; tail -5 "$work/out.log"; fi
done < tests.txt
echo "glib-suite: $passed of $total GLib GSettings tests pass on kvd, $on_memory on the memory backend"
# kvd's module was the one used (GLib falls back to memory silently): the tests' schema path
# /tests/ is kvd domain "tests".
"$bin/kvctl" domains | grep -qx tests || { echo "glib-suite: nothing reached kvd: was the module used?" >&2; exit 1; }
[ -z "$memory_only" ] || { echo "glib-suite: passed on the memory backend but not on kvd:$memory_only" >&2; exit 1; }
