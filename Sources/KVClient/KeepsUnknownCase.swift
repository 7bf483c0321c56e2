/// An enum property that keeps a stored raw value this app does not know: the app sees the
/// enum's fallback, and saving writes the stored raw value back unchanged, until the app sets
/// the property (then the new case is written).
///
/// ```swift
/// enum Priority: String, Codable, Sendable, DecodableWithFallback {
///     case low, normal, high
///     static let decodingFallback = Priority.normal
/// }
/// struct Task: VersionedValue {
///     static let schemaVersion = 2
///     var title: String
///     @KeepsUnknownCase var priority: Priority = .normal
/// }
/// // stored {"title": "Taxes", "priority": "urgent"} (from a newer app):
/// // task.priority == .normal, task.$priority.unknownRawValue == "urgent";
/// // saved back as "urgent"; after task.priority = .high, saved as "high".
/// ```
///
/// The stored member must be present (a missing one fails like any missing member).
@propertyWrapper
public struct KeepsUnknownCase<Wrapped: DecodableWithFallback & Encodable & Sendable>: Codable, Sendable
where Wrapped.RawValue: Codable & Sendable {
    private var value: Wrapped

    /// The stored raw value this app does not know, written back unchanged; nil once the app
    /// sets ``wrappedValue``, or when the stored value was a known case.
    public private(set) var unknownRawValue: Wrapped.RawValue?

    /// The value the app sees (the fallback case for an unknown stored raw value); setting it
    /// forgets ``unknownRawValue``.
    public var wrappedValue: Wrapped {
        get { value }
        set {
            value = newValue
            unknownRawValue = nil
        }
    }

    /// The wrapper itself (`$priority.unknownRawValue`).
    public var projectedValue: Self { self }

    /// A known value.
    public init(wrappedValue: Wrapped) {
        value = wrappedValue
        unknownRawValue = nil
    }

    public init(from decoder: any Decoder) throws {
        (value, unknownRawValue) = try Wrapped.decodeKnownOrFallback(decoder)
        if let unknownRawValue { Wrapped.recordUnknownCase(decoder, raw: unknownRawValue, kept: true) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(unknownRawValue ?? value.rawValue)
    }
}

extension KeepsUnknownCase: Equatable where Wrapped: Equatable, Wrapped.RawValue: Equatable {}
extension KeepsUnknownCase: Hashable where Wrapped: Hashable, Wrapped.RawValue: Hashable {}
