import Glibc
import KVSystem

/// The lock that lets one client at a time start kvd for a socket: an exclusive `flock` on
/// `SOCKET.autostart.lock` beside the socket (mode 0600, left in place), held from the check that
/// nothing listens until the started kvd accepts or the start fails. A client that finds it held
/// waits, then finds the socket listening and connects instead of starting a second kvd.
///
/// The name differs from kvd's own lock (`kvd.lock` in its state folder), which a starting kvd
/// takes so that no two kvds share a state folder. Threads of one process exclude each other too
/// (each opens the file itself, so each has its own open file description).
struct AutostartLock {
    private let descriptor: FileDescriptor
    private let system: any SystemCalls

    /// The lock file for `socketPath`.
    static func path(for socketPath: String) -> String { socketPath + ".autostart.lock" }

    /// Takes the lock for `socketPath`, trying every 20 ms until `deadline`; `nil` when the file
    /// cannot be opened (a folder this user cannot write, a file another user made) or the lock is
    /// still held at `deadline`. Autostart then goes on without it: kvd itself refuses to take a
    /// socket another kvd listens on, so the worst is a second kvd that exits at once. C:
    /// `open(O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)`, `flock(LOCK_EX | LOCK_NB)`.
    static func acquire(
        for socketPath: String, until deadline: ContinuousClock.Instant, system: any SystemCalls
    ) -> AutostartLock? {
        let descriptor: FileDescriptor
        do {
            descriptor = try system.open(path(for: socketPath), [.write, .create, .noFollow], permissions: 0o600)
        } catch {
            return nil
        }
        while true {
            do {
                try system.lockExclusively(descriptor)
                return AutostartLock(descriptor: descriptor, system: system)
            } catch  where error.code == EWOULDBLOCK && ContinuousClock.now < deadline {
                system.sleep(microseconds: 20_000)
            } catch {
                system.close(descriptor)
                return nil
            }
        }
    }

    /// Lets the next waiting client go (closing the descriptor drops the `flock`). C: `close`.
    func release() { system.close(descriptor) }
}
