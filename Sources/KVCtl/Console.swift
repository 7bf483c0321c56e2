import Glibc

/// Where kvctl's output goes: stdout, stderr and stdin, replaceable in tests.
public protocol Console: AnyObject {
    func out(_ text: String)
    func err(_ text: String)
    func readStandardInput() throws(Failure) -> [UInt8]
}

/// The process's own standard streams, unbuffered so `watch` lines appear at once.
final class StandardConsole: Console {
    func out(_ text: String) { Files.writeAll(1, Array(text.utf8)) }
    func err(_ text: String) { Files.writeAll(2, Array(text.utf8)) }
    func readStandardInput() throws(Failure) -> [UInt8] { try Files.readAll(0, name: "stdin") }
}

/// Whole-file reads and atomic writes with the C calls underneath.
enum Files {
    /// Writes all of `bytes`; returns the `errno` of a failure, or `nil`.
    @discardableResult
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += written
        }
        return nil
    }

    static func readAll(_ descriptor: Int32, name: String) throws(Failure) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Failure("cannot read \(name): \(String(cString: strerror(errno)))")
            }
            if count == 0 { return bytes }
            bytes += chunk[..<count]
        }
    }

    /// The contents of the file at `path`.
    static func read(_ path: String) throws(Failure) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        return try readAll(descriptor, name: path)
    }

    /// Replaces the file at `path` with `bytes` atomically, as editors save: a new file beside it,
    /// written, synced and renamed over it.
    ///
    /// - A symbolic link is written through: its target is replaced and the link stays. A link
    ///   whose target does not exist is refused.
    /// - An existing file keeps its permissions and its owner and group; where the owner cannot
    ///   be kept (a file of another user, without root) the write is refused, not taken over.
    ///   A new file gets mode 0600 (less the umask): exported settings may hold secrets.
    /// - Anything but a regular file (a folder, a FIFO, a device) is refused: `-` is standard
    ///   output.
    ///
    /// Hard links to the old file keep the old content. The corresponding C calls are `lstat`,
    /// `realpath`, `open(O_CREAT|O_EXCL|O_NOFOLLOW)`, `fchown`, `fchmod`, `fsync` and `rename`.
    static func writeAtomically(_ path: String, _ bytes: [UInt8]) throws(Failure) {
        do { try writeAtomically(path) { write in try write(bytes) } } catch let failure as Failure {
            throw failure
        } catch { throw Failure("cannot write \(path): \(error)") }
    }

    /// Writes what `body` hands to its `write` function, in pieces, to `path`, atomically as
    /// ``writeAtomically(_:_:)`` does: the file is replaced only after `body` returned and every
    /// piece is durable; if `body` or a write throws, the file is left as it was (the error is
    /// rethrown; a failed write as a `Failure` naming the file).
    static func writeAtomically(
        _ path: String, writing body: (_ write: ([UInt8]) throws(Failure) -> Void) throws -> Void
    ) throws {
        let (target, existing) = try replacedFile(path)
        let temporary = target + ".kvctl-\(getpid()).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Failure("cannot create \(temporary): \(systemError())") }
        var failure = existing.flatMap { keepOwnerAndMode(of: $0, on: descriptor) }
        if failure == nil {
            do {
                try body { (bytes) throws(Failure) in
                    if let code = writeAll(descriptor, bytes) {
                        throw Failure("cannot write \(path): \(systemError(code))")
                    }
                }
            } catch {
                close(descriptor)
                unlink(temporary)
                throw error
            }
        }
        if failure == nil, fsync(descriptor) != 0 { failure = systemError() }
        close(descriptor)
        if failure == nil, rename(temporary, target) != 0 { failure = systemError() }
        if let failure {
            unlink(temporary)
            throw Failure("cannot write \(path): \(failure)")
        }
    }

    /// The file a write to `path` replaces (the target of a link) and its status, `nil` if
    /// there is none yet.
    private static func replacedFile(_ path: String) throws(Failure) -> (path: String, status: stat?) {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            guard errno == ENOENT else { throw Failure("cannot write \(path): \(systemError())") }
            return (path, nil)
        }
        var target = path
        if info.st_mode & S_IFMT == S_IFLNK {
            let resolved = realpath(path, nil)
            defer { free(resolved) }
            guard let resolved, stat(resolved, &info) == 0 else {
                throw Failure(
                    "cannot write \(path): it is a symbolic link to a file that cannot be reached (\(systemError())); create that file first, or remove the link"
                )
            }
            target = String(cString: resolved)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw Failure(
                "cannot write \(path): it is not a regular file; give the name of a file, or - for standard output")
        }
        return (target, info)
    }

    /// Gives the new file open at `descriptor` the owner, group and permissions of `existing`;
    /// returns why it could not, or `nil`.
    private static func keepOwnerAndMode(of existing: stat, on descriptor: Int32) -> String? {
        var created = stat()
        guard fstat(descriptor, &created) == 0 else { return systemError() }
        if created.st_uid != existing.st_uid || created.st_gid != existing.st_gid,
            fchown(descriptor, existing.st_uid, existing.st_gid) != 0
        {
            return
                "it belongs to uid \(existing.st_uid) and gid \(existing.st_gid), which a new copy cannot keep (\(systemError())); export as its owner, or to another file"
        }
        return fchmod(descriptor, existing.st_mode & 0o7777) == 0 ? nil : systemError()
    }

    /// The system's message for `code`, like "Permission denied".
    private static func systemError(_ code: Int32 = errno) -> String {
        String(cString: strerror(code))
    }
}
