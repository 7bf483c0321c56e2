// Blocking Unix-socket helpers shared by the clients and the echo server.
import Glibc

func unixAddress(_ path: String) -> sockaddr_un {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        let bytes = Array(path.utf8.prefix(raw.count - 1))
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    return address
}

func connectUnix(_ path: String) -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var address = unixAddress(path)
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    if result != 0 {
        print("kvbench: cannot connect to \(path): \(String(cString: strerror(errno)))")
        exit(1)
    }
    return fd
}

/// Sends all of `bytes`.
func sendAll(_ fd: Int32, _ bytes: [UInt8]) {
    var sent = 0
    while sent < bytes.count {
        let count = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
        if count <= 0 {
            print("kvbench: send failed: \(String(cString: strerror(errno)))")
            exit(1)
        }
        sent += count
    }
}

func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Runs `body` on a new pthread; `join` waits for it.
final class ClosureBox: @unchecked Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
    var thread = pthread_t()
    pthread_create(
        &thread, nil,
        { raw in
            Unmanaged<ClosureBox>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, Unmanaged.passRetained(ClosureBox(body)).toOpaque())
    return thread
}
