import FoundationEssentials
import KVValues

/// The members of a stored object. A member counts as read once a decode of it succeeded;
/// `decodeIfPresent` never throws on a member it cannot read: it records it and returns nil
/// (the member is put back when the value is saved unchanged there).
struct KeyedNodeDecoding<K: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [String: Node]
    var codingPath: [any CodingKey]
    let context: DecodingContext
    let access: Access

    var allKeys: [K] { members.keys.compactMap { K(stringValue: $0) } }
    func contains(_ key: K) -> Bool { members[key.stringValue] != nil }

    private func node(_ key: K) throws -> Node {
        guard let node = members[key.stringValue] else {
            throw DecodingError.keyNotFound(
                key, .init(codingPath: codingPath, debugDescription: "no member \"\(key.stringValue)\""))
        }
        return node
    }

    /// Decodes the member with `body`, and marks it read if that succeeded.
    private func read<T>(_ key: K, _ body: (Node, [any CodingKey]) throws -> T) throws -> T {
        let value = try body(node(key), codingPath + [key])
        access.read.insert(key.stringValue)
        return value
    }

    /// The member decoded with `body`; nil if absent or null; nil and a record if unreadable.
    private func lenient<T>(_ key: K, _ body: (Node, [any CodingKey]) throws -> T) -> T? {
        guard let node = members[key.stringValue] else { return nil }
        access.read.insert(key.stringValue)
        if node == .null { return nil }
        let path = codingPath + [key]
        do {
            return try body(node, path)
        } catch {
            context.log.record(
                Finding(
                    path, Versioning.kind(of: error), "read as nil: " + Versioning.describe(error),
                    stored: node, keep: .memberIfUnchanged, stable: context.stable))
            return nil
        }
    }

    func decodeNil(forKey key: K) throws -> Bool {
        let isNil = members[key.stringValue] == nil || members[key.stringValue] == .null
        if isNil { access.read.insert(key.stringValue) }
        return isNil
    }

    func decode(_ type: Bool.Type, forKey key: K) throws -> Bool { try read(key, NodeDecoding.bool) }
    func decode(_ type: String.Type, forKey key: K) throws -> String { try read(key, NodeDecoding.string) }
    func decode(_ type: Double.Type, forKey key: K) throws -> Double { try read(key, NodeDecoding.double) }
    func decode(_ type: Float.Type, forKey key: K) throws -> Float { Float(try read(key, NodeDecoding.double)) }
    func decode(_ type: Int.Type, forKey key: K) throws -> Int {
        try read(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decode(_ type: Int8.Type, forKey key: K) throws -> Int8 {
        try read(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decode(_ type: Int16.Type, forKey key: K) throws -> Int16 {
        try read(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decode(_ type: Int32.Type, forKey key: K) throws -> Int32 {
        try read(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decode(_ type: Int64.Type, forKey key: K) throws -> Int64 {
        try read(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decode(_ type: UInt.Type, forKey key: K) throws -> UInt {
        try read(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decode(_ type: UInt8.Type, forKey key: K) throws -> UInt8 {
        try read(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decode(_ type: UInt16.Type, forKey key: K) throws -> UInt16 {
        try read(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decode(_ type: UInt32.Type, forKey key: K) throws -> UInt32 {
        try read(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decode(_ type: UInt64.Type, forKey key: K) throws -> UInt64 {
        try read(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decode<T: Decodable>(_ type: T.Type, forKey key: K) throws -> T {
        try read(key) { try NodeDecoding.unbox(type, $0, $1, context) }
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: K) throws -> Bool? { lenient(key, NodeDecoding.bool) }
    func decodeIfPresent(_ type: String.Type, forKey key: K) throws -> String? { lenient(key, NodeDecoding.string) }
    func decodeIfPresent(_ type: Double.Type, forKey key: K) throws -> Double? { lenient(key, NodeDecoding.double) }
    func decodeIfPresent(_ type: Float.Type, forKey key: K) throws -> Float? {
        lenient(key, NodeDecoding.double).map(Float.init)
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: K) throws -> Int? {
        lenient(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decodeIfPresent(_ type: Int8.Type, forKey key: K) throws -> Int8? {
        lenient(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decodeIfPresent(_ type: Int16.Type, forKey key: K) throws -> Int16? {
        lenient(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decodeIfPresent(_ type: Int32.Type, forKey key: K) throws -> Int32? {
        lenient(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decodeIfPresent(_ type: Int64.Type, forKey key: K) throws -> Int64? {
        lenient(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decodeIfPresent(_ type: UInt.Type, forKey key: K) throws -> UInt? {
        lenient(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: K) throws -> UInt8? {
        lenient(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: K) throws -> UInt16? {
        lenient(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: K) throws -> UInt32? {
        lenient(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: K) throws -> UInt64? {
        lenient(key) { try NodeDecoding.integer(type, $0, $1) }
    }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: K) throws -> T? {
        lenient(key) { try NodeDecoding.unbox(type, $0, $1, context) }
    }

    func nestedContainer<N: CodingKey>(keyedBy type: N.Type, forKey key: K) throws -> KeyedDecodingContainer<N> {
        try read(key) { node, path in
            try nested(node, path, "\(access.typeName).\(key.stringValue)").container(keyedBy: type)
        }
    }

    func nestedUnkeyedContainer(forKey key: K) throws -> any UnkeyedDecodingContainer {
        try read(key) { node, path in try nested(node, path, "\(access.typeName).\(key.stringValue)").unkeyedContainer()
        }
    }

    func superDecoder() throws -> any Decoder {
        access.read.insert("super")
        return nested(members["super"] ?? .null, codingPath + [MemberKey("super")], "\(access.typeName).super")
    }

    func superDecoder(forKey key: K) throws -> any Decoder {
        access.read.insert(key.stringValue)
        return nested(members[key.stringValue] ?? .null, codingPath + [key], "\(access.typeName).\(key.stringValue)")
    }

    /// A decoder for a member whose reading is checked with this container's.
    private func nested(_ node: Node, _ path: [any CodingKey], _ name: String) -> NodeDecoding {
        NodeDecoding(node: node, codingPath: path, context: context, access: access.child(name, node, path))
    }
}

/// The elements of a stored array read one by one by a type's own `init(from:)`; elements it
/// does not reach are recorded as unread.
struct UnkeyedNodeDecoding: UnkeyedDecodingContainer {
    let elements: [Node]
    var codingPath: [any CodingKey]
    let context: DecodingContext
    let access: Access
    var currentIndex = 0

    init(elements: [Node], codingPath: [any CodingKey], context: DecodingContext, access: Access) {
        self.elements = elements
        self.codingPath = codingPath
        self.context = context
        self.access = access
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    /// Decodes the next element and moves past it only on success, as Codable expects.
    private mutating func next<T>(_ type: T.Type, _ body: (Node, [any CodingKey]) throws -> T) throws -> T {
        let path = codingPath + [IndexKey(currentIndex)]
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                type, .init(codingPath: path, debugDescription: "the array has no more elements"))
        }
        let value = try body(elements[currentIndex], path)
        currentIndex += 1
        access.consumed = max(access.consumed, currentIndex)
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, elements[currentIndex] == .null else { return false }
        currentIndex += 1
        access.consumed = max(access.consumed, currentIndex)
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type, NodeDecoding.bool) }
    mutating func decode(_ type: String.Type) throws -> String { try next(type, NodeDecoding.string) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type, NodeDecoding.double) }
    mutating func decode(_ type: Float.Type) throws -> Float { Float(try next(Double.self, NodeDecoding.double)) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type) { try NodeDecoding.integer(type, $0, $1) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type) { try NodeDecoding.integer(type, $0, $1) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 {
        try next(type) { try NodeDecoding.integer(type, $0, $1) }
    }
    mutating func decode(_ type: Int32.Type) throws -> Int32 {
        try next(type) { try NodeDecoding.integer(type, $0, $1) }
    }
    mutating func decode(_ type: Int64.Type) throws -> Int64 {
        try next(type) { try NodeDecoding.integer(type, $0, $1) }
    }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type) { try NodeDecoding.integer(type, $0, $1) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 {
        try next(type) { try NodeDecoding.integer(type, $0, $1) }
    }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 {
        try next(type) { try NodeDecoding.integer(type, $0, $1) }
    }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 {
        try next(type) { try NodeDecoding.integer(type, $0, $1) }
    }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 {
        try next(type) { try NodeDecoding.integer(type, $0, $1) }
    }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let context = context.unstable
        return try next(type) { try NodeDecoding.unbox(type, $0, $1, context) }
    }

    mutating func nestedContainer<N: CodingKey>(keyedBy type: N.Type) throws -> KeyedDecodingContainer<N> {
        let (context, access) = (context, access)
        return try next(KeyedDecodingContainer<N>.self) {
            try Self.nested($0, $1, context, access).container(keyedBy: type)
        }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let (context, access) = (context, access)
        return try next((any UnkeyedDecodingContainer).self) {
            try Self.nested($0, $1, context, access).unkeyedContainer()
        }
    }

    mutating func superDecoder() throws -> any Decoder {
        let (context, access) = (context, access)
        return try next((any Decoder).self) { Self.nested($0, $1, context, access) }
    }

    private static func nested(_ node: Node, _ path: [any CodingKey], _ context: DecodingContext, _ access: Access)
        -> NodeDecoding
    {
        NodeDecoding(
            node: node, codingPath: path, context: context.unstable,
            access: access.child("\(access.typeName)[…]", node, path))
    }
}

/// One stored value read whole by a type's own `init(from:)`.
struct SingleNodeDecoding: SingleValueDecodingContainer {
    let node: Node
    var codingPath: [any CodingKey]
    let context: DecodingContext

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
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try NodeDecoding.unbox(type, node, codingPath, context) }
}
