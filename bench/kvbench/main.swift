// kvbench: the load generator of `make bench` (bench/run.py drives it). It measures round trips
// against a running kvd (varlink), Redis (RESP) or the raw ping-pong server it serves itself
// (`--serve-echo`), over Unix sockets, as a client would make them: N clients on one epoll thread
// or (`--mode threads`) a blocking thread each. Each run prints ops/s, the p50, p99, p99.9 and
// largest latency of every call of every client, and the CPU the generator itself used.
import Glibc
import KVSystem

let options = parseOptions()
if !options.serveEcho.isEmpty { serveEcho(options.serveEcho) }
if options.operation == "populate" {
    let begin = now()
    populate(options)
    let seconds = Double(now() - begin) / 1e9
    print(
        options.json
            ? #"{"op":"populate","keys":\#(options.keys),"seconds":\#(seconds)}"#
            : "populated \(options.keys) keys in \(seconds) s")
    exit(0)
}
if options.operation == "get" { prepareKeys(options) }

/// The latency at fraction `p` of `sorted` (ascending, ns), in µs.
func percentile(_ sorted: [UInt32], _ p: Double) -> Double {
    sorted.isEmpty ? 0 : Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
}

/// Writes every call of `recorded` as a line `START LATENCY` (ns; the start on
/// `CLOCK_MONOTONIC`, the clock of `time.monotonic_ns()` in Python) to `path`, client by client.
func writeTrace(_ recorded: [Recorded], to path: String) {
    do throws(SystemError) {
        let file = try system.open(path, [.write, .create, .truncate], permissions: 0o644)
        defer { system.close(file) }
        for calls in recorded {
            var text = ""
            text.reserveCapacity(calls.latencies.count * 24)
            for (begin, latency) in zip(calls.begins, calls.latencies) { text += "\(begin) \(latency)\n" }
            try system.write(file, Array(text.utf8))
        }
    } catch {
        print("kvbench: cannot write \(path): \(error)")
        exit(1)
    }
}

let mode = options.effectiveMode
for run in 1...options.runs {
    let cpuBefore = cpuSeconds()
    let recorded = mode == .threads ? runClients(options) : [runClientsPolled(options)]
    let cpu = cpuSeconds() - cpuBefore
    if !options.trace.isEmpty {
        writeTrace(recorded, to: options.runs == 1 ? options.trace : "\(options.trace).\(run)")
    }
    let all = recorded.flatMap(\.latencies).sorted()
    let throughput = Double(all.count) / options.seconds
    let (p50, p99, p999) = (percentile(all, 0.5), percentile(all, 0.99), percentile(all, 0.999))
    let largest = Double(all.last ?? 0) / 1000
    if options.json {
        print(
            #"{"op":"\#(options.operation)","proto":"\#(options.proto)","clients":\#(options.clients),"mode":"\#(mode.rawValue)","ops":\#(all.count),"ops_per_s":\#(throughput),"p50_us":\#(p50),"p99_us":\#(p99),"p999_us":\#(p999),"max_us":\#(largest),"client_cpu_s":\#(cpu),"seconds":\#(options.seconds)}"#
        )
    } else {
        print(
            "proto=\(options.proto) op=\(options.operation) clients=\(options.clients) mode=\(mode.rawValue) ops=\(all.count) ops_per_s=\(Int(throughput)) p50_us=\(p50) p99_us=\(p99) p999_us=\(p999) max_us=\(largest) client_cpu_s=\(cpu)"
        )
    }
}
