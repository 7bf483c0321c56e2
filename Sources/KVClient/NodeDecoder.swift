import FoundationEssentials
import KVValues

/// Decodes `Decodable` values from a ``Node``, accepting both what ``NodeEncoder`` writes and
/// plain JSON as `JSONEncoder` writes it with its default strategies: a `Date` from a date, a
/// number of seconds since 2001-01-01 UTC, or an RFC 3339 string; `Data` from data or base64
/// text; a `Double` from an integer; an integer from a real without a fraction. A
/// ``VersionedValue`` anywhere in the tree is read by the version rules.
struct NodeDecoder {
    func decode<T: Decodable>(_ type: T.Type, from node: Node) throws -> T {
        try NodeDecoding.unbox(type, node, codingPath: [])
    }
}

struct NodeDecoding: Decoder {
    let node: Node
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<K: CodingKey>(keyedBy type: K.Type) throws -> KeyedDecodingContainer<K> {
        guard case .object(let members) = node else { throw Self.mismatch([String: Node].self, node, codingPath) }
        return KeyedDecodingContainer(KeyedNodeDecoding<K>(members: members, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = node else { throw Self.mismatch([Node].self, node, codingPath) }
        return UnkeyedNodeDecoding(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleNodeDecoding(node: node, codingPath: codingPath)
    }

    static func mismatch(_ type: Any.Type, _ node: Node, _ codingPath: [any CodingKey]) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "expected \(type), found a \(node.typeName)"))
    }

    /// Decodes one value, with the types kvd stores natively handled here.
    static func unbox<T: Decodable>(_ type: T.Type, _ node: Node, codingPath: [any CodingKey]) throws -> T {
        if node == .null, !(T.self is any OptionalProtocol.Type) {
            throw DecodingError.valueNotFound(T.self, .init(codingPath: codingPath, debugDescription: "found null"))
        }
        switch type {
        case is Date.Type: return try date(node, codingPath) as! T
        case is Data.Type: return try data(node, codingPath) as! T
        case is URL.Type:
            guard case .string(let text) = node, let url = URL(string: text) else { throw mismatch(URL.self, node, codingPath) }
            return url as! T
        case is Value.Type:
            do { return try node.value() as! T } catch { throw mismatch(Value.self, node, codingPath) }
        case let versioned as any VersionedValue.Type:
            return try decodeVersioned(versioned, node, codingPath) as! T
        default:
            return try T(from: NodeDecoding(node: node, codingPath: codingPath))
        }
    }

    private static func decodeVersioned<V: VersionedValue>(_ type: V.Type, _ node: Node, _ codingPath: [any CodingKey]) throws -> V {
        try Versioning.decodeVersioned(type, node, codingPath: codingPath)
    }

    static func date(_ node: Node, _ codingPath: [any CodingKey]) throws -> Date {
        switch node {
        case .date(let date): return date
        case .real(let seconds): return Date(timeIntervalSinceReferenceDate: seconds)
        case .integer(let seconds): return Date(timeIntervalSinceReferenceDate: Double(seconds))
        case .string(let text):
            if let date = RFC3339.parse(text) { return date }
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "\"\(text)\" is not an RFC 3339 date"))
        default: throw mismatch(Date.self, node, codingPath)
        }
    }

    static func data(_ node: Node, _ codingPath: [any CodingKey]) throws -> Data {
        switch node {
        case .data(let data): return data
        case .string(let text):
            if let data = Data(base64Encoded: text) { return data }
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "not base64 text"))
        default: throw mismatch(Data.self, node, codingPath)
        }
    }

    static func bool(_ node: Node, _ codingPath: [any CodingKey]) throws -> Bool {
        guard case .bool(let flag) = node else { throw mismatch(Bool.self, node, codingPath) }
        return flag
    }

    static func string(_ node: Node, _ codingPath: [any CodingKey]) throws -> String {
        guard case .string(let text) = node else { throw mismatch(String.self, node, codingPath) }
        return text
    }

    static func double(_ node: Node, _ codingPath: [any CodingKey]) throws -> Double {
        switch node {
        case .real(let number): return number
        case .integer(let number): return Double(number)
        default: throw mismatch(Double.self, node, codingPath)
        }
    }

    static func integer<T: FixedWidthInteger>(_ type: T.Type, _ node: Node, _ codingPath: [any CodingKey]) throws -> T {
        let exact: T?
        switch node {
        case .integer(let number): exact = T(exactly: number)
        case .real(let number): exact = T(exactly: number)
        default: throw mismatch(T.self, node, codingPath)
        }
        guard let exact else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "\(node) does not fit \(T.self)"))
        }
        return exact
    }
}

/// Lets the decoder tell `Optional` apart, so `null` decodes as `nil` only where allowed.
protocol OptionalProtocol {
    static var wrappedType: Any.Type { get }
}

extension Optional: OptionalProtocol {
    static var wrappedType: Any.Type { Wrapped.self }
}

struct KeyedNodeDecoding<K: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [String: Node]
    var codingPath: [any CodingKey]

    var allKeys: [K] { members.keys.compactMap { K(stringValue: $0) } }
    func contains(_ key: K) -> Bool { members[key.stringValue] != nil }

    private func node(_ key: K) throws -> Node {
        guard let node = members[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no member \"\(key.stringValue)\""))
        }
        return node
    }

    func decodeNil(forKey key: K) throws -> Bool { members[key.stringValue] == nil || members[key.stringValue] == .null }
    func decode(_ type: Bool.Type, forKey key: K) throws -> Bool { try NodeDecoding.bool(node(key), codingPath + [key]) }
    func decode(_ type: String.Type, forKey key: K) throws -> String { try NodeDecoding.string(node(key), codingPath + [key]) }
    func decode(_ type: Double.Type, forKey key: K) throws -> Double { try NodeDecoding.double(node(key), codingPath + [key]) }
    func decode(_ type: Float.Type, forKey key: K) throws -> Float { Float(try NodeDecoding.double(node(key), codingPath + [key])) }
    func decode(_ type: Int.Type, forKey key: K) throws -> Int { try NodeDecoding.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: Int8.Type, forKey key: K) throws -> Int8 { try NodeDecoding.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: Int16.Type, forKey key: K) throws -> Int16 { try NodeDecoding.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: Int32.Type, forKey key: K) throws -> Int32 { try NodeDecoding.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: Int64.Type, forKey key: K) throws -> Int64 { try NodeDecoding.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: UInt.Type, forKey key: K) throws -> UInt { try NodeDecoding.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: UInt8.Type, forKey key: K) throws -> UInt8 { try NodeDecoding.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: UInt16.Type, forKey key: K) throws -> UInt16 { try NodeDecoding.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: UInt32.Type, forKey key: K) throws -> UInt32 { try NodeDecoding.integer(type, node(key), codingPath + [key]) }
    func decode(_ type: UInt64.Type, forKey key: K) throws -> UInt64 { try NodeDecoding.integer(type, node(key), codingPath + [key]) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: K) throws -> T {
        try NodeDecoding.unbox(type, node(key), codingPath: codingPath + [key])
    }

    func nestedContainer<N: CodingKey>(keyedBy type: N.Type, forKey key: K) throws -> KeyedDecodingContainer<N> {
        try NodeDecoding(node: node(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: K) throws -> any UnkeyedDecodingContainer {
        try NodeDecoding(node: node(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        NodeDecoding(node: members["super"] ?? .null, codingPath: codingPath)
    }

    func superDecoder(forKey key: K) throws -> any Decoder {
        NodeDecoding(node: members[key.stringValue] ?? .null, codingPath: codingPath + [key])
    }
}

struct UnkeyedNodeDecoding: UnkeyedDecodingContainer {
    let elements: [Node]
    var codingPath: [any CodingKey]
    var currentIndex = 0

    init(elements: [Node], codingPath: [any CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    /// Decodes the next element and moves past it only on success, as Codable expects.
    private mutating func next<T>(_ type: T.Type, _ body: (Node, [any CodingKey]) throws -> T) throws -> T {
        let path = codingPath + [IndexKey(currentIndex)]
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, .init(codingPath: path, debugDescription: "the array has no more elements"))
        }
        let value = try body(elements[currentIndex], path)
        currentIndex += 1
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, elements[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type, NodeDecoding.bool) }
    mutating func decode(_ type: String.Type) throws -> String { try next(type, NodeDecoding.string) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type, NodeDecoding.double) }
    mutating func decode(_ type: Float.Type) throws -> Float { Float(try next(Double.self, NodeDecoding.double)) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type) { try NodeDecoding.integer(type, $0, $1) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type) { try NodeDecoding.integer(type, $0, $1) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type) { try NodeDecoding.integer(type, $0, $1) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type) { try NodeDecoding.integer(type, $0, $1) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type) { try NodeDecoding.integer(type, $0, $1) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type) { try NodeDecoding.integer(type, $0, $1) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type) { try NodeDecoding.integer(type, $0, $1) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type) { try NodeDecoding.integer(type, $0, $1) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type) { try NodeDecoding.integer(type, $0, $1) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type) { try NodeDecoding.integer(type, $0, $1) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try next(type) { try NodeDecoding.unbox(type, $0, codingPath: $1) }
    }

    mutating func nestedContainer<N: CodingKey>(keyedBy type: N.Type) throws -> KeyedDecodingContainer<N> {
        try next(KeyedDecodingContainer<N>.self) { try NodeDecoding(node: $0, codingPath: $1).container(keyedBy: type) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next((any UnkeyedDecodingContainer).self) { try NodeDecoding(node: $0, codingPath: $1).unkeyedContainer() }
    }

    mutating func superDecoder() throws -> any Decoder {
        try next((any Decoder).self) { NodeDecoding(node: $0, codingPath: $1) }
    }
}

struct SingleNodeDecoding: SingleValueDecodingContainer {
    let node: Node
    var codingPath: [any CodingKey]

    func decodeNil() -> Bool { node == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try NodeDecoding.bool(node, codingPath) }
    func decode(_ type: String.Type) throws -> String { try NodeDecoding.string(node, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try NodeDecoding.double(node, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { Float(try NodeDecoding.double(node, codingPath)) }
    func decode(_ type: Int.Type) throws -> Int { try NodeDecoding.integer(type, node, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try NodeDecoding.integer(type, node, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try NodeDecoding.integer(type, node, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try NodeDecoding.integer(type, node, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try NodeDecoding.integer(type, node, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try NodeDecoding.integer(type, node, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try NodeDecoding.integer(type, node, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try NodeDecoding.integer(type, node, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try NodeDecoding.integer(type, node, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try NodeDecoding.integer(type, node, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try NodeDecoding.unbox(type, node, codingPath: codingPath) }
}
