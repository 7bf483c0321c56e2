import Glibc

/// What the daemon and the client do about each error of a system call, decided here once for
/// every ``SystemCalls`` conformer: `EINTR` is retried (by ``retryingInterrupts(_:)``, here and
/// in the file calls, nowhere else); `EAGAIN` on a
/// non-blocking descriptor means "nothing now"; other failures become a ``SystemError`` naming
/// the call. Thread-safe as the conformer is.
extension SystemCalls {
    /// Runs `body` until it does not fail with `EINTR`; another failure becomes a ``SystemError``
    /// naming `call`.
    @inlinable
    public func retrying<T>(_ call: String, _ body: () throws(Errno) -> T) throws(SystemError) -> T {
        do {
            return try retryingInterrupts(body)
        } catch {
            throw SystemError(call, error)
        }
    }

    // MARK: non-blocking descriptors (the event loop)

    /// Reads what `fd` holds, up to `buffer.count`: the count, 0 at end of stream, `nil` when
    /// nothing is there now (`EAGAIN`). C: `read`.
    @inlinable
    public func readAvailable(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        do {  // the loop's hot path: the closure is inlined
            return try retryingInterrupts { () throws(Errno) in try read(fd, into: buffer) }
        } catch  where error == .wouldBlock {
            return nil
        } catch {
            throw SystemError("read", error)
        }
    }

    /// Sends what the socket takes of `bytes`; returns the count (0 when it is full, `EAGAIN`).
    /// C: `send(..., MSG_NOSIGNAL)`.
    @inlinable
    public func sendAvailable(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int {
        do {  // the loop's hot path: the closure is inlined
            return try retryingInterrupts { () throws(Errno) in try send(fd, bytes) }
        } catch  where error == .wouldBlock {
            return 0
        } catch {
            throw SystemError("send", error)
        }
    }

    /// Accepts one waiting connection, non-blocking and close-on-exec; `nil` when none waits.
    /// A connection that went away before it was accepted (`ECONNABORTED`) is skipped.
    /// C: `accept4`.
    @inlinable
    public func acceptWaiting(_ listener: Int32) throws(SystemError) -> Int32? {
        while true {
            do {
                return try retrying("accept4") { () throws(Errno) in try accept(listener) }
            } catch  where error.errno == .connectionAborted {
                continue
            } catch  where error.errno == .wouldBlock {
                return nil
            }
        }
    }

    /// Makes `fd` non-blocking (or, with `false`, blocking again). C: `fcntl(F_GETFL)`,
    /// `fcntl(F_SETFL)`.
    @inlinable
    public func setNonBlocking(_ fd: Int32, _ nonBlocking: Bool = true) throws(SystemError) {
        let flags = try retrying("fcntl") { () throws(Errno) in try statusFlags(fd) }
        let changed = nonBlocking ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
        try retrying("fcntl") { () throws(Errno) in try setStatusFlags(fd, changed) }
    }

    // MARK: blocking descriptors (the client, kvd's log)

    /// Writes all of `bytes` to a blocking descriptor, as few calls as it takes. C: `write`.
    @inlinable
    public func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        try all(bytes, "write") { (rest) throws(Errno) in try write(fd, rest) }
    }

    /// Sends all of `bytes` on a blocking socket. C: `send(..., MSG_NOSIGNAL)`.
    @inlinable
    public func sendAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        try all(bytes, "send") { (rest) throws(Errno) in try send(fd, rest) }
    }

    /// Calls `transfer` with what is left of `bytes` until it has taken them all, retrying
    /// `EINTR` (``retrying(_:_:)``).
    @inlinable
    func all(
        _ bytes: UnsafeRawBufferPointer, _ operation: String, _ transfer: (UnsafeRawBufferPointer) throws(Errno) -> Int
    ) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[offset...])
            offset += try retrying(operation) { () throws(Errno) in try transfer(rest) }
        }
    }

    /// Receives up to `buffer.count` bytes from a blocking socket; 0 when the peer closed.
    /// C: `read`.
    @inlinable
    public func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        try retrying("read") { () throws(Errno) in try read(fd, into: buffer) }
    }

    /// Reads a blocking descriptor to its end, in pieces of up to 64 KiB; stops early once it
    /// holds more than `limit` bytes (the caller sees more than `limit` and refuses). C: `read`.
    public func readToEnd(_ fd: Int32, limit: Int = .max) throws(SystemError) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: min(65_536, limit == .max ? 65_536 : limit + 1))
        while bytes.count <= limit {
            let count = try chunk.withUnsafeMutableBytes { raw in
                Result { () throws(SystemError) in try receive(fd, into: raw) }
            }.get()
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        return bytes
    }

    /// Waits for child `process` to exit and returns its wait status. C: `waitpid`.
    public func waitForExit(_ process: pid_t) throws(SystemError) -> Int32 {
        while true {
            if let status = try retrying("waitpid", { () throws(Errno) in try waitForExit(process, blocking: true) }) {
                return status
            }
        }
    }

    // MARK: Unix sockets

    /// The address of `path`; `ENAMETOOLONG` when it is empty, holds a NUL or does not fit.
    public func unixAddress(_ path: String) throws(SystemError) -> UnixSocketAddress {
        guard !path.isEmpty, !path.utf8.contains(0), let address = UnixSocketAddress(path) else {
            throw SystemError("socket path (1 to \(UnixSocketAddress.maxPathBytes) bytes)", .nameTooLong)
        }
        return address
    }

    /// A blocking Unix stream socket connected to `path`, close-on-exec. C: `socket`, `connect`.
    public func connectUnix(_ path: String) throws(SystemError) -> Int32 {
        let address = try unixAddress(path)
        let fd = try retrying("socket") { () throws(Errno) in try socket(nonBlocking: false) }
        do {
            // A connect interrupted by a signal goes on in the background: not retried.
            try connect(fd, to: address)
            return fd
        } catch {
            close(fd)
            throw SystemError("connect", error)
        }
    }

    /// A Unix stream socket bound at `path` and listening, close-on-exec and non-blocking (with
    /// `nonBlocking: false`, blocking: ``accept(_:)`` then waits for a connection). C: `socket`,
    /// `bind`, `listen`.
    public func listenUnix(_ path: String, backlog: Int32 = 512, nonBlocking: Bool = true) throws(SystemError)
        -> Int32
    {
        let address = try unixAddress(path)
        let fd = try retrying("socket") { () throws(Errno) in try socket(nonBlocking: nonBlocking) }
        do {
            try retrying("bind") { () throws(Errno) in try bind(fd, to: address) }
            try retrying("listen") { () throws(Errno) in try listen(fd, backlog: backlog) }
            return fd
        } catch {
            close(fd)
            throw error
        }
    }

    // MARK: paths

    /// Creates `path` and its missing parents, each with `permissions`. C: `mkdir`.
    public func makeDirectories(_ path: String, permissions: UInt32) throws(SystemError) {
        var partial = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            partial += "/" + component
            do {
                try makeDirectory(partial, permissions: permissions)
            } catch  where error.errno == .fileExists {
                continue
            }
        }
    }
}
