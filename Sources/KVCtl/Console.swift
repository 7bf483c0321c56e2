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

    /// Replaces the file at `path` with `bytes` atomically: a temporary file beside it, written,
    /// synced and renamed over it.
    static func writeAtomically(_ path: String, _ bytes: [UInt8]) throws(Failure) {
        let temporary = path + ".kvctl-\(getpid()).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw Failure("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        var failure = writeAll(descriptor, bytes)
        if failure == nil, fsync(descriptor) != 0 { failure = errno }
        close(descriptor)
        if failure == nil, rename(temporary, path) != 0 { failure = errno }
        if let failure {
            unlink(temporary)
            throw Failure("cannot write \(path): \(String(cString: strerror(failure)))")
        }
    }
}
