import FoundationEssentials
import KVValues

/// The rules of ``VersionedValue`` and of lenient arrays, applied to stored nodes.
enum Versioning {
    /// Why a stored node could not be read as the wanted type.
    struct Failure: Error, Sendable {
        var kind: KVDiagnostic.Kind
        var message: String
    }

    /// An element of a stored array that could not be read; it stays in the stored array.
    struct SkippedElement: Sendable {
        var index: Int
        var node: Node
        var failure: Failure
    }

    // MARK: reading

    /// Decodes `node` as `T`: versioned types by the version rules, arrays leniently (bad
    /// elements are returned in `skipped`), anything else as plain Codable.
    static func decode<T: Decodable>(_ type: T.Type, from node: Node) -> (result: Result<T, Failure>, skipped: [SkippedElement]) {
        if let arrayType = T.self as? any LenientArray.Type, case .array(let elements) = node {
            let (array, skipped) = arrayType.decodeLeniently(elements)
            return (.success(array as! T), skipped)
        }
        return (decodeOne(type, from: node), [])
    }

    /// Decodes one value (an array element, or a whole non-array value).
    static func decodeOne<T: Decodable>(_ type: T.Type, from node: Node) -> Result<T, Failure> {
        do {
            return .success(try NodeDecoder().decode(type, from: node))
        } catch let failure as Failure {
            return .failure(failure)
        } catch {
            return .failure(Failure(kind: .undecodable, message: "cannot decode \(T.self): \(describe(error))"))
        }
    }

    /// Decodes a ``VersionedValue`` by the version rules (called by the decoder for every
    /// versioned type in the tree, so nested versioned values migrate too).
    static func decodeVersioned<V: VersionedValue>(_ type: V.Type, _ node: Node, codingPath: [any CodingKey]) throws -> V {
        guard let stored = storedVersion(node, key: V.schemaVersionKey) else {
            if let value = try tryEachVersion(V.self, node, codingPath) { return value }
            throw Failure(kind: .undecodable, message: "no version of \(V.self) can read it (no \(V.schemaVersionKey) stored)")
        }
        if stored > V.schemaVersion {
            throw Failure(
                kind: .newerSchema(stored: stored, known: V.schemaVersion),
                message: "it was written by a newer version of the app (\(V.schemaVersionKey) \(stored); this app knows up to \(V.schemaVersion)); it is left as stored")
        }
        do {
            guard let value = try decodeVersion(stored, as: V.self, node, codingPath) else {
                throw Failure(kind: .undecodable, message: "\(V.self) has no type for \(V.schemaVersionKey) \(stored)")
            }
            return value
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(kind: .undecodable, message: "cannot decode \(V.self) of \(V.schemaVersionKey) \(stored): \(describe(error))")
        }
    }

    /// The version stored in an object node under `key`.
    static func storedVersion(_ node: Node, key: String) -> Int? {
        guard case .object(let members) = node else { return nil }
        switch members[key] {
        case .integer(let number)?: return Int(exactly: number)
        case .real(let number)?: return Int(exactly: number)
        default: return nil
        }
    }

    /// Decodes `node` as the type of `version` in the chain ending at `V`, then migrates up to
    /// `V`; `nil` when the chain has no type of that version.
    private static func decodeVersion<V: VersionedValue>(_ version: Int, as type: V.Type, _ node: Node, _ path: [any CodingKey]) throws -> V? {
        if V.self == NoPreviousVersion.self || V.schemaVersion < version { return nil }
        if V.schemaVersion == version { return try V(from: NodeDecoding(node: node, codingPath: path)) }
        guard let previous = try decodeVersion(version, as: V.Previous.self, node, path) else { return nil }
        return try V(migrating: previous)
    }

    /// For a node with no version: `V`, else each older type newest first, migrated up to `V`.
    private static func tryEachVersion<V: VersionedValue>(_ type: V.Type, _ node: Node, _ path: [any CodingKey]) throws -> V? {
        if V.self == NoPreviousVersion.self { return nil }
        if let value = try? V(from: NodeDecoding(node: node, codingPath: path)) { return value }
        guard let previous = try tryEachVersion(V.Previous.self, node, path) else { return nil }
        return try V(migrating: previous)
    }

    // MARK: writing

    /// The version of a node stored for `T` when it is newer than `T` knows (only for versioned
    /// types; an array's elements are kept by ``undecodableElements(_:for:)`` instead).
    static func newerVersion(_ node: Node, for type: Any.Type) -> Int? {
        guard let versioned = unwrapped(type) as? any VersionedValue.Type else { return nil }
        return newerVersion(node, versioned)
    }

    private static func newerVersion<V: VersionedValue>(_ node: Node, _ type: V.Type) -> Int? {
        guard let stored = storedVersion(node, key: V.schemaVersionKey), stored > V.schemaVersion else { return nil }
        return stored
    }

    /// The elements of a stored array that `T` (an array type) cannot read: they are appended to
    /// the array the app writes, so nothing the app could not read is lost by saving.
    static func undecodableElements(_ node: Node, for type: Any.Type) -> [Node] {
        guard let arrayType = unwrapped(type) as? any LenientArray.Type, case .array(let elements) = node else { return [] }
        return arrayType.decodeLeniently(elements).skipped.map(\.node)
    }

    /// `Wrapped` for an `Optional` (however deep), else the type itself.
    static func unwrapped(_ type: Any.Type) -> Any.Type {
        guard let optional = type as? any OptionalProtocol.Type else { return type }
        return unwrapped(optional.wrappedType)
    }

    /// Whether writes of `type` need the guards of ``KVDefaults/set(_:for:)``.
    static func needsGuardedWrite(_ type: Any.Type) -> Bool {
        let type = unwrapped(type)
        return type is any VersionedValue.Type || type is any LenientArray.Type
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let failure as Failure: return failure.message
        case DecodingError.keyNotFound(let key, let context):
            return "no member \"\(key.stringValue)\"\(at(context.codingPath))"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.dataCorrupted(let context):
            return context.debugDescription + at(context.codingPath)
        default:
            return "\(error)"
        }
    }

    private static func at(_ path: [any CodingKey]) -> String {
        guard !path.isEmpty else { return "" }
        return " at " + path.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
    }
}

/// Arrays decode element by element: one bad element is skipped, not fatal to the rest.
protocol LenientArray {
    static func decodeLeniently(_ elements: [Node]) -> (array: Any, skipped: [Versioning.SkippedElement])
}

extension Array: LenientArray where Element: Decodable {
    static func decodeLeniently(_ elements: [Node]) -> (array: Any, skipped: [Versioning.SkippedElement]) {
        var decoded: [Element] = []
        var skipped: [Versioning.SkippedElement] = []
        for (index, node) in elements.enumerated() {
            switch Versioning.decodeOne(Element.self, from: node) {
            case .success(let element): decoded.append(element)
            case .failure(let failure): skipped.append(.init(index: index, node: node, failure: failure))
            }
        }
        return (decoded, skipped)
    }
}
