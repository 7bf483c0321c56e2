import FoundationEssentials
import KVClient

/// A habit as habits stores it today: one element of the list under `Habits` in the domain
/// `com.example.habits`.
///
/// ## Version history (``schemaVersion``)
///
/// Each element of the stored list carries its own version, so one list can mix them while an
/// upgrade is under way (an element the app cannot read stays stored, untouched).
///
/// - **v0.1** (schema 1, ``HabitItemV01``): seed 002's `HabitItem` exactly. No version field;
///   written by `JSONEncoder` into a `UserDefaults` data value, so dates are seconds since
///   2001-01-01 UTC; the interval is `daysBetweenCompletions`, a bare number of days.
/// - **v2** (schema 2, this type): `"schemaVersion": 2` in every element; dates are kvd dates
///   (RFC 3339 in typed JSON); the interval is a ``Schedule`` in a unit (`{"every": 12,
///   "unit": "hours"}`) instead of a number of days (the changed meaning); new optional
///   `preset`, the built-in suggestion the habit was added from. The conversion from v0.1 is
///   ``init(migrating:)``: id, name, dates and count are kept exactly.
///
/// v0.1 wrote no version and every later version writes one, so data without a version is
/// v0.1 (``unversionedSchemaVersion``): it is never tried as v2 first.
///
/// A later version adds a type here, names this one as its `Previous` and raises the number;
/// an older habits that meets it leaves the list alone (see ``HabitStore``).
public struct Habit: VersionedValue, Equatable {
    public typealias Previous = HabitItemV01
    public static let schemaVersion = 2
    public static let unversionedSchemaVersion: Int? = 1

    public var id: UUID
    public var name: String
    /// When the habit was added.
    public var started: Date
    /// When it was last done; for a habit never done (``timesDone`` 0), when it was added, as in
    /// v0.1: the interval counts from there.
    public var lastDone: Date
    public var timesDone: Int
    public var schedule: Schedule
    /// The name of the built-in preset it was added from, if any.
    public var preset: String?

    public init(
        id: UUID = UUID(), name: String, started: Date, lastDone: Date? = nil, timesDone: Int = 0, schedule: Schedule,
        preset: String? = nil
    ) {
        self.id = id
        self.name = name
        self.started = started
        self.lastDone = lastDone ?? started
        self.timesDone = timesDone
        self.schedule = schedule
        self.preset = preset
    }

    /// v0.1 → v2: the same habit, its interval as a ``Schedule`` (``Schedule/init(legacyDays:)``).
    public init(migrating old: HabitItemV01) {
        self.init(
            id: old.id, name: old.name, started: old.started, lastDone: old.lastDone, timesDone: old.timesDone,
            schedule: Schedule(legacyDays: old.daysBetweenCompletions))
    }

    /// The interval in days, as `list --json` prints it.
    public var everyDays: Double { schedule.everyDays }

    /// When it next falls due.
    public var due: Date { lastDone.addingTimeInterval(schedule.seconds) }

    /// Marks it done at `now`.
    public mutating func markDone(at now: Date) {
        timesDone += 1
        lastDone = now
    }

    private enum CodingKeys: String, CodingKey { case id, name, started, lastDone, timesDone, schedule, preset }

    /// Every member but `preset` is required.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try c.decode(UUID.self, forKey: .id), name: try c.decode(String.self, forKey: .name),
            started: try c.decode(Date.self, forKey: .started), lastDone: try c.decode(Date.self, forKey: .lastDone),
            timesDone: try c.decode(Int.self, forKey: .timesDone),
            schedule: try c.decode(Schedule.self, forKey: .schedule),
            preset: try c.decodeIfPresent(String.self, forKey: .preset))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(name, forKey: .name)
        try c.encode(started, forKey: .started)
        try c.encode(lastDone, forKey: .lastDone)
        try c.encode(timesDone, forKey: .timesDone)
        try c.encode(schedule, forKey: .schedule)
        try c.encodeIfPresent(preset, forKey: .preset)
    }
}
