// swift-tools-version:6.0
import PackageDescription

/// Targets, one role each; dependencies point one way:
/// KVValues ← KVStorage ← KVProtocol ← KVDaemon / KVClient ← kvd / kvctl / habits.
let package = Package(
    name: "kvd",
    products: [
        .executable(name: "kvd", targets: ["kvd"]),
        .executable(name: "kvctl", targets: ["kvctl"]),
        .library(name: "KVClient", targets: ["KVClient"]),
        .executable(name: "habits", targets: ["habits"]),
    ],
    targets: [
        .target(name: "KVValues"),
        .target(name: "KVStorage", dependencies: ["KVValues"]),
        .target(name: "KVProtocol", dependencies: ["KVValues"]),
        .systemLibrary(name: "CLinux"),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .target(name: "KVDaemon", dependencies: ["KVValues", "KVStorage", "KVProtocol", "CSystemd", "CLinux"]),
        .executableTarget(name: "kvd", dependencies: ["KVDaemon"]),
        .target(name: "KVClient", dependencies: ["KVValues", "KVProtocol"]),
        .target(name: "KVCtl", dependencies: ["KVValues", "KVClient"]),
        .executableTarget(name: "kvctl", dependencies: ["KVCtl"]),
        .executableTarget(name: "kvbench", dependencies: ["CLinux"]),
        .executableTarget(name: "kvclient-probe", dependencies: ["KVClient", "KVValues"]),
        .target(name: "HabitsKit", dependencies: ["KVClient", "KVProtocol", "KVValues"]),
        .executableTarget(name: "habits", dependencies: ["HabitsKit"]),
        .executableTarget(name: "kvbench-local", dependencies: ["KVClient"]),
        .executableTarget(name: "kvbench-hello"),

        .testTarget(name: "KVValuesTests", dependencies: ["KVValues"]),
        .testTarget(name: "KVStorageTests", dependencies: ["KVStorage"]),
        .testTarget(name: "KVProtocolTests", dependencies: ["KVProtocol"]),
        .testTarget(name: "KVDaemonTests", dependencies: ["KVDaemon"]),
        .testTarget(name: "KVCtlTests", dependencies: ["KVCtl"]),
        .testTarget(name: "KVClientTests", dependencies: ["KVClient"]),
        .testTarget(name: "EndToEndTests"),
        .testTarget(name: "HabitsTests", dependencies: ["HabitsKit", "KVClient", "KVValues"], exclude: ["Fixtures"]),
    ]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .enableUpcomingFeature("ExistentialAny"),
    ]
}
