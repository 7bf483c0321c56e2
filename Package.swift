// swift-tools-version:6.0
import PackageDescription

/// Targets, one role each; dependencies point one way (a target uses only those after "←"):
///
///     KVValues                                 typed values, names
///     KVSystem ← CLinux                        the one OS seam of every target: errno, FileSystem and SystemCalls, paths, socket folder, the reconnecting stream
///     KVStorage ← KVValues, KVSystem           domain files, log, recovery; no sockets
///     KVProtocol ← KVValues                    varlink framing, the interface
///     KVFleet ← KVValues, KVSystem, CCurl      etcd v3 through its JSON gateway: the fleet's source of truth
///     CCurl                                    libcurl's few calls, typed for Swift (HTTP and HTTPS)
///     KVConnection ← KVValues, KVProtocol, KVSystem   connections to kvd (no Foundation: kvctl starts fast)
///     KVDaemon ← KVValues, KVStorage, KVProtocol, KVSystem, KVConnection, KVFleet, CSystemd, CLinux   the event loop
///                                              (KVConnection: a user's kvd is a client of the system instance)
///     KVClient ← KVValues, KVProtocol, KVSystem, KVConnection   the Swift library (links Foundation)
///     KVCtl ← KVValues, KVProtocol, KVSystem, KVConnection    kvctl's commands
///     HabitsKit ← KVClient, KVProtocol, KVSystem, KVValues    the sample app
///     kvd ← KVDaemon; kvctl ← KVCtl; habits ← HabitsKit, KVSystem (thin mains)
///     kvbench ← KVSystem, CLinux; kvbench-local ← KVClient, KVSystem   the benchmark's load generator and in-process rows
///     kvctl-plist ← KVValues, KVSystem        property lists ↔ typed JSON for kvctl (its own reader and writer on FoundationEssentials; a process of its own, so kvctl links neither)
///     KVTestSupport ← KVSystem, KVProtocol, CLinux     shared by test targets only (fake server, faults)
///
/// Only KVSystem (and the C shims) calls the C library's system calls: `scripts/check-nm.sh` (run by
/// `make test`) fails when another target's object file does. `scripts/check-imports.py` (run by
/// `make test`) fails when a target imports a target it does not declare here; the `MemberImportVisibility` feature fails the build when a file uses a
/// module's members without importing it.
let package = Package(
    name: "kvd",
    products: [
        .executable(name: "kvd", targets: ["kvd"]),
        .executable(name: "kvctl", targets: ["kvctl"]),
        .library(name: "KVClient", targets: ["KVClient"]),
        .executable(name: "habits", targets: ["habits"]),
        .executable(name: "kvctl-plist", targets: ["kvctl-plist"]),
    ],
    targets: [
        .target(name: "KVValues"),
        .systemLibrary(name: "CLinux"),
        .target(name: "KVSystem", dependencies: ["CLinux"]),
        .target(name: "KVStorage", dependencies: ["KVValues", "KVSystem"]),
        .target(name: "KVProtocol", dependencies: ["KVValues"]),
        .target(name: "CCurl"),  // loads libcurl when the fleet first needs it (dlopen)
        .target(name: "KVFleet", dependencies: ["KVValues", "KVSystem", "CCurl"]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .target(
            name: "KVDaemon",
            dependencies: [
                "KVValues", "KVStorage", "KVProtocol", "KVSystem", "KVConnection", "KVFleet", "CSystemd", "CLinux",
            ]),
        .executableTarget(name: "kvd", dependencies: ["KVDaemon"]),
        .target(name: "KVConnection", dependencies: ["KVValues", "KVProtocol", "KVSystem"]),
        .target(name: "KVClient", dependencies: ["KVValues", "KVProtocol", "KVSystem", "KVConnection"]),
        .target(name: "KVCtl", dependencies: ["KVValues", "KVProtocol", "KVSystem", "KVConnection"]),
        .executableTarget(name: "kvctl", dependencies: ["KVCtl"]),
        .executableTarget(name: "kvctl-plist", dependencies: ["KVValues", "KVProtocol", "KVSystem"]),
        .executableTarget(name: "kvbench", dependencies: ["KVSystem", "CLinux"]),
        .executableTarget(name: "kvclient-probe", dependencies: ["KVClient", "KVValues", "KVSystem"]),
        .target(name: "HabitsKit", dependencies: ["KVClient", "KVProtocol", "KVSystem", "KVValues"]),
        .executableTarget(name: "habits", dependencies: ["HabitsKit", "KVSystem"]),
        .executableTarget(name: "kvbench-local", dependencies: ["KVClient", "KVSystem"]),
        .executableTarget(name: "kvbench-hello"),
        .executableTarget(
            name: "kvbench-fleet", dependencies: ["KVConnection", "KVFleet", "KVProtocol", "KVSystem", "KVValues"]),
        .target(name: "KVTestSupport", dependencies: ["KVSystem", "KVProtocol", "CLinux"], path: "Tests/Support"),

        .testTarget(name: "KVValuesTests", dependencies: ["KVValues"]),
        .testTarget(name: "KVSystemTests", dependencies: ["KVSystem", "KVTestSupport"]),
        .testTarget(name: "KVStorageTests", dependencies: ["KVStorage", "KVValues", "KVSystem"]),
        .testTarget(name: "KVProtocolTests", dependencies: ["KVProtocol", "KVValues", "KVTestSupport"]),
        .testTarget(
            name: "KVFleetTests", dependencies: ["KVFleet", "KVValues", "KVProtocol", "KVConnection", "CLinux"]),
        .testTarget(
            name: "KVDaemonTests",
            dependencies: ["KVDaemon", "KVStorage", "KVProtocol", "KVValues", "KVSystem", "KVFleet", "KVTestSupport"]),
        .testTarget(
            name: "KVCtlTests",
            dependencies: ["KVCtl", "KVClient", "KVConnection", "KVProtocol", "KVValues", "KVTestSupport"]),
        .testTarget(
            name: "KVClientTests",
            dependencies: ["KVClient", "KVConnection", "KVProtocol", "KVValues", "KVSystem", "KVTestSupport", "CLinux"]),
        .testTarget(name: "EndToEndTests"),
        .testTarget(name: "HabitsTests", dependencies: ["HabitsKit", "KVClient", "KVValues"], exclude: ["Fixtures"]),
    ]
)

for target in package.targets where target.type != .system {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .enableUpcomingFeature("ExistentialAny"),
            .enableUpcomingFeature("MemberImportVisibility"),
        ]
}
