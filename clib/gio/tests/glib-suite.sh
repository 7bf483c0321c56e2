#!/bin/sh
# clib/gio/tests/glib-suite.sh MODULE_DIR BIN_DIR — GLib's own GSettings test (gio/tests/gsettings.c
# of Debian's glib2.0 source, the version this machine runs) built against the installed GLib and
# run on a real kvd, two ways:
#  1. test by test as GLib's CI runs it (GSETTINGS_BACKEND not set: the test picks the backend
#     itself, and registers all 49 tests), with the one g_setenv that picks "memory" made to pick
#     kvd (glib-suite-backend.h, included first; nothing else of the test changes); every test
#     that passes so on GLib's memory backend must pass on kvd;
#  2. whole, in one process, with GSETTINGS_BACKEND=kvd set outside, the way the test honours an
#     external backend: then it leaves out 8 tests (no-schema, unknown-key, wrong-type,
#     wrong-path, no-path, typesafe-binding, no-read-binding, no-write-binding) and its
#     g_test_undefined checks; the 41 others must pass, as they do on memory.
# Each run checks that GLib really chose kvd's module (G_MESSAGES_DEBUG=GLib-GIO: GLib says which
# implementation it found; it falls back to memory without a word otherwise).
# The source is fetched at test time with its own deb-src list into .build/glib-source (apt's
# state there too; nothing of the system's apt config changes, and nothing of GLib's enters the
# repository).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
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
cc -O1 -g -o gsettings-test "$tests/gsettings.c" -include "$here/glib-suite-backend.h" -DG_LOG_DOMAIN='"GLib-GIO"' -UG_DISABLE_ASSERT \
    -I"$tests" -I"$(pkg-config --variable=includedir glib-2.0)/glib-2.0/glib" -DSRCDIR="\"$tests\"" -DTEST_LOCALE_PATH="\"$work\"" \
    -DGLIB_MKENUMS="\"$(command -v glib-mkenums)\"" -DGLIB_COMPILE_SCHEMAS="\"$(command -v glib-compile-schemas)\"" \
    $(pkg-config --cflags --libs gio-2.0 gmodule-2.0) 2>"$work/cc.log" || { cat "$work/cc.log" >&2; exit 1; }
"$bin/kvd" --socket "$work/kvd.sock" --state-dir "$work/state" --idle-exit 0 2>"$work/kvd.log" </dev/null >/dev/null &
kvd_pid=$!
while [ ! -S "$work/kvd.sock" ]; do kill -0 "$kvd_pid" || exit 1; sleep 0.05; done
export KVD_SOCKET="$work/kvd.sock" KVD_NO_AUTOSTART=1 GIO_EXTRA_MODULES="$module_dir"
unset GSETTINGS_BACKEND GLIB_SUITE_BACKEND
# GLib's word on the backend it chose: kvd's module, never the memory fallback.
chose_kvd() { # LOG
    if grep -q "Found default implementation memory" "$1"; then echo "GLib fell back to the memory backend" >> "$1"; return 1; fi
    return 0
}
# Each run starts on an empty kvd, as each starts on an empty memory backend (the tests expect
# the schema defaults: test_basic_types reads test-boolean as true before it sets it false).
empty_kvd() {
    "$bin/kvctl" domains | while read -r domain; do "$bin/kvctl" delete "$domain" || exit 1; done
}
./gsettings-test -l | grep '^/' > tests.txt
passed=0; on_memory=0; total=0; memory_only=""; chosen=0; reached=0
while read -r t; do
    total=$((total + 1))
    memory=0; kvd=0
    timeout 20 ./gsettings-test -p "$t" >/dev/null 2>&1 || memory=$?
    empty_kvd
    GLIB_SUITE_BACKEND=kvd G_MESSAGES_DEBUG=GLib-GIO timeout 20 ./gsettings-test -p "$t" >"$work/out.log" 2>&1 || kvd=$?
    chose_kvd "$work/out.log" || kvd=1
    if grep -q "Found default implementation kvd" "$work/out.log"; then chosen=$((chosen + 1)); fi
    # What the tests write under their schemas' path /tests/ is in kvd domain "tests".
    if "$bin/kvctl" domains | grep -qx tests; then reached=$((reached + 1)); fi
    [ $kvd -eq 0 ] || echo "exit status $kvd" >> "$work/out.log"
    if [ $kvd -eq 0 ]; then passed=$((passed + 1)); fi
    if [ $memory -eq 0 ]; then on_memory=$((on_memory + 1)); fi
    if [ $memory -eq 0 ] && [ $kvd -ne 0 ]; then memory_only="$memory_only $t"; echo "FAIL on kvd only: $t"; tail -5 "$work/out.log"; fi
done < tests.txt
echo "glib-suite: $passed of $total GLib GSettings tests pass on kvd one by one, $on_memory on the memory backend ($chosen used the default backend, kvd's each time; $reached wrote to kvd)"
[ "$chosen" -gt 0 ] && [ "$reached" -gt 0 ] || { echo "glib-suite: no test used kvd's module" >&2; exit 1; }
# 2. As the test runs on an external backend: GSETTINGS_BACKEND=kvd, the whole suite in one process.
whole=0
empty_kvd
GSETTINGS_BACKEND=kvd G_MESSAGES_DEBUG=GLib-GIO timeout 120 ./gsettings-test >"$work/whole.log" 2>&1 || whole=$?
chose_kvd "$work/whole.log" || whole=1
grep -q "Found default implementation kvd" "$work/whole.log" || { echo "whole run: GLib never chose kvd" >> "$work/whole.log"; whole=1; }
"$bin/kvctl" domains | grep -qx tests || { echo "whole run: nothing reached kvd" >> "$work/whole.log"; whole=1; }
listed=$(GSETTINGS_BACKEND=kvd ./gsettings-test -l | grep -c '^/')
if [ $whole -ne 0 ]; then
    if GSETTINGS_BACKEND=memory timeout 120 ./gsettings-test >/dev/null 2>&1; then
        tail -20 "$work/whole.log"; memory_only="$memory_only (the whole suite with GSETTINGS_BACKEND=kvd)"
    else
        echo "glib-suite: the whole suite with GSETTINGS_BACKEND set fails on memory too: not counted"
    fi
else
    echo "glib-suite: the $listed tests GLib runs on an external backend pass on kvd in one process (GSETTINGS_BACKEND=kvd)"
fi
[ -z "$memory_only" ] || { echo "glib-suite: passed on the memory backend but not on kvd:$memory_only" >&2; exit 1; }
