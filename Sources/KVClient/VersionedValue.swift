/// An app type stored with a schema version, which can still read every version the app shipped.
///
/// Declare each shipped version as its own type; each names the one before it as `Previous` and
/// says how to build itself from it. The first version keeps the default `Previous`,
/// ``NoPreviousVersion``.
///
/// ```swift
/// struct TemplateV1: VersionedValue {          // shipped in 1.0, written without a version
///     static let schemaVersion = 1
///     var name: String
///     var pointSize: Double?
/// }
/// struct Template: VersionedValue {            // the current version
///     static let schemaVersion = 2
///     var name: String
///     var relativeSize: Double
///     init(migrating old: TemplateV1) { name = old.name; relativeSize = (old.pointSize ?? 48) / 1080 }
/// }
/// try defaults.set([template], for: .templates)  // stored as [{"name": ..., "relativeSize": ..., "schemaVersion": 2}]
/// ```
///
/// Reading a stored value follows these rules:
/// - version stored and current: decoded as the current type;
/// - an older version: decoded as the type of that version, then migrated step by step with
///   ``init(migrating:)``;
/// - no version (written before the app had versions): as version
///   ``unversionedSchemaVersion`` if the type says which one; otherwise the newest version
///   that reads every stored member (a decode that leaves a member unread is not a clean read
///   of that type), newest first; if none does, the one that leaves the fewest parts unread,
///   and those parts are reported;
/// - a newer version than this app knows (after a downgrade): not decoded; a typed key reads its
///   default (an array element or optional member is skipped), ``KVReadReport/newerVersion``
///   says so, and ``KVDefaults/set(_:for:unread:)`` will not overwrite it;
/// - writing always stores the current version, so a migrated value is migrated for good when
///   the app saves it.
///
/// The version is a member of the stored object (``schemaVersionKey``, `"schemaVersion"` unless
/// the type says otherwise), so the type must encode to a keyed container (a struct or class
/// with properties); a type that encodes to anything else is stored without a version and read
/// by trying each version in turn.
public protocol VersionedValue: Codable, Sendable {
    /// The type of the schema version before this one; ``NoPreviousVersion`` for the first.
    associatedtype Previous: VersionedValue = NoPreviousVersion

    /// This type's schema version: 1 for the first shipped version, then rising by one.
    static var schemaVersion: Int { get }

    /// The member of the stored object that holds the version; `"schemaVersion"` by default.
    static var schemaVersionKey: String { get }

    /// The version of stored data that has no version member, for an app whose first version
    /// shipped without one (`1`); `nil` (the default) tries each version, newest first. Declared
    /// on the current type; it makes reading unversioned data unambiguous.
    static var unversionedSchemaVersion: Int? { get }

    /// This version built from the previous one. Throwing makes the stored value unreadable (a
    /// typed key reads its default; an array skips the element and keeps it stored).
    init(migrating previous: Previous) throws
}

extension VersionedValue {
    /// `"schemaVersion"`, unless the type says otherwise.
    public static var schemaVersionKey: String { "schemaVersion" }
    /// nil: a stored value without a version number is not read, unless the type says which
    /// version it is.
    public static var unversionedSchemaVersion: Int? { nil }
}

extension VersionedValue where Previous == NoPreviousVersion {
    /// Never called: there is no value before the first version.
    public init(migrating previous: NoPreviousVersion) { switch previous {} }
}

/// The `Previous` of the first version of a ``VersionedValue``: a type with no values.
public enum NoPreviousVersion: VersionedValue {
    /// Itself: nothing comes before it.
    public typealias Previous = NoPreviousVersion
    /// 0, below every real version.
    public static var schemaVersion: Int { 0 }

    /// Never called: the type has no values.
    public init(migrating previous: NoPreviousVersion) { switch previous {} }

    public init(from decoder: any Decoder) throws {
        throw DecodingError.dataCorrupted(
            .init(codingPath: decoder.codingPath, debugDescription: "there is no version before the first"))
    }

    public func encode(to encoder: any Encoder) throws { switch self {} }
}

/// An enum that decodes an unknown raw value as a fallback case instead of failing, so that a
/// value written by a newer version of the app (with a case this one lacks) still loads.
///
/// ```swift
/// enum Anchor: String, Codable, DecodableWithFallback {
///     case top, center, bottomTrailing
///     static let decodingFallback = Anchor.bottomTrailing
/// }
/// // "diagonal" decodes as .bottomTrailing
/// ```
///
/// The read reports the unknown raw value (``KVReadReport/Finding/Kind/unknownCase(raw:kept:)``):
/// saving the fallback would lose it, so a save refuses unless the raw value can be put back
/// where it was. To keep it through a round trip anywhere (inside arrays too), declare the
/// property `@KeepsUnknownCase`.
public protocol DecodableWithFallback: Decodable, RawRepresentable where RawValue: Decodable {
    /// The case an unknown raw value decodes as.
    static var decodingFallback: Self { get }
}

extension DecodableWithFallback {
    public init(from decoder: any Decoder) throws {
        self = try Self.decodeReporting(decoder)
    }

    /// The case of the stored raw value, or the fallback and the raw value it stands for.
    static func decodeKnownOrFallback(_ decoder: any Decoder) throws -> (value: Self, unknown: RawValue?) {
        let raw = try decoder.singleValueContainer().decode(RawValue.self)
        if let known = Self(rawValue: raw) { return (known, nil) }
        return (decodingFallback, raw)
    }

    /// Decodes, reporting an unknown raw value to a kvd read (not kept: a save must not write
    /// the fallback over it).
    static func decodeReporting(_ decoder: any Decoder) throws -> Self {
        let (value, unknown) = try decodeKnownOrFallback(decoder)
        if let unknown { recordUnknownCase(decoder, raw: unknown, kept: false) }
        return value
    }

    static func recordUnknownCase(_ decoder: any Decoder, raw: RawValue, kept: Bool) {
        guard let decoding = decoder as? NodeDecoding else { return }
        let message =
            "\"\(raw)\" is not a case of \(Self.self); read as \(decodingFallback)"
            + (kept ? ", and written back as \"\(raw)\" unless the app changes it" : "")
        decoding.context.log.record(
            Finding(
                decoder.codingPath, .unknownCase(raw: "\(raw)", kept: kept), message, stored: decoding.node,
                keep: .memberIfUnchanged, stable: decoding.context.stable))
    }
}

extension DecodableWithFallback where RawValue == String {
    public init(from decoder: any Decoder) throws {
        self = try Self.decodeReporting(decoder)
    }
}

extension DecodableWithFallback where RawValue == Int {
    public init(from decoder: any Decoder) throws {
        self = try Self.decodeReporting(decoder)
    }
}
