#!/bin/sh
# Builds the libFuzzer targets into ${FUZZ_BUILD:-.build/fuzz}/bin with swiftc alone (no SwiftPM):
# each module the targets need is compiled once, instrumented (-sanitize=fuzzer,address), as a
# static library; targets that test internal functions are compiled into the module they test.
# libkvd's C target is built with the toolchain's clang (it carries libFuzzer; Debian's gcc has none).
set -eu
cd "$(dirname "$0")/.."
OUT=${FUZZ_BUILD:-.build/fuzz}
SWIFTC=${SWIFTC:-swiftc}
FLAGS="-sanitize=fuzzer,address -swift-version 6 -enable-upcoming-feature ExistentialAny -parse-as-library -O -g -use-ld=lld"
mkdir -p "$OUT/modules" "$OUT/lib" "$OUT/bin"

library() {  # NAME SOURCES...
    name=$1; shift
    echo "fuzz: module $name"
    $SWIFTC $FLAGS -module-name "$name" -I "$OUT/modules" -emit-module -emit-module-path "$OUT/modules/$name.swiftmodule" \
        -emit-library -static -o "$OUT/lib/lib$name.a" "$@"
}

target() {  # NAME MODULE-NAME SOURCES-AND-LIBRARIES...
    name=$1; module=$2; shift 2
    echo "fuzz: target $name"
    $SWIFTC $FLAGS -module-name "$module" -I "$OUT/modules" -o "$OUT/bin/$name" fuzz/Fail.swift "$@"
}

library KVValues Sources/KVValues/*.swift
library KVSystem -I Sources/CLinux Sources/KVSystem/*.swift
library KVProtocol Sources/KVProtocol/*.swift
target typed-json FuzzTypedJSON fuzz/FuzzTypedJSON.swift "$OUT/lib/libKVValues.a"
target varlink FuzzVarlink fuzz/FuzzVarlink.swift "$OUT/lib/libKVProtocol.a" "$OUT/lib/libKVValues.a"
target domain-file KVStorage -I Sources/CLinux fuzz/FuzzDomainFile.swift Sources/KVStorage/*.swift "$OUT/lib/libKVValues.a" "$OUT/lib/libKVSystem.a"
target log KVStorage -I Sources/CLinux fuzz/FuzzLog.swift Sources/KVStorage/*.swift "$OUT/lib/libKVValues.a" "$OUT/lib/libKVSystem.a"
target commit KVStorage -I Sources/CLinux fuzz/FuzzCommit.swift Sources/KVStorage/*.swift "$OUT/lib/libKVProtocol.a" "$OUT/lib/libKVValues.a" "$OUT/lib/libKVSystem.a"
target value-parser KVCtl fuzz/FuzzValueParser.swift Sources/KVCtl/ValueParser.swift "$OUT/lib/libKVValues.a"
target plist KVCtlPlist fuzz/FuzzPlist.swift Sources/kvctl-plist/PlistRefusal.swift Sources/kvctl-plist/BinaryPlistReader.swift Sources/kvctl-plist/XMLPlistReader.swift Sources/kvctl-plist/PlistWriter.swift "$OUT/lib/libKVValues.a"
# libkvd's C targets, with the toolchain's clang and its libFuzzer: its JSON reader and writer, and
# the scan of a WatchAll's current state (linked with the rest of libkvd, which current.c calls).
clang_target() {  # NAME SOURCES...
    name=$1; shift
    echo "fuzz: target $name"
    ${CLANG:-$(dirname "$(command -v "$SWIFTC")")/clang} -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fuse-ld=lld -O1 -g \
        -D_GNU_SOURCE -DKVD_DAEMON_PATH='"kvd"' -Iclib/libkvd/include -Iclib/libkvd -o "$OUT/bin/$name" "$@" -lpthread
}
clang_target libkvd-json clib/fuzz/fuzz_json.c clib/libkvd/json.c clib/libkvd/value.c clib/libkvd/encoding.c clib/libkvd/error.c
clang_target libkvd-current clib/fuzz/fuzz_current.c clib/libkvd/*.c
