import Glibc
import KVSystem

/// Where an autostarted kvd's standard error goes: `STATE/kvd-autostart.log` in the state folder
/// that kvd will use (mode 0600, the folder made 0700 if missing), appended to, and emptied at a
/// start once it holds more than ``limit`` bytes. When the kvd fails to come up, the client's
/// error names the file and quotes the last line this start added (``explanation()``).
///
/// Opening it never stops a start: a log that cannot be opened leaves kvd's standard error on
/// `/dev/null`.
struct AutostartLog {
    static let fileName = "kvd-autostart.log"
    /// The size over which the next start empties the log: 1 MiB.
    static let limit: Int64 = 1 << 20
    /// The most of the last line an error message quotes.
    static let quotedCharacters = 300

    let path: String
    /// Open for appending (close-on-exec), to hand to the child as its standard error.
    let descriptor: FileDescriptor
    /// The size of the file before this start's lines.
    private let start: Int64
    private let system: any SystemCalls

    /// Opens the log in `stateDirectory` (creating the folder and the file), empties it if over
    /// ``limit`` and writes a line saying what is being started; `nil` when it cannot.
    /// C: `mkdir`, `open(O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW, 0600)`, `fstat`, `ftruncate`, `write`.
    static func open(
        stateDirectory: String, starting command: String, system: any SystemCalls
    ) -> AutostartLog? {
        let path = stateDirectory + "/" + fileName
        do {
            try system.makeDirectories(stateDirectory, permissions: 0o700)
            let descriptor = try system.open(path, [.write, .create, .append, .noFollow], permissions: 0o600)
            do {
                if try system.size(descriptor) > limit { try system.truncate(descriptor, to: 0) }
                try system.write(descriptor, Array("kvd-autostart: pid \(system.processID) runs \(command)\n".utf8))
                let start = try system.size(descriptor)
                return AutostartLog(path: path, descriptor: descriptor, start: start, system: system)
            } catch {
                system.close(descriptor)
                return nil
            }
        } catch {
            return nil
        }
    }

    /// Closes this process's descriptor (the child keeps its own). C: `close`.
    func close() { system.close(descriptor) }

    /// The last non-empty line the started kvd wrote to the log (at most ``quotedCharacters``
    /// of it), or `nil` when it wrote none.
    func lastLine() -> String? {
        guard let bytes = try? system.readRegularFile(path, limit: 4 * Self.limit), bytes.count > start else {
            return nil
        }
        let added = String(decoding: bytes[Int(start)...], as: UTF8.self)
        guard let line = added.split(whereSeparator: \.isNewline).last(where: { !$0.allSatisfy(\.isWhitespace) })
        else { return nil }
        return String(line.prefix(Self.quotedCharacters))
    }

    /// For an error message: "its log PATH ends: LINE", or "it wrote nothing to PATH".
    func explanation() -> String {
        guard let line = lastLine() else { return "it wrote nothing to its log \(path)" }
        return "its log \(path) ends: \(line)"
    }
}
