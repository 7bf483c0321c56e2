import KVSystem

/// Something a read or a non-throwing write could not do, reported instead of thrown: reads
/// never throw, so this is how an app learns why it got a default.
///
/// ```swift
/// var configuration = KVDefaults.Configuration()
/// configuration.diagnostics = { log($0.description) }
/// let defaults = KVDefaults(suiteName: "com.example.app", configuration: configuration)!
/// ```
public struct KVDiagnostic: Sendable, CustomStringConvertible {
    /// What kind of problem it is.
    public enum Kind: Sendable, Equatable {
        /// A stored value could not be decoded as the key's type; the default was returned.
        case undecodable
        /// A stored value was written by a newer schema version than the app knows; the default
        /// was returned and the stored value is left as it is.
        case newerSchema(stored: Int, known: Int)
        /// An element of a stored top-level array was skipped; it stays in the stored array
        /// (`index`).
        case skippedElement(index: Int)
        /// A part deeper in a stored value (at `path`, such as `$.notes[1]`) was not read: a
        /// skipped element or entry, an unreadable optional, an unknown member or enum case, a
        /// newer nested version. The rest was read.
        case notRead(path: String)
        /// A non-throwing write (`set(_:forKey:)`) failed; nothing changed.
        case writeFailed
        /// A non-throwing write (`set(_:forKey:)`) was refused because the system administrator
        /// locked the key; nothing changed, and reads return the locked value.
        case keyLocked
        /// kvd cannot be reached; reads return the last known values (or defaults) meanwhile.
        case unavailable
        /// A suite name (``KVDefaults/init(suiteName:configuration:)``) breaks the domain rule
        /// (docs/reference/names-and-limits.md); no suite was made. The message names the rule.
        case invalidName
        /// A non-throwing typed write (a ``KVSettings`` property setter) replaced a stored value
        /// it could not read cleanly as the key's type, as Foundation's `UserDefaults` would. kvd
        /// keeps the replaced value in the key's history; the message says how to get it back
        /// (`kvctl history DOMAIN KEY`, `kvctl restore DOMAIN KEY --revision N`).
        case replacedUnreadValue
    }

    /// The domain (suite) concerned.
    public var domain: String
    /// The key concerned, if one.
    public var key: String?
    /// What kind of problem it is.
    public var kind: Kind
    /// What happened, in one sentence.
    public var message: String

    /// A diagnostic with these members.
    public init(domain: String, key: String?, kind: Kind, message: String) {
        self.domain = domain
        self.key = key
        self.kind = kind
        self.message = message
    }

    public var description: String {
        "kvclient: \(domain)" + (key.map { " \"\($0)\"" } ?? "") + ": " + message
    }

    /// The default handler: one line on stderr.
    public static let standardError: @Sendable (KVDiagnostic) -> Void = { diagnostic in
        let bytes = Array((diagnostic.description + "\n").utf8)
        bytes.withUnsafeBytes { _ = try? LinuxSystem().writeAll(2, $0) }
    }
}
