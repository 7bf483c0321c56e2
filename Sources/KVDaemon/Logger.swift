import Glibc
import KVStorage
import KVSystem

/// The daemon's log: the journal (with priorities) when systemd runs kvd, standard error
/// otherwise (through ``system``). Thread-safe; each line is written with one system call.
public struct Logger: Sendable {
    public let toJournal: Bool
    public let verbose: Bool
    private let system: any SystemCalls

    public init(toJournal: Bool, verbose: Bool = false, system: any SystemCalls = LinuxSystem()) {
        self.toJournal = toJournal
        self.verbose = verbose
        self.system = system
    }

    public func log(_ level: LogLevel, _ message: String) {
        if level == .debug && !verbose { return }
        if toJournal {
            Systemd.journal(priority: level.syslogPriority, message: message, identifier: "kvd")
        } else {
            let line = Array("kvd: \(level.label)\(message)\n".utf8)
            line.withUnsafeBytes { _ = try? system.writeAll(STDERR_FILENO, $0) }
        }
    }

    public func info(_ message: String) { log(.info, message) }
    public func notice(_ message: String) { log(.notice, message) }
    public func warning(_ message: String) { log(.warning, message) }
    public func error(_ message: String) { log(.error, message) }
}

extension LogLevel {
    var syslogPriority: Int32 {
        switch self {
        case .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        }
    }

    var label: String {
        switch self {
        case .warning: "warning: "
        case .error: "error: "
        default: ""
        }
    }
}
