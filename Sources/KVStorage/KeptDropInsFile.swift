import KVSystem
import KVValues

/// One drop-in file's last good content, as the system instance keeps it (``KeptDropInsFile``):
/// its values (a `defaults.d` file) or locks (a `locks.d` file), and the names of its `"for"`.
public struct KeptDropIn: Sendable, Equatable {
    public var values: [Domain: [Key: Value]]
    public var locks: [Domain: Set<Key>]
    /// Whom the file is for (names as written); nil: everyone.
    public var audience: DefaultsDocument.Audience?

    public init(
        values: [Domain: [Key: Value]] = [:], locks: [Domain: Set<Key>] = [:],
        audience: DefaultsDocument.Audience? = nil
    ) {
        self.values = values
        self.locks = locks
        self.audience = audience
    }
}

/// `STATE/kvd.drop-ins`: the system instance's durable copy of the last good content of every
/// drop-in file it applies, by path, so that a file that stops parsing or stops being trusted
/// keeps its last good content across a restart ("a typo never lifts a lock"), not only until
/// one. A file deleted is left out at the next save, so its locks go.
///
/// Format (``FramedLines``): the header `{"format":"kvd-drop-ins","formatVersion":1}`, one line
/// per file, `{"file": PATH, "values": {DOMAIN: {KEY: <typed JSON>}}, "locks": {DOMAIN: [KEY]},
/// "for": {"groups": [NAME], "users": [NAME]}}` (`for` only for a file with one), then
/// `{"end": N}`. Written whole under a temporary name, synced, renamed into place and the folder
/// synced: after a crash at any point a reader finds the old copy or the new one, whole. A copy
/// that fails any check is not used at all (``load()`` says why): the files are read as if for
/// the first time. Thread-safe (no state of its own); every call may block on I/O.
public struct KeptDropInsFile: Sendable {
    public static let fileName = "kvd.drop-ins"
    static let format = "kvd-drop-ins"
    static let formatVersion: Int64 = 1
    /// The largest copy read: the drop-in files together hold at most 32 MiB.
    static let maxFileBytes: Int64 = 1 << 30

    let file: FramedLines.File

    public init(directory: String, fileSystem: any FileSystem = LinuxSystem()) {
        file = FramedLines.File(
            directory: directory, fileSystem: fileSystem, name: Self.fileName, format: Self.format,
            version: Self.formatVersion, limit: Self.maxFileBytes, what: "the drop-in files' last good content")
    }

    public var path: String { file.path }

    /// Replaces the copy with `files` (by path), durably (see the type's comment).
    public func save(_ files: [String: KeptDropIn]) throws(StorageError) {
        try file.save(Self.encode(files))
    }

    /// The copy; nil when there is none. Throws ``StorageError/failure(_:)`` saying why when
    /// the file is there but cannot be used.
    public func load() throws(StorageError) -> [String: KeptDropIn]? {
        try file.load { _, lines throws(FramedLines.DecodeError) in
            var files: [String: KeptDropIn] = [:]
            for line in lines {
                let (path, kept) = try Self.decode(line)
                files[path] = kept
            }
            return files
        }
    }

    static func encode(_ files: [String: KeptDropIn]) -> [UInt8] {
        var out = FramedLines.header(format: format, version: formatVersion)
        for (path, kept) in files.sorted(by: { $0.key < $1.key }) {
            var members: [String: JSON] = [
                "file": .string(path),
                "values": .object(
                    Dictionary(
                        uniqueKeysWithValues: kept.values.map { domain, values in
                            (
                                domain.name,
                                JSON.object(values.reduce(into: [:]) { $0[$1.key.name] = $1.value.typedJSON })
                            )
                        })),
                "locks": .object(
                    Dictionary(
                        uniqueKeysWithValues: kept.locks.map {
                            ($0.key.name, JSON.array($0.value.sorted().map { .string($0.name) }))
                        })),
            ]
            if let audience = kept.audience {
                members["for"] = .object([
                    "groups": .array(audience.groups.map(JSON.string)),
                    "users": .array(audience.users.map(JSON.string)),
                ])
            }
            out += LogFormat.frame(.object(members))
        }
        return out + FramedLines.end(lines: files.count + 1)
    }

    private static func decode(_ line: JSON) throws(FramedLines.DecodeError) -> (String, KeptDropIn) {
        guard case .string(let path)? = line["file"], case .object(let values)? = line["values"],
            case .object(let locks)? = line["locks"]
        else { throw FramedLines.DecodeError(reason: "a line is not a file's content") }
        var kept = KeptDropIn()
        for (name, member) in values {
            guard let domain = try? Domain(validating: name), case .object(let entries) = member else {
                throw FramedLines.DecodeError(reason: "\(path) has an invalid domain")
            }
            for (keyName, typed) in entries {
                guard let key = try? Key(validating: keyName), let value = try? Value(typedJSON: typed) else {
                    throw FramedLines.DecodeError(reason: "\(path) has an invalid key or value")
                }
                kept.values[domain, default: [:]][key] = value
            }
        }
        for (name, member) in locks {
            guard let domain = try? Domain(validating: name), case .array(let keys) = member else {
                throw FramedLines.DecodeError(reason: "\(path) has an invalid lock")
            }
            for case .string(let keyName) in keys {
                guard let key = try? Key(validating: keyName) else {
                    throw FramedLines.DecodeError(reason: "\(path) has an invalid lock")
                }
                kept.locks[domain, default: []].insert(key)
            }
        }
        if case .object(let audience)? = line["for"] {
            let names = { (member: String) -> [String] in
                guard case .array(let items)? = audience[member] else { return [] }
                return items.compactMap { if case .string(let name) = $0 { name } else { nil } }
            }
            kept.audience = DefaultsDocument.Audience(groups: names("groups"), users: names("users"))
        }
        return (path, kept)
    }
}
