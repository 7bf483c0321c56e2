import KVValues

/// dconf's own admin files, read as a part of the drop-in layer (docs/drop-in-rules.md, "dconf's
/// files"): the profile (`DCONF/profile/user`: which system databases users get, in order), each
/// database's keyfiles (`DCONF/db/NAME.d/*`: `[path]` groups of `key=GVariant text`) and its
/// lock files (`DCONF/db/NAME.d/locks/*`: one key path a line), as `dconf update` compiles them.
/// Key paths become kvd domains and keys by the GSettings backend's rule (``GSettingsPath``),
/// values kvd values as the backend stores them (``GVariant/kvdValue``). Pure.
enum DconfFiles {
    /// The system databases a profile names, in its order (`system-db:NAME` lines; `user-db:`
    /// and `service-db:` lines are the user's own values, kvd's user layer). Each line as dconf
    /// reads it: spaces around it and a `#` comment after it ignored, a UTF-8 byte order mark at
    /// the start skipped. Any other line, or a name that is not a plain file name, is an error
    /// (a misspelt line would drop a database, its locks with it) carrying, in
    /// ``DropInReadError/guess``, the databases the profile may mean (``ProfileGuess``).
    static func profile(_ bytes: [UInt8]) throws(DropInReadError) -> [String] {
        guard let text = String(validating: DefaultsDocument.withoutByteOrderMark(bytes), as: UTF8.self) else {
            throw DropInReadError(description: "the profile is not UTF-8 text")
        }
        var databases: [String] = []
        var failure: DropInReadError?
        var guess = ProfileGuess()
        for (index, raw) in lines(of: text).enumerated() {
            switch profileLine(raw) {
            case .none: continue
            case .database(let name):
                if !databases.contains(name) { databases.append(name) }
                guess.add(name)
            case .typo(let reason, let meant):
                failure = failure ?? DropInReadError(description: "the profile's line \(index + 1) \(reason)")
                if let meant { guess.add(meant) } else { guess.everyDatabase = true }
            }
        }
        if var failure {
            failure.guess = guess
            throw failure
        }
        return databases
    }

    /// What one profile line says: nothing for kvd (blank, a comment, the user's own database),
    /// a system database, or a typo with why and the database it surely means, if one.
    private enum ProfileLine {
        case none
        case database(String)
        case typo(String, meant: String?)
    }

    private static func profileLine(_ raw: Substring) -> ProfileLine {
        let line = raw.prefix { $0 != "#" }.trimmingASCIISpaces
        if line.isEmpty || line.hasPrefix("user-db:") || line.hasPrefix("service-db:") { return .none }
        guard line.hasPrefix("system-db:") else {
            return .typo("is neither user-db:NAME nor system-db:NAME (kvd reads no other source)", meant: nil)
        }
        let name = line.dropFirst("system-db:".count)
        if isDatabaseName(String(name)) { return .database(String(name)) }
        let trimmed = String(name.trimmingASCIISpaces)
        return .typo("is not system-db:NAME with a database name", meant: isDatabaseName(trimmed) ? trimmed : nil)
    }

    /// A database name: `A-Z a-z 0-9 _ - .`, not starting with `.`.
    static func isDatabaseName(_ name: String) -> Bool {
        !name.isEmpty && !name.hasPrefix(".")
            && name.utf8.allSatisfy {
                TokenBytes.isAlnum($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".")
            }
    }

    /// One keyfile's values: `[GROUP]` lines (the folder path without its slashes at the ends,
    /// or `/`), `key=value` lines (the value GVariant text, its type inferred as `dconf update`
    /// infers it), `#` comments and blank lines. An error names the line.
    static func keyfile(_ bytes: [UInt8]) throws(DropInReadError) -> [Domain: [Key: Value]] {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw DropInReadError(description: "not UTF-8 text")
        }
        var values: [Domain: [Key: Value]] = [:]
        var group: Substring?
        for (index, raw) in lines(of: text).enumerated() {
            let line = raw.trimmingASCIISpaces
            if line.isEmpty || line.hasPrefix("#") { continue }
            let number = index + 1
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count > 2 else {
                    throw DropInReadError(description: "line \(number): a group is [PATH]")
                }
                group = line.dropFirst().dropLast()
                continue
            }
            guard let group else { throw DropInReadError(description: "line \(number): a key before any [group]") }
            guard let equals = line.firstIndex(of: "=") else {
                throw DropInReadError(description: "line \(number): needs key=value")
            }
            let name = line[..<equals].trimmingASCIISpaces
            let path = (group == "/" ? "/" : "/" + group + "/") + name
            let (domain, key) = try mapped(path, line: number)
            let value: GVariant
            do { value = try GVariantText.parse(String(line[line.index(after: equals)...])) } catch {
                throw DropInReadError(description: "line \(number): not a GVariant value (\(error))")
            }
            values[domain, default: [:]][key] = value.kvdValue
        }
        return values
    }

    /// One lock file's locks: each line a key path (`/org/gnome/desktop/lockdown/disable-command-line`),
    /// blank lines and `#` comments skipped, a UTF-8 byte order mark at the start skipped. Any
    /// other line is an error (``lockLineProblem(_:)``), so that a typo never lifts the file's
    /// locks silently (dconf skips it, or locks a key nobody uses); the error carries, in
    /// ``DropInReadError/partial``, the locks the file surely means: every line that parses, and
    /// of a line that does not, the key path before its first space or `#`, if it is one.
    static func locks(_ bytes: [UInt8]) throws(DropInReadError) -> [Domain: Set<Key>] {
        guard let text = String(validating: DefaultsDocument.withoutByteOrderMark(bytes), as: UTF8.self) else {
            throw DropInReadError(description: "not UTF-8 text")
        }
        var locks: [Domain: Set<Key>] = [:]
        var failure: DropInReadError?
        for (index, raw) in lines(of: text).enumerated() {
            if raw.trimmingASCIISpaces.isEmpty || raw.hasPrefix("#") { continue }
            var path = raw
            if let problem = lockLineProblem(raw) {
                failure = failure ?? DropInReadError(description: "line \(index + 1): \(problem)")
                path = raw.trimmingASCIISpaces.prefix {
                    $0 != " " && $0 != "#" && !$0.unicodeScalars.contains(where: isInvisible)
                }
            }
            guard let (domain, key) = try? mapped(String(path), line: index + 1) else {
                failure =
                    failure ?? DropInReadError(description: "line \(index + 1): not a dconf key path (/FOLDER/.../KEY)")
                continue
            }
            locks[domain, default: []].insert(key)
        }
        if var failure {
            failure.partial = DropInContent(locks: locks)
            throw failure
        }
        return locks
    }

    /// Why a lock line is surely a typo, or nil: spaces around it, a `#` after a space (a comment
    /// after the path: comments take a line of their own), a tab, a carriage return or another
    /// character that does not show (it would lock a key other than it shows), a space or `#` in
    /// the key's name (GSettings' key names are `a-z 0-9 -`). A space inside a folder's name is
    /// taken: a relocatable schema's path may hold one, and dconf's do.
    static func lockLineProblem(_ line: Substring) -> String? {
        if line.trimmingASCIISpaces != line { return "a lock is a key path starting with / (no spaces around it)" }
        if line.contains(" #") { return "a comment after the path (# starts a comment only at the start of a line)" }
        if let hidden = line.unicodeScalars.first(where: isInvisible) {
            let code = String(hidden.value, radix: 16, uppercase: true)
            let padded = String(repeating: "0", count: max(0, 4 - code.count)) + code
            return
                "the path holds U+\(padded), a character that does not show (it would lock another key than it shows)"
        }
        let name = line.split(separator: "/", omittingEmptySubsequences: false).last ?? ""
        if name.contains(" ") || name.contains("#") {
            return "a key's name holds a space or # (no GSettings key does)"
        }
        return nil
    }

    /// The domain and key of a dconf key path (starting with `/`, no `//`, not ending with `/`).
    private static func mapped(_ path: String, line: Int) throws(DropInReadError) -> (Domain, Key) {
        guard path.hasPrefix("/"), !path.hasSuffix("/"), !path.contains("//"),
            let (domain, key) = GSettingsPath.map(path),
            let domain = try? Domain(validating: domain), let key = try? Key(validating: key)
        else {
            throw DropInReadError(description: "line \(line): not a dconf key path (/FOLDER/.../KEY)")
        }
        return (domain, key)
    }
}

extension DconfFiles {
    /// The databases a profile with a typo may mean: those its lines name (a name with spaces
    /// around it trimmed), and every database when a line names none that can be told.
    struct ProfileGuess: Equatable, Sendable {
        var databases: [String] = []
        var everyDatabase = false

        mutating func add(_ name: String) {
            if !databases.contains(name) { databases.append(name) }
        }
    }

    /// The lines of `text`, ended by LF or CRLF, as dconf reads them. (Swift reads CRLF as one
    /// character, so a split at "\n" alone left a CRLF file one line: its locks lifted.)
    fileprivate static func lines(of text: String) -> [Substring] {
        text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
    }
}

extension Substring {
    /// Without the spaces, tabs and carriage returns at its ends.
    fileprivate var trimmingASCIISpaces: Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        guard let start = firstIndex(where: { !isSpace($0) }) else { return self[endIndex...] }
        return self[start...lastIndex(where: { !isSpace($0) })!]
    }
}

private enum TokenBytes {
    static func isAlnum(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }
}
