import Foundation
import Glibc

/// A TCP proxy on 127.0.0.1 in front of one etcd member that passes everything through, except
/// the answers to transactions (`POST /v3/kv/txn`): the request reaches etcd, which commits
/// it, and its answer is thrown away and the client's connection closed, as a network that
/// fails at the wrong moment would. Gateway calls over HTTP/2 (gRPC ranges) and watch streams
/// pass untouched. ``stop()`` closes everything.
final class LossyProxy: @unchecked Sendable {
    let url: String
    private let listener: Int32
    private let target: UInt16
    private let lock = NSLock()
    private var sockets: [Int32] = []
    private var stopped = false
    private var dropped = 0
    /// How many transaction answers were thrown away.
    var droppedAnswers: Int { lock.withLock { dropped } }

    init(to member: String) throws {
        guard let port = URL(string: member)?.port else { throw ClusterFailure("no port in \(member)") }
        target = UInt16(port)
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard bound, listen(listener, 64) == 0 else {
            throw ClusterFailure("the proxy cannot listen: \(String(cString: strerror(errno)))")
        }
        self.listener = listener
        url = "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
        Thread { [self] in acceptLoop() }.start()
    }

    deinit { stop() }

    func stop() {
        let all = lock.withLock { () -> [Int32] in
            defer { (stopped, sockets) = (true, []) }
            return stopped ? [] : sockets + [listener]
        }
        for fd in all {
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
        }
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        return address
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: target)
            let connected = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            guard connected,
                lock.withLock({ () -> Bool in
                    sockets += [client, server]
                    return !stopped
                })
            else {
                close(client)
                close(server)
                continue
            }
            let connection = Connection()
            Thread { [self] in pump(from: client, to: server, connection, upstream: true) }.start()
            Thread { [self] in pump(from: server, to: client, connection, upstream: false) }.start()
        }
    }

    /// One connection's state: a transaction was asked on it, so its next answer is dropped.
    private final class Connection: @unchecked Sendable {
        let lock = NSLock()
        var transactionAsked = false
    }

    private func pump(from source: Int32, to sink: Int32, _ connection: Connection, upstream: Bool) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(source, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            let chunk = buffer[0..<count]
            if upstream {
                if String(decoding: chunk.prefix(64), as: UTF8.self).hasPrefix("POST /v3/kv/txn") {
                    connection.lock.withLock { connection.transactionAsked = true }
                }
            } else if connection.lock.withLock({ connection.transactionAsked }) {
                lock.withLock { dropped += 1 }
                break  // the answer is lost: close both sides
            }
            var sent = 0
            while sent < count {
                let written = chunk.withUnsafeBytes { write(sink, $0.baseAddress! + sent, count - sent) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { break }
                sent += written
            }
            guard sent == count else { break }
        }
        shutdown(source, Int32(SHUT_RDWR))
        shutdown(sink, Int32(SHUT_RDWR))
    }
}
