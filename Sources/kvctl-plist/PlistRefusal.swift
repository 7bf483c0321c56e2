import KVValues

/// Why kvctl-plist refuses an input: one line for the user, naming the key where there is one.
struct PlistRefusal: Error, Equatable {
    var message: String
    init(_ message: String) { self.message = message }
}

/// What the property-list readers accept, derived from the contract's limits.
enum PlistLimits {
    /// Most bytes of values a property list may expand to, counted as a lower bound of their
    /// typed JSON: a domain holds at most ``Limits/domainBytes``, so a list whose values would
    /// take more (a binary list that refers to one large string many times, say) can never be
    /// imported and is refused before any value is built.
    static let expandedBytes = Limits.domainBytes

    /// Deepest nesting of arrays and dictionaries: each takes at least one of the contract's
    /// ``Limits/valueDepth`` levels, so anything deeper could never be stored.
    static let depth = Limits.valueDepth
}

/// Where a value sits in a property list, for messages.
enum PlistPlace {
    /// `the value of "key"`, or of `"key" at [2]["inner"]`; `the property list` for the top.
    static func describe(_ path: [String]) -> String {
        guard let key = path.first else { return "the property list" }
        let inside = path.dropFirst().map { $0.hasPrefix("[") ? $0 : "[\"\($0)\"]" }.joined()
        return "the value of \"\(key)\"\(inside.isEmpty ? "" : " at \(inside)")"
    }

    /// `path` extended by array element `index`.
    static func element(_ path: [String], _ index: Int) -> [String] { path + ["[\(index)]"] }

    /// The refusal for a nesting deeper than ``PlistLimits/depth``.
    static func tooDeep(_ path: [String]) -> PlistRefusal {
        PlistRefusal(
            "\(describe(path)) nests arrays and dictionaries more than \(PlistLimits.depth) levels deep, deeper than kvd holds; nothing imported"
        )
    }

    /// The refusal for a list that expands beyond ``PlistLimits/expandedBytes``.
    static func tooLarge(_ path: [String]) -> PlistRefusal {
        PlistRefusal(
            "\(describe(path)) expands to more than \(PlistLimits.expandedBytes) bytes of values, more than one domain holds (\(Limits.messageBytes >> 20) MiB); nothing imported"
        )
    }

    /// The refusal for a string that is not Unicode text (a lone UTF-16 surrogate).
    static func loneSurrogate(_ path: [String], _ unit: UInt32, isKey: Bool) -> PlistRefusal {
        let what = isKey ? "a key of \(describe(path))" : describe(path)
        let code = String(unit, radix: 16, uppercase: true)
        return PlistRefusal(
            "\(what) holds a lone UTF-16 surrogate (U+\(code)), which is not text kvd can hold; nothing imported")
    }

    /// The refusal for an integer outside kvd's signed 64 bits; `number` is its decimal text.
    static func integerTooBig(_ path: [String], _ number: String) -> PlistRefusal {
        PlistRefusal(
            "\(describe(path)) is the integer \(number.prefix(80)), beyond kvd's signed 64-bit integers; nothing imported"
        )
    }

    /// The refusal for a real that is NaN or infinite.
    static func notFinite(_ path: [String], _ number: String) -> PlistRefusal {
        PlistRefusal(
            "\(describe(path)) is the real \(number.prefix(80)), which kvd cannot hold (reals are finite); nothing imported"
        )
    }

    /// The refusal for a type kvd has no value for (`kind`: "a UID (from a keyed archive)").
    static func cannotHold(_ path: [String], _ kind: String) -> PlistRefusal {
        PlistRefusal("\(describe(path)) is \(kind), which kvd cannot hold; nothing imported")
    }

    /// The refusal for a dictionary that holds one key twice.
    static func duplicateKey(_ path: [String], _ key: String) -> PlistRefusal {
        PlistRefusal(
            "\(path.isEmpty ? "the property list" : describe(path)) holds the key \"\(key)\" twice; nothing imported")
    }

    /// The refusal for a top-level object that is not a dictionary.
    static func notADictionary(_ kind: String) -> PlistRefusal {
        PlistRefusal("the property list holds \(kind), but import needs a dictionary of key: value")
    }

    /// Whether seconds since 2001-01-01 is a date kvd holds (finite, in the years 0001-9999).
    static func isStorableDate(sinceReferenceDate seconds: Double) -> Bool {
        seconds.isFinite && RFC3339.range.contains(seconds + 978_307_200)
    }
}
