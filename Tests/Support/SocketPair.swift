import CLinux
import Glibc
import KVSystem

/// A connected pair of Unix stream sockets for tests: ``near`` (non-blocking; the side under
/// test) and ``far`` (blocking; the peer). Both are closed when the pair is released.
public final class SocketPair {
    public let near: Int32
    public let far: Int32

    public init() throws {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw SystemError("socketpair")
        }
        (near, far) = (fds[0], fds[1])
        try LinuxSystem().setNonBlocking(near)
    }

    deinit {
        close(near)
        close(far)
    }

    /// Everything the far end can read now, without waiting.
    public func received() -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while case let count = recv(far, &chunk, chunk.count, Int32(MSG_DONTWAIT)), count > 0 {
            bytes += chunk[..<count]
        }
        return bytes
    }
}
