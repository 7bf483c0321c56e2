import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An etcd user's name and password, for ``EtcdGateway``.
public struct EtcdCredentials: Sendable, Equatable {
    public var name: String
    public var password: String

    public init(name: String, password: String) {
        self.name = name
        self.password = password
    }

    /// Reads the credentials from `path` (`--etcd-auth-file`): either two lines (name, then
    /// password) or one line `name:password`; a final newline is optional.
    ///
    /// Refuses, with ``EtcdError/badConfiguration(_:)`` saying what to fix, a file that is not a
    /// regular file, is owned by neither root nor this process's user, or that group or others
    /// may read or write (it holds a password), and content that has no name or no password.
    /// Blocking (reads one small file).
    public static func read(fromFile path: String) throws(EtcdError) -> EtcdCredentials {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            throw .badConfiguration("cannot open the etcd auth file \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw .badConfiguration("cannot inspect the etcd auth file \(path): \(String(cString: strerror(errno)))")
        }
        try checkOwnership(info, path)
        return try parse(readAll(fd, path), path)
    }

    static func checkOwnership(_ info: stat, _ path: String) throws(EtcdError) {
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw .badConfiguration("the etcd auth file \(path) is not a regular file")
        }
        guard info.st_uid == 0 || info.st_uid == geteuid() else {
            throw .badConfiguration(
                "the etcd auth file \(path) is owned by uid \(info.st_uid): it must belong to root or to uid \(geteuid()) (chown it)"
            )
        }
        guard info.st_mode & 0o077 == 0 else {
            let mode = String(info.st_mode & 0o777, radix: 8)
            throw .badConfiguration(
                "the etcd auth file \(path) has mode \(mode): group and others must have no access (chmod 600 \(path))")
        }
    }

    private static func readAll(_ fd: Int32, _ path: String) throws(EtcdError) -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else {
                throw .badConfiguration("cannot read the etcd auth file \(path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes += chunk[..<count]
            guard bytes.count <= 64 * 1024 else {
                throw .badConfiguration(
                    "the etcd auth file \(path) is over 64 KiB: it should hold a name and a password")
            }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw .badConfiguration("the etcd auth file \(path) is not UTF-8 text")
        }
        return text
    }

    /// `name\npassword` or `name:password`, with optional final newline (LF or CRLF).
    static func parse(_ text: String, _ path: String) throws(EtcdError) -> EtcdCredentials {
        // "\r\n" is one Character in Swift, and a newline.
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        while lines.last?.isEmpty == true { lines.removeLast() }
        let name: Substring
        let password: Substring
        switch lines.count {
        case 1:
            guard let colon = lines[0].firstIndex(of: ":") else {
                throw .badConfiguration(
                    "the etcd auth file \(path) has one line without ':': write 'name:password', or the name and the password on two lines"
                )
            }
            name = lines[0][..<colon]
            password = lines[0][lines[0].index(after: colon)...]
        case 2:
            name = lines[0]
            password = lines[1]
        default:
            throw .badConfiguration(
                "the etcd auth file \(path) has \(lines.count) lines: write 'name:password', or the name and the password on two lines"
            )
        }
        guard !name.isEmpty, !password.isEmpty else {
            throw .badConfiguration("the etcd auth file \(path) has an empty \(name.isEmpty ? "name" : "password")")
        }
        return EtcdCredentials(name: String(name), password: String(password))
    }
}
