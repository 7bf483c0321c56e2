// kvbench: round trips against a running kvd over its Unix socket, as a client would make them.
//
// Each client is a thread with its own blocking connection that sends one prepared varlink call,
// waits for the whole reply, and records the latency; nothing is parsed beyond finding the NUL,
// so the load generator costs little next to what it measures. The full comparison with Redis,
// SQLite and UserDefaults is `make bench` (issue #5); this program is its kvd load generator.
import Glibc
import Synchronization

struct Options: Sendable {
    var socket = ""
    var clients = 1
    var seconds = 2.0
    var operation = "get"
    var domain = "bench.kvd"
}

func usage() -> Never {
    print("usage: kvbench --socket PATH [--clients N] [--seconds S] [--op get|set|ping]")
    exit(2)
}

func parseOptions() -> Options {
    var options = Options()
    var arguments = CommandLine.arguments.dropFirst()
    while let flag = arguments.popFirst() {
        guard let value = arguments.popFirst() else { usage() }
        switch flag {
        case "--socket": options.socket = value
        case "--clients": options.clients = Int(value) ?? 1
        case "--seconds": options.seconds = Double(value) ?? 2
        case "--op": options.operation = value
        default: usage()
        }
    }
    if options.socket.isEmpty { usage() }
    return options
}

func connectUnix(_ path: String) -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        let bytes = Array(path.utf8)
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    if result != 0 {
        print("kvbench: cannot connect to \(path): \(String(cString: strerror(errno)))")
        exit(1)
    }
    return fd
}

func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// One call's bytes for client `index`.
func request(_ options: Options, client index: Int) -> [UInt8] {
    let text: String
    switch options.operation {
    case "set":
        let payload = String(repeating: "x", count: 100)
        text = #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"\#(options.domain)","key":"k\#(index)","value":"\#(payload)"}}"#
    case "ping":
        text = #"{"method":"io.kvd.Defaults.Domains"}"#
    default:
        text = #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"\#(options.domain)","key":"k\#(index)"}}"#
    }
    return Array(text.utf8) + [0]
}

/// Runs one client until `deadline`; returns its latencies in nanoseconds.
func runClient(_ options: Options, index: Int, start: UInt64, deadline: UInt64) -> [UInt32] {
    let fd = connectUnix(options.socket)
    defer { close(fd) }
    let call = request(options, client: index)
    var buffer = [UInt8](repeating: 0, count: 65536)
    var latencies: [UInt32] = []
    latencies.reserveCapacity(200_000)
    while now() < start {}
    while true {
        let begin = now()
        if begin >= deadline { break }
        _ = call.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var complete = false
        while !complete {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { print("kvbench: connection closed"); exit(1) }
            complete = buffer[count - 1] == 0
        }
        latencies.append(UInt32(min(now() - begin, UInt64(UInt32.max))))
    }
    return latencies
}

final class Box: @unchecked Sendable {
    var latencies: [UInt32] = []
}

let options = parseOptions()
// Make sure the keys read exist.
if options.operation == "get" {
    let fd = connectUnix(options.socket)
    var buffer = [UInt8](repeating: 0, count: 4096)
    for index in 0..<options.clients {
        let text = #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"\#(options.domain)","key":"k\#(index)","value":"\#(String(repeating: "x", count: 100))"}}"#
        let bytes = Array(text.utf8) + [0]
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        _ = recv(fd, &buffer, buffer.count, 0)
    }
    close(fd)
}
/// Runs every client on its own thread; returns all latencies, sorted.
func runClients(_ options: Options) -> [UInt32] {
    let start = now() + 50_000_000
    let deadline = start + UInt64(options.seconds * 1e9)
    let boxes = (0..<options.clients).map { _ in Box() }
    var threads: [pthread_t] = []
    for index in 0..<options.clients {
        let box = boxes[index]
        let work = ClosureBox { box.latencies = runClient(options, index: index, start: start, deadline: deadline) }
        var thread = pthread_t()
        pthread_create(&thread, nil, { raw in
            Unmanaged<ClosureBox>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, Unmanaged.passRetained(work).toOpaque())
        threads.append(thread)
    }
    for thread in threads { pthread_join(thread, nil) }
    return boxes.flatMap(\.latencies).sorted()
}

final class ClosureBox: @unchecked Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

let all = runClients(options)
let throughput = Double(all.count) / options.seconds
func percentile(_ sorted: [UInt32], _ p: Double) -> Double {
    sorted.isEmpty ? 0 : Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
}
print("op=\(options.operation) clients=\(options.clients) ops=\(all.count) ops_per_s=\(Int(throughput)) p50_us=\(percentile(all, 0.5)) p99_us=\(percentile(all, 0.99))")
