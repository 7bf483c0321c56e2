// Blocking Unix-socket helpers shared by the clients and the echo server, through KVSystem's
// seam (`LinuxSystem`: a struct with no state, so a call costs what the C call costs).
import Glibc
import KVSystem

let system = LinuxSystem()

func connectUnix(_ path: String) -> Int32 {
    do {
        return try system.connectUnix(path)
    } catch {
        print("kvbench: cannot connect to \(path): \(error.errno)")
        exit(1)
    }
}

/// Sends all of `bytes`.
func sendAll(_ fd: Int32, _ bytes: [UInt8]) {
    let failure = bytes.withUnsafeBytes { raw -> SystemError? in
        do throws(SystemError) {
            try system.sendAll(fd, raw)
            return nil
        } catch {
            return error
        }
    }
    if let failure {
        print("kvbench: send failed: \(failure.errno)")
        exit(1)
    }
}

func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Runs `body` on a new thread; `join()` waits for it.
func startJoinableThread(_ body: @escaping @Sendable () -> Void) -> StartedThread {
    do {
        return try startThread(body)
    } catch {
        print("kvbench: cannot start a thread: \(error)")
        exit(1)
    }
}
