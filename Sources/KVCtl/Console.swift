import KVSystem

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

/// Whole-file reads and atomic writes, through KVSystem's seam.
enum Files {
    static let system: any SystemCalls = LinuxSystem()

    /// Writes all of `bytes`; returns the `errno` of a failure, or `nil`.
    @discardableResult
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Errno? {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) in try system.writeAll(descriptor, raw) }
        }
        if case .failure(let error) = result { return error.errno }
        return nil
    }

    static func readAll(_ descriptor: Int32, name: String) throws(Failure) -> [UInt8] {
        do { return try system.readToEnd(descriptor) } catch {
            throw Failure("cannot read \(name): \(error.errno)")
        }
    }

    /// The contents of the file at `path`.
    static func read(_ path: String) throws(Failure) -> [UInt8] {
        let descriptor: FileDescriptor
        do { descriptor = try system.open(path, [], permissions: 0) } catch {
            throw Failure("cannot open \(path): \(error.errno)")
        }
        defer { system.close(descriptor) }
        return try readAll(descriptor.rawValue, name: path)
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
        let temporary = target + ".kvctl-\(system.processID).tmp"
        let descriptor: FileDescriptor
        do {
            descriptor = try system.open(temporary, [.write, .create, .exclusive, .noFollow], permissions: 0o600)
        } catch {
            throw Failure("cannot create \(temporary): \(error.errno)")
        }
        var failure = existing.flatMap { keepOwnerAndMode(of: $0, on: descriptor) }
        if failure == nil {
            do {
                try body { (bytes) throws(Failure) in
                    if let code = writeAll(descriptor.rawValue, bytes) {
                        throw Failure("cannot write \(path): \(code)")
                    }
                }
            } catch {
                system.close(descriptor)
                try? system.unlink(temporary)
                throw error
            }
        }
        if failure == nil {
            do { try system.fsync(descriptor) } catch { failure = error.errno.description }
        }
        system.close(descriptor)
        if failure == nil {
            do { try system.rename(temporary, to: target) } catch { failure = error.errno.description }
        }
        if let failure {
            try? system.unlink(temporary)
            throw Failure("cannot write \(path): \(failure)")
        }
    }

    /// The file a write to `path` replaces (the target of a link) and its status, `nil` if
    /// there is none yet.
    private static func replacedFile(_ path: String) throws(Failure) -> (path: String, status: FileStatus?) {
        var status: FileStatus
        do { status = try system.status(path, followingLinks: false) } catch {
            guard error == .noSuchFileOrDirectory else { throw Failure("cannot write \(path): \(error)") }
            return (path, nil)
        }
        var target = path
        if status.kind == .symbolicLink {
            do {
                target = try system.resolvedPath(path)
                status = try system.status(target, followingLinks: true)
            } catch {
                throw Failure(
                    "cannot write \(path): it is a symbolic link to a file that cannot be reached (\(error)); create that file first, or remove the link"
                )
            }
        }
        guard status.kind == .regular else {
            throw Failure(
                "cannot write \(path): it is not a regular file; give the name of a file, or - for standard output")
        }
        return (target, status)
    }

    /// Gives the new file open at `descriptor` the owner, group and permissions of `existing`;
    /// returns why it could not, or `nil`.
    private static func keepOwnerAndMode(of existing: FileStatus, on descriptor: FileDescriptor) -> String? {
        let created: FileStatus
        do { created = try system.status(descriptor) } catch { return error.errno.description }
        if created.owner != existing.owner || created.group != existing.group {
            do { try system.changeOwner(descriptor, owner: existing.owner, group: existing.group) } catch {
                return
                    "it belongs to uid \(existing.owner) and gid \(existing.group), which a new copy cannot keep (\(error)); export as its owner, or to another file"
            }
        }
        do { try system.changePermissions(descriptor, existing.permissions) } catch { return error.description }
        return nil
    }
}
