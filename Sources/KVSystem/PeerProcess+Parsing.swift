/// The parts of ``PeerProcess`` read from `/proc` text: pure functions of that text.
extension PeerProcess {
    /// The unified hierarchy's path of a `/proc/PID/cgroup` text (its `0::PATH` line).
    /// Read as bytes, not Characters: kvd reads it for every connection it accepts.
    static func cgroupPath(_ text: String) -> Substring.UTF8View? {
        for line in Substring(text).utf8.split(separator: UInt8(ascii: "\n"))
        where line.starts(with: "0::".utf8) {
            return line.dropFirst(3)
        }
        return nil
    }

    /// The last `.service` or `.scope` of the cgroup path: the unit the process runs in.
    static func unit(inCgroup text: String) -> String? {
        guard let path = cgroupPath(text) else { return nil }
        func ends(_ part: Substring.UTF8View, _ suffix: String) -> Bool {
            part.count >= suffix.utf8.count && part.suffix(suffix.utf8.count).elementsEqual(suffix.utf8)
        }
        let unit = path.split(separator: UInt8(ascii: "/")).last { ends($0, ".service") || ends($0, ".scope") }
        return unit.map { String(decoding: $0, as: UTF8.self) }
    }

    /// The application a cgroup names: a snap (`snap.NAME.APP.service`, `snap.NAME.HOOK.scope`,
    /// `snap.NAME.APP-UUID.scope`) or a launcher's XDG app unit, per systemd's convention
    /// `app[-LAUNCHER]-APPID[@RANDOM].service` and `app[-LAUNCHER]-APPID-RANDOM.scope`, the app id
    /// holding a dot (reverse DNS) where a launcher's name does not; units' `\x2d` escapes undone.
    static func app(inCgroup text: String) -> AppIdentity? {
        unit(inCgroup: text).flatMap(app(inUnit:))
    }

    /// ``app(inCgroup:)`` of the unit already found (``unit(inCgroup:)``).
    static func app(inUnit unit: String) -> AppIdentity? {
        if unit.hasPrefix("snap.") {
            let parts = unit.split(separator: ".")
            guard parts.count >= 3, !parts[1].isEmpty else { return nil }
            return AppIdentity(id: bounded(String(parts[1])), source: .snap)
        }
        guard unit.hasPrefix("app-") else { return nil }
        let isScope = unit.hasSuffix(".scope")
        var name = Substring(unit.dropFirst(4).dropLast(isScope ? 6 : 8))
        if let at = name.firstIndex(of: "@") { name = name[..<at] }
        var parts = name.split(separator: "-", omittingEmptySubsequences: false)
        if isScope, parts.count >= 2 { parts.removeLast() }  // the random part
        if parts.count >= 2, !parts[0].contains(".") { parts.removeFirst() }  // the launcher
        let id = parts.joined(separator: "-").replacingEscapes
        guard !id.isEmpty else { return nil }
        return AppIdentity(id: bounded(id), source: .appUnit)
    }

    /// The uids of a `/proc/PID/status` text (its `Uid:` line: real, effective, saved, file
    /// system); none when it has no such line.
    static func uids(inStatus bytes: [UInt8]) -> [UInt32] {
        for line in bytes.split(separator: UInt8(ascii: "\n")) where line.starts(with: "Uid:".utf8) {
            return line.dropFirst(4).split { $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: " ") }.compactMap {
                UInt32(String(decoding: $0, as: UTF8.self))
            }
        }
        return []
    }

    /// The `[Application] name=` of a `/.flatpak-info` keyfile (nil when absent or it names none).
    static func flatpakApp(_ bytes: [UInt8]?) -> AppIdentity? {
        guard let bytes else { return nil }
        var group = ""
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let text = line.trimmingCharacters(in: " \t\r")
            if text.hasPrefix("[") && text.hasSuffix("]") {
                group = String(text.dropFirst().dropLast())
            } else if group == "Application", let equals = text.firstIndex(of: "=") {
                let key = text[..<equals].trimmingCharacters(in: " \t")
                guard key == "name" else { continue }
                let value = text[text.index(after: equals)...].trimmingCharacters(in: " \t")
                return value.isEmpty ? nil : AppIdentity(id: bounded(value), source: .flatpak)
            }
        }
        return nil
    }
}

extension StringProtocol {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var text = Substring(self)
        while let first = text.first, set.contains(first) { text.removeFirst() }
        while let last = text.last, set.contains(last) { text.removeLast() }
        return String(text)
    }
}

extension String {
    /// systemd's unit name escapes (`\x2d` for `-`) undone.
    fileprivate var replacingEscapes: String {
        var out: [UInt8] = []
        var bytes = Array(utf8)[...]
        while let byte = bytes.first {
            if byte == UInt8(ascii: "\\"), bytes.count >= 4, bytes[bytes.startIndex + 1] == UInt8(ascii: "x"),
                let value = UInt8(String(decoding: bytes.dropFirst(2).prefix(2), as: UTF8.self), radix: 16)
            {
                out.append(value)
                bytes = bytes.dropFirst(4)
            } else {
                out.append(byte)
                bytes = bytes.dropFirst()
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
