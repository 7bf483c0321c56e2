/// Built-in suggested habits. They live here, in code: none is written to the user's domain
/// until the user adds it (`habits add --preset NAME`), so a new release can change them freely.
public struct Preset: Sendable, Equatable {
    public var name: String
    public var schedule: Schedule
    public var summary: String

    public static let all: [Preset] = [
        Preset(
            name: "Drink water", schedule: Schedule(every: 2, unit: .hours), summary: "a glass every couple of hours"),
        Preset(name: "Brush teeth", schedule: Schedule(every: 12, unit: .hours), summary: "morning and evening"),
        Preset(name: "Stretch", schedule: Schedule(every: 1, unit: .days), summary: "five minutes, once a day"),
        Preset(name: "Read", schedule: Schedule(every: 1, unit: .days), summary: "a chapter a day"),
        Preset(name: "Water plants", schedule: Schedule(every: 3, unit: .days), summary: "before the soil dries out"),
        Preset(name: "Bins out", schedule: Schedule(every: 1, unit: .weeks), summary: "the night before collection"),
        Preset(name: "Change sheets", schedule: Schedule(every: 2, unit: .weeks), summary: "fresh bed linen"),
    ]

    /// The preset called `name` (ignoring case and surrounding spaces).
    public static func named(_ name: String) -> Preset? {
        all.first { NameMatch.normalized($0.name) == NameMatch.normalized(name) }
    }
}
