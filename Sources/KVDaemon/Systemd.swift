import CSystemd
import Glibc
import KVSystem

/// What the daemon asks of systemd, through libsystemd: inherited sockets, readiness and status
/// notifications, the watchdog, and the journal. Each call is harmless when systemd is absent.
public enum Systemd {
    /// Listening sockets passed by socket activation (`LISTEN_FDS`), from fd 3 on. Clears the
    /// `LISTEN_*` variables so children do not inherit them. The corresponding C function is
    /// `sd_listen_fds`.
    public static func listenFileDescriptors() -> [Int32] {
        let count = sd_listen_fds(1)
        guard count > 0 else { return [] }
        return (0..<count).map { SD_LISTEN_FDS_START + $0 }
    }

    /// Sends `state` (such as `READY=1`) to the service manager; a no-op without `NOTIFY_SOCKET`.
    /// The corresponding C function is `sd_notify`.
    public static func notify(_ state: String) {
        _ = sd_notify(0, state)
    }

    /// The watchdog interval systemd expects pings within (`WatchdogSec=`), or `nil`.
    public static func watchdogInterval() -> Duration? {
        var microseconds: UInt64 = 0
        guard sd_watchdog_enabled(0, &microseconds) > 0, microseconds > 0 else { return nil }
        return .microseconds(Int64(microseconds))
    }

    /// Whether standard error is connected to the journal (systemd sets `JOURNAL_STREAM` to the
    /// device and inode of the stream it gave us).
    public static func stderrIsJournal(environment: [String: String]) -> Bool {
        guard let stream = environment["JOURNAL_STREAM"] else { return false }
        let parts = stream.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        guard let status = try? LinuxSystem().status(FileDescriptor(rawValue: 2)) else { return false }
        return status.device == device && status.inode == inode
    }

    /// Sends one structured entry to the journal. The corresponding C function is `sd_journal_sendv`.
    static func journal(priority: Int32, message: String, identifier: String) {
        let fields = ["MESSAGE=\(message)", "PRIORITY=\(priority)", "SYSLOG_IDENTIFIER=\(identifier)"].map {
            Array($0.utf8)
        }
        var buffer = fields.flatMap { $0 }
        buffer.withUnsafeMutableBytes { raw in
            var offset = 0
            var vectors: [iovec] = fields.map { field in
                defer { offset += field.count }
                return iovec(iov_base: raw.baseAddress! + offset, iov_len: field.count)
            }
            _ = sd_journal_sendv(&vectors, Int32(vectors.count))
        }
    }
}
