// swift-tools-version:6.0
import PackageDescription

/// kvd: the targets, one role each, and their dependencies. What each target owns, the order
/// they depend on each other and who owns which thread: ARCHITECTURE.md, whose target table
/// `scripts/check-architecture.py` (run by `make test`) keeps equal to this file. The version is
/// in Sources/KVProtocol/Version.swift.
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

        // The sample app (Examples/Habits): a habit tracker on KVClient, shipped as `habits`.
        .target(
            name: "HabitsKit", dependencies: ["KVClient", "KVProtocol", "KVSystem", "KVValues"],
            path: "Examples/Habits/HabitsKit"),
        .executableTarget(name: "habits", dependencies: ["HabitsKit", "KVSystem"], path: "Examples/Habits/habits"),

        // The benchmarks' programs (bench/, beside the harness that runs them: `make bench`).
        .executableTarget(name: "kvbench", dependencies: ["KVSystem", "CLinux"], path: "bench/kvbench"),
        .executableTarget(name: "kvbench-local", dependencies: ["KVClient", "KVSystem"], path: "bench/kvbench-local"),
        .executableTarget(name: "kvbench-hello", path: "bench/kvbench-hello"),
        .executableTarget(
            name: "kvbench-fleet", dependencies: ["KVConnection", "KVFleet", "KVProtocol", "KVSystem", "KVValues"],
            path: "bench/kvbench-fleet"),

        // What the tests use: their support library and a KVClient program run as a second process.
        .executableTarget(
            name: "kvclient-probe", dependencies: ["KVClient", "KVValues", "KVSystem"],
            path: "Tests/Probes/kvclient-probe"),
        .target(name: "KVTestSupport", dependencies: ["KVSystem", "KVProtocol", "CLinux"], path: "Tests/Support"),

        .testTarget(name: "KVValuesTests", dependencies: ["KVValues", "KVTestSupport"]),
        .testTarget(name: "KVSystemTests", dependencies: ["KVSystem", "KVTestSupport"]),
        .testTarget(name: "KVStorageTests", dependencies: ["KVStorage", "KVValues", "KVSystem", "KVTestSupport"]),
        .testTarget(name: "KVProtocolTests", dependencies: ["KVProtocol", "KVValues", "KVTestSupport"]),
        .testTarget(
            name: "KVFleetTests",
            dependencies: ["KVFleet", "KVValues", "KVProtocol", "KVConnection", "CLinux", "KVTestSupport"]),
        .testTarget(
            name: "KVDaemonTests",
            dependencies: ["KVDaemon", "KVStorage", "KVProtocol", "KVValues", "KVSystem", "KVFleet", "KVTestSupport"]),
        .testTarget(
            name: "KVCtlTests",
            dependencies: ["KVCtl", "KVClient", "KVConnection", "KVProtocol", "KVSystem", "KVValues", "KVTestSupport"]),
        .testTarget(
            name: "KVClientTests",
            dependencies: ["KVClient", "KVConnection", "KVProtocol", "KVValues", "KVSystem", "KVTestSupport", "CLinux"]),
        .testTarget(name: "EndToEndTests", dependencies: ["KVTestSupport"]),
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
