import FoundationEssentials
import KVValues

/// The rules of ``VersionedValue``, applied to stored nodes, and the top of a typed read.
enum Versioning {
    /// Why a stored node could not be read as the wanted type.
    struct Failure: Error, Sendable {
        var kind: KVReadReport.Finding.Kind
        var message: String
    }

    /// One version of a chain ending at `V`: how to read a node as that version and migrate it
    /// up to `V`.
    struct Step<V> {
        let version: Int
        let typeName: String
        let decode: (Node, [any CodingKey], DecodingContext) throws -> V
    }

    // MARK: reading

    /// Reads `node` as `T`: the value (nil when the value itself cannot be read) and every
    /// finding, the failure included.
    static func read<T: Decodable>(_ type: T.Type, from node: Node) -> (value: T?, findings: [Finding]) {
        let log = ReadLog()
        do {
            let value = try NodeDecoder().decode(type, from: node, log: log)
            return (value, log.findings)
        } catch {
            let failure = Finding(
                [], kind(of: error), "cannot read it as \(T.self): \(describe(error))", stored: node, keep: .never,
                stable: false)
            return (nil, [failure])
        }
    }

    /// Decodes a ``VersionedValue`` by the version rules (called by the decoder for every
    /// versioned type in the tree, so nested versioned values migrate too):
    /// - a stored version newer than `V`'s: a failure of kind `newerVersion`;
    /// - a stored version, or none and `V.unversionedSchemaVersion`: read as that version's type
    ///   and migrated up;
    /// - no version: the newest version that reads every stored member; if none does, the one
    ///   that leaves the fewest parts unread (they are recorded).
    static func decodeVersioned<V: VersionedValue>(
        _ type: V.Type, _ node: Node, _ codingPath: [any CodingKey], _ context: DecodingContext
    ) throws -> V {
        let key = V.schemaVersionKey
        let steps = chain(V.self)
        guard let stored = storedVersion(node, key: key) ?? V.unversionedSchemaVersion else {
            return try newestClean(steps, node, codingPath, context)
        }
        let how =
            storedVersion(node, key: key) == nil
            ? "no \"\(key)\", which \(V.self) reads as version \(stored)" : "\(key) \(stored)"
        if stored > V.schemaVersion {
            throw Failure(
                kind: .newerVersion(stored: stored, known: V.schemaVersion),
                message:
                    "it was written by a newer version of the app (\(key) \(stored); this app knows up to \(V.schemaVersion))"
            )
        }
        guard let step = steps.first(where: { $0.version == stored }) else {
            throw Failure(kind: .undecodable, message: "\(V.self) has no type for \(key) \(stored)")
        }
        do {
            return try step.decode(node, codingPath, context)
        } catch {
            throw Failure(
                kind: kind(of: error), message: "cannot read it as \(step.typeName) (\(how)): \(describe(error))")
        }
    }

    /// The versions of the chain ending at `V`, newest first; each older one decodes as its own
    /// type (in an unstable context: its stored shape is not `V`'s) and migrates up.
    static func chain<V: VersionedValue>(_ type: V.Type) -> [Step<V>] {
        if V.self == NoPreviousVersion.self { return [] }
        let current = Step<V>(version: V.schemaVersion, typeName: "\(V.self)") { node, path, context in
            try NodeDecoding.decodeTracked(V.self, node, path, context, alreadyRead: [V.schemaVersionKey])
        }
        let older = chain(V.Previous.self).map { step in
            Step<V>(version: step.version, typeName: step.typeName) { node, path, context in
                let previous = try step.decode(node, path, context.unstable)
                do { return try V(migrating: previous) } catch {
                    throw Failure(
                        kind: .undecodable, message: "cannot migrate \(step.typeName) to \(V.self): \(describe(error))")
                }
            }
        }
        return [current] + older
    }

    /// For a node with no version: the newest version that reads it cleanly, else the one with
    /// the fewest findings that block a save (its findings recorded), else a failure naming why
    /// each version could not read it.
    private static func newestClean<V: VersionedValue>(
        _ steps: [Step<V>], _ node: Node, _ path: [any CodingKey], _ context: DecodingContext
    ) throws -> V {
        var best: (value: V, findings: [Finding], blocking: Int)?
        var failures: [String] = []
        for step in steps {
            let mark = context.log.mark
            do {
                let value = try step.decode(node, path, context)
                let found = Array(context.log.since(mark))
                context.log.rollback(to: mark)
                let blocking = found.filter(\.blocksWrite).count
                if blocking == 0 {
                    context.log.append(found)
                    return value
                }
                if blocking < best?.blocking ?? .max { best = (value, found, blocking) }
            } catch {
                failures.append("as \(step.typeName) (version \(step.version)): \(describe(error))")
            }
        }
        if let best {
            context.log.append(best.findings)
            return best.value
        }
        throw Failure(
            kind: .undecodable,
            message: "no version of \(V.self) can read it (it has no \"\(V.schemaVersionKey)\"): "
                + failures.joined(separator: "; "))
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

    /// A failure when a list of versioned elements is stored as an object stamped with a newer
    /// version: a newer app reshaped the whole list.
    static func newerReshaped(_ elementType: Any.Type, _ node: Node) -> Failure? {
        guard let versioned = unwrapped(elementType) as? any VersionedValue.Type,
            let stored = storedVersion(node, key: versioned.schemaVersionKey), stored > versioned.schemaVersion
        else { return nil }
        return Failure(
            kind: .newerVersion(stored: stored, known: versioned.schemaVersion),
            message:
                "it is not a list but a dictionary written by a newer version of the app (\(versioned.schemaVersionKey) \(stored); this app knows up to \(versioned.schemaVersion))"
        )
    }

    // MARK: naming

    /// `Wrapped` for an `Optional` (however deep), else the type itself.
    static func unwrapped(_ type: Any.Type) -> Any.Type {
        guard let optional = type as? any OptionalProtocol.Type else { return type }
        return unwrapped(optional.wrappedType)
    }

    static func kind(of error: any Error) -> KVReadReport.Finding.Kind {
        (error as? Failure)?.kind ?? .undecodable
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let failure as Failure: return failure.message
        case DecodingError.keyNotFound(let key, let context):
            return "no member \"\(key.stringValue)\"\(at(context.codingPath))"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.dataCorrupted(let context):
            return context.debugDescription + at(context.codingPath)
        case EncodingError.invalidValue(_, let context):
            return context.debugDescription + at(context.codingPath)
        default:
            return "\(error)"
        }
    }

    private static func at(_ path: [any CodingKey]) -> String {
        path.isEmpty ? "" : " at " + PathStep.text(PathStep.steps(path))
    }
}
