#!/bin/sh
# Prints kvd's version, read from its one source, Sources/KVProtocol/Version.swift
# (`static let current = "X.Y.Z"`). Used by the Makefile (kvd.pc, libkvd, kvd-dconf-import),
# scripts/build-deb.sh, scripts/check-consumer.sh and scripts/release.sh.
set -eu
file="$(dirname "$0")/../Sources/KVProtocol/Version.swift"
version=$(sed -n 's/.*static let current = "\([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\)".*/\1/p' "$file")
[ -n "$version" ] || { echo "version: no X.Y.Z version in $file" >&2; exit 1; }
echo "$version"
