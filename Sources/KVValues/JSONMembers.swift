/// The members of a small JSON object in document order, for hot paths that read a few names
/// (a varlink call and its parameters): no dictionary is built, names are found by a linear
/// search. Equality ignores order, as for ``JSON/object(_:)``.
public struct JSONMembers: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    public var pairs: [(name: String, value: JSON)]

    public init(pairs: [(name: String, value: JSON)] = []) {
        self.pairs = pairs
    }

    public init(_ dictionary: [String: JSON]) {
        pairs = dictionary.map { (name: $0.key, value: $0.value) }
    }

    public init(dictionaryLiteral elements: (String, JSON)...) {
        pairs = elements.map { (name: $0.0, value: $0.1) }
    }

    /// The value of member `name`, if present. Linear in the number of members.
    public subscript(name: String) -> JSON? {
        for pair in pairs where pair.name == name { return pair.value }
        return nil
    }

    public var isEmpty: Bool { pairs.isEmpty }

    /// The members as a dictionary (names are unique: the parser refuses duplicates).
    public var dictionary: [String: JSON] {
        Dictionary(pairs, uniquingKeysWith: { _, last in last })
    }

    public static func == (lhs: JSONMembers, rhs: JSONMembers) -> Bool {
        lhs.pairs.count == rhs.pairs.count && lhs.dictionary == rhs.dictionary
    }
}

/// Detects a repeated member name while an object is read in order: a linear search of the
/// members read so far while they are few, a set of their names beyond that (so a hostile
/// object with many members stays linear).
struct MemberNameSet {
    private var many: Set<String>?

    /// Whether `name` is among `pairs` (the members read so far, to which it is then added).
    mutating func contains(_ name: String, among pairs: [(name: String, value: JSON)]) -> Bool {
        if many == nil {
            if pairs.count < 16 { return pairs.contains { $0.name == name } }
            many = Set(pairs.map(\.name))
        }
        return !many!.insert(name).inserted
    }
}
