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
        var entries: [FileEntry] = []
        entries.reserveCapacity(state.entries.count + state.foreign.count)
        state.entries.forEachStored { name, revision, content, unreadable in
            entries.append(
                FileEntry(name: name, revision: revision, content: unreadable ? .text(content) : .json(content)))
        }
        for (name, entry) in state.foreign {
            switch entry.content {
            case .value(let value):
                entries.append(FileEntry(name: name, revision: entry.revision, content: .value(value)))
            case .unreadable(let raw, _):
                entries.append(FileEntry(name: name, revision: entry.revision, content: .text(raw[...])))
            }
        }
        entries.sort { $0.name < $1.name }
        var out: [UInt8] = []
        out.reserveCapacity(state.budgetBytes * 2 + 256)
        out.append(UInt8(ascii: "{"))
        func member(_ name: String) { writeMember(name, writer, into: &out) }
        func object(_ write: (FileEntry, inout [UInt8]) -> Void) { writeObject(entries, writer, into: &out, write) }
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
        object { entry, out in entry.content.write(writer, into: &out) }
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
        _ entries: [FileEntry], _ writer: JSONWriter, into out: inout [UInt8],
        _ write: (FileEntry, inout [UInt8]) -> Void
    ) {
        out.append(UInt8(ascii: "{"))
        for (index, entry) in entries.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            writer.newline(into: &out, level: 2)
            writer.writeMemberName(entry.name, into: &out)
            write(entry, &out)
        }
        if !entries.isEmpty { writer.newline(into: &out, level: 1) }
        out.append(UInt8(ascii: "}"))
    }
}

/// One entry as a domain file writes it.
private struct FileEntry {
    enum Content {
        /// A value's compact typed JSON (``EntryTable``): a scalar's is its text in the file too.
        case json(ArraySlice<UInt8>)
        case value(Value)
        /// An unreadable value's text, written back as it was read.
        case text(ArraySlice<UInt8>)

        /// Writes the value at level 2 of the file.
        func write(_ writer: JSONWriter, into out: inout [UInt8]) {
            switch self {
            case .text(let raw): out.append(contentsOf: raw)
            case .value(let value): writer.write(value.typedJSON, into: &out, level: 2)
            case .json(let json):
                guard let first = json.first, first == UInt8(ascii: "{") || first == UInt8(ascii: "[") else {
                    out.append(contentsOf: json)  // no indentation to add
                    return
                }
                switch EntryTable.decode(json) {
                case .value(let value): writer.write(value.typedJSON, into: &out, level: 2)
                case .unreadable: out.append(contentsOf: json)
                }
            }
        }
    }

    let name: String
    let revision: Int64
    let content: Content
}

/// Why a domain file as a whole could not be read.
struct DomainFileError: Error {
    var reason: String
}
