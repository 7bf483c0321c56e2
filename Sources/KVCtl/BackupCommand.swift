import FoundationEssentials
import KVConnection
import KVValues

/// A backup file: every domain of an instance at one revision, as typed JSON.
///
/// `{"format": "kvd-backup", "version": 1, "revision": N, "created": RFC 3339,
///   "domains": {DOMAIN: {KEY: typed value, ...}, ...}}` — each domain's values as the
/// contract encodes a dictionary (wrapped in `{"$dict": ...}` when a key starts with `$`).
/// A reader refuses a newer version.
struct BackupFile: Equatable {
    static let format = "kvd-backup"
    /// The version this kvctl writes and reads.
    static let version: Int64 = 1

    var revision: Int64
    var created: Date
    var domains: [Domain: [Key: Value]]

    init(revision: Int64, created: Date, domains: [Domain: [Key: Value]]) {
        self.revision = revision
        self.created = created
        self.domains = domains
    }

    /// The file's bytes: one domain a line-indented member, values compact. The same bytes as
    /// ``Writer`` writes piece by piece.
    func encoded() -> [UInt8] {
        var writer = Writer(created: created)
        var bytes = writer.start()
        for domain in domains.keys.sorted() { bytes += writer.domain(domain, domains[domain]!) }
        return bytes + writer.end(revision: revision)
    }

    /// Writes a backup file piece by piece, as the domains arrive (sorted by name: the order
    /// kvd sends them): ``start()``, ``domain(_:_:)`` for each, then ``end(revision:)``.
    struct Writer {
        let created: Date
        private var domains = 0
        private let json = JSONWriter(pretty: true, sortKeys: true, maxIndentedLevel: 2)

        init(created: Date) {
            self.created = created
        }

        /// The file's members before its domains (sorted, as a pretty writer puts them).
        func start() -> [UInt8] {
            var out: [UInt8] = [UInt8(ascii: "{")]
            json.newline(into: &out, level: 1)
            json.writeMemberName("created", into: &out)
            json.write(.string(RFC3339.format(created)), into: &out, level: 1)
            out.append(UInt8(ascii: ","))
            json.newline(into: &out, level: 1)
            json.writeMemberName("domains", into: &out)
            out.append(UInt8(ascii: "{"))
            return out
        }

        /// One domain's member of `"domains"`.
        mutating func domain(_ domain: Domain, _ values: [Key: Value]) -> [UInt8] {
            var out: [UInt8] = domains > 0 ? [UInt8(ascii: ",")] : []
            domains += 1
            json.newline(into: &out, level: 2)
            json.writeMemberName(domain.name, into: &out)
            let value = Value.dictionary(Dictionary(uniqueKeysWithValues: values.map { ($0.key.name, $0.value) }))
                .typedJSON
            json.write(value, into: &out, level: 2)
            return out
        }

        /// The rest of the file, after the last domain.
        func end(revision: Int64) -> [UInt8] {
            var out: [UInt8] = []
            if domains > 0 { json.newline(into: &out, level: 1) }
            out.append(UInt8(ascii: "}"))
            for (name, value) in [
                ("format", JSON.string(BackupFile.format)), ("revision", .integer(revision)),
                ("version", .integer(BackupFile.version)),
            ] {
                out.append(UInt8(ascii: ","))
                json.newline(into: &out, level: 1)
                json.writeMemberName(name, into: &out)
                json.write(value, into: &out, level: 1)
            }
            json.newline(into: &out, level: 0)
            return out + Array("}\n".utf8)
        }
    }

    /// Reads a backup file (`name` for messages). Throws what is wrong with it, naming the
    /// first problem: not JSON, not a kvd backup, a newer version, a bad domain, key or value.
    init(_ bytes: [UInt8], name: String) throws(Failure) {
        let json: JSON
        do {
            // A value sits 4 levels down: file, "domains", the domain, its "$dict" wrapper.
            json = try JSONParser.parse(bytes, limits: JSONLimits(framingDepth: 4, maxBytes: Int.max))
        } catch {
            throw Failure("\(name) is not a kvd backup: it is not JSON (\(error)); nothing was restored")
        }
        guard json["format"] == .string(Self.format) else {
            throw Failure(
                "\(name) is not a kvd backup (it has no \"format\": \"\(Self.format)\"; write one with: kvctl backup FILE); nothing was restored"
            )
        }
        guard case .integer(let version)? = json["version"], version >= 1 else {
            throw Failure("\(name): \"version\" must be a whole number from 1; nothing was restored")
        }
        guard version <= Self.version else {
            throw Failure(
                "\(name) is a kvd backup of version \(version), written by a newer kvctl; this one reads version \(Self.version): restore it with that kvctl; nothing was restored"
            )
        }
        guard case .integer(let revision)? = json["revision"], case .string(let text)? = json["created"],
            let created = RFC3339.parse(text),
            case .object(let domains)? = json["domains"]
        else {
            throw Failure(
                "\(name) is damaged: it needs an integer \"revision\", an RFC 3339 \"created\" and a \"domains\" object; nothing was restored"
            )
        }
        self.revision = revision
        self.created = created
        self.domains = [:]
        for (domainName, members) in domains {
            let domain: Domain
            do { domain = try Domain(validating: domainName) } catch {
                throw Failure("\(name) is damaged: \(error); nothing was restored")
            }
            self.domains[domain] = try Self.values(members, of: domainName, in: name)
        }
    }

    /// One domain's values, each key and value checked as kvd would.
    private static func values(_ json: JSON, of domain: String, in name: String) throws(Failure) -> [Key: Value] {
        let failure = { (reason: String) in
            Failure("\(name) is damaged: domain \(domain): \(reason); nothing was restored")
        }
        guard case .dictionary(let members)? = try? Value(typedJSON: json) else {
            throw failure("its values are not a typed JSON object")
        }
        var values: [Key: Value] = [:]
        for (keyName, value) in members {
            do {
                try value.validate()
                values[try Key(validating: keyName)] = value
            } catch {
                throw failure("\"\(keyName)\": \(error)")
            }
        }
        return values
    }
}

extension Invocation {
    /// `backup FILE|-` and `restore-backup FILE|- [--yes]` (`--yes` anywhere after the command).
    static func parseBackupCommand(_ name: String, _ reader: inout ArgumentReader) throws(UsageError) -> Command {
        var words = reader.remaining()
        let yes = name == "restore-backup" && words.contains("--yes")
        words.removeAll { $0 == "--yes" && name == "restore-backup" }
        if let option = words.first(where: { $0.hasPrefix("--") }) {
            throw UsageError("unknown option \(option) for \(name)")
        }
        var positional = ArgumentReader(words)
        let file = try positional.word("FILE")
        try positional.end()
        return name == "backup" ? .backup(file) : .restoreBackup(file, yes: yes)
    }
}

extension Runner {
    /// `backup FILE|-`: every domain at one revision into FILE (atomically) or stdout, written
    /// as the domains arrive (one held at a time); says on stderr what it wrote. Keys kvd
    /// cannot read are named, and make it fail, after the file is written without them.
    func backup(to file: String, on connection: Connection) throws {
        var writer = BackupFile.Writer(created: Date())
        var (domains, keys) = (0, 0)
        var unreadable: [(Domain, [Key: String])] = []
        var revision: Int64 = 0
        func write(_ output: ([UInt8]) throws(Failure) -> Void) throws {
            var failure: Failure?
            try output(writer.start())
            let last = try connection.backup { domain, values, left in
                do throws(Failure) { try output(writer.domain(domain, values)) } catch {
                    failure = error
                    return false
                }
                (domains, keys) = (domains + 1, keys + values.count)
                if !left.isEmpty { unreadable.append((domain, left)) }
                return true
            }
            if let failure { throw failure }
            revision = last ?? 0
            try output(writer.end(revision: revision))
        }
        if file == "-" {
            try write { bytes in console.out(String(decoding: bytes, as: UTF8.self)) }
        } else {
            try Files.writeAtomically(file) { output in try write(output) }
        }
        console.err(
            "kvctl: backed up \(domains) domains (\(keys) keys) at revision \(revision) to \(file == "-" ? "stdout" : file)\n"
        )
        for (domain, left) in unreadable {
            try Self.refuseLeftOut(
                DomainListing(values: [:], unreadable: left, revision: 0), of: domain, from: "the backup")
        }
    }

    /// `restore-backup FILE|- [--yes]`: without `--yes`, says what it would do and fails;
    /// with it, makes each domain's own layer hold exactly the backup's values, one atomic change
    /// per domain (domains not in the backup are left alone). The whole file is checked first:
    /// a damaged one restores nothing. Every domain it can is restored; keys the system locks
    /// are left out; what was not restored is named with the reason, and a rerun is suggested
    /// only when the failure may pass (kvd gone, storage failing). A caller who may not write
    /// (the system instance) restores nothing and is told so.
    func restoreBackup(from file: String, yes: Bool, on connection: Connection) throws {
        let name = file == "-" ? "stdin" : file
        let backup = try BackupFile(file == "-" ? try console.readStandardInput() : try Files.read(file), name: name)
        let domains = backup.domains.keys.sorted()
        let summary = domains.map { "\($0.name) (\(backup.domains[$0]!.count) keys)" }.joined(separator: ", ")
        guard yes else {
            throw Failure(
                "\(name) holds \(domains.count) domains at revision \(backup.revision) (\(RFC3339.format(backup.created))): \(summary); restoring makes each hold exactly these values, one atomic change per domain (other domains stay as they are): nothing was changed; run again with --yes to restore"
            )
        }
        var restored: [Domain] = []
        var notes: [String] = []
        var transient = false
        var last: Int64?
        for domain in domains {
            do {
                let change = try makeOwnLayer(
                    domain, hold: backup.domains[domain]!, onlyChanged: true, from: name, on: connection)
                last = change.revision ?? last
                restored.append(domain)
                if !change.locked.isEmpty { notes.append("left out \(Self.lockedNote(change.locked, of: domain))") }
            } catch let error as ClientError {
                if case .permissionDenied = error {
                    let done =
                        restored.isEmpty
                        ? "nothing was restored" : "restored \(restored.map(\.name).joined(separator: ", ")) only"
                    throw Failure("\(Self.message(for: error)); \(done)")
                }
                if error.isConnectionLost { transient = true }
                if case .storageFailure = error { transient = true }
                notes.append("not \(domain.name): \(Self.message(for: error))")
            }
        }
        guard notes.isEmpty else {
            let again = transient ? "; running it again may restore the rest" : ""
            throw Failure(
                "restored \(restored.count) of \(domains.count) domains from \(name); \(notes.joined(separator: "; "))\(again)"
            )
        }
        console.err("kvctl: restored \(domains.count) domains from \(name) (backup of revision \(backup.revision))\n")
        if options.json, let last { console.out("{\"revision\":\(last)}\n") }
    }
}
