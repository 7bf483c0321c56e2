import KVConnection
import KVProtocol
import KVValues

extension Invocation {
    /// `permit APPID PATTERN [--read-only]`, `permit --revoke APPID PATTERN` (the flags anywhere
    /// after the command) and `permits [APPID]`; the app id and the pattern validated here.
    static func parsePermitCommand(_ name: String, _ reader: inout ArgumentReader) throws(UsageError) -> Command {
        var words = reader.remaining()
        guard name == "permit" else {
            var positional = ArgumentReader(words)
            let app = try positional.optionalWord().map { (text) throws(UsageError) in try appID(text) }
            try positional.end()
            return .permits(app)
        }
        let flags = ["--read-only", "--revoke"]
        let given = Set(words.filter(flags.contains))
        words.removeAll(where: flags.contains)
        if let option = words.first(where: { $0.hasPrefix("--") }) {
            throw UsageError("unknown option \(option) for permit")
        }
        var positional = ArgumentReader(words)
        let app = try appID(try positional.word("APPID"))
        let text = try positional.word("DOMAIN-PATTERN")
        try positional.end()
        let pattern: DomainPattern
        do { pattern = try DomainPattern(validating: text) } catch { throw UsageError("\(error)") }
        if given.contains("--revoke") {
            guard !given.contains("--read-only") else { throw UsageError("permit --revoke takes no --read-only") }
            return .revoke(app, pattern)
        }
        return .permit(Permit(app: app, pattern: pattern, readOnly: given.contains("--read-only")))
    }

    private static func appID(_ text: String) throws(UsageError) -> AppID {
        do { return try AppID(validating: text) } catch { throw UsageError("\(error)") }
    }
}

extension Runner {
    /// `permit`, `permit --revoke` and `permits`: the revision, or the grants one a line
    /// (`APPID PATTERN read-write|read-only`), or with `--json` an array of
    /// `{"app", "pattern", "readOnly"}` objects.
    func performPermits(_ command: Command, on connection: Connection) throws {
        switch command {
        case .permit(let permit):
            printRevision(try connection.permit(permit))
        case .revoke(let app, let pattern):
            printRevision(try connection.revoke(app, pattern))
        case .permits(let app):
            let permits = try connection.permits(of: app)
            guard options.json else { return console.out(permits.map { "\($0)\n" }.joined()) }
            console.out(JSONWriter(sortKeys: true).string(.array(permits.map(\.json))) + "\n")
        default:
            preconditionFailure("performPermits(_:on:) takes only permit, revoke and permits")
        }
    }
}
