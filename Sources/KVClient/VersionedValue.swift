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
/// - no version (written before the app had versions): the current type is tried, then each
///   older type, newest first;
/// - a newer version than this app knows (after a downgrade): not decoded; a typed key reads its
///   default, and ``KVDefaults/set(_:for:)`` refuses to overwrite the stored value;
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

    /// This version built from the previous one. Throwing makes the stored value unreadable (a
    /// typed key reads its default; an array skips the element and keeps it stored).
    init(migrating previous: Previous) throws
}

extension VersionedValue {
    public static var schemaVersionKey: String { "schemaVersion" }
}

extension VersionedValue where Previous == NoPreviousVersion {
    public init(migrating previous: NoPreviousVersion) { switch previous {} }
}

/// The `Previous` of the first version of a ``VersionedValue``: a type with no values.
public enum NoPreviousVersion: VersionedValue {
    public typealias Previous = NoPreviousVersion
    public static var schemaVersion: Int { 0 }

    public init(migrating previous: NoPreviousVersion) { switch previous {} }

    public init(from decoder: any Decoder) throws {
        throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "there is no version before the first"))
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
public protocol DecodableWithFallback: Decodable, RawRepresentable where RawValue: Decodable {
    /// The case an unknown raw value decodes as.
    static var decodingFallback: Self { get }
}

extension DecodableWithFallback {
    public init(from decoder: any Decoder) throws {
        self = Self(rawValue: try decoder.singleValueContainer().decode(RawValue.self)) ?? Self.decodingFallback
    }
}

extension DecodableWithFallback where RawValue == String {
    public init(from decoder: any Decoder) throws {
        self = Self(rawValue: try decoder.singleValueContainer().decode(String.self)) ?? Self.decodingFallback
    }
}

extension DecodableWithFallback where RawValue == Int {
    public init(from decoder: any Decoder) throws {
        self = Self(rawValue: try decoder.singleValueContainer().decode(Int.self)) ?? Self.decodingFallback
    }
}
