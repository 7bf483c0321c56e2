// The load: N client threads, each with its own blocking connection, one call in flight, the
// latency of every call recorded. Nothing is parsed beyond finding the end of the reply, so the
// generator costs the same whatever it talks to.
import CLinux
import Glibc

final class Box: @unchecked Sendable {
    var latencies: [UInt32] = []
}

/// One call and its whole reply on `fd`; the reply's bytes are left in `buffer[0..<returned]`.
func roundTrip(_ fd: Int32, _ call: [UInt8], _ proto: String, _ buffer: UnsafeMutableRawBufferPointer) -> Int {
    sendAll(fd, call)
    var count = 0
    repeat {
        let received = recv(fd, buffer.baseAddress! + count, buffer.count - count, 0)
        if received <= 0 {
            print("kvbench: connection closed")
            exit(1)
        }
        count += received
    } while !replyComplete(proto, UnsafeRawBufferPointer(buffer), count, sent: call.count)
    return count
}

/// Runs one client from `start` until `deadline`; returns its latencies in nanoseconds.
func runClient(_ options: Options, index: Int, start: UInt64, deadline: UInt64) -> [UInt32] {
    let fd = connectUnix(options.socket)
    defer { close(fd) }
    let call = request(options, client: index)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 8)
    defer { buffer.deallocate() }
    let first = roundTrip(fd, call, options.proto, buffer)
    if !replyIsSuccess(options.proto, Array(buffer[0..<first])) {
        print("kvbench: \(options.operation) failed: \(String(decoding: buffer[0..<min(first, 300)], as: UTF8.self))")
        exit(1)
    }
    var latencies: [UInt32] = []
    latencies.reserveCapacity(1 << 20)
    while now() < start { usleep(100) }
    while true {
        let begin = now()
        if begin >= deadline { break }
        _ = roundTrip(fd, call, options.proto, buffer)
        latencies.append(UInt32(min(now() - begin, UInt64(UInt32.max))))
    }
    return latencies
}

/// Runs every client on its own thread; returns all latencies, sorted.
func runClients(_ options: Options) -> [UInt32] {
    let start = now() + 50_000_000
    let deadline = start + UInt64(options.seconds * 1e9)
    let boxes = (0..<options.clients).map { _ in Box() }
    let threads = (0..<options.clients).map { index in
        let box = boxes[index]
        return startThread { box.latencies = runClient(options, index: index, start: start, deadline: deadline) }
    }
    for thread in threads { pthread_join(thread, nil) }
    return boxes.flatMap(\.latencies).sorted()
}

/// The keys the get clients read, so each get finds its value.
func prepareKeys(_ options: Options) {
    var setup = options
    setup.operation = "set"
    let fd = connectUnix(options.socket)
    defer { close(fd) }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 8)
    defer { buffer.deallocate() }
    for index in 0..<options.clients { _ = roundTrip(fd, request(setup, client: index), options.proto, buffer) }
}

/// Writes `keys` keys of 100 bytes, spread over `domains` domains, in batches (varlink `Apply`,
/// RESP `MSET`), as fast as the peer takes them.
func populate(_ options: Options) {
    let fd = connectUnix(options.socket)
    defer { close(fd) }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 8)
    defer { buffer.deallocate() }
    let perDomain = (options.keys + options.domains - 1) / options.domains
    for domainIndex in 0..<options.domains {
        let domain = options.domains == 1 ? options.domain : "\(options.domain).\(domainIndex)"
        var first = 0
        while first < perDomain {
            let batch = first..<min(perDomain, first + 500)
            let call: [UInt8]
            if options.proto == "resp" {
                call = resp(["MSET"] + batch.flatMap { ["\(domain):p\($0)", payload] })
            } else {
                let changes = batch.map { #"{"key":"p\#($0)","value":"\#(payload)"}"# }.joined(separator: ",")
                call = varlink("Apply", #"{"domain":"\#(domain)","changes":[\#(changes)]}"#)
            }
            let count = roundTrip(fd, call, options.proto, buffer)
            if !replyIsSuccess(options.proto, Array(buffer[0..<count])) {
                print("kvbench: populate failed: \(String(decoding: buffer[0..<min(count, 300)], as: UTF8.self))")
                exit(1)
            }
            first = batch.upperBound
        }
    }
}

/// CPU seconds (user + system) this process has used so far.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The same load from one thread: every connection non-blocking, one call in flight on each,
/// driven by epoll, so that many clients cost no thread switches in the generator (a reply
/// wakes no thread but this one) and each wait returns only the connections with a reply
/// (poll(2) would scan all of them per wake). Returns all latencies, sorted.
func runClientsPolled(_ options: Options) -> [UInt32] {
    let count = options.clients
    let fds = (0..<count).map { _ in connectUnix(options.socket) }
    defer { for fd in fds { close(fd) } }
    let buffers = (0..<count).map { _ in UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 8) }
    defer { for buffer in buffers { buffer.deallocate() } }
    let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
    defer { close(epoll) }
    var clients = PolledClients(options: options, fds: fds, buffers: buffers)
    clients.warmUp(watchedBy: epoll)
    var events = [epoll_event](repeating: epoll_event(), count: count)
    let start = now() + 50_000_000
    let deadline = start + UInt64(options.seconds * 1e9)
    while now() < start { usleep(100) }
    for index in 0..<count { clients.send(index) }
    var open = count
    while open > 0 {
        let ready = epoll_wait(epoll, &events, Int32(count), 1000)
        if ready < 0 {
            if errno == EINTR { continue }
            print("kvbench: epoll_wait failed")
            exit(1)
        }
        for event in events[0..<Int(ready)] {
            let index = Int(event.data.u64)
            guard let end = clients.receive(index) else { continue }
            if end >= deadline {
                _ = epoll_ctl(epoll, EPOLL_CTL_DEL, fds[index], nil)  // finished: no more calls
                open -= 1
            } else {
                clients.send(index, at: end)
            }
        }
    }
    // Calls that started before the deadline count; the run's length is still `seconds`.
    return clients.latencies.sorted()
}

/// The connections of ``runClientsPolled(_:)``, each with one call in flight and its reply
/// buffer, and the latencies measured so far.
struct PolledClients {
    let options: Options
    let fds: [Int32]
    let buffers: [UnsafeMutableRawBufferPointer]
    let calls: [[UInt8]]
    var received: [Int]
    var began: [UInt64]
    var latencies: [UInt32] = []

    init(options: Options, fds: [Int32], buffers: [UnsafeMutableRawBufferPointer]) {
        self.options = options
        self.fds = fds
        self.buffers = buffers
        calls = (0..<fds.count).map { request(options, client: $0) }
        received = [Int](repeating: 0, count: fds.count)
        began = [UInt64](repeating: 0, count: fds.count)
        latencies.reserveCapacity(1 << 22)
    }

    /// One blocking round trip on each connection (the first call must succeed), then each is
    /// made non-blocking and added to `epoll` with its index.
    func warmUp(watchedBy epoll: Int32) {
        for index in fds.indices {
            let first = roundTrip(fds[index], calls[index], options.proto, buffers[index])
            if !replyIsSuccess(options.proto, Array(buffers[index][0..<first])) {
                print(
                    "kvbench: \(options.operation) failed: \(String(decoding: buffers[index][0..<min(first, 300)], as: UTF8.self))"
                )
                exit(1)
            }
            _ = fcntl(fds[index], F_SETFL, fcntl(fds[index], F_GETFL) | O_NONBLOCK)
            var event = epoll_event()
            event.events = EPOLLIN.rawValue
            event.data.u64 = UInt64(index)
            guard epoll_ctl(epoll, EPOLL_CTL_ADD, fds[index], &event) == 0 else {
                print("kvbench: epoll_ctl failed")
                exit(1)
            }
        }
    }

    /// Sends connection `index`'s call, its clock started at `time`.
    mutating func send(_ index: Int, at time: UInt64 = now()) {
        began[index] = time
        sendAll(fds[index], calls[index])
    }

    /// Reads what connection `index` has; when its reply is complete, records the latency and
    /// returns the time it ended.
    mutating func receive(_ index: Int) -> UInt64? {
        let buffer = buffers[index]
        let got = recv(fds[index], buffer.baseAddress! + received[index], buffer.count - received[index], 0)
        if got < 0, errno == EAGAIN { return nil }
        if got <= 0 {
            print("kvbench: connection closed")
            exit(1)
        }
        received[index] += got
        guard replyComplete(options.proto, UnsafeRawBufferPointer(buffer), received[index], sent: calls[index].count)
        else { return nil }
        let end = now()
        latencies.append(UInt32(min(end - began[index], UInt64(UInt32.max))))
        received[index] = 0
        return end
    }
}
