/// The one format of the system instance's `defaults.d` files and of `kvctl apply`: typed JSON,
/// `{DOMAIN: {KEY: VALUE}}`, each domain's object as `kvctl export` writes it (`{"$dict":
/// {...}}` for a domain whose keys start with `$`; a `$` key outside that wrapper is refused).
/// The member `"for"` is not a domain: `{"groups": [NAME, ...], "users": [NAME, ...]}` names
/// whom a drop-in file is for (``audience``), at least one name; a member `For` or `FOR` is
/// refused as a misspelt `"for"`. A UTF-8 byte order mark at the start is skipped.
///
/// An error never quotes the document (a file that is not what it should be may hold anything,
/// and the system instance shows its problems to every user): it names a byte offset, a line,
/// or a domain or key only once that validated as a name. Pure and thread-safe.
public struct DefaultsDocument: Sendable, Equatable {
    /// Whom a document is for: the names of its `"for"` member, as written.
    public struct Audience: Sendable, Equatable {
        public var groups: [String]
        public var users: [String]

        public init(groups: [String] = [], users: [String] = []) {
            self.groups = groups
            self.users = users
        }
    }

    /// Each domain's values (a domain with an empty object too: `apply --prune` empties it).
    public var values: [Domain: [Key: Value]] = [:]
    /// The `"for"` member, or nil when the document has none (it is for everyone).
    public var audience: Audience?

    public init(values: [Domain: [Key: Value]] = [:], audience: Audience? = nil) {
        self.values = values
        self.audience = audience
    }

    /// `bytes` without a leading UTF-8 byte order mark (EF BB BF), as editors on other systems
    /// write one.
    public static func withoutByteOrderMark(_ bytes: [UInt8]) -> ArraySlice<UInt8> {
        bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? bytes.dropFirst(3) : bytes[...]
    }

    /// Parses a whole document.
    public static func parse(_ bytes: [UInt8]) throws(DefaultsDocumentError) -> DefaultsDocument {
        let json: JSON
        do {
            json = try JSONParser.parse(
                withoutByteOrderMark(bytes), limits: JSONLimits(framingDepth: 3, maxBytes: Int.max))
        } catch {
            throw DefaultsDocumentError("not JSON: \(error.withoutContent)")
        }
        guard case .object(let members) = json else {
            throw DefaultsDocumentError("not a JSON object of DOMAIN: {KEY: VALUE}")
        }
        var document = DefaultsDocument()
        for (name, member) in members.sorted(by: { $0.key < $1.key }) {
            if name == "for" {
                document.audience = try audience(member)
                continue
            }
            if name.lowercased() == "for" {  // `For`, `FOR`: a directive misspelt, not a domain
                throw DefaultsDocumentError(#"a member "\#(name)" looks like a misspelt "for" (written in lower case)"#)
            }
            guard let domain = try? Domain(validating: name) else {
                throw DefaultsDocumentError(
                    "a member is not a valid domain name (A-Z a-z 0-9 . _ -, at most 255 bytes)")
            }
            document.values[domain] = try domainValues(member, of: domain)
        }
        return document
    }

    private static func domainValues(_ member: JSON, of domain: Domain) throws(DefaultsDocumentError) -> [Key: Value] {
        guard case .object(var entries) = member else {
            throw DefaultsDocumentError("domain \(domain) must hold a JSON object of KEY: VALUE")
        }
        if entries.count == 1, case .object(let wrapped)? = entries["$dict"] {
            entries = wrapped
        } else if entries.keys.contains(where: { $0.hasPrefix("$") }) {
            throw DefaultsDocumentError(
                "domain \(domain) has a key starting with $: wrap its object in {\"$dict\": ...}, as kvctl export does")
        }
        var values: [Key: Value] = [:]
        for (name, entry) in entries.sorted(by: { $0.key < $1.key }) {
            guard let key = try? Key(validating: name) else {
                throw DefaultsDocumentError("domain \(domain) has an invalid key (empty, too long, or holding NUL)")
            }
            do {
                let value = try Value(typedJSON: entry)
                try value.validate()
                values[key] = value
            } catch {
                throw DefaultsDocumentError("domain \(domain) key \"\(key.name)\": not a valid typed value")
            }
        }
        return values
    }

    /// The `"for"` member: `{"groups": [NAME, ...], "users": [NAME, ...]}`, at least one.
    private static func audience(_ json: JSON) throws(DefaultsDocumentError) -> Audience {
        guard case .object(let members) = json, !members.isEmpty,
            members.keys.allSatisfy({ $0 == "groups" || $0 == "users" })
        else {
            throw DefaultsDocumentError(#""for" must be {"groups": [NAME, ...], "users": [NAME, ...]}"#)
        }
        func names(_ member: String) throws(DefaultsDocumentError) -> [String] {
            guard let value = members[member] else { return [] }
            guard case .array(let items) = value else {
                throw DefaultsDocumentError(#""for" "\#(member)" must be an array of names"#)
            }
            var names: [String] = []
            for item in items {
                guard case .string(let name) = item, !name.isEmpty else {
                    throw DefaultsDocumentError(#""for" "\#(member)" must be an array of names"#)
                }
                names.append(name)
            }
            return names
        }
        let audience = Audience(groups: try names("groups"), users: try names("users"))
        guard !audience.groups.isEmpty || !audience.users.isEmpty else {
            throw DefaultsDocumentError(#""for" names no group and no user: the file would reach nobody"#)
        }
        return audience
    }
}

/// Why a ``DefaultsDocument`` (or a drop-in file) was refused, in one line that quotes none of it.
public struct DefaultsDocumentError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}

extension JSONSyntaxError {
    /// The error without what it quotes of the text (a character, a member name, an escape):
    /// the byte offset and the kind of problem only.
    public var withoutContent: String {
        let cut = reason.firstIndex(where: { $0 == "'" || $0 == "\"" || $0 == "\\" }) ?? reason.endIndex
        var kind = reason[..<cut]
        if let byte = kind.firstRange(of: " byte 0x") { kind = kind[..<byte.lowerBound] }
        return "invalid JSON at byte \(offset): " + kind.trimmingSuffix(" ")
    }
}

extension Substring {
    fileprivate func trimmingSuffix(_ character: Character) -> String {
        var text = self
        while text.last == character { text = text.dropLast() }
        return String(text)
    }
}
