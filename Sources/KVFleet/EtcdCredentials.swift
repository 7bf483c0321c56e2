import FoundationEssentials
import KVSystem

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
    public static func read(fromFile path: String, system: any SystemCalls = LinuxSystem()) throws(EtcdError)
        -> EtcdCredentials
    {
        let fd: FileDescriptor
        do { fd = try system.open(path, [.noFollow], permissions: 0) } catch {
            throw .badConfiguration("cannot open the etcd auth file \(path): \(error.errno)")
        }
        defer { system.close(fd) }
        let status: FileStatus
        do { status = try system.status(fd) } catch {
            throw .badConfiguration("cannot inspect the etcd auth file \(path): \(error.errno)")
        }
        try checkOwnership(status, path, user: system.effectiveUserID)
        return try parse(readAll(fd, path, system), path)
    }

    /// Refuses a file that is not a regular file of root's or `user`'s, or that group or others
    /// may use (``OwnershipRule``).
    static func checkOwnership(_ status: FileStatus, _ path: String, user: UInt32) throws(EtcdError) {
        switch OwnershipRule(kind: .regular, owners: [0, user], forbiddenPermissions: 0o077).violation(of: status) {
        case nil:
            return
        case .kind:
            throw .badConfiguration("the etcd auth file \(path) is not a regular file")
        case .owner(let owner):
            throw .badConfiguration(
                "the etcd auth file \(path) is owned by uid \(owner): it must belong to root or to uid \(user) (chown it)"
            )
        case .permissions(let permissions):
            let mode = String(permissions & 0o777, radix: 8)
            throw .badConfiguration(
                "the etcd auth file \(path) has mode \(mode): group and others must have no access (chmod 600 \(path))")
        }
    }

    private static func readAll(_ fd: FileDescriptor, _ path: String, _ system: any SystemCalls) throws(EtcdError)
        -> String
    {
        let limit = 64 * 1024
        let bytes: [UInt8]
        do { bytes = try system.readToEnd(fd.rawValue, limit: limit) } catch {
            throw .badConfiguration("cannot read the etcd auth file \(path): \(error.errno)")
        }
        guard bytes.count <= limit else {
            throw .badConfiguration("the etcd auth file \(path) is over 64 KiB: it should hold a name and a password")
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
