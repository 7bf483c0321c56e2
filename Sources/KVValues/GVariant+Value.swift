import FoundationEssentials

/// GVariant values as kvd stores them, the rule of the GSettings backend (`clib/gio/convert.c`,
/// docs/gsettings.md): the natural form where there is one (a boolean, an integer of any width
/// that fits an Int64, a finite double, a string, an object path or a signature, a bytestring as
/// data, an array whose items all have one, a dictionary with string keys in strictly ascending
/// order, a variant whose value's natural form reads back as the same type), else the tagged
/// form `{"gvariant": TYPE, "text": TEXT}` that the backend reads with `g_variant_parse`.
extension GVariant {
    /// The value as the GSettings backend stores it.
    public var kvdValue: Value {
        natural ?? .dictionary(["gvariant": .string(typeString), "text": .string(printed())])
    }

    /// The natural form, or nil when there is none.
    var natural: Value? {
        switch self {
        case .boolean(let value): .bool(value)
        case .byte(let value): .integer(Int64(value))
        case .int16(let value): .integer(Int64(value))
        case .uint16(let value): .integer(Int64(value))
        case .int32(let value): .integer(Int64(value))
        case .uint32(let value): .integer(Int64(value))
        case .int64(let value): .integer(value)
        case .uint64(let value): value <= UInt64(Int64.max) ? .integer(Int64(value)) : nil
        case .double(let value): value.isFinite ? .real(value) : nil
        case .string(let text), .objectPath(let text), .signature(let text): .string(text)
        case .variant(let inner):
            inner.natural.flatMap { converted in Self.inferredType(converted) == inner.typeString ? converted : nil }
        case .array(let element, let items): Self.naturalArray(element, items)
        case .handle, .maybe, .tuple, .entry: nil
        }
    }

    private static func naturalArray(_ element: String, _ items: [GVariant]) -> Value? {
        if element == "y" {
            return .data(Data(items.map { if case .byte(let byte) = $0 { byte } else { 0 } }))
        }
        if element.hasPrefix("{") {
            guard element.hasPrefix("{s") else { return nil }
            var members: [String: Value] = [:]
            var previous: String?
            for item in items {
                guard case .entry(.string(let key), let value) = item,
                    previous.map({ Array($0.utf8).lexicographicallyPrecedes(Array(key.utf8)) }) ?? true,
                    let converted = value.natural
                else { return nil }
                members[key] = converted
                previous = key
            }
            return isTagged(members) ? nil : .dictionary(members)
        }
        var values: [Value] = []
        for item in items {
            guard let converted = item.natural else { return nil }
            values.append(converted)
        }
        return .array(values)
    }

    /// Whether `members` would read back as the tagged form (so a dictionary that looks like
    /// one is itself stored tagged).
    private static func isTagged(_ members: [String: Value]) -> Bool {
        guard members.count == 2, case .string(let type)? = members["gvariant"] else { return false }
        let hasText: Bool
        if case .string? = members["text"] { hasText = true } else { hasText = false }
        let hasData: Bool
        if case .data? = members["data"] { hasData = true } else { hasData = false }
        return (hasText || hasData) && GVariantType.isDefinite(type)
    }

    /// The GVariant type a kvd value reads back as inside a variant (convert.c's
    /// `inferred_type`); nil for a date.
    static func inferredType(_ value: Value) -> String? {
        switch value {
        case .bool: return "b"
        case .integer: return "x"
        case .real: return "d"
        case .string: return "s"
        case .data: return "ay"
        case .dictionary: return "a{sv}"
        case .date: return nil
        case .array(let items):
            guard let first = items.first else { return "as" }
            let simple = { (value: Value) -> String? in
                switch value {
                case .bool: "bool"
                case .integer: "integer"
                case .real: "real"
                case .string: "string"
                default: nil
                }
            }
            guard let kind = simple(first), items.allSatisfy({ simple($0) == kind }) else { return "av" }
            return inferredType(first).map { "a" + $0 }
        }
    }
}
