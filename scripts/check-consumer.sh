#!/bin/sh
# The consumer check: KVClient used the way Swift developers take a library. In a
# temporary folder outside the source tree it
#  1. makes a fresh git repository of this checkout's tracked files as they are in the work tree
#     (so it works on a shallow clone, one without tags, and with uncommitted changes) and tags
#     it with the version in Sources/KVProtocol/Version.swift; the real repository is never
#     tagged;
#  2. makes an app package whose Package.swift says
#     `.package(url: "file://...", .upToNextMinor(from: "X.Y.Z"))`, the requirement README.md
#     recommends (a 0.x minor release may break KVClient's API: docs/releases.md) — SwiftPM
#     refuses a dependency taken by version that has unsafe build flags, which is
#     the failure this check exists for;
#     The app holds KVSettings' documented example (the first ```swift block of the doc comment
#     in Sources/KVClient/KVSettings.swift, its statements in a function the app never calls),
#     and its own target builds in the Swift 6 language mode with warnings as errors (an unsafe
#     flag, which SwiftPM allows to the root package), so the documented shape must be
#     warning-free (it restates `@unchecked Sendable`);
#  3. builds the app in debug and in release (only KVClient's own dependency graph: the app
#     depends on the KVClient product alone);
#  4. runs both builds against a real kvd it starts on a socket in that folder (the kvd of this
#     checkout's debug build: BIN, default `swift build --show-bin-path`), and an in-memory suite.
# SwiftPM's repository cache is in that folder too, so nothing outlives the check. Prints how
# long it took; exits 1 on any failure. KEEP=1 keeps the folder.
set -eu
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
BIN=${BIN:-$($SWIFT build --show-bin-path)}
[ -x "$BIN/kvd" ] || { echo "check-consumer: $BIN/kvd is missing; build first (swift build)" >&2; exit 1; }
start=$(date +%s)
work=$(mktemp -d /tmp/kvd-consumer-XXXXXX)
kvd_pid=
cleanup() {
    [ -n "$kvd_pid" ] && kill "$kvd_pid" 2>/dev/null && wait "$kvd_pid" 2>/dev/null
    [ "${KEEP:-0}" = 1 ] && echo "check-consumer: kept $work" || rm -rf "$work"
}
trap cleanup EXIT INT TERM

version=$(scripts/version.sh)  # Sources/KVProtocol/Version.swift

# 1. The library, as a tagged repository (tracked files only: no .build, no local state).
mkdir "$work/kvd"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard | xargs -0 sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' sh
else  # a source tarball: everything but build products
    find . \( -name .build -o -name .git -o -name .swiftpm \) -prune -o -type f -print0
fi | tar --null -T - -cf - | tar -xf - -C "$work/kvd"
git -C "$work/kvd" init -q
git -C "$work/kvd" add -A
git -C "$work/kvd" -c user.name=check-consumer -c user.email=check@localhost -c commit.gpgsign=false commit -qm "kvd $version for the consumer check"
git -C "$work/kvd" -c tag.gpgsign=false tag "$version"

# 2. The app.
mkdir -p "$work/app/Sources/ConsumerApp"
cat > "$work/app/Package.swift" <<EOF
// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ConsumerApp",
    dependencies: [.package(url: "file://$work/kvd", .upToNextMinor(from: "$version"))],
    targets: [
        .executableTarget(
            name: "ConsumerApp", dependencies: [.product(name: "KVClient", package: "kvd")],
            swiftSettings: [.unsafeFlags(["-warnings-as-errors"])])
    ],
    swiftLanguageModes: [.v6]
)
EOF
# KVSettings' documented example: declarations as they are, statements from the first `let` on
# in a function (a file other than main.swift holds no top-level statements).
awk '
    /^\/\/\/ ```swift$/ && !done { inside = 1; print "import KVClient"; print "import Observation"; print ""; next }
    inside && /^\/\/\/ ```$/ { if (body) print "}"; inside = 0; done = 1; next }
    inside {
        line = substr($0, 5)
        if (!body && line ~ /^let /) { print "func documentedSettingsExample() {"; body = 1 }
        print line
    }
' Sources/KVClient/KVSettings.swift >"$work/app/Sources/ConsumerApp/DocumentedExample.swift"
grep -q 'final class AppSettings: KVSettings' "$work/app/Sources/ConsumerApp/DocumentedExample.swift" || {
    echo "check-consumer: no KVSettings example found in Sources/KVClient/KVSettings.swift's doc comment" >&2
    exit 1
}
cat > "$work/app/Sources/ConsumerApp/main.swift" <<'EOF'
import Glibc
import KVClient

extension KVDefaults.Keys {
    static let launches = Key<Int>("launches", default: 0)
}

/// The README's Observation model (DocumentedExample.swift holds KVSettings' own, `AppSettings`).
final class LaunchSettings: KVSettings, @unchecked Sendable {
    var launches: Int {
        get { self[.launches] }
        set { self[.launches] = newValue }
    }
}

func check(_ condition: Bool, _ what: String) {
    if !condition {
        print("consumer app: \(what)")
        exit(1)
    }
}

let live = LaunchSettings(KVDefaults(suiteName: "com.example.consumer")!)
let before = live.launches
live.launches = before + 1
check(live.launches == before + 1, "the typed key did not read its own write")

let memory = KVDefaults(suiteName: "com.example.consumer", configuration: .inMemory())!
check(memory[.launches] == 0, "an in-memory suite did not start empty")
try memory.set(7, for: .launches)
check(memory[.launches] == 7, "an in-memory suite lost a write")
print("launches \(live.launches)")
EOF
cd "$work/app"

# 3. and 4.
"$BIN/kvd" --socket "$work/kvd.sock" --state-dir "$work/state" --idle-exit 0 --no-system-layer 2>"$work/kvd.log" &
kvd_pid=$!
export KVD_SOCKET="$work/kvd.sock" KVD_NO_AUTOSTART=1
expected=1
for configuration in debug release; do
    if ! $SWIFT build -c $configuration --scratch-path "$work/build" --cache-path "$work/swiftpm-cache" >"$work/build-$configuration.log" 2>&1; then
        cat "$work/build-$configuration.log" >&2
        echo "check-consumer: an app taking KVClient by .upToNextMinor(from: \"$version\") does not build in $configuration" >&2
        exit 1
    fi
    output=$("$work/build/$configuration/ConsumerApp") || { echo "check-consumer: the $configuration app failed: $output" >&2; exit 1; }
    [ "$output" = "launches $expected" ] || { echo "check-consumer: the $configuration app printed \"$output\", not \"launches $expected\"" >&2; exit 1; }
    expected=$((expected + 1))
done
echo "check-consumer: an app taking KVClient by .upToNextMinor(from: \"$version\") built in debug and release and ran against kvd ($(($(date +%s) - start)) s)"
