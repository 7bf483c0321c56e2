import KVConnection
import KVProtocol
import KVValues

/// Carries out one parsed command against kvd, printing through the console.
struct Runner {
    let options: GlobalOptions
    let console: any Console
    let connect: () throws(ClientError) -> Connection
    /// A connection to the system instance, for a user's command that says where a lock or a
    /// value comes from (nil: not asked).
    var connectSystem: (() throws(ClientError) -> Connection)?

    /// How often a read-change-write command retries when the data changed meanwhile.
    static let attempts = 5

    func run(_ command: Command) throws(Failure) {
        var failure: Failure
        do {
            return try perform(command, on: try connect())
        } catch let error as WouldChange {
            throw Failure("\(error.count) change(s) to make (kvctl apply without --check makes them)", status: 1)
        } catch let error as ClientError {
            failure = Failure(message(for: error, in: command))
        } catch let error as Failure {
            failure = error
        } catch {
            failure = Failure("\(error)")
        }
        // `apply --check`: 1 says "would change"; a failure is 3, so a tool never takes one for the other.
        if case .apply(_, check: true, _, _) = command { failure.status = 3 }
        throw failure
    }

    private func perform(_ command: Command, on connection: Connection) throws {
        switch command {
        case .get(let domain, let key?):
            printValue(try connection.get(domain, key).value)
        case .getEffective(let domain, let key):
            printValue(try effectiveValue(domain, key, on: connection))
        case .get(let domain, nil):
            let listing = try connection.list(domain)
            console.out(Format.domain(listing.values, pretty: !options.json) + "\n")
            try Self.refuseLeftOut(listing, of: domain, from: "the output above")
        case .set(let domain, let key, let spec):
            printRevision(try set(domain, key, spec, on: connection))
        case .delete(let domain, let key):
            printRevision(try connection.delete(domain, key))
        case .domains:
            console.out(
                Format.names(try connection.domains().map(\.name).sorted(), json: options.json, null: options.null))
        case .keys(let domain):
            let listing = try connection.list(domain)
            let names = (Array(listing.values.keys) + Array(listing.unreadable.keys)).map(\.name).sorted()
            console.out(Format.names(names, json: options.json, null: options.null))
        case .readType(let domain, let key):
            console.out(try connection.get(domain, key).value.typeName + "\n")
        case .rename(let domain, let old, let new):
            printRevision(try rename(domain, old, new, on: connection))
        case .export(let domain, let file, let effective):
            try export(domain, to: file, effective: effective, on: connection)
        case .exportPlist(let domain, let file, let format, let effective):
            try exportPlist(domain, to: file, format: format, effective: effective, on: connection)
        case .import(let domain, let file):
            try importFile(file, into: domain, on: connection)
        case .watch(let domain, let key):
            try watch(domain, key, first: connection)
        case .apply(let file, let check, let diff, let prune):
            try apply(file: file, check: check, diff: diff, prune: prune, on: connection)
        case .source, .lock, .unlock, .locks, .status, .history, .blame, .forgetHistory, .keepHistory, .restore,
            .backup, .restoreBackup, .reload, .permit, .revoke, .permits:
            try performAdministration(command, on: connection)
        case .help, .version, .completion, .gnome:  // answered without kvd (KVCtl.run)
            break
        }
    }

    /// One value as `get` prints it: plain, or typed JSON with `--json`.
    private func printValue(_ value: Value) {
        console.out((options.json ? Format.json(value) : Format.plain(value)) + "\n")
    }

    /// The commands about layers, history, backups and grants rather than one domain's values.
    private func performAdministration(_ command: Command, on connection: Connection) throws {
        switch command {
        case .source(let domain, let key) where options.system:
            let found = try connection.systemSource(domain, key)
            console.out(Format.systemSource(found, domain: domain, key: key, json: options.json))
        case .reload:
            try reload(on: connection)
        case .source(let domain, let key):
            try printSource(domain, key, on: connection)
        case .lock(let domain, let key):
            printRevision(try connection.lock(domain, key))
        case .unlock(let domain, let key):
            printRevision(try connection.unlock(domain, key))
        case .locks(let domain):
            console.out(Format.locks(try connection.locks(domain), ofOneDomain: domain != nil, json: options.json))
        case .status:
            console.out(Format.status(try connection.status(), json: options.json))
        case .history(let domain, let key, let limit, let json):
            try printHistory(domain, key, limit: limit, json: json, on: connection)
        case .blame(let domain, let key):
            try printBlame(domain, key, on: connection)
        case .forgetHistory(let domain, let key):
            printRevision(try connection.forgetHistory(domain, key: key))
        case .keepHistory(let domain, let key, let keep):
            printRevision(try connection.keepHistory(domain, key: key, keep))
        case .restore(let domain, let key, let revision):
            printRevision(try restore(domain, key, revision: revision, on: connection))
        case .backup(let file):
            try backup(to: file, on: connection)
        case .restoreBackup(let file, let yes):
            try restoreBackup(from: file, yes: yes, on: connection)
        case .permit, .revoke, .permits:
            try performPermits(command, on: connection)
        default:
            preconditionFailure("perform(_:on:) sends only these commands here")
        }
    }

    /// `--system reload`: the revision and the drop-in status; fails when there is a problem.
    private func reload(on connection: Connection) throws {
        let revision = try connection.reload()
        let status = try connection.status()
        console.out(Format.reload(revision, status.dropIns, json: options.json))
        if let problems = status.dropIns?.problems, !problems.isEmpty {
            throw Failure(
                "\(problems.count) drop-in problem(s) (named above): those files were not read, or keep their last good content; the others apply"
            )
        }
    }

    /// `source DOMAIN KEY` for a user: where the value comes from, and for a lock who can lift
    /// it and how, as the system instance says.
    /// A key locked with no value (a lock line alone) has no source of a value, but is locked:
    /// said so, not "no key".
    private func printSource(_ domain: Domain, _ key: Key, on connection: Connection) throws {
        let found: (value: Value, revision: Int64, source: ValueSource)
        do { found = try connection.getWithSource(domain, key) } catch .notFound(let name, let missing?) {
            guard let lift = lockLift(domain, key) else { throw ClientError.notFound(domain: name, key: missing) }
            return console.out(
                Format.lockedWithoutValue(domain: domain, key: key, json: options.json, lift: lift) + "\n")
        }
        let lift = found.source == .locked ? lockLift(domain, key) : nil
        console.out(
            Format.source(found.source, found.value, domain: domain, key: key, json: options.json, lift: lift) + "\n")
    }

    /// `export DOMAIN FILE`: the domain as typed JSON, to `file` (`-`: standard output).
    private func export(_ domain: Domain, to file: String, effective: Bool, on connection: Connection) throws {
        let listing = try exportListing(domain, effective: effective, on: connection)
        let text = Format.domain(listing.values, pretty: true) + "\n"
        if file == "-" { console.out(text) } else { try Files.writeAtomically(file, Array(text.utf8)) }
        try Self.refuseLeftOut(listing, of: domain, from: file == "-" ? "the export" : file)
    }

    /// `export DOMAIN FILE --format xml|binary`: the domain as a property list; a binary one is
    /// never written to the terminal.
    private func exportPlist(
        _ domain: Domain, to file: String, format: PlistFormat, effective: Bool, on connection: Connection
    ) throws {
        let listing = try exportListing(domain, effective: effective, on: connection)
        let bytes = try Plist.plist(fromTypedJSON: Format.domain(listing.values, pretty: false), format: format)
        if file != "-" {
            try Files.writeAtomically(file, bytes)
        } else if format == .xml {
            console.out(String(decoding: bytes, as: UTF8.self))
        } else {
            throw Failure("a binary property list is not written to the terminal: give a FILE, or use --format xml")
        }
        try Self.refuseLeftOut(listing, of: domain, from: file == "-" ? "the export" : file)
    }

    /// `import DOMAIN FILE`: typed JSON or a property list becomes the user's own layer of the
    /// domain; locked keys are left out and said.
    private func importFile(_ file: String, into domain: Domain, on connection: Connection) throws {
        var bytes = file == "-" ? try console.readStandardInput() : try Files.read(file)
        if Plist.looksLikePlist(bytes) {
            bytes = try Plist.typedJSON(fromPlist: bytes, name: file == "-" ? "stdin" : file)
        }
        let change = try makeOwnLayer(
            domain, hold: try Self.domainValues(bytes, from: file), onlyChanged: false, from: file, on: connection)
        printRevision(change.revision)
        if !change.locked.isEmpty {
            throw Failure(
                "imported \(domain.name) but \(Self.lockedNote(change.locked, of: domain)); the rest is imported")
        }
    }

    /// `watch DOMAIN [KEY]` on `first`, then on a new connection each time kvd comes back.
    private func watch(_ domain: Domain, _ key: Key?, first: Connection) throws {
        var first: Connection? = first
        try WatchCommand(domain: domain, key: key, json: options.json, console: console) { () throws(ClientError) in
            if let connection = first {
                first = nil
                return connection
            }
            return try connect()
        }.run()
    }

    /// With `--json`, a write prints `{"revision": N}`; otherwise nothing.
    func printRevision(_ revision: Int64?) {
        guard options.json, let revision else { return }
        console.out("{\"revision\":\(revision)}\n")
    }

    private func set(_ domain: Domain, _ key: Key, _ spec: ValueSpec, on connection: Connection) throws -> Int64 {
        if case .replace(let value) = spec { return try connection.set(domain, key, value) }
        return try retrying {
            let current = try Self.optional { () throws(ClientError) in try connection.get(domain, key) }
            let merged = try Self.merge(spec, into: current?.value, key: key)
            return try connection.set(domain, key, merged, ifRevision: current?.revision ?? 0)
        }
    }

    /// The value of `-array-add`/`-dict-add` applied to what is stored (`nil`: nothing).
    static func merge(_ spec: ValueSpec, into current: Value?, key: Key) throws(Failure) -> Value {
        switch (spec, current) {
        case (.replace(let value), _): return value
        case (.arrayAdd(let added), nil): return .array(added)
        case (.arrayAdd(let added), .array(let elements)?): return .array(elements + added)
        case (.dictionaryAdd(let added), nil): return .dictionary(added)
        case (.dictionaryAdd(let added), .dictionary(let members)?): return .dictionary(members.merging(added) { $1 })
        case (.arrayAdd, let other?):
            throw Failure(
                "\"\(key.name)\" holds a \(other.typeName), not an array, so -array-add cannot append to it (replace it with -array)"
            )
        case (.dictionaryAdd, let other?):
            throw Failure(
                "\"\(key.name)\" holds a \(other.typeName), not a dictionary, so -dict-add cannot merge into it (replace it with -dict)"
            )
        }
    }

    private func rename(_ domain: Domain, _ old: Key, _ new: Key, on connection: Connection) throws -> Int64? {
        try retrying {
            let listing = try connection.list(domain)
            if let reason = listing.unreadable[old] {
                throw ClientError.unreadableValue(domain: domain.name, key: old.name, reason: reason)
            }
            guard let value = listing.values[old] else {
                throw ClientError.notFound(domain: domain.name, key: old.name)
            }
            guard old != new else { return nil }
            let changes = [Change(key: old, value: nil), Change(key: new, value: value)]
            return try connection.apply(domain, changes, ifRevision: listing.revision)
        }
    }

    /// What `export` writes: the user's own values, or with `effective` the values as the
    /// layers combine. A domain with no values of the user's own but system ones is exported
    /// empty, not refused.
    private func exportListing(_ domain: Domain, effective: Bool, on connection: Connection) throws -> DomainListing {
        var listing = try connection.list(domain)
        if !effective { Self.keepOwn(&listing) }
        return listing
    }

    /// Fails (after the output was written) when `listing` left out unreadable keys, naming them.
    static func refuseLeftOut(_ listing: DomainListing, of domain: Domain, from output: String) throws(Failure) {
        guard !listing.unreadable.isEmpty else { return }
        let keys = listing.unreadable.keys.sorted()
        throw Failure(
            "\(output) left out \(quoted(keys)) of \(domain.name): kvd cannot read \(keys.count == 1 ? "its stored value" : "their stored values") and keeps \(keys.count == 1 ? "it" : "them") as stored (see why with: kvctl get \(domain.name) KEY)"
        )
    }

    /// `"a"`, `"a" and "b"`, `"a", "b" and 3 more`.
    static func quoted(_ keys: [Key]) -> String {
        let names = keys.prefix(2).map { "\"\($0.name)\"" }
        let rest = keys.count - names.count
        if rest > 0 { return names.joined(separator: ", ") + " and \(rest) more" }
        return names.joined(separator: " and ")
    }

    /// The values of an import file: a typed JSON object whose members are valid keys.
    static func domainValues(_ bytes: [UInt8], from file: String) throws(Failure) -> [Key: Value] {
        let name = file == "-" ? "stdin" : file
        let json: JSON
        do {
            // The file is a dictionary of values: each may be as deep as the contract allows
            // inside the object and its `$dict` wrapper, as `export` writes it.
            json = try JSONParser.parse(bytes, limits: JSONLimits(framingDepth: 2, maxBytes: Int.max))
        } catch {
            throw Failure("\(name) is not typed JSON: \(error) (write one with: kvctl export DOMAIN FILE)")
        }
        return try domainValues(json, from: name)
    }

    /// The values of one domain's typed JSON object (`{KEY: VALUE}`, or `{"$dict": {...}}`);
    /// `name` names the source in messages.
    static func domainValues(_ json: JSON, from name: String) throws(Failure) -> [Key: Value] {
        var members: [String: JSON]
        switch json {
        case .object(let object) where object.count == 1 && object["$dict"] != nil:
            guard case .object(let wrapped)? = object["$dict"] else {
                throw Failure("\(name): \"$dict\" must hold a JSON object")
            }
            members = wrapped
        case .object(let object) where !object.keys.contains(where: { $0.hasPrefix("$") }):
            members = object
        default:
            let shown = (try? Value(typedJSON: json)).map { "a \($0.typeName)" } ?? "no typed JSON object"
            throw Failure("\(name) holds \(shown), but import needs a typed JSON object of key: value")
        }
        var values: [Key: Value] = [:]
        for (keyName, member) in members {
            do {
                let value = try Value(typedJSON: member)
                try value.validate()
                values[try Key(validating: keyName)] = value
            } catch {
                throw Failure("\(name): the value of \"\(keyName)\" is not valid typed JSON: \(error)")
            }
        }
        return values
    }

    /// Runs `body`, again while it fails with `RevisionMismatch`, at most ``attempts`` times.
    func retrying<T>(_ body: () throws -> T) throws -> T {
        for _ in 1..<Self.attempts {
            do {
                return try body()
            } catch ClientError.revisionMismatch {
                continue
            }
        }
        return try body()
    }

    /// The result of a read, or `nil` when kvd says NotFound.
    static func optional<T>(_ body: () throws(ClientError) -> T) throws(ClientError) -> T? {
        do {
            return try body()
        } catch .notFound {
            return nil
        }
    }

    /// One line for the user about `error` in `command`: what happened and what to do.
    func message(for error: ClientError, in command: Command) -> String {
        if let message = Self.historyMessage(for: error, in: command) { return message }
        return switch (error, command) {
        case (.notFound, .unlock(let domain, let key)):
            fileLockNote(domain, key)
                ?? "\(domain.name) \(ClientError.shellWord(key.name)) is not locked (list the locks with: kvctl --system locks \(domain.name))"
        case (.notFound(_, _?), .get(let domain, let key?)) where options.system:
            Self.message(for: error) + fileNote(domain, key)
        case (.permissionDenied, _) where options.system:
            adminGroup().map {
                "permission denied: only root and members of group \($0) may change the system instance"
            }
                ?? Self.message(for: error)
        case (.permissionDenied, _):
            "permission denied: kvd lets a sandboxed app (Flatpak, snap) reach only its own settings, the public ones "
                + "and what its user permitted it (kvctl permits, run outside the sandbox)"
        case (.keyLocked(let domain, let key), _) where !options.system:
            lockHint(domain, key) ?? Self.message(for: error)
        case (.cannotConnect(let path, let reason), _) where options.system:
            "cannot connect to the system instance at \(path): \(reason) (is it running? start it with `systemctl start kvd-system.socket`, or give its socket with --socket or $KVD_SYSTEM_SOCKET)"
        default:
            Self.message(for: error)
        }
    }

    /// One line for the user: what happened and what to do.
    static func message(for error: ClientError) -> String {
        switch error {
        case .notFound(let domain, _?):
            "\(error) (list keys with: kvctl keys \(domain))"
        case .notFound(_, nil):
            "\(error) (list domains with: kvctl domains)"
        case .revisionMismatch:
            "the data kept changing while kvctl tried \(attempts) times; try again"
        default:
            error.description
        }
    }
}
