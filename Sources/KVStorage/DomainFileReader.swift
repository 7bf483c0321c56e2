import Glibc
import KVValues

extension DomainFile {
    /// The limits for one value read from a domain file: the contract's, since each value is
    /// parsed on its own (the file around it is split, not parsed).
    static let valueLimits = JSONLimits(maxDepth: Limits.valueDepth, maxBytes: StorageFormat.maxDomainFileBytes)

    /// Reads a domain file of any shipped version (see ``StorageFormat`` for what a hand edit
    /// costs). `domain` is the one the file's name gives, nil for a `~` file (then its `domain`
    /// member names it). Throws a reason if the file as a whole is unreadable: its structure
    /// cannot be followed, or the envelope is wrong or from a newer kvd.
    static func decode(_ bytes: [UInt8], domain: Domain?) throws(DomainFileError) -> LoadedDomain {
        let start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0  // a UTF-8 byte-order mark, as some editors write
        let top = try split(bytes, start..<bytes.count, what: "the file")
        var members: [String: Range<Int>] = [:]
        var repeated: [String] = []
        for (name, range) in top where members.updateValue(range, forKey: name) != nil { repeated.append(name) }
        guard members["format"] != nil || members["formatVersion"] != nil else {
            guard let domain else {
                throw DomainFileError(
                    reason: "the file holds no envelope naming its domain, which a file of a long domain name needs")
            }
            var loaded = LoadedDomain(
                domain: domain, state: DomainState(revision: 1), version: 0, replayedThrough: 0, warnings: [])
            readValues(top, revisions: [:], from: bytes, into: &loaded)
            return loaded
        }
        if let name = repeated.first {
            throw DomainFileError(reason: "the envelope member \"\(name)\" appears more than once")
        }
        func header(_ name: String) -> JSON? { members[name].flatMap { try? JSONParser.parse(bytes[$0]) } }
        guard header("format") == .string(StorageFormat.domainFormat) else {
            throw DomainFileError(reason: "\"format\" is not \"\(StorageFormat.domainFormat)\"")
        }
        switch header("formatVersion") {
        case .integer(1)?: break
        case .integer(let version)? where version > StorageFormat.domainFormatVersion:
            throw DomainFileError(
                reason:
                    "formatVersion \(version) was written by a newer kvd (this one reads up to \(StorageFormat.domainFormatVersion))"
            )
        default:
            throw DomainFileError(reason: "\"formatVersion\" is missing or not a known version")
        }
        return try readVersion1(members, header: header, from: bytes, domain: domain)
    }

    /// Version 1: the envelope with `revision`, `values` and `revisions`.
    private static func readVersion1(
        _ members: [String: Range<Int>], header: (String) -> JSON?, from bytes: [UInt8], domain: Domain?
    ) throws(DomainFileError) -> LoadedDomain {
        guard case .integer(let revision)? = header("revision"), revision >= 0 else {
            throw DomainFileError(reason: "\"revision\" is missing or not a non-negative integer")
        }
        guard let valuesRange = members["values"], let values = try? split(bytes, valuesRange, what: "\"values\"")
        else {
            throw DomainFileError(reason: "\"values\" is missing or not an object")
        }
        var named: Domain?
        if case .string(let name)? = header("domain") { named = try? Domain(stored: name) }
        guard let which = domain ?? named else {
            throw DomainFileError(reason: "\"domain\" is missing or not a valid domain name")
        }
        var loaded = LoadedDomain(
            domain: which, state: DomainState(revision: revision), version: 1, replayedThrough: revision, warnings: [])
        if named != which {
            loaded.warnings.append("the file names another domain in \"domain\"; it is read as \(which)")
        }
        var revisions: [String: Int64] = [:]
        let revisionMembers = members["revisions"].flatMap { try? split(bytes, $0, what: "\"revisions\"") } ?? []
        for (name, range) in revisionMembers {
            if case .integer(let found)? = try? JSONParser.parse(bytes[range]), found > 0, found <= revision {
                revisions[name] = found
            }
        }
        readValues(values, revisions: revisions, from: bytes, into: &loaded)
        return loaded
    }

    /// Reads each value on its own: one that is not valid typed JSON, or under a key no request
    /// can name, costs only its key (kept verbatim). Of a key given more than once the last is
    /// read, as JSON readers commonly do, and ``LoadedDomain/copyReason`` asks for a copy of
    /// the file, since its rewrite keeps only that one.
    private static func readValues(
        _ values: [(name: String, value: Range<Int>)], revisions: [String: Int64], from bytes: [UInt8],
        into loaded: inout LoadedDomain
    ) {
        var repeated: Set<String> = []
        for (name, range) in values {
            let revision = revisions[name] ?? loaded.state.revision
            let raw = bytes[range]
            var problems: [String] = []
            var key: Key?
            do { key = try Key(validating: name) } catch {
                problems.append("no request can name this key: \(error.reason)")
            }
            let entry: StoredEntry
            do throws(ValueError) {
                let json: JSON
                do { json = try JSONParser.parse(raw, limits: valueLimits) } catch {
                    throw ValueError(reason: error.description)
                }
                let value = try Value(typedJSON: json)
                entry = StoredEntry(content: .value(value), revision: revision, bytes: StoredEntry.measure(name, value))
            } catch {
                problems.insert(error.description, at: 0)
                entry = StoredEntry(
                    content: .unreadable(raw: Array(raw), reason: error.description), revision: revision,
                    bytes: StoredEntry.measure(name, raw: raw.count))
            }
            if loaded.state.load(key, name: name, entry) { repeated.insert(name) }
            if !problems.isEmpty {
                loaded.warnings.append(
                    "key \"\(name.prefix(80))\" is unreadable (\(problems.joined(separator: "; "))); it is kept in the file as it is"
                )
            }
        }
        if !repeated.isEmpty {
            loaded.copyReason =
                "it gives the keys \(repeated.sorted().map { "\"\($0.prefix(80))\"" }.joined(separator: ", ")) more than once; the last of each is read, and a rewrite keeps only that one"
        }
    }

    /// The members of the JSON object in `range` of `bytes`, in order, with where each value's
    /// text lies. Names are read as strict JSON strings; values are only delimited (strings and
    /// brackets), so a bad value costs only itself. Linear; no recursion. `what` names the
    /// object in the error.
    static func split(_ bytes: [UInt8], _ range: Range<Int>, what: String) throws(DomainFileError) -> [(
        name: String, value: Range<Int>
    )] {
        var scanner = JSONScanner(bytes: bytes, end: range.upperBound, position: range.lowerBound)
        do throws(JSONSyntaxError) {
            let members = try scanner.objectMembers()
            scanner.skipWhitespace()
            guard scanner.position == range.upperBound else { throw scanner.error("unexpected data after the object") }
            return members
        } catch {
            throw DomainFileError(reason: "\(what) is not a JSON object that can be read: \(error)")
        }
    }
}

/// Delimits JSON texts without building them (see ``DomainFile/split(_:_:what:)``).
private struct JSONScanner {
    let bytes: [UInt8]
    let end: Int
    var position: Int

    func error(_ reason: String) -> JSONSyntaxError { JSONSyntaxError(offset: position, reason: reason) }

    mutating func skipWhitespace() {
        while position < end {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    mutating func expect(_ byte: UInt8) throws(JSONSyntaxError) {
        skipWhitespace()
        guard position < end, bytes[position] == byte else {
            throw error("expected '\(Character(Unicode.Scalar(byte)))'")
        }
        position += 1
    }

    mutating func objectMembers() throws(JSONSyntaxError) -> [(name: String, value: Range<Int>)] {
        try expect(UInt8(ascii: "{"))
        var members: [(name: String, value: Range<Int>)] = []
        skipWhitespace()
        if position < end, bytes[position] == UInt8(ascii: "}") {
            position += 1
            return members
        }
        while true {
            skipWhitespace()
            let nameStart = position
            guard position < end, bytes[position] == UInt8(ascii: "\"") else {
                throw error("expected a member name in quotes")
            }
            try skipString()
            let name = try memberName(nameStart..<position)
            try expect(UInt8(ascii: ":"))
            skipWhitespace()
            let valueStart = position
            try skipValue()
            members.append((name, valueStart..<position))
            skipWhitespace()
            guard position < end else { throw error("unexpected end of input in object") }
            position += 1
            if bytes[position - 1] == UInt8(ascii: "}") { return members }
            guard bytes[position - 1] == UInt8(ascii: ",") else { throw error("expected ',' or '}' in object") }
        }
    }

    /// The string in quotes at `range`: a plain ASCII name is taken as it is, anything else
    /// read by the strict parser.
    func memberName(_ range: Range<Int>) throws(JSONSyntaxError) -> String {
        let inner = bytes[(range.lowerBound + 1)..<(range.upperBound - 1)]
        if inner.allSatisfy({ $0 >= 0x20 && $0 < 0x80 && $0 != UInt8(ascii: "\\") }) {
            return String(decoding: inner, as: UTF8.self)
        }
        guard case .string(let name) = try JSONParser.parse(bytes[range]) else { throw error("expected a member name") }
        return name
    }

    /// From a `"` to past its closing quote: the next quote not escaped (an odd number of
    /// backslashes before it), found with `memchr`.
    mutating func skipString() throws(JSONSyntaxError) {
        let start = position
        let closing: Int? = bytes.withUnsafeBufferPointer { buffer in
            var from = start + 1
            while from < end, let found = memchr(buffer.baseAddress! + from, 0x22, end - from) {
                let quote = buffer.baseAddress!.distance(to: found.assumingMemoryBound(to: UInt8.self))
                var backslashes = 0
                while quote - backslashes - 1 > start, buffer[quote - backslashes - 1] == UInt8(ascii: "\\") {
                    backslashes += 1
                }
                if backslashes % 2 == 0 { return quote }
                from = quote + 1
            }
            return nil
        }
        guard let closing else { throw error("unterminated string") }
        position = closing + 1
    }

    /// Past one value: a string, a bracketed text (brackets and strings matched, the rest left
    /// to the value's own parse), or a run of the characters of numbers and literals.
    mutating func skipValue() throws(JSONSyntaxError) {
        guard position < end else { throw error("expected a value") }
        switch bytes[position] {
        case UInt8(ascii: "\""): return try skipString()
        case UInt8(ascii: "{"), UInt8(ascii: "["): break
        default:
            let start = position
            while position < end, Self.isScalarByte(bytes[position]) { position += 1 }
            guard position > start else { throw error("unexpected character") }
            return
        }
        var closers: [UInt8] = []
        while position < end {
            switch bytes[position] {
            case UInt8(ascii: "\""):
                try skipString()
                continue
            case UInt8(ascii: "{"): closers.append(UInt8(ascii: "}"))
            case UInt8(ascii: "["): closers.append(UInt8(ascii: "]"))
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                guard closers.popLast() == bytes[position] else { throw error("unbalanced brackets") }
                if closers.isEmpty {
                    position += 1
                    return
                }
            default: break
            }
            position += 1
        }
        throw error("unterminated array or object")
    }

    private static func isScalarByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."):
            true
        default: false
        }
    }
}
