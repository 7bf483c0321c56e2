// The load: N clients, each with its own connection and one call in flight, the latency of
// every call recorded (and, with --trace, its start). Nothing is parsed beyond finding the end of
// the reply, so the generator costs the same whatever it talks to.
import CLinux
import Dispatch
import Glibc
import KVSystem
import Synchronization

/// The calls one client thread (or the epoll thread) made: each one's latency in nanoseconds
/// and, when tracing, its start (`CLOCK_MONOTONIC`, in the same order).
struct Recorded {
    var latencies: [UInt32] = []
    var begins: [UInt64] = []
    let tracing: Bool

    init(tracing: Bool, expected: Int) {
        self.tracing = tracing
        latencies.reserveCapacity(expected)
        if tracing { begins.reserveCapacity(expected) }
    }

    /// Records a call that started at `begin` and whose whole reply was read at `end`.
    mutating func record(begin: UInt64, end: UInt64) {
        latencies.append(UInt32(min(end - begin, UInt64(UInt32.max))))
        if tracing { begins.append(begin) }
    }
}

final class Box: @unchecked Sendable {
    var recorded = Recorded(tracing: false, expected: 0)
}

/// Where the client threads of ``runClients(_:)`` wait, blocked, until every one has connected
/// and made its first call; then all start at once, and the run's clock starts with them.
final class StartLine: Sendable {
    private let ready = DispatchSemaphore(value: 0)
    private let go = DispatchSemaphore(value: 0)
    private let start = Atomic<UInt64>(0)

    /// A client is connected and warmed up: blocks until the start; returns it.
    func arriveAndWait() -> UInt64 {
        ready.signal()
        go.wait()
        let time = start.load(ordering: .acquiring)
        let now = now()
        if time > now { system.sleep(microseconds: UInt32((time - now) / 1000)) }
        return time
    }

    /// Waits until `count` clients arrived, then starts them all `lead` ns from now; returns
    /// the start.
    func release(after count: Int, lead: UInt64) -> UInt64 {
        for _ in 0..<count { ready.wait() }
        let time = now() + lead
        start.store(time, ordering: .releasing)
        for _ in 0..<count { go.signal() }
        return time
    }
}

/// The bytes of each connection's reply buffer: a `History` reply of a key with many entries
/// takes hundreds of KiB. Pages never touched cost no memory, so 1,000 clients cost what their
/// replies take.
let replyBufferBytes = 1 << 20

/// Ends the run, saying so, when a reply fills all of `buffer`.
func checkRoom(_ buffer: UnsafeMutableRawBufferPointer, _ count: Int) {
    guard count >= buffer.count else { return }
    print("kvbench: a reply is larger than \(buffer.count) bytes")
    exit(1)
}

/// One call and its whole reply on `fd`; the reply's bytes are left in `buffer[0..<returned]`.
func roundTrip(_ fd: Int32, _ call: [UInt8], _ proto: String, _ buffer: UnsafeMutableRawBufferPointer) -> Int {
    sendAll(fd, call)
    var count = 0
    repeat {
        checkRoom(buffer, count)
        let received = try? system.receive(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[count...]))
        guard let received, received > 0 else {
            print("kvbench: connection closed")
            exit(1)
        }
        count += received
    } while !replyComplete(proto, UnsafeRawBufferPointer(buffer), count, sent: call.count)
    return count
}

/// The calls each thread reserves room for: more grow the arrays (pages never touched cost
/// nothing, but 1,000 threads need not each reserve what one fast client makes).
func expectedCalls(threads: Int) -> Int {
    max((1 << 22) / threads, 1 << 12)
}

/// Runs one client once every client is ready (`line`) for `options.seconds`; returns its calls.
func runClient(_ options: Options, index: Int, line: StartLine) -> Recorded {
    let fd = connectUnix(options.socket)
    defer { system.close(fd) }
    let call = request(options, client: index)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: replyBufferBytes, alignment: 8)
    defer { buffer.deallocate() }
    let first = roundTrip(fd, call, options.proto, buffer)
    if !replyIsSuccess(options.proto, Array(buffer[0..<first])) {
        print("kvbench: \(options.operation) failed: \(String(decoding: buffer[0..<min(first, 300)], as: UTF8.self))")
        exit(1)
    }
    var recorded = Recorded(tracing: !options.trace.isEmpty, expected: expectedCalls(threads: options.clients))
    let deadline = line.arriveAndWait() + UInt64(options.seconds * 1e9)
    while true {
        let begin = now()
        if begin >= deadline { break }
        _ = roundTrip(fd, call, options.proto, buffer)
        recorded.record(begin: begin, end: now())
    }
    return recorded
}

/// Runs every client on its own blocking thread, all started together once each has connected
/// and made a first call; returns each thread's calls.
func runClients(_ options: Options) -> [Recorded] {
    let line = StartLine()
    let boxes = (0..<options.clients).map { _ in Box() }
    let threads = (0..<options.clients).map { index in
        let box = boxes[index]
        return startJoinableThread {
            box.recorded = runClient(options, index: index, line: line)
        }
    }
    _ = line.release(after: options.clients, lead: 10_000_000)
    for thread in threads { thread.join() }
    return boxes.map(\.recorded)
}

/// The keys the get clients read, so each get finds its value.
func prepareKeys(_ options: Options) {
    var setup = options
    setup.operation = "set"
    let fd = connectUnix(options.socket)
    defer { system.close(fd) }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: replyBufferBytes, alignment: 8)
    defer { buffer.deallocate() }
    for index in 0..<options.clients { _ = roundTrip(fd, request(setup, client: index), options.proto, buffer) }
}

/// Writes `keys` keys of 100 bytes, spread over `domains` domains, in batches (varlink `Apply`,
/// RESP `MSET`), as fast as the peer takes them.
func populate(_ options: Options) {
    let fd = connectUnix(options.socket)
    defer { system.close(fd) }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: replyBufferBytes, alignment: 8)
    defer { buffer.deallocate() }
    let payload = valueText(options)
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
    let used = system.processorSeconds()
    return used.user + used.system
}

/// The same load from one thread: every connection non-blocking, one call in flight on each,
/// driven by epoll, so that many clients cost no thread switches in the generator (a reply
/// wakes no thread but this one) and each wait returns only the connections with a reply
/// (poll(2) would scan all of them per wake). A call's latency runs from its send to the moment
/// this thread has read its whole reply, so it includes the time the reply waited while the
/// thread read the others' (as a client process's would while it was not scheduled). Returns
/// the calls.
func runClientsPolled(_ options: Options) -> Recorded {
    let count = options.clients
    let fds = (0..<count).map { _ in connectUnix(options.socket) }
    defer { for fd in fds { system.close(fd) } }
    let buffers = (0..<count).map { _ in
        UnsafeMutableRawBufferPointer.allocate(byteCount: replyBufferBytes, alignment: 8)
    }
    defer { for buffer in buffers { buffer.deallocate() } }
    guard let epoll = try? system.epollCreate() else {
        print("kvbench: epoll_create1 failed")
        exit(1)
    }
    defer { system.close(epoll) }
    var clients = PolledClients(options: options, fds: fds, buffers: buffers)
    clients.warmUp(watchedBy: epoll)
    let events = UnsafeMutableBufferPointer<epoll_event>.allocate(capacity: count)
    defer { events.deallocate() }
    let start = now() + 50_000_000
    let deadline = start + UInt64(options.seconds * 1e9)
    while now() < start { system.sleep(microseconds: 100) }
    for index in 0..<count { clients.send(index) }
    var open = count
    while open > 0 {
        for event in events[0..<waitForReplies(epoll, into: events)] {
            let index = clients.index(of: event.data.fd)
            guard let end = clients.receive(index) else { continue }
            if end >= deadline {
                // finished: no more calls
                _ = try? system.epollControl(epoll, EPOLL_CTL_DEL, fds[index], events: 0)
                open -= 1
            } else {
                clients.send(index, at: end)
            }
        }
    }
    // Calls that started before the deadline count; the run's length is still `seconds`.
    return clients.recorded
}

/// Waits up to a second for connections with a reply to read (`EINTR`: again); returns how many
/// events it stored in `events`. Exits the program when `epoll_wait` fails.
func waitForReplies(_ epoll: Int32, into events: UnsafeMutableBufferPointer<epoll_event>) -> Int {
    do {
        return try system.retrying("epoll_wait") { () throws(Errno) in
            try system.epollWait(epoll, into: events, timeoutMilliseconds: 1000)
        }
    } catch {
        print("kvbench: epoll_wait failed")
        exit(1)
    }
}

/// The connections of ``runClientsPolled(_:)``, each with one call in flight and its reply
/// buffer, and the calls measured so far.
struct PolledClients {
    let options: Options
    let fds: [Int32]
    let buffers: [UnsafeMutableRawBufferPointer]
    let calls: [[UInt8]]
    /// The index of each connection, by its descriptor (what epoll reports).
    let indices: [Int]
    var received: [Int]
    var began: [UInt64]
    var recorded: Recorded

    init(options: Options, fds: [Int32], buffers: [UnsafeMutableRawBufferPointer]) {
        self.options = options
        self.fds = fds
        self.buffers = buffers
        calls = (0..<fds.count).map { request(options, client: $0) }
        var indices = [Int](repeating: -1, count: Int(fds.max() ?? 0) + 1)
        for (index, fd) in fds.enumerated() { indices[Int(fd)] = index }
        self.indices = indices
        received = [Int](repeating: 0, count: fds.count)
        began = [UInt64](repeating: 0, count: fds.count)
        recorded = Recorded(tracing: !options.trace.isEmpty, expected: 1 << 22)
    }

    /// One blocking round trip on each connection (the first call must succeed), then each is
    /// made non-blocking and added to `epoll`.
    func warmUp(watchedBy epoll: Int32) {
        for index in fds.indices {
            let first = roundTrip(fds[index], calls[index], options.proto, buffers[index])
            if !replyIsSuccess(options.proto, Array(buffers[index][0..<first])) {
                print(
                    "kvbench: \(options.operation) failed: \(String(decoding: buffers[index][0..<min(first, 300)], as: UTF8.self))"
                )
                exit(1)
            }
            do {
                try system.setNonBlocking(fds[index])
                try system.epollControl(epoll, EPOLL_CTL_ADD, fds[index], events: EPOLLIN.rawValue)
            } catch {
                print("kvbench: epoll_ctl failed")
                exit(1)
            }
        }
    }

    /// The index of the connection on descriptor `fd`.
    func index(of fd: Int32) -> Int { indices[Int(fd)] }

    /// Sends connection `index`'s call, its clock started at `time`.
    mutating func send(_ index: Int, at time: UInt64 = now()) {
        began[index] = time
        sendAll(fds[index], calls[index])
    }

    /// Reads what connection `index` has; when its reply is complete, records the latency and
    /// returns the time it ended.
    mutating func receive(_ index: Int) -> UInt64? {
        let buffer = buffers[index]
        checkRoom(buffer, received[index])
        let got: Int
        do {
            let rest = UnsafeMutableRawBufferPointer(rebasing: buffer[received[index]...])
            guard let count = try system.readAvailable(fds[index], into: rest) else { return nil }
            got = count
        } catch {
            got = 0
        }
        if got == 0 {
            print("kvbench: connection closed")
            exit(1)
        }
        received[index] += got
        guard replyComplete(options.proto, UnsafeRawBufferPointer(buffer), received[index], sent: calls[index].count)
        else { return nil }
        let end = now()
        recorded.record(begin: began[index], end: end)
        received[index] = 0
        return end
    }
}
