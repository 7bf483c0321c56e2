/// An application id, as a sandbox names the app behind a connection (Flatpak's
/// `org.gnome.TextEditor`, a snap's `firefox`), and as `kvctl permit` names the app it grants more:
/// a valid domain name (``Domain``) whose dot-separated elements are none empty. Case matters:
/// `org.example.App` and `org.example.app` are two apps.
///
/// ```swift
/// try AppID(validating: "org.example.App").owns(Domain(validating: "org.example.App.window"))  // true
/// ```
public struct AppID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let name: String

    /// Validates `name`: 1–255 bytes of `A-Z a-z 0-9 . _ -`, not starting with `-`, no empty
    /// element (no leading, trailing or doubled `.`).
    public init(validating name: String) throws(NameError) {
        let domain: Domain
        do {
            domain = try Domain(validating: name)
        } catch {
            throw NameError(name: name, reason: error.reason.replacingDomainWithAppID)
        }
        guard !domain.name.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty) else {
            throw NameError(name: name, reason: "an app id must not have an empty element (no '..', no '.' at its end)")
        }
        self.name = domain.name
    }

    /// Whether `domain` is one of the app's own: the app id itself, a domain under it
    /// (`APPID.` then anything), or the same two as the GSettings backend names the app's
    /// schema path (`/org/example/My_App/` is domain `org.example.My_5FApp`, docs/gsettings.md).
    /// `org.example.AppEvil` is not `org.example.App`'s.
    public func owns(_ domain: Domain) -> Bool {
        Self.isSelfOrUnder(domain.name, name) || gsettingsName.map { Self.isSelfOrUnder(domain.name, $0) } == true
    }

    /// The domain the GSettings backend stores the path `/ELEMENTS/OF/THE/ID/` in, when it is
    /// not the id itself (an element holding `_` is escaped).
    private var gsettingsName: String? {
        let path = "/" + name.split(separator: ".").joined(separator: "/") + "/k"
        guard let mapped = GSettingsPath.map(path)?.domain, mapped != name else { return nil }
        return mapped
    }

    private static func isSelfOrUnder(_ domain: String, _ base: String) -> Bool {
        domain == base || (domain.hasPrefix(base) && domain.utf8.dropFirst(base.utf8.count).first == UInt8(ascii: "."))
    }

    public var description: String { name }
    public static func < (lhs: AppID, rhs: AppID) -> Bool { lhs.name < rhs.name }
}

/// Which domains a rule reaches: a domain name, or the start of one followed by `*` (any rest,
/// none too: `org.gnome.desktop.a11y*` reaches `org.gnome.desktop.a11y` and
/// `org.gnome.desktop.a11y.keyboard`), or `*` alone (every domain). `*` is allowed only at the
/// end. Never reaches kvd's internal domains. Pure and thread-safe.
public struct DomainPattern: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The pattern as written.
    public let text: String
    /// What a matching name starts with (the text without its `*`), or the whole name.
    private let stem: String
    private let isPrefix: Bool

    /// Validates `text`: a domain name, or a domain name's start then one `*`, or `*`.
    public init(validating text: String) throws(NameError) {
        let isPrefix = text.hasSuffix("*")
        let stem = String(text.dropLast(isPrefix ? 1 : 0))
        guard !stem.contains("*") else {
            throw NameError(name: text, reason: "a domain pattern may hold '*' only at its end")
        }
        if !(isPrefix && stem.isEmpty) {
            do {
                _ = try Domain(validating: stem)
            } catch {
                throw NameError(name: text, reason: error.reason.replacingDomainWithPattern)
            }
        }
        self.text = text
        self.stem = stem
        self.isPrefix = isPrefix
    }

    /// Whether the pattern reaches `domain` (an internal domain: never).
    public func matches(_ domain: Domain) -> Bool {
        guard !domain.isInternal else { return false }
        return isPrefix ? domain.name.hasPrefix(stem) : domain.name == stem
    }

    public var description: String { text }
    public static func < (lhs: DomainPattern, rhs: DomainPattern) -> Bool { lhs.text < rhs.text }
}

/// What a user granted an app beyond its own domains (`kvctl permit APPID PATTERN
/// [--read-only]`): the domains `pattern` reaches, to read, and to write unless `readOnly`.
public struct Permit: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var app: AppID
    public var pattern: DomainPattern
    public var readOnly: Bool

    public init(app: AppID, pattern: DomainPattern, readOnly: Bool) {
        self.app = app
        self.pattern = pattern
        self.readOnly = readOnly
    }

    /// `org.example.App org.example.shared.* read-only`.
    public var description: String { "\(app) \(pattern) \(readOnly ? "read-only" : "read-write")" }

    public static func < (lhs: Permit, rhs: Permit) -> Bool {
        (lhs.app, lhs.pattern.text) < (rhs.app, rhs.pattern.text)
    }
}

extension String {
    fileprivate var replacingDomainWithAppID: String { replacingStart("a domain name", with: "an app id") }
    fileprivate var replacingDomainWithPattern: String { replacingStart("a domain name", with: "a domain pattern") }

    private func replacingStart(_ old: String, with new: String) -> String {
        hasPrefix(old) ? new + dropFirst(old.count) : self
    }
}
