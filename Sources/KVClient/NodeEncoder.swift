import FoundationEssentials
import KVValues

/// Encodes `Encodable` values to a ``Node``, the way they are stored in kvd: `Date` as a date,
/// `Data` as data, `URL` as its string, integers as integers and floating-point numbers as reals.
/// A ``VersionedValue`` anywhere in the tree gets its schema version written into its object.
struct NodeEncoder {
    func encode(_ value: some Encodable) throws -> Node {
        let root = NodeRef()
        try root.store(value, codingPath: [])
        return root.node
    }
}

/// A node under construction; containers write into it by reference.
final class NodeRef {
    private enum Content {
        case empty
        case leaf(Node)
        case object([String: NodeRef])
        case array([NodeRef])
    }

    private var content = Content.empty

    var node: Node {
        switch content {
        case .empty: .object([:])
        case .leaf(let node): node
        case .object(let members): .object(members.mapValues(\.node))
        case .array(let elements): .array(elements.map(\.node))
        }
    }

    func set(_ leaf: Node) { content = .leaf(leaf) }

    func makeObject() {
        if case .object = content { return }
        content = .object([:])
    }

    func makeArray() {
        if case .array = content { return }
        content = .array([])
    }

    func child(named name: String) -> NodeRef {
        makeObject()
        guard case .object(var members) = content else { fatalError("unreachable") }
        if let existing = members[name] { return existing }
        let child = NodeRef()
        members[name] = child
        content = .object(members)
        return child
    }

    func appendChild() -> NodeRef {
        makeArray()
        guard case .array(var elements) = content else { fatalError("unreachable") }
        let child = NodeRef()
        elements.append(child)
        content = .array(elements)
        return child
    }

    var count: Int {
        switch content {
        case .array(let elements): elements.count
        case .object(let members): members.count
        default: 0
        }
    }

    /// Encodes `value` into this node, with the types kvd stores natively kept as they are.
    func store(_ value: some Encodable, codingPath: [any CodingKey]) throws {
        switch value {
        case let date as Date: set(.date(date))
        case let data as Data: set(.data(data))
        case let url as URL: set(.string(url.absoluteString))
        case let value as Value: set(Node(value))
        case let versioned as any VersionedValue:
            try versioned.encode(to: NodeEncoding(ref: self, codingPath: codingPath))
            switch content {
            case .object, .empty:
                let type = type(of: versioned)
                child(named: type.schemaVersionKey).set(.integer(Int64(type.schemaVersion)))
            case .leaf, .array: break
            }
        default: try value.encode(to: NodeEncoding(ref: self, codingPath: codingPath))
        }
    }

    static func real(_ number: Double, _ codingPath: [any CodingKey]) throws -> Node {
        guard number.isFinite else {
            throw EncodingError.invalidValue(
                number, .init(codingPath: codingPath, debugDescription: "kvd stores only finite numbers, not \(number)")
            )
        }
        return .real(number)
    }

    static func integer<T: BinaryInteger>(_ number: T, _ codingPath: [any CodingKey]) throws -> Node {
        guard let exact = Int64(exactly: number) else {
            throw EncodingError.invalidValue(
                number,
                .init(codingPath: codingPath, debugDescription: "\(number) does not fit a signed 64-bit integer"))
        }
        return .integer(exact)
    }
}

struct IndexKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(_ index: Int) {
        stringValue = "Index \(index)"
        intValue = index
    }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { self.init(intValue) }
}

struct NodeEncoding: Encoder {
    let ref: NodeRef
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<K: CodingKey>(keyedBy type: K.Type) -> KeyedEncodingContainer<K> {
        ref.makeObject()
        return KeyedEncodingContainer(KeyedNodeEncoding<K>(ref: ref, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        ref.makeArray()
        return UnkeyedNodeEncoding(ref: ref, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleNodeEncoding(ref: ref, codingPath: codingPath)
    }
}

struct KeyedNodeEncoding<K: CodingKey>: KeyedEncodingContainerProtocol {
    let ref: NodeRef
    var codingPath: [any CodingKey]

    private func put(_ node: Node, _ key: K) { ref.child(named: key.stringValue).set(node) }

    mutating func encodeNil(forKey key: K) throws { put(.null, key) }
    mutating func encode(_ value: Bool, forKey key: K) throws { put(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: K) throws { put(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: K) throws {
        put(try NodeRef.real(value, codingPath + [key]), key)
    }
    mutating func encode(_ value: Float, forKey key: K) throws {
        put(try NodeRef.real(Coercion.decimal(value), codingPath + [key]), key)
    }
    mutating func encode(_ value: Int, forKey key: K) throws {
        put(try NodeRef.integer(value, codingPath + [key]), key)
    }
    mutating func encode(_ value: Int8, forKey key: K) throws {
        put(try NodeRef.integer(value, codingPath + [key]), key)
    }
    mutating func encode(_ value: Int16, forKey key: K) throws {
        put(try NodeRef.integer(value, codingPath + [key]), key)
    }
    mutating func encode(_ value: Int32, forKey key: K) throws {
        put(try NodeRef.integer(value, codingPath + [key]), key)
    }
    mutating func encode(_ value: Int64, forKey key: K) throws {
        put(try NodeRef.integer(value, codingPath + [key]), key)
    }
    mutating func encode(_ value: UInt, forKey key: K) throws {
        put(try NodeRef.integer(value, codingPath + [key]), key)
    }
    mutating func encode(_ value: UInt8, forKey key: K) throws {
        put(try NodeRef.integer(value, codingPath + [key]), key)
    }
    mutating func encode(_ value: UInt16, forKey key: K) throws {
        put(try NodeRef.integer(value, codingPath + [key]), key)
    }
    mutating func encode(_ value: UInt32, forKey key: K) throws {
        put(try NodeRef.integer(value, codingPath + [key]), key)
    }
    mutating func encode(_ value: UInt64, forKey key: K) throws {
        put(try NodeRef.integer(value, codingPath + [key]), key)
    }
    mutating func encode<T: Encodable>(_ value: T, forKey key: K) throws {
        try ref.child(named: key.stringValue).store(value, codingPath: codingPath + [key])
    }

    mutating func nestedContainer<N: CodingKey>(keyedBy type: N.Type, forKey key: K) -> KeyedEncodingContainer<N> {
        let child = ref.child(named: key.stringValue)
        child.makeObject()
        return KeyedEncodingContainer(KeyedNodeEncoding<N>(ref: child, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: K) -> any UnkeyedEncodingContainer {
        let child = ref.child(named: key.stringValue)
        child.makeArray()
        return UnkeyedNodeEncoding(ref: child, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder {
        NodeEncoding(ref: ref.child(named: "super"), codingPath: codingPath)
    }

    mutating func superEncoder(forKey key: K) -> any Encoder {
        NodeEncoding(ref: ref.child(named: key.stringValue), codingPath: codingPath + [key])
    }
}

struct UnkeyedNodeEncoding: UnkeyedEncodingContainer {
    let ref: NodeRef
    var codingPath: [any CodingKey]
    var count: Int { ref.count }

    private var nextPath: [any CodingKey] { codingPath + [IndexKey(count)] }
    private func put(_ node: Node) { ref.appendChild().set(node) }

    mutating func encodeNil() throws { put(.null) }
    mutating func encode(_ value: Bool) throws { put(.bool(value)) }
    mutating func encode(_ value: String) throws { put(.string(value)) }
    mutating func encode(_ value: Double) throws { put(try NodeRef.real(value, nextPath)) }
    mutating func encode(_ value: Float) throws { put(try NodeRef.real(Coercion.decimal(value), nextPath)) }
    mutating func encode(_ value: Int) throws { put(try NodeRef.integer(value, nextPath)) }
    mutating func encode(_ value: Int8) throws { put(try NodeRef.integer(value, nextPath)) }
    mutating func encode(_ value: Int16) throws { put(try NodeRef.integer(value, nextPath)) }
    mutating func encode(_ value: Int32) throws { put(try NodeRef.integer(value, nextPath)) }
    mutating func encode(_ value: Int64) throws { put(try NodeRef.integer(value, nextPath)) }
    mutating func encode(_ value: UInt) throws { put(try NodeRef.integer(value, nextPath)) }
    mutating func encode(_ value: UInt8) throws { put(try NodeRef.integer(value, nextPath)) }
    mutating func encode(_ value: UInt16) throws { put(try NodeRef.integer(value, nextPath)) }
    mutating func encode(_ value: UInt32) throws { put(try NodeRef.integer(value, nextPath)) }
    mutating func encode(_ value: UInt64) throws { put(try NodeRef.integer(value, nextPath)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        let path = nextPath
        try ref.appendChild().store(value, codingPath: path)
    }

    mutating func nestedContainer<N: CodingKey>(keyedBy type: N.Type) -> KeyedEncodingContainer<N> {
        let path = nextPath
        let child = ref.appendChild()
        child.makeObject()
        return KeyedEncodingContainer(KeyedNodeEncoding<N>(ref: child, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = nextPath
        let child = ref.appendChild()
        child.makeArray()
        return UnkeyedNodeEncoding(ref: child, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let path = nextPath
        return NodeEncoding(ref: ref.appendChild(), codingPath: path)
    }
}

struct SingleNodeEncoding: SingleValueEncodingContainer {
    let ref: NodeRef
    var codingPath: [any CodingKey]

    mutating func encodeNil() throws { ref.set(.null) }
    mutating func encode(_ value: Bool) throws { ref.set(.bool(value)) }
    mutating func encode(_ value: String) throws { ref.set(.string(value)) }
    mutating func encode(_ value: Double) throws { ref.set(try NodeRef.real(value, codingPath)) }
    mutating func encode(_ value: Float) throws { ref.set(try NodeRef.real(Coercion.decimal(value), codingPath)) }
    mutating func encode(_ value: Int) throws { ref.set(try NodeRef.integer(value, codingPath)) }
    mutating func encode(_ value: Int8) throws { ref.set(try NodeRef.integer(value, codingPath)) }
    mutating func encode(_ value: Int16) throws { ref.set(try NodeRef.integer(value, codingPath)) }
    mutating func encode(_ value: Int32) throws { ref.set(try NodeRef.integer(value, codingPath)) }
    mutating func encode(_ value: Int64) throws { ref.set(try NodeRef.integer(value, codingPath)) }
    mutating func encode(_ value: UInt) throws { ref.set(try NodeRef.integer(value, codingPath)) }
    mutating func encode(_ value: UInt8) throws { ref.set(try NodeRef.integer(value, codingPath)) }
    mutating func encode(_ value: UInt16) throws { ref.set(try NodeRef.integer(value, codingPath)) }
    mutating func encode(_ value: UInt32) throws { ref.set(try NodeRef.integer(value, codingPath)) }
    mutating func encode(_ value: UInt64) throws { ref.set(try NodeRef.integer(value, codingPath)) }
    mutating func encode<T: Encodable>(_ value: T) throws { try ref.store(value, codingPath: codingPath) }
}
