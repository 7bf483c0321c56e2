/// The second pass of ``GVariantText``: a node's pattern (what types it could have), the type
/// chosen from it (not a maybe where it need not be, `s` for a string, `i` for a number), and
/// the node's value at a type.
extension GVariantNode {
    typealias Failure = GVariantText.ParseError

    var offset: Int {
        switch self {
        case .array(_, let at), .tuple(_, let at), .variant(_, let at), .dictionary(_, _, let at), .string(_, let at),
            .bytes(_, let at), .number(_, let at), .boolean(_, let at), .maybe(_, let at), .typed(_, _, let at):
            at
        }
    }

    /// The value with its type inferred, as GLib's `ast_resolve`.
    func resolved() throws(Failure) -> GVariant {
        var type: [UInt8] = []
        for byte in try pattern() {
            switch byte {
            case UInt8(ascii: "*"): throw .init(offset: offset, reason: "unable to infer type")
            case UInt8(ascii: "M"): continue
            case UInt8(ascii: "S"): type.append(UInt8(ascii: "s"))
            case UInt8(ascii: "N"): type.append(UInt8(ascii: "i"))
            default: type.append(byte)
            }
        }
        return try value(as: String(decoding: type, as: UTF8.self))
    }

    /// The types this node could have, as a pattern (``GVariantType``).
    func pattern() throws(Failure) -> [UInt8] {
        switch self {
        case .array(let items, _):
            return Array("Ma".utf8) + (items.isEmpty ? [UInt8(ascii: "*")] : try Self.common(items))
        case .tuple(let items, _):
            var out = Array("M(".utf8)
            for item in items { out += try item.pattern() }
            return out + [UInt8(ascii: ")")]
        case .variant: return Array("Mv".utf8)
        case .dictionary(let entries, let single, _):
            return try Self.dictionaryPattern(entries, single: single, at: offset)
        case .string: return Array("MS".utf8)
        case .bytes: return Array("May".utf8)
        case .number(let token, _):
            let floating =
                token.contains(".") || (!token.hasPrefix("0x") && token.contains("e")) || token.contains("inf")
                || token.contains("nan")
            return Array((floating ? "Md" : "MN").utf8)
        case .boolean: return Array("Mb".utf8)
        case .maybe(let inner, _): return [UInt8(ascii: "m")] + (try inner?.pattern() ?? [UInt8(ascii: "*")])
        case .typed(let type, _, _): return Array(type.utf8)
        }
    }

    /// The one pattern all of `nodes` fit, or a failure naming the first that does not fit.
    static func common(_ nodes: [GVariantNode]) throws(Failure) -> [UInt8] {
        var pattern = try nodes[0].pattern()
        for node in nodes.dropFirst() {
            guard let merged = GVariantType.coalesce(pattern, try node.pattern()) else {
                throw .init(offset: node.offset, reason: "unable to find a common type")
            }
            pattern = merged
        }
        return pattern
    }

    private static func dictionaryPattern(_ entries: [(GVariantNode, GVariantNode)], single: Bool, at offset: Int)
        throws(Failure) -> [UInt8]
    {
        guard let first = entries.first else { return Array("Ma{**}".utf8) }
        let keys = try common(entries.map(\.0))
        let key = keys.first == UInt8(ascii: "M") && keys.count > 1 ? keys[1] : keys[0]
        guard Array("bynqiuxthdsogNS".utf8).contains(key) else {
            throw .init(offset: offset, reason: "dictionary keys must have basic types")
        }
        return Array((single ? "M{" : "Ma{").utf8) + [key] + (try first.1.pattern()) + [UInt8(ascii: "}")]
    }

    /// The value of this node as `type` (a definite type string), as GLib's `get_value`: a
    /// value where a maybe is wanted is just that value (not for `nothing`/`just`, nor a typed one).
    func value(as type: String) throws(Failure) -> GVariant {
        switch self {
        case .maybe(let inner, _):
            guard type.hasPrefix("m") else { throw typeError(type) }
            let element = String(type.dropFirst())
            return .maybe(element: element, try inner?.value(as: element))
        case .typed(_, let inner, _): return try inner.value(as: type)
        default:
            guard type.hasPrefix("m") else { return try baseValue(as: type) }
            let element = String(type.dropFirst())
            return .maybe(element: element, try value(as: element))
        }
    }

    func typeError(_ type: String) -> Failure {
        .init(offset: offset, reason: "can not parse as value of type '\(type)'")
    }

    private func baseValue(as type: String) throws(Failure) -> GVariant {
        switch self {
        case .array(let items, _):
            guard type.hasPrefix("a") else { throw typeError(type) }
            let element = String(type.dropFirst())
            var values: [GVariant] = []
            for item in items { values.append(try item.value(as: element)) }
            return .array(element: element, values)
        case .tuple(let items, _):
            guard let types = GVariantType.items(ofTuple: type), types.count == items.count else {
                throw typeError(type)
            }
            var values: [GVariant] = []
            for (item, itemType) in zip(items, types) { values.append(try item.value(as: itemType)) }
            return .tuple(values)
        case .variant(let inner, _):
            guard type == "v" else { throw typeError(type) }
            return .variant(try inner.resolved())
        case .dictionary(let entries, let single, _): return try dictionaryValue(entries, single: single, as: type)
        case .string(let text, _): return try stringValue(text, as: type)
        case .bytes(let bytes, _):
            guard type == "ay" else { throw typeError(type) }
            return .array(element: "y", bytes.map(GVariant.byte))
        case .number(let token, _): return try numberValue(token, as: type)
        case .boolean(let value, _):
            guard type == "b" else { throw typeError(type) }
            return .boolean(value)
        case .maybe, .typed: return try value(as: type)
        }
    }

    private func dictionaryValue(_ entries: [(GVariantNode, GVariantNode)], single: Bool, as type: String)
        throws(Failure) -> GVariant
    {
        if single {
            guard let parts = GVariantType.parts(ofEntry: type) else { throw typeError(type) }
            return .entry(try entries[0].0.value(as: parts.key), try entries[0].1.value(as: parts.value))
        }
        guard type.hasPrefix("a{"), let parts = GVariantType.parts(ofEntry: String(type.dropFirst())) else {
            throw typeError(type)
        }
        var values: [GVariant] = []
        for (key, value) in entries {
            values.append(.entry(try key.value(as: parts.key), try value.value(as: parts.value)))
        }
        return .array(element: String(type.dropFirst()), values)
    }

    private func stringValue(_ text: String, as type: String) throws(Failure) -> GVariant {
        switch type {
        case "s": return .string(text)
        case "o":
            guard GVariantType.isObjectPath(text) else {
                throw .init(offset: offset, reason: "not a valid object path")
            }
            return .objectPath(text)
        case "g":
            guard GVariantType.isSignature(text) else { throw .init(offset: offset, reason: "not a valid signature") }
            return .signature(text)
        default: throw typeError(type)
        }
    }
}
