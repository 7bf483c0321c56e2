#!/usr/bin/env bash
# make deb: dist/kvd_VERSION_amd64.deb, built with dpkg-deb from a staged tree.
#
# Why a staged tree rather than debian/ and dpkg-buildpackage: kvd builds with SwiftPM and a Swift
# toolchain that Debian does not package, so debhelper's build steps would only wrap
# `swift build`; the staged tree is the same files, laid out by one script a reader can follow,
# with the metadata beside it in packaging/deb/. The programs link the Swift runtime statically
# (--static-swift-stdlib): the package needs no toolchain, only the Debian libraries it lists.
#
# Usage: scripts/build-deb.sh [BIN_DIR]   (BIN_DIR: a release build; built when not given)
# KVD_DEB_VERSION gives the package another version (scripts/test-deb-upgrade.sh builds an older
# one to upgrade from); KVD_DEB_DIR another folder than dist/; KVD_DEB_SCRIPTS another folder of
# maintainer scripts than packaging/deb/ (that test's copy of an older kvd's).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="/opt/swift/usr/bin:$PATH"
swift=${SWIFT:-swift}
upstream_version=$(scripts/version.sh)  # Sources/KVProtocol/Version.swift
version=${KVD_DEB_VERSION:-$upstream_version}
if [ $# -ge 1 ]; then
  bin=$(cd "$1" && pwd)
else
  $swift build -c release --static-swift-stdlib
  bin=$($swift build -c release --static-swift-stdlib --show-bin-path)
fi

stage=$root/.build/deb/kvd_${version}_amd64
rm -rf "$stage"
install -d -m 0755 "$stage/DEBIAN" "$stage/usr/bin" "$stage/usr/lib/systemd/user" "$stage/usr/lib/systemd/system" \
  "$stage/usr/share/doc/kvd" "$stage/usr/share/man/man1" "$stage/usr/share/man/man8"

for program in kvd kvctl kvctl-plist habits; do
  install -m 0755 "$bin/$program" "$stage/usr/bin/$program"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/$program"
done
# libkvd (the shared library, its header and kvd.pc: one package, see docs/c-libkvd.md) and the
# GSettings backend (GIO's module folder; libglib2.0-0's file trigger on that folder runs
# gio-querymodules when dpkg installs, upgrades or removes it), built for /usr (libkvd starts
# /usr/bin/kvd) in a folder of their own, with Debian's hardening flags.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
libdir=/usr/lib/$multiarch
giomoduledir=$(pkg-config --variable=giomoduledir gio-2.0)
[ -n "$giomoduledir" ] || { echo "build-deb: pkg-config knows no gio-2.0 (install libglib2.0-dev)" >&2; exit 1; }
clib=$root/.build/deb/clib
make -s -C "$root" libkvd giokvd PREFIX=/usr BINDIR=/usr/bin LIBDIR="$libdir" INCLUDEDIR=/usr/include \
  LIBKVD_OUT="$clib" GIOKVD_OUT="$clib/gio" \
  LIBKVD_CFLAGS="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)" \
  LIBKVD_LDFLAGS="$(dpkg-buildflags --get LDFLAGS) -Wl,-z,now" >/dev/null
install -d -m 0755 "$stage$libdir/pkgconfig" "$stage/usr/include" "$stage$giomoduledir"
libkvd=libkvd.so.$upstream_version  # the file make libkvd builds: named for the sources' version
install -m 0644 "$clib/$libkvd" "$stage$libdir/$libkvd"
ln -s "$libkvd" "$stage$libdir/libkvd.so.0"
ln -s libkvd.so.0 "$stage$libdir/libkvd.so"
install -m 0644 clib/libkvd/include/kvd.h "$stage/usr/include/kvd.h"
install -m 0644 "$clib/kvd.pc" "$stage$libdir/pkgconfig/kvd.pc"
install -m 0644 "$clib/gio/libgiokvd.so" "$stage$giomoduledir/libgiokvd.so"
install -m 0755 "$clib/gio/kvd-dconf-import" "$stage/usr/bin/kvd-dconf-import"
for object in "$stage$libdir/$libkvd" "$stage$giomoduledir/libgiokvd.so" "$stage/usr/bin/kvd-dconf-import"; do
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$object"
done

for unit in kvd.socket kvd.service kvd-gnome-login.service; do
  sed -e 's|@BINDIR@|/usr/bin|g' -e 's|@DOCDIR@|/usr/share/doc/kvd|g' "systemd/$unit" > "$stage/usr/lib/systemd/user/$unit"
done
for unit in kvd-system.socket kvd-system.service; do
  sed -e 's|@BINDIR@|/usr/bin|g' -e 's|@DOCDIR@|/usr/share/doc/kvd|g' "systemd/$unit" > "$stage/usr/lib/systemd/system/$unit"
done
chmod 0644 "$stage"/usr/lib/systemd/*/*

install -m 0644 README.md ARCHITECTURE.md "$stage/usr/share/doc/kvd/"
# docs/ as in the sources, so README.md's links hold: kvd.h sends C programmers to
# /usr/share/doc/kvd/docs/reference/protocol.md.
install -d -m 0755 "$stage/usr/share/doc/kvd/docs" "$stage/usr/share/doc/kvd/docs/reference"
install -m 0644 docs/*.md "$stage/usr/share/doc/kvd/docs/"
install -m 0644 docs/reference/*.md "$stage/usr/share/doc/kvd/docs/reference/"
# The system instance's drop-in folders (kvd --system --config-dir, default /etc/kvd): empty.
install -d -m 0755 "$stage/etc/kvd/defaults.d" "$stage/etc/kvd/locks.d"
install -m 0644 packaging/deb/copyright "$stage/usr/share/doc/kvd/copyright"
gzip -9n < CHANGELOG.md > "$stage/usr/share/doc/kvd/changelog.gz"
{
  printf 'kvd (%s) unstable; urgency=medium\n\n  * Built from the kvd repository; see changelog.gz.\n\n' "$version"
  printf ' -- kvd project <kvd@kvd.invalid>  %s\n' "$(date -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")"
} | gzip -9n > "$stage/usr/share/doc/kvd/changelog.Debian.gz"
find "$stage/usr/share/doc/kvd" -type f -exec chmod 0644 {} +
for page in man/*.[18]; do
  [ -e "$page" ] || continue
  section=${page##*.}
  gzip -9n < "$page" > "$stage/usr/share/man/man$section/$(basename "$page").gz"
  chmod 0644 "$stage/usr/share/man/man$section/$(basename "$page").gz"
done
rmdir --ignore-fail-on-non-empty "$stage/usr/share/man/man1" "$stage/usr/share/man/man8" "$stage/usr/share/man"
if [ -x "$bin/kvctl" ]; then
  for shell in bash zsh fish; do
    case $shell in
      bash) target=usr/share/bash-completion/completions/kvctl ;;
      zsh) target=usr/share/zsh/vendor-completions/_kvctl ;;
      fish) target=usr/share/fish/vendor_completions.d/kvctl.fish ;;
    esac
    if "$bin/kvctl" completion "$shell" > "$stage/completion.tmp" 2>/dev/null; then
      install -D -m 0644 "$stage/completion.tmp" "$stage/$target"
    fi
    rm -f "$stage/completion.tmp"
  done
fi

# Depends: the package of each shared library the programs need, at least the version here; and
# libcurl, which kvd loads (dlopen) when the fleet first needs it, so no program names it.
depends=$(
  {
    for program in "$stage"/usr/bin/* "$stage$libdir/$libkvd" "$stage$giomoduledir/libgiokvd.so"; do
      objdump -p "$program" | awk '/NEEDED/ {print $2}'
    done
    echo libcurl.so.4
  } | grep -v '^libkvd\.' | sort -u |
    while read -r library; do
      path=$(ldconfig -p | awk -v lib="$library" '$1 == lib && /x86-64/ {print $NF; exit}')
      [ -n "$path" ] || continue
      package=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n1 | cut -d: -f1) || package=""
      [ -n "$package" ] || package=$(dpkg -S "$path" 2>/dev/null | head -n1 | cut -d: -f1)
      [ -n "$package" ] || continue
      upstream=$(dpkg-query -W -f='${Version}' "$package" | sed -e 's/-[^-]*$//' -e 's/^[0-9]*://')
      echo "$package (>= $upstream)"
    done | sort -u | paste -sd, | sed 's/,/, /g'
)
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@SIZE@|$size|" -e "s|@DEPENDS@|$depends|" packaging/deb/control.in > "$stage/DEBIAN/control"
# libkvd's shlibs (a program linked with it depends on kvd at least this version) and the
# ldconfig trigger for it.
echo "libkvd 0 kvd (>= $version)" > "$stage/DEBIAN/shlibs"
echo "activate-noawait ldconfig" > "$stage/DEBIAN/triggers"
chmod 0644 "$stage/DEBIAN/shlibs" "$stage/DEBIAN/triggers"
scripts=${KVD_DEB_SCRIPTS:-packaging/deb}
for script in preinst postinst prerm postrm; do
  if [ -f "$scripts/$script" ]; then install -m 0755 "$scripts/$script" "$stage/DEBIAN/"; fi
done
(cd "$stage" && find usr -type f -print0 | sort -z | xargs -0 md5sum) > "$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/md5sums"

out=${KVD_DEB_DIR:-dist}
mkdir -p "$out"
dpkg-deb --root-owner-group -Zgzip --build "$stage" "$out/kvd_${version}_amd64.deb" >/dev/null
echo "built $out/kvd_${version}_amd64.deb"
