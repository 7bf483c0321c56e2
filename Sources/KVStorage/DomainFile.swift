import FoundationEssentials
import KVValues

/// A domain file as read: its content, the version it was written in, and what it costs.
struct LoadedDomain {
    var state: DomainState
    /// The format version read (0 for a legacy bare object).
    var version: Int64
    /// Log records at or below this revision are already in the file (0 for version 0).
    var replayedThrough: Int64
    /// Problems that cost single keys, for the log.
    var warnings: [String]
}

/// Reads and writes `DOMAIN.json` (see ``StorageFormat``). Pure functions; thread-safe.
enum DomainFile {
    /// The pretty, sorted-key JSON of the current version for `state`.
    static func encode(_ domain: Domain, _ state: DomainState, savedAt: Date = Date()) -> [UInt8] {
        var values: [String: JSON] = [:]
        var revisions: [String: JSON] = [:]
        for (key, entry) in state.entries {
            switch entry.content {
            case .value(let value): values[key.name] = value.typedJSON
            case .unreadable(let raw, _): values[key.name] = raw
            }
            revisions[key.name] = .integer(entry.revision)
        }
        let envelope: JSON = .object([
            "format": .string(StorageFormat.domainFormat),
            "formatVersion": .integer(StorageFormat.domainFormatVersion),
            "domain": .string(domain.name),
            "revision": .integer(state.revision),
            "savedAt": .string(RFC3339.format(savedAt)),
            "values": .object(values),
            "revisions": .object(revisions),
        ])
        return JSONWriter(pretty: true).bytes(envelope) + [UInt8(ascii: "\n")]
    }

    /// Reads a domain file of any shipped version; throws a reason if the file as a whole is
    /// unreadable (bad JSON, wrong envelope, a future version).
    static func decode(_ bytes: [UInt8], domain: Domain) throws(DomainFileError) -> LoadedDomain {
        let json: JSON
        do { json = try JSONParser.parse(bytes, limits: JSONLimits(maxDepth: 520, maxBytes: Int.max)) } catch {
            throw DomainFileError(reason: error.description)
        }
        guard case .object(let members) = json else {
            throw DomainFileError(reason: "the file holds a JSON \(json.typeName), not an object")
        }
        guard members["format"] != nil || members["formatVersion"] != nil else {
            return readVersion0(members)
        }
        guard members["format"] == .string(StorageFormat.domainFormat) else {
            throw DomainFileError(reason: "\"format\" is not \"\(StorageFormat.domainFormat)\"")
        }
        switch members["formatVersion"] {
        case .integer(1): return try readVersion1(members, domain: domain)
        case .integer(let version) where version > StorageFormat.domainFormatVersion:
            throw DomainFileError(reason: "formatVersion \(version) was written by a newer kvd (this one reads up to \(StorageFormat.domainFormatVersion))")
        default:
            throw DomainFileError(reason: "\"formatVersion\" is missing or not a known version")
        }
    }

    /// Version 0: a bare object of typed values, without revisions.
    private static func readVersion0(_ members: [String: JSON]) -> LoadedDomain {
        var loaded = LoadedDomain(state: DomainState(revision: 1), version: 0, replayedThrough: 0, warnings: [])
        readValues(members, revisions: [:], into: &loaded)
        return loaded
    }

    /// Version 1: the envelope with `revision`, `values` and `revisions`.
    private static func readVersion1(_ members: [String: JSON], domain: Domain) throws(DomainFileError) -> LoadedDomain {
        guard case .integer(let revision)? = members["revision"], revision >= 0 else {
            throw DomainFileError(reason: "\"revision\" is missing or not a non-negative integer")
        }
        guard case .object(let values)? = members["values"] else {
            throw DomainFileError(reason: "\"values\" is missing or not an object")
        }
        var revisions: [String: JSON] = [:]
        if case .object(let found)? = members["revisions"] { revisions = found }
        var loaded = LoadedDomain(state: DomainState(revision: revision), version: 1, replayedThrough: revision, warnings: [])
        if members["domain"] != .string(domain.name) {
            loaded.warnings.append("the file names another domain in \"domain\"; it is read as \(domain)")
        }
        readValues(values, revisions: revisions, into: &loaded)
        return loaded
    }

    /// Decodes each value on its own: one bad value costs only its key (kept verbatim).
    private static func readValues(_ values: [String: JSON], revisions: [String: JSON], into loaded: inout LoadedDomain) {
        for (name, json) in values {
            guard let key = try? Key(validating: name) else {
                loaded.warnings.append("skipped key \"\(name)\": not a valid key name")
                continue
            }
            var revision = loaded.state.revision
            if case .integer(let found)? = revisions[name], found > 0, found <= revision { revision = found }
            do {
                let value = try Value(typedJSON: json)
                loaded.state.entries[key] = StoredEntry(content: .value(value), revision: revision)
            } catch {
                loaded.warnings.append("key \"\(name)\" is unreadable (\(error)); it is kept as it is")
                loaded.state.entries[key] = StoredEntry(content: .unreadable(raw: json, reason: error.description), revision: revision)
            }
        }
    }
}

/// Why a domain file as a whole could not be read.
struct DomainFileError: Error {
    var reason: String
}
