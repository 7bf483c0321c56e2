import FoundationEssentials
import KVValues

/// Decodes `Decodable` values from a ``Node``, accepting both what ``NodeEncoder`` writes and
/// plain JSON as `JSONEncoder` writes it with its default strategies: a `Date` from a date, a
/// number of seconds since 2001-01-01 UTC, or an RFC 3339 string; `Data` from data or base64
/// text; a `Double` from an integer; an integer from a real without a fraction. A
/// ``VersionedValue`` anywhere in the tree is read by the version rules.
///
/// Nothing is dropped without a record: into the read's ``ReadLog`` go every array element and
/// dictionary entry skipped (they do not fail the rest), every optional member that could not be
/// read (it reads as nil), every stored member a type never read, and every enum read as its
/// fallback. Whatever a decode that then fails recorded is rolled back with it.
struct NodeDecoder {
    /// Decodes `type` from `node`; what the read could not use goes to `log`. Throws when the
    /// value itself cannot be read.
    func decode<T: Decodable>(_ type: T.Type, from node: Node, log: ReadLog = ReadLog()) throws -> T {
        try NodeDecoding.unbox(type, node, [], DecodingContext(log: log, stable: true))
    }
}

/// What every decoder and container of one read shares.
struct DecodingContext {
    let log: ReadLog
    /// Whether the value being decoded is reached from the root through member names only and
    /// no migration: then a member kept aside can be put back by name when the value is saved.
    let stable: Bool

    /// The context inside an array element or a migrated value.
    var unstable: DecodingContext { DecodingContext(log: log, stable: false) }
}

/// What the containers made for one node have read: checked once the type's `init(from:)`
/// returned, so that stored members it never read are recorded, not silently dropped.
final class Access {
    let typeName: String
    var keyed = false
    var unkeyed = false
    var single = false
    var read: Set<String> = []
    var consumed = 0
    /// Nested containers and super-decoders made from this node, checked with it.
    var children: [(access: Access, node: Node, path: [any CodingKey])] = []

    init(typeName: String, read: Set<String> = []) {
        self.typeName = typeName
        self.read = read
    }

    func child(_ typeName: String, _ node: Node, _ path: [any CodingKey]) -> Access {
        let access = Access(typeName: typeName)
        children.append((access, node, path))
        return access
    }

    /// Records what of `node` the type did not read: members, trailing elements, or all of it.
    func recordUnread(_ node: Node, _ path: [any CodingKey], _ context: DecodingContext) {
        switch node {
        case .object(let members) where keyed:
            for name in members.keys.sorted() where !read.contains(name) && members[name] != .null {
                context.log.record(
                    Finding(
                        path + [MemberKey(name)], .unread, "\(typeName) does not read the stored member \"\(name)\"",
                        stored: members[name], keep: .memberIfAbsent, stable: context.stable))
            }
        case .array(let elements) where unkeyed && consumed < elements.count:
            context.log.record(
                Finding(
                    path + [IndexKey(consumed)], .unread,
                    "\(typeName) read \(consumed) of the \(elements.count) elements",
                    stored: nil, keep: .never, stable: context.stable))
        case .null:
            break
        default:
            if !keyed, !unkeyed, !single {
                context.log.record(
                    Finding(path, .unread, "\(typeName) did not read it", stored: node, keep: .never, stable: false))
            }
        }
        for child in children { child.access.recordUnread(child.node, child.path, context) }
    }
}

struct NodeDecoding: Decoder {
    let node: Node
    var codingPath: [any CodingKey]
    let context: DecodingContext
    let access: Access
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<K: CodingKey>(keyedBy type: K.Type) throws -> KeyedDecodingContainer<K> {
        guard case .object(let members) = node else {
            throw Self.mismatch("\(access.typeName) as a dictionary", node, codingPath)
        }
        access.keyed = true
        return KeyedDecodingContainer(
            KeyedNodeDecoding<K>(members: members, codingPath: codingPath, context: context, access: access))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = node else {
            throw Self.mismatch("\(access.typeName) as an array", node, codingPath)
        }
        access.unkeyed = true
        return UnkeyedNodeDecoding(elements: elements, codingPath: codingPath, context: context, access: access)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        access.single = true
        return SingleNodeDecoding(node: node, codingPath: codingPath, context: context)
    }

    static func mismatch(_ expected: String, _ node: Node, _ codingPath: [any CodingKey]) -> DecodingError {
        .typeMismatch(
            Any.self, .init(codingPath: codingPath, debugDescription: "expected \(expected), found \(node.phrase)"))
    }

    /// Decodes one value, with the types kvd stores natively handled here. What it recorded is
    /// rolled back if it throws.
    static func unbox<T: Decodable>(
        _ type: T.Type, _ node: Node, _ codingPath: [any CodingKey], _ context: DecodingContext
    ) throws -> T {
        if node == .null, !(T.self is any OptionalProtocol.Type) {
            throw DecodingError.valueNotFound(
                T.self, .init(codingPath: codingPath, debugDescription: "expected \(T.self), found null"))
        }
        let mark = context.log.mark
        do {
            return try unboxRecording(type, node, codingPath, context)
        } catch {
            context.log.rollback(to: mark)
            throw error
        }
    }

    private static func unboxRecording<T: Decodable>(
        _ type: T.Type, _ node: Node, _ codingPath: [any CodingKey], _ context: DecodingContext
    ) throws -> T {
        switch type {
        case is Date.Type: return try date(node, codingPath) as! T
        case is Data.Type: return try data(node, codingPath) as! T
        case is URL.Type:
            guard case .string(let text) = node, let url = URL(string: text) else {
                throw mismatch("URL", node, codingPath)
            }
            return url as! T
        case is Value.Type:
            do { return try node.value() as! T } catch { throw mismatch("a value kvd can store", node, codingPath) }
        case let versioned as any VersionedValue.Type:
            return try decodeVersioned(versioned, node, codingPath, context) as! T
        case let array as any LenientArray.Type:
            guard case .array(let elements) = node else {
                throw Versioning.newerReshaped(array.elementType, node)
                    ?? mismatch("\(T.self) (an array)", node, codingPath)
            }
            return array.decodeLeniently(elements, codingPath, context) as! T
        case let dictionary as any LenientDictionary.Type:
            guard case .object(let members) = node else { throw mismatch("\(T.self) (a dictionary)", node, codingPath) }
            return dictionary.decodeLeniently(members, codingPath, context) as! T
        default:
            return try decodeTracked(T.self, node, codingPath, context)
        }
    }

    /// `T(from:)` on `node`, then a record of what it did not read (`alreadyRead`: members read
    /// for it, such as the schema version).
    static func decodeTracked<T: Decodable>(
        _ type: T.Type, _ node: Node, _ codingPath: [any CodingKey], _ context: DecodingContext,
        alreadyRead: Set<String> = []
    ) throws -> T {
        let access = Access(typeName: "\(T.self)", read: alreadyRead)
        let value = try T(from: NodeDecoding(node: node, codingPath: codingPath, context: context, access: access))
        access.recordUnread(node, codingPath, context)
        return value
    }

    private static func decodeVersioned<V: VersionedValue>(
        _ type: V.Type, _ node: Node, _ codingPath: [any CodingKey], _ context: DecodingContext
    ) throws -> V {
        try Versioning.decodeVersioned(type, node, codingPath, context)
    }

    static func date(_ node: Node, _ codingPath: [any CodingKey]) throws -> Date {
        switch node {
        case .date(let date): return date
        case .real(let seconds): return Date(timeIntervalSinceReferenceDate: seconds)
        case .integer(let seconds): return Date(timeIntervalSinceReferenceDate: Double(seconds))
        case .string(let text):
            if let date = RFC3339.parse(text) { return date }
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: codingPath,
                    debugDescription: "expected Date, found \(node.phrase), which is not an RFC 3339 date"))
        default: throw mismatch("Date", node, codingPath)
        }
    }

    static func data(_ node: Node, _ codingPath: [any CodingKey]) throws -> Data {
        switch node {
        case .data(let data): return data
        case .string(let text):
            if let data = Data(base64Encoded: text) { return data }
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: codingPath,
                    debugDescription: "expected Data, found \(node.phrase), which is not base64 text"))
        default: throw mismatch("Data", node, codingPath)
        }
    }

    static func bool(_ node: Node, _ codingPath: [any CodingKey]) throws -> Bool {
        guard case .bool(let flag) = node else { throw mismatch("Bool", node, codingPath) }
        return flag
    }

    static func string(_ node: Node, _ codingPath: [any CodingKey]) throws -> String {
        guard case .string(let text) = node else { throw mismatch("String", node, codingPath) }
        return text
    }

    static func double(_ node: Node, _ codingPath: [any CodingKey]) throws -> Double {
        switch node {
        case .real(let number): return number
        case .integer(let number): return Double(number)
        default: throw mismatch("Double", node, codingPath)
        }
    }

    static func integer<T: FixedWidthInteger>(_ type: T.Type, _ node: Node, _ codingPath: [any CodingKey]) throws -> T {
        let exact: T?
        switch node {
        case .integer(let number): exact = T(exactly: number)
        case .real(let number): exact = T(exactly: number)
        default: throw mismatch("\(T.self)", node, codingPath)
        }
        guard let exact else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: codingPath,
                    debugDescription: "expected \(T.self), found \(node.phrase), which does not fit"))
        }
        return exact
    }
}

/// Lets the decoder tell `Optional` apart, so `null` decodes as `nil` only where allowed.
protocol OptionalProtocol {
    static var wrappedType: Any.Type { get }
    static func wrapping(_ value: Any) -> Any?
}

extension Optional: OptionalProtocol {
    static var wrappedType: Any.Type { Wrapped.self }

    /// `value` as this optional type, if it is a `Wrapped` (or, for nested optionals, wraps one).
    static func wrapping(_ value: Any) -> Any? {
        if let wrapped = value as? Wrapped { return Optional(wrapped) as Any }
        guard let inner = (Wrapped.self as? any OptionalProtocol.Type)?.wrapping(value), let wrapped = inner as? Wrapped
        else { return nil }
        return Optional(wrapped) as Any
    }
}

/// A member name as a coding key (a dictionary entry's, or an unread member's).
struct MemberKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// Arrays decode element by element at every depth: an element that cannot be read is skipped
/// and recorded (with its stored node, to be put back on save), not fatal to the rest.
protocol LenientArray {
    static var elementType: Any.Type { get }
    static func decodeLeniently(_ elements: [Node], _ codingPath: [any CodingKey], _ context: DecodingContext) -> Any
}

extension Array: LenientArray where Element: Decodable {
    static var elementType: Any.Type { Element.self }

    static func decodeLeniently(_ elements: [Node], _ codingPath: [any CodingKey], _ context: DecodingContext) -> Any {
        var decoded: [Element] = []
        for (index, node) in elements.enumerated() {
            let path = codingPath + [IndexKey(index)]
            do {
                decoded.append(try NodeDecoding.unbox(Element.self, node, path, context.unstable))
            } catch {
                context.log.record(
                    Finding(
                        path, Versioning.kind(of: error), "skipped: " + Versioning.describe(error),
                        stored: node, keep: .append, stable: context.stable))
            }
        }
        return decoded
    }
}

/// Dictionaries with string keys decode entry by entry: an entry that cannot be read is
/// skipped and recorded, not fatal to the rest.
protocol LenientDictionary {
    static func decodeLeniently(_ members: [String: Node], _ codingPath: [any CodingKey], _ context: DecodingContext)
        -> Any
}

extension Dictionary: LenientDictionary where Key == String, Value: Decodable {
    static func decodeLeniently(_ members: [String: Node], _ codingPath: [any CodingKey], _ context: DecodingContext)
        -> Any
    {
        var decoded: [String: Value] = [:]
        for name in members.keys.sorted() {
            let path = codingPath + [MemberKey(name)]
            do {
                decoded[name] = try NodeDecoding.unbox(Value.self, members[name]!, path, context)
            } catch {
                context.log.record(
                    Finding(
                        path, Versioning.kind(of: error), "skipped: " + Versioning.describe(error),
                        stored: members[name], keep: .memberIfUnchanged, stable: context.stable))
            }
        }
        return decoded
    }
}
