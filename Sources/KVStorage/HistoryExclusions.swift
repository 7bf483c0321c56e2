import Glibc
import KVSystem
import KVValues

/// The domains and keys that keep no history (marked with ``Store/setKeepsHistory(_:_:key:)``,
/// for tokens and passwords): their changes are never written to a history file nor served
/// by `History`; the log holds them only until the next fold. Kept in `kvd.nohistory` (see
/// ``StorageFormat``). A value type; thread-safe.
public struct HistoryExclusions: Sendable, Equatable {
    /// Domains whose every key keeps no history.
    public var domains: Set<Domain> = []
    /// Keys that keep no history, per domain.
    public var keys: [Domain: Set<Key>] = [:]

    public init() {}

    public var isEmpty: Bool { domains.isEmpty && keys.isEmpty }

    /// Whether `key` of `domain` keeps no history.
    public func excludes(_ domain: Domain, _ key: Key) -> Bool {
        guard !isEmpty else { return false }
        return domains.contains(domain) || keys[domain]?.contains(key) == true
    }

    /// Whether every key of `domain` keeps no history.
    public func excludes(_ domain: Domain) -> Bool { domains.contains(domain) }

    /// Marks `key` of `domain` (every key, if nil) to keep history (`keep`) or not.
    mutating func set(_ domain: Domain, key: Key?, keep: Bool) {
        switch (key, keep) {
        case (nil, false): domains.insert(domain)
        case (nil, true): domains.remove(domain)
        case (let key?, false): keys[domain, default: []].insert(key)
        case (let key?, true):
            keys[domain]?.remove(key)
            if keys[domain]?.isEmpty == true { keys[domain] = nil }
        }
    }

    /// `changes` without those of keys that keep no history (of `domain`).
    func filter(_ changes: [Change], of domain: Domain) -> [Change] {
        guard !isEmpty else { return changes }
        if excludes(domain) { return [] }
        guard let excluded = keys[domain] else { return changes }
        return changes.filter { !excluded.contains($0.key) }
    }

    static let fileName = "kvd.nohistory"
    static let format = "kvd-nohistory"

    /// One framed line (like the log's): `{"format":"kvd-nohistory","formatVersion":1,
    /// "domains":["d"],"keys":{"d":["k"]}}`, sorted.
    func encoded() -> [UInt8] {
        var byDomain: [String: JSON] = [:]
        for (domain, names) in keys { byDomain[domain.name] = .array(names.sorted().map { .string($0.name) }) }
        return LogFormat.frame(
            .object([
                "format": .string(Self.format), "formatVersion": .integer(1),
                "domains": .array(domains.sorted().map { .string($0.name) }), "keys": .object(byDomain),
            ]))
    }

    /// Reads `bytes` (a whole `kvd.nohistory`); nil if it is not one.
    static func decode(_ bytes: [UInt8]) -> HistoryExclusions? {
        guard let (payload, _) = LogFormat.line(in: bytes, at: 0), let json = try? JSONParser.parse(bytes[payload]),
            json["format"] == .string(format), json["formatVersion"] == .integer(1),
            case .array(let domainNames)? = json["domains"], case .object(let keyMembers)? = json["keys"]
        else { return nil }
        var exclusions = HistoryExclusions()
        for name in domainNames {
            guard case .string(let text) = name, let domain = try? Domain(stored: text) else { return nil }
            exclusions.domains.insert(domain)
        }
        for (name, list) in keyMembers {
            guard let domain = try? Domain(stored: name), case .array(let keyNames) = list else { return nil }
            for keyName in keyNames {
                guard case .string(let text) = keyName, let key = try? Key(validating: text) else { return nil }
                exclusions.keys[domain, default: []].insert(key)
            }
        }
        return exclusions
    }
}

/// Reading and writing ``HistoryExclusions/fileName`` in the state folder. Blocks on I/O.
extension HistoryExclusions {
    /// The exclusions `folder`'s file holds, or nil if it has none. One that cannot be read is
    /// set aside and logged (every key then keeps history until marked again): nil too.
    static func load(from folder: StateFolder) throws(SystemError) -> HistoryExclusions? {
        let name = fileName
        let bytes: [UInt8]?
        do { bytes = try folder.fileSystem.readRegularFile(folder.path(name), limit: 16 << 20) } catch {
            if case .system(let failure) = error { throw failure }
            bytes = []
        }
        guard let bytes else { return nil }
        if let read = decode(bytes) { return read }
        let backup = try folder.moveAside(name)
        folder.log(
            .error,
            "\(folder.path(name)) cannot be read; moved it to \(folder.path(backup)): every key keeps history until marked again (kvctl history --keep-none)"
        )
        return nil
    }

    /// Writes these exclusions to `folder`'s file durably (removes it when empty).
    func save(to folder: StateFolder) throws(SystemError) {
        let name = Self.fileName
        if isEmpty {
            do { try folder.fileSystem.unlink(folder.path(name)) } catch  where error.code == ENOENT { return }
        } else {
            try folder.fileSystem.replaceFile(
                folder.path(name), temporary: folder.path("." + name + ".tmp"), with: encoded())
        }
        try folder.fileSystem.syncDirectory(folder.directory)
    }
}
