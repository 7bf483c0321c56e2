import KVConnection
import KVValues

/// What kvctl tells about a value or a lock that comes from the system instance's layers, asked
/// of the system instance (`io.kvd.System.Source`, which anyone may call): the drop-in file
/// behind it and the real admin group (`--admin-group`). Best effort: when the system instance
/// does not answer, the caller says what it can without it.
extension Runner {
    /// `--system get DOMAIN KEY --effective`: the admins' value, else the drop-in files' for
    /// everyone; a user's kvd already answers with the value in effect.
    func effectiveValue(_ domain: Domain, _ key: Key, on connection: Connection) throws -> Value {
        guard options.system else { return try connection.get(domain, key).value }
        do {
            return try connection.get(domain, key).value
        } catch .notFound(_, _?) {
            guard let value = try connection.systemSource(domain, key).fileValue else {
                throw ClientError.notFound(domain: domain.name, key: key.name)
            }
            return value
        }
    }

    /// For `--system get`'s "no key": the drop-in file that supplies the key, if one does.
    func fileNote(_ domain: Domain, _ key: Key) -> String {
        guard let source = try? connect().systemSource(domain, key), let file = source.file else { return "" }
        let shown = "\(ClientError.shellWord(domain.name)) \(ClientError.shellWord(key.name))"
        return
            "; --system get reads the admins' layer only, and the drop-in file \(file) supplies this key (see the value in effect with: kvctl --system get \(shown) --effective)"
    }

    /// The system instance's admin group (`--admin-group`), as `Source` (which anyone may call)
    /// says; nil when it does not answer or does not say.
    func adminGroup() -> String? {
        guard let domain = try? Domain(validating: "kvd"), let key = try? Key(validating: "admin-group") else {
            return nil
        }
        return (try? connect().systemSource(domain, key))?.adminGroup
    }

    /// For `--system unlock` of a key no admin locked: the drop-in file that locks it, if one
    /// does (unlock lifts only the admins' locks).
    func fileLockNote(_ domain: Domain, _ key: Key) -> String? {
        guard let source = try? connect().systemSource(domain, key), let file = source.lockFile else { return nil }
        return
            "\(ClientError.shellWord(domain.name)) \(ClientError.shellWord(key.name)) is locked by the drop-in file \(file), not by an admin's lock: remove its line there (then kvctl --system reload)"
    }

    /// Where the lock on `key` comes from and who can lift it, from the system instance; nil
    /// when it does not answer or does not say.
    func lockHint(_ domain: String, _ key: String) -> String? {
        guard let domain = try? Domain(validating: domain), let key = try? Key(validating: key),
            let lift = lockLift(domain, key)
        else { return nil }
        return
            "\(ClientError.shellWord(domain.name)) \(ClientError.shellWord(key.name)) is locked by the system administrator; \(lift)"
    }

    /// Who can lift the lock on `key` and how, from the system instance; nil when it does not
    /// answer or does not say.
    func lockLift(_ domain: Domain, _ key: Key) -> String? {
        guard let connectSystem, let source = try? connectSystem().systemSource(domain, key) else { return nil }
        return Self.lift(source, "\(ClientError.shellWord(domain.name)) \(ClientError.shellWord(key.name))")
    }

    /// Who can lift the lock `source` describes, and how, in words; nil when it is not locked.
    static func lift(_ source: SystemSource, _ shown: String) -> String? {
        let group =
            source.adminGroup.map { "root or a member of group \($0)" } ?? "root or an admin of the system instance"
        switch (source.lock, source.lockFile) {
        case ("admin"?, let file?):
            return
                "\(group) can lift the admins' lock with: kvctl --system unlock \(shown), and the drop-in file \(file) locks it too (remove its line there, then kvctl --system reload)"
        case ("admin"?, nil): return "\(group) can lift it with: kvctl --system unlock \(shown)"
        case (_, let file?):
            return
                "the drop-in file \(file) locks it: \(group) can lift it by removing its line there (then kvctl --system reload)"
        default: return nil
        }
    }
}
