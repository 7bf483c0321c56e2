import KVSystem
import KVValues

/// The system layer (the machine's system defaults and locks) as a user's kvd last received it
/// whole from the system instance, at the system instance's revision `revision`.
public struct SavedSystemLayer: Sendable, Equatable {
    /// The system instance's store revision this layer reflects.
    public var revision: Int64
    /// Each domain's system values.
    public var values: [Domain: [Key: Value]]
    /// Each domain's locked keys.
    public var locks: [Domain: Set<Key>]

    public init(revision: Int64, values: [Domain: [Key: Value]], locks: [Domain: Set<Key>]) {
        self.revision = revision
        self.values = values
        self.locks = locks
    }
}

/// `STATE/kvd.system-layer`: a user's kvd's durable copy of the last system layer it received, so
/// that a lock holds from the moment kvd starts, while the system instance is away, and whatever
/// happens to the connection that brings it.
///
/// Format: lines framed like the log's (`CRC SP JSON LF`, CRC-32 of the JSON bytes as 8 hex
/// digits): the header `{"format":"kvd-system-layer","formatVersion":1,"revision":R}`, then any
/// number of `{"domain":D,"values":{K: <typed JSON>, ...}}` and `{"domain":D,"locks":[K, ...]}`
/// lines (a domain may take several, each of about 1 MiB or one entry), then
/// `{"end":N}`, N the count of lines before it. Written whole under a temporary name, synced and
/// renamed into place, then the folder synced: a reader finds the old layer or the new one. A
/// file that fails any check (a line's checksum, the header, a name, a value, the count, bytes
/// after the end) is not used at all: ``load()`` says why.
///
/// Thread-safe (no state of its own); every call may block on I/O.
public struct SystemLayerFile: Sendable {
    public static let fileName = "kvd.system-layer"
    static let format = "kvd-system-layer"
    static let formatVersion: Int64 = 1
    /// The size past which a line of values is ended and another begun (a line holds at least
    /// one entry).
    static let lineBytes = 1 << 20
    /// The largest file read: far above any layer a system instance can hold for a machine.
    static let maxFileBytes: Int64 = 1 << 34

    let file: FramedLines.File

    public init(directory: String, fileSystem: any FileSystem = LinuxSystem()) {
        file = FramedLines.File(
            directory: directory, fileSystem: fileSystem, name: Self.fileName, format: Self.format,
            version: Self.formatVersion, limit: Self.maxFileBytes, what: "the system layer")
    }

    public var path: String { file.path }

    /// Replaces the saved layer with `layer`, durably (see the type's comment).
    public func save(_ layer: SavedSystemLayer) throws(StorageError) {
        try file.save(Self.encode(layer))
    }

    /// The saved layer; nil when there is none. Throws ``StorageError/failure(_:)`` saying why
    /// when the file is there but cannot be used.
    public func load() throws(StorageError) -> SavedSystemLayer? {
        try file.load { header, lines throws(FramedLines.DecodeError) in try Self.decode(header, lines) }
    }

    /// The file's bytes: each value written once, straight into its line.
    static func encode(_ layer: SavedSystemLayer) -> [UInt8] {
        var out: [UInt8] = []
        var lines = 1
        out += FramedLines.header(format: format, version: formatVersion, ["revision": .integer(layer.revision)])
        let writer = JSONWriter()
        for domain in layer.values.keys.sorted() {
            let entries = layer.values[domain]!.sorted { $0.key < $1.key }
            var index = 0
            while index < entries.count {
                let start = out.count
                out += Array("00000000 {\"domain\":".utf8)
                JSONWriter.writeString(domain.name, into: &out)
                out += Array(",\"values\":{".utf8)
                let first = index
                while index < entries.count, index == first || out.count - start < lineBytes {
                    if index > first { out.append(UInt8(ascii: ",")) }
                    JSONWriter.writeString(entries[index].key.name, into: &out)
                    out.append(UInt8(ascii: ":"))
                    writer.write(entries[index].value.typedJSON, into: &out)
                    index += 1
                }
                out += Array("}}".utf8)
                LogFormat.finishLine(in: &out, from: start)
                lines += 1
            }
        }
        for domain in layer.locks.keys.sorted() where !(layer.locks[domain]?.isEmpty ?? true) {
            out += LogFormat.frame(
                .object([
                    "domain": .string(domain.name),
                    "locks": .array(layer.locks[domain]!.sorted().map { .string($0.name) }),
                ]))
            lines += 1
        }
        out += FramedLines.end(lines: lines)
        return out
    }

    /// The layer of a decoded file: its header's revision, and its lines.
    static func decode(_ header: JSON, _ lines: [JSON]) throws(FramedLines.DecodeError) -> SavedSystemLayer {
        guard case .integer(let revision)? = header["revision"] else {
            throw FramedLines.DecodeError(reason: "its header holds no revision")
        }
        var layer = SavedSystemLayer(revision: revision, values: [:], locks: [:])
        for line in lines { try read(line, into: &layer) }
        return layer
    }

    private static func read(_ json: JSON, into layer: inout SavedSystemLayer) throws(FramedLines.DecodeError) {
        guard case .string(let name)? = json["domain"], let domain = try? Domain(validating: name) else {
            throw FramedLines.DecodeError(reason: "a line names no valid domain")
        }
        if case .object(let members)? = json["values"] {
            for (name, typed) in members {
                guard let key = try? Key(validating: name), let value = try? Value(typedJSON: typed) else {
                    throw FramedLines.DecodeError(reason: "domain \(domain) has an invalid key or value")
                }
                layer.values[domain, default: [:]][key] = value
            }
        } else if case .array(let names)? = json["locks"] {
            for item in names {
                guard case .string(let name) = item, let key = try? Key(validating: name) else {
                    throw FramedLines.DecodeError(reason: "domain \(domain) has an invalid lock")
                }
                layer.locks[domain, default: []].insert(key)
            }
        } else {
            throw FramedLines.DecodeError(reason: "a line of domain \(domain) holds neither values nor locks")
        }
    }
}
