// kvbench-local: the in-process rows of `make bench` (bench/run.py drives it), each printed as
// one JSON object per run:
//   kvdefaults-set --socket S   KVDefaults.write (acknowledged once durable), 1 thread
//   userdefaults-set            Foundation UserDefaults.set + synchronize()
//   sqlite-set --dir D          SQLite WAL, synchronous=FULL, INSERT OR REPLACE
//   cached-read --socket S      KVDefaults.string(forKey:) hot read vs UserDefaults.standard
import Foundation
import Glibc
import KVClient

func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let mode = arguments.first else {
    print(
        "usage: kvbench-local kvdefaults-set|userdefaults-set|sqlite-set|cached-read [--socket S] [--dir D] [--seconds S] [--runs N]"
    )
    exit(2)
}
var flags: [String: String] = [:]
for index in stride(from: 1, to: arguments.count - 1, by: 2) { flags[arguments[index]] = arguments[index + 1] }
let seconds = Double(flags["--seconds"] ?? "1") ?? 1
let runs = Int(flags["--runs"] ?? "3") ?? 3
let socketPath = flags["--socket"] ?? ""
let payload = String(repeating: "x", count: 100)
/// Two values written in turn, so that every write changes the stored value (Foundation's
/// UserDefaults writes nothing at synchronize() when the value is the one it already has).
let payloads = [payload, String(repeating: "y", count: 100)]
nonisolated(unsafe) var turn = 0
func nextPayload() -> String {
    turn &+= 1
    return payloads[turn & 1]
}

/// Calls `body` for `seconds`, `runs` times, printing each run's throughput and percentiles.
func measure(_ name: String, _ body: () -> Void) {
    for _ in 0..<3 { body() }
    for _ in 0..<runs {
        var latencies: [UInt32] = []
        let deadline = now() + UInt64(seconds * 1e9)
        while true {
            let begin = now()
            if begin >= deadline { break }
            body()
            latencies.append(UInt32(min(now() - begin, UInt64(UInt32.max))))
        }
        latencies.sort()
        func percentile(_ p: Double) -> Double {
            latencies.isEmpty ? 0 : Double(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) / 1000
        }
        print(
            #"{"op":"\#(name)","clients":1,"ops":\#(latencies.count),"ops_per_s":\#(Double(latencies.count) / seconds),"p50_us":\#(percentile(0.5)),"p99_us":\#(percentile(0.99)),"seconds":\#(seconds)}"#
        )
    }
}

func suite() -> KVDefaults {
    KVDefaults(suiteName: "bench.kvdefaults", configuration: .init(socketPath: socketPath, autostart: false))!
}

/// Nanoseconds per call of `body`, the best of `runs` timings of `count` calls.
func nanosecondsPerCall(_ count: Int, _ body: () -> Int) -> (Double, Int) {
    var best = Double.infinity
    var sink = 0
    for _ in 0..<max(runs, 1) {
        let begin = now()
        for _ in 0..<count { sink &+= body() }
        best = min(best, Double(now() - begin) / Double(count))
    }
    return (best, sink)
}

switch mode {
case "kvdefaults-set":
    let defaults = suite()
    measure("kvdefaults-set") {
        do { try defaults.write(nextPayload(), forKey: "k0") } catch {
            print("kvbench-local: \(error)")
            exit(1)
        }
    }
case "userdefaults-set":
    let defaults = UserDefaults(suiteName: "bench.userdefaults")!
    measure("userdefaults-set") {
        defaults.set(nextPayload(), forKey: "k0")
        if !defaults.synchronize() {
            print("kvbench-local: synchronize() failed")
            exit(1)
        }
    }
case "sqlite-set":
    let (sqlite, reason) = SQLite.load()
    guard let sqlite else {
        print(#"{"skipped":"\#(reason)"}"#)
        exit(0)
    }
    let writer = SQLiteWriter(sqlite: sqlite, path: (flags["--dir"] ?? "/tmp") + "/bench.sqlite")
    measure("sqlite-set") { writer.set() }
case "sqlite-probe":
    let (sqlite, reason) = SQLite.load()
    print(sqlite == nil ? #"{"skipped":"\#(reason)"}"# : #"{"ok":true}"#)
case "cached-read":
    let defaults = suite()
    do { try defaults.write(payload, forKey: "hot") } catch {
        print("kvbench-local: \(error)")
        exit(1)
    }
    UserDefaults.standard.set(payload, forKey: "hot")
    let count = Int(flags["--count"] ?? "1000000") ?? 1_000_000
    guard defaults.string(forKey: "hot") == payload else {
        print("kvbench-local: KVDefaults read back wrong")
        exit(1)
    }
    let (kvd, sinkA) = nanosecondsPerCall(count) { defaults.string(forKey: "hot")?.utf8.count ?? 0 }
    let (foundation, sinkB) = nanosecondsPerCall(count) { UserDefaults.standard.string(forKey: "hot")?.utf8.count ?? 0 }
    print(
        #"{"op":"cached-read","kvdefaults_ns":\#(kvd),"userdefaults_ns":\#(foundation),"count":\#(count),"check":\#(sinkA == sinkB)}"#
    )
default:
    print("kvbench-local: unknown mode \(mode)")
    exit(2)
}
exit(0)
