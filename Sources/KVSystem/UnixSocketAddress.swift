import Glibc

/// The address of kvd's Unix socket, built once for the daemon (bind, probe) and the client
/// (connect) alike. Pure; thread-safe.
public struct UnixSocketAddress: Sendable {
    private var address: sockaddr_un

    /// The address of `path`, or nil when it does not fit (`sun_path` holds 107 bytes and a NUL).
    public init?(_ path: String) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        self.address = address
    }

    /// The longest path that fits, in bytes.
    public static var maxPathBytes: Int { MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1 }

    /// Calls `body` with the address as `bind` and `connect` take it.
    public func withSockaddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
        withUnsafePointer(to: address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}
