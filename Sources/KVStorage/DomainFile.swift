import FoundationEssentials
import KVValues

/// A domain file as read: its domain and content, the version it was written in, and what it
/// costs.
struct LoadedDomain {
    /// The domain the file holds: the one its name gives, or for a `~` file, the one its
    /// `domain` member names.
    var domain: Domain
    var state: DomainState
    /// The format version read (0 for a legacy bare object).
    var version: Int64
    /// Log records at or below this revision are already in the file (0 for version 0).
    var replayedThrough: Int64
    /// Problems that cost single keys, for the log.
    var warnings: [String]
    /// Why the file must be copied aside before anything rewrites it (the rewrite cannot keep
    /// all of its text), or nil.
    var copyReason: String?
}

/// Reads and writes `DOMAIN.json` (see ``StorageFormat``). Pure functions; thread-safe.
enum DomainFile {
    /// The pretty, sorted-key JSON of the current version for `state`, indented down to
    /// ``StorageFormat/maxIndentedLevel``. Unreadable values are written back as the text read.
    static func encode(_ domain: Domain, _ state: DomainState, savedAt: Date = Date()) -> [UInt8] {
        let writer = JSONWriter(pretty: true, maxIndentedLevel: StorageFormat.maxIndentedLevel)
        var entries =
            state.entries.map { (name: $0.key.name, entry: $0.value) }
            + state.foreign.map { (name: $0.key, entry: $0.value) }
        entries.sort { $0.name < $1.name }
        var out: [UInt8] = []
        out.reserveCapacity(state.budgetBytes * 2 + 256)
        out.append(UInt8(ascii: "{"))
        func member(_ name: String) { writeMember(name, writer, into: &out) }
        func object(_ write: (StoredEntry, inout [UInt8]) -> Void) { writeObject(entries, writer, into: &out, write) }
        member("domain")
        JSONWriter.writeString(domain.name, into: &out)
        member("format")
        JSONWriter.writeString(StorageFormat.domainFormat, into: &out)
        member("formatVersion")
        JSONWriter.writeInteger(StorageFormat.domainFormatVersion, into: &out)
        member("revision")
        JSONWriter.writeInteger(state.revision, into: &out)
        member("revisions")
        object { entry, out in JSONWriter.writeInteger(entry.revision, into: &out) }
        member("savedAt")
        JSONWriter.writeString(RFC3339.format(savedAt), into: &out)
        member("values")
        object { entry, out in
            switch entry.content {
            case .value(let value): writer.write(value.typedJSON, into: &out, level: 2)
            case .unreadable(let raw, _): out.append(contentsOf: raw)
            }
        }
        writer.newline(into: &out, level: 0)
        out.append(contentsOf: [UInt8(ascii: "}"), UInt8(ascii: "\n")])
        return out
    }

    /// `"name": ` of a top-level member, after a comma unless it is the first.
    private static func writeMember(_ name: String, _ writer: JSONWriter, into out: inout [UInt8]) {
        if out.count > 1 { out.append(UInt8(ascii: ",")) }
        writer.newline(into: &out, level: 1)
        writer.writeMemberName(name, into: &out)
    }

    /// `{"key": ..., ...}` at level 1, each entry written by `write`.
    private static func writeObject(
        _ entries: [(name: String, entry: StoredEntry)], _ writer: JSONWriter, into out: inout [UInt8],
        _ write: (StoredEntry, inout [UInt8]) -> Void
    ) {
        out.append(UInt8(ascii: "{"))
        for (index, (name, entry)) in entries.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            writer.newline(into: &out, level: 2)
            writer.writeMemberName(name, into: &out)
            write(entry, &out)
        }
        if !entries.isEmpty { writer.newline(into: &out, level: 1) }
        out.append(UInt8(ascii: "}"))
    }
}

/// Why a domain file as a whole could not be read.
struct DomainFileError: Error {
    var reason: String
}
