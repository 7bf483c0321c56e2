import FoundationEssentials
import KVClient

/// A habit as version 0.1 of the app stored it: seed 002's `HabitItem`, field for field.
///
/// Written by `JSONEncoder().encode(items)` with its default strategies into a `UserDefaults`
/// data value: no version field, `Date` as seconds since 2001-01-01 UTC (a JSON number), the
/// interval as `daysBetweenCompletions` (a number of days, `0.5` for twice a day), and
/// `lastDone` set to the moment of creation until the habit is first done. Only read, never
/// written: ``Habit/init(migrating:)`` turns it into the current version.
public struct HabitItemV01: VersionedValue, Equatable {
    public static let schemaVersion = 1

    public var id: UUID
    public let name: String
    public var started: Date
    public var timesDone: Int
    public var lastDone: Date
    public var daysBetweenCompletions: Double

    public init(id: UUID, name: String, started: Date, timesDone: Int, lastDone: Date, daysBetweenCompletions: Double) {
        self.id = id
        self.name = name
        self.started = started
        self.timesDone = timesDone
        self.lastDone = lastDone
        self.daysBetweenCompletions = daysBetweenCompletions
    }
}
