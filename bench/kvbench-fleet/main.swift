// kvbench-fleet: the fleet rows of `make bench` (bench/run.py drives it against a real etcd and
// real system instances), each printed as one JSON object per run:
//   propagation --subject kvd --from SOCK --to SOCK     a Set on host A's system instance until
//                                                       the Watch reply on host B's
//   propagation --subject etcd --etcd URLS              etcd's own put until its watch event, through
//                                                       the same gateway client kvd uses
//   populate --etcd URLS --keys N                       N values under kvd/values/com.corp.bench/
//   first-listing --kvd PATH --etcd URLS --dir DIR      a fresh system instance started until it
//                                                       has mirrored everything etcd holds
import Dispatch
import Foundation
import Glibc
import KVConnection
import KVFleet
import KVProtocol
import KVSystem
import KVValues
import Synchronization

func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("kvbench-fleet: \(message)\n".utf8))
    exit(1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let mode = arguments.first else {
    print(
        "usage: kvbench-fleet propagation|populate|first-listing [--subject kvd|etcd] [--from S] [--to S] [--etcd URLS] [--keys N] [--kvd PATH] [--dir D] [--seconds S]"
    )
    exit(2)
}
let flags: [String: String] = {
    var flags: [String: String] = [:]
    for index in stride(from: 1, to: arguments.count - 1, by: 2) { flags[arguments[index]] = arguments[index + 1] }
    return flags
}()
let seconds = Double(flags["--seconds"] ?? "1") ?? 1
let endpoints = (flags["--etcd"] ?? "").split(separator: ",").map(String.init)
let domain = Domain(constant: "com.corp.bench")
let key = Key(constant: "propagation")
let etcdKey = Array("kvd/values/com.corp.bench/propagation".utf8)

/// The value a watcher saw last, and when.
final class Arrivals: Sendable {
    private let seen = Mutex<(value: Int64, at: UInt64)>((-1, 0))
    private let signal = DispatchSemaphore(value: 0)

    func note(_ value: Int64) {
        let at = now()
        seen.withLock { $0 = (value, at) }
        signal.signal()
    }

    /// Waits until `value` was seen (10 s at most); when it was.
    func wait(for value: Int64) -> UInt64 {
        while true {
            let current = seen.withLock { $0 }
            if current.value == value { return current.at }
            if signal.wait(timeout: .now() + 10) == .timedOut { fail("value \(value) never reached the watcher") }
        }
    }
}

/// Writes values 1, 2, ... for `seconds` with `write`, each timed until `arrivals` saw it.
func propagate(_ name: String, arrivals: Arrivals, write: (Int64) throws -> Void) rethrows {
    var latencies: [UInt64] = []
    var value = Int64(now() % 1_000_000) * 1000
    let deadline = now() + UInt64(seconds * 1e9)
    let start = now()
    while now() < deadline || latencies.count < 3 {
        value += 1
        let begin = now()
        try write(value)
        latencies.append(arrivals.wait(for: value) - begin)
    }
    let elapsed = Double(now() - start) / 1e9
    latencies.sort()
    func percentile(_ p: Double) -> Double {
        Double(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) / 1000
    }
    print(
        #"{"op":"\#(name)","clients":1,"ops":\#(latencies.count),"ops_per_s":\#(Double(latencies.count) / elapsed),"p50_us":\#(percentile(0.5)),"p99_us":\#(percentile(0.99)),"seconds":\#(elapsed)}"#
    )
}

func gateway() -> EtcdGateway {
    do { return try EtcdGateway(endpoints: endpoints) } catch { fail("\(error)") }
}

func kvdPropagation() throws {
    guard let from = flags["--from"], let to = flags["--to"] else {
        fail("propagation --subject kvd needs --from and --to")
    }
    let arrivals = Arrivals()
    let watcher = try Connection(socketPath: to)
    Thread {
        try? watcher.watch(domain, key) { event in
            for change in event.changes where change.key == key {
                if case .integer(let number)? = change.value { arrivals.note(number) }
            }
            return true
        }
    }.start()
    let writer = try Connection(socketPath: from)
    try propagate("fleet-propagation-kvd", arrivals: arrivals) { value in
        _ = try writer.set(domain, key, .integer(value))
    }
}

func etcdPropagation() throws {
    let etcd = gateway()
    let arrivals = Arrivals()
    let start = try etcd.range(from: etcdKey, end: [], revision: nil, limit: 1).revision + 1
    Thread {
        try? etcd.watch(from: etcdKey, end: [], startRevision: start, progressInterval: .seconds(5)) { message in
            if case .events(let events, _) = message {
                for event in events {
                    if let number = Int64(String(decoding: event.keyValue.value, as: UTF8.self)) {
                        arrivals.note(number)
                    }
                }
            }
            return true
        }
    }.start()
    try propagate("fleet-propagation-etcd", arrivals: arrivals) { value in
        _ = try etcd.commit(EtcdTransaction(success: [.put(key: etcdKey, value: Array(String(value).utf8))]))
    }
}

func populate() throws {
    let etcd = gateway()
    let count = Int(flags["--keys"] ?? "10000") ?? 10000
    for batch in stride(from: 0, to: count, by: 100) {
        let puts = (batch..<min(batch + 100, count)).map { index in
            EtcdTransaction.Operation.put(
                key: Array("kvd/values/com.corp.bench/k\(index)".utf8), value: Array(#""value \#(index)""#.utf8))
        }
        _ = try etcd.commit(EtcdTransaction(success: puts))
    }
    print(#"{"op":"fleet-populate","keys":\#(count)}"#)
}

/// Starts a system instance on an empty state folder; times it until its mirror holds etcd's
/// current revision.
func firstListing() throws {
    guard let kvd = flags["--kvd"], let dir = flags["--dir"] else { fail("first-listing needs --kvd and --dir") }
    let target = try gateway().range(from: etcdKey, end: [], revision: nil, limit: 1).revision
    let run = "\(dir)/listing-\(now())"
    try FileManager.default.createDirectory(atPath: run, withIntermediateDirectories: true)
    let socket = run + "/system.sock"
    let process = Process()
    process.executableURL = URL(fileURLWithPath: kvd)
    process.arguments = [
        "--system", "--socket", socket, "--state-dir", run + "/state", "--etcd", endpoints.joined(separator: ","),
        "--fleet-domain", "com.corp.*",
    ]
    process.standardError = FileHandle(forWritingAtPath: "/dev/null")
    let begin = now()
    try process.run()
    defer {
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: run)
    }
    var connection: Connection?
    while connection == nil {
        connection = try? Connection(socketPath: socket)
        if connection == nil { LinuxSystem().sleep(microseconds: 200) }
        if now() - begin > 60_000_000_000 { fail("the system instance did not start") }
    }
    while (try connection!.status().fleet?.appliedRevision ?? 0) < target {
        LinuxSystem().sleep(microseconds: 200)
        if now() - begin > 60_000_000_000 { fail("the system instance did not list etcd within 60 s") }
    }
    let elapsed = Double(now() - begin) / 1e9
    print(
        #"{"op":"fleet-first-listing","ops":1,"ops_per_s":\#(1 / elapsed),"p50_us":\#(elapsed * 1e6),"p99_us":\#(elapsed * 1e6),"seconds":\#(elapsed)}"#
    )
}

do {
    switch (mode, flags["--subject"]) {
    case ("propagation", "kvd"): try kvdPropagation()
    case ("propagation", "etcd"): try etcdPropagation()
    case ("populate", _): try populate()
    case ("first-listing", _): try firstListing()
    default: fail("unknown mode \(mode)")
    }
} catch {
    fail("\(error)")
}
exit(0)
