#!/usr/bin/env bash
# The package's C library and GSettings backend as a user gets them, in a throw-away root: an
# overlay of / in private mount and PID namespaces (nothing reaches the machine's /etc, /usr or
# dpkg database, and every process started there ends with it), where dpkg installs DEB. Checks
# that libglib2.0-0's trigger ran gio-querymodules (giomodule.cache names libgiokvd.so); that an
# ordinary user's `GSETTINGS_BACKEND=kvd gsettings set` and `get` work with nothing else set (no
# GIO_EXTRA_MODULES: the module is found in GLib's own folder, and kvd is started from /usr/bin
# by libkvd's autostart), that GLib says it chose kvd's module (G_MESSAGES_DEBUG; it falls back to
# memory without a word otherwise) and that kvctl reads back what gsettings wrote and the other
# way round; that a C program builds with `pkg-config kvd` and runs against the installed libkvd;
# and that removing the package takes the module out of GIO's cache.
# Usage: scripts/test-deb-gsettings.sh DEB   (as root; scripts/test-deb.sh runs it)
set -euo pipefail
deb=$(readlink -f "${1:?usage: scripts/test-deb-gsettings.sh DEB}")
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { printf 'test-deb-gsettings: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "test-deb-gsettings: skipped: needs root"; exit 0; }
command -v unshare >/dev/null || fail "unshare is missing (util-linux)"
command -v gsettings >/dev/null || fail "gsettings is missing (libglib2.0-bin)"

work=$(mktemp -d /tmp/kvd-deb-gsettings-XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$deb" "$work/kvd.deb"
cp "$root/clib/gio/tests/io.kvd.test.gschema.xml" "$work/"
cat > "$work/client.c" <<'CLIENT'
/* A C program of a user's: reads a key with the installed libkvd. */
#include <kvd.h>
#include <stdio.h>
int main(int argc, char **argv) {
    kvd_client *client;
    kvd_error error = KVD_ERROR_INIT;
    kvd_value *value = NULL;
    if (argc != 3 || kvd_connect(NULL, &client, &error) || kvd_get(client, argv[1], argv[2], &value, NULL, NULL, &error)) {
        fprintf(stderr, "client: %s\n", error.message ? error.message : "usage: client DOMAIN KEY");
        return 1;
    }
    printf("%s\n", kvd_value_get_string(value, NULL));
    kvd_value_free(value);
    kvd_client_free(client);
    return 0;
}
CLIENT

# What runs inside the throw-away root, as root there.
cat > "$work/inside.sh" <<'INSIDE'
set -eu
fail() { printf 'test-deb-gsettings: %s\n' "$*" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
modules=$(pkg-config --variable=giomoduledir gio-2.0)
dpkg -i /tmp/kvd.deb >/run/dpkg.log 2>&1 || { cat /run/dpkg.log >&2; fail "dpkg -i"; }
[ -f "$modules/libgiokvd.so" ] || fail "the module is not in GIO's folder $modules"
grep -q '^libgiokvd.so: .*gsettings-backend' "$modules/giomodule.cache" ||
  fail "gio-querymodules did not run (giomodule.cache: $(cat "$modules/giomodule.cache"))"
echo "test-deb-gsettings: dpkg installed the module and GLib's trigger listed it in giomodule.cache"

user=kvd-gsettings-user
useradd --create-home --home-dir /home/$user --shell /bin/sh "$user"
install -d -o "$user" -m 0755 /home/$user/schemas
glib-compile-schemas --targetdir=/home/$user/schemas /tmp >/dev/null
as_user() {
  runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME=/home/$user GSETTINGS_SCHEMA_DIR=/home/$user/schemas "$@"
}
as_user env GSETTINGS_BACKEND=kvd G_MESSAGES_DEBUG=GLib-GIO gsettings set io.kvd.test text from-gsettings \
  >/run/set.log 2>&1 || { cat /run/set.log >&2; fail "gsettings set"; }
grep -q 'Found default implementation kvd (KvdSettingsBackend)' /run/set.log ||
  fail "GLib did not choose kvd's module: $(cat /run/set.log)"
got=$(as_user /usr/bin/kvctl get io.kvd.test text) || fail "kvctl get"
[ "$got" = from-gsettings ] || fail "kvctl read back '$got' after gsettings set"
as_user /usr/bin/kvctl set io.kvd.test text from-kvctl
got=$(as_user env GSETTINGS_BACKEND=kvd gsettings get io.kvd.test text) || fail "gsettings get"
[ "$got" = "'from-kvctl'" ] || fail "gsettings get printed $got after kvctl set"
echo "test-deb-gsettings: $user's GSETTINGS_BACKEND=kvd gsettings set/get went through the installed module and kvd"

if command -v cc >/dev/null; then
  # shellcheck disable=SC2046
  cc -o /tmp/client /tmp/client.c $(pkg-config --cflags --libs kvd) || fail "a program does not build with pkg-config kvd"
  got=$(as_user /tmp/client io.kvd.test text) || fail "the program linked with libkvd failed"
  [ "$got" = from-kvctl ] || fail "the program linked with libkvd read '$got'"
  loaded=$(ldd /tmp/client | awk '$1 == "libkvd.so.0" {print $3}')
  [ "$(readlink -f "$loaded")" = "$(readlink -f "$(pkg-config --variable=libdir kvd)/libkvd.so.0")" ] ||
    fail "not the installed libkvd: $(ldd /tmp/client)"
  echo "test-deb-gsettings: a C program built with pkg-config kvd reads the value with the installed libkvd"
fi

dpkg --remove kvd >/run/dpkg.log 2>&1 || { cat /run/dpkg.log >&2; fail "dpkg --remove"; }
[ ! -e "$modules/libgiokvd.so" ] || fail "remove left the module"
! grep -q libgiokvd "$modules/giomodule.cache" 2>/dev/null || fail "remove left the module in giomodule.cache"
echo "test-deb-gsettings: remove took the module out of GIO's folder and cache"
INSIDE

# --pid --fork: the kvd that libkvd started for the user, and anything else started in there,
# ends when the namespace's first process does.
"$root/scripts/throwaway-root.sh" "$work"
