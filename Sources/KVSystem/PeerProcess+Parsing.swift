/// The parts of ``PeerProcess`` read from `/proc` text: pure functions of that text.
extension PeerProcess {
    /// The unified hierarchy's path of a `/proc/PID/cgroup` text (its `0::PATH` line). Byte by
    /// byte, with no `String` or array made: kvd reads it for every connection it accepts.
    static func cgroupPath(_ text: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        var start = text.startIndex
        while start < text.endIndex {
            let end = text[start...].firstIndex(of: UInt8(ascii: "\n")) ?? text.endIndex
            if end - start >= 3, text[start] == UInt8(ascii: "0"), text[start + 1] == UInt8(ascii: ":"),
                text[start + 2] == UInt8(ascii: ":")
            {
                return text[(start + 3)..<end]
            }
            start = end + 1
        }
        return nil
    }

    /// The last `.service` or `.scope` of the cgroup path of a `/proc/PID/cgroup` text: the unit
    /// the process runs in.
    static func unit(inCgroup text: [UInt8]) -> String? {
        cgroupPath(text[...]).flatMap(unit(inPath:))
    }

    /// The last `.service` or `.scope` of a cgroup path.
    static func unit(inPath path: ArraySlice<UInt8>) -> String? {
        func ends(_ part: ArraySlice<UInt8>, _ suffix: StaticString) -> Bool {
            let count = suffix.utf8CodeUnitCount
            guard part.count >= count else { return false }
            return suffix.withUTF8Buffer { part.suffix(count).elementsEqual($0) }
        }
        var end = path.endIndex
        while true {
            let start = path[..<end].lastIndex(of: UInt8(ascii: "/")).map { $0 + 1 } ?? path.startIndex
            let part = path[start..<end]
            if ends(part, ".service") || ends(part, ".scope") { return String(decoding: part, as: UTF8.self) }
            guard start > path.startIndex else { return nil }
            end = start - 1
        }
    }

    /// ``unit(inCgroup:)-([UInt8])`` of a text.
    static func unit(inCgroup text: String) -> String? { unit(inCgroup: Array(text.utf8)) }

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

    /// The file system type of the mount of `device` (`major << 32 | minor`) in a
    /// `/proc/PID/mountinfo` text; nil when no mount is of that device.
    static func fileSystemType(ofDevice device: UInt64, inMountinfo text: [UInt8]) -> String? {
        let wanted = Array("\(device >> 32):\(device & 0xFFFF_FFFF)".utf8)
        return Mountinfo.mounts(text).first { $0.device.elementsEqual(wanted) }.map {
            String(decoding: $0.type, as: UTF8.self)
        }
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
