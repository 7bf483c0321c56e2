import KVProtocol
import KVValues
import Synchronization

/// The settings of one app (a suite, stored as one kvd domain), with the API of Foundation's
/// `UserDefaults`, typed keys, versioned Codable values and live updates.
///
/// ```swift
/// let defaults = KVDefaults(suiteName: "com.example.habits")!   // or KVDefaults.standard
/// defaults.register(defaults: ["theme": "light"])
/// defaults.set("dark", forKey: "theme")
/// defaults.string(forKey: "theme")                             // "dark"
/// ```
///
/// Lookups search, in order: the argument domain (`-key value` on the command line, and what
/// ``setVolatileDomain(_:forName:)`` adds to ``argumentDomain``), the suite's domain, the suites
/// added with ``addSuite(named:)`` (in the order added), `NSGlobalDomain`, then the registration
/// domain (``register(defaults:)``, in memory only). Each change made through the suite, or by
/// another process to a domain it reads, posts ``didChangeNotification``. Reads come from an
/// in-process cache kept coherent by a watch on kvd (started at the
/// first read), so a hot read does no IPC; a write is applied to the cache when kvd acknowledges
/// it, so the process reads its own writes at once, and other processes see it as soon as their
/// watch delivers it. Reads never throw. Safe to use from any thread.
public final class KVDefaults: Sendable {
    /// How a suite reaches kvd.
    public struct Configuration: Sendable {
        /// The socket; `nil` follows the contract's rule (`$KVD_SOCKET`, `$XDG_RUNTIME_DIR/kvd.sock`, ...).
        public var socketPath: String?
        /// The environment for the socket rule and for an autostarted kvd.
        public var environment: [String: String]
        /// The command line whose `-key value` pairs form the argument domain.
        public var arguments: [String]
        /// Whether to start kvd (beside this executable, or ``daemonPath``) when nothing listens;
        /// `KVD_NO_AUTOSTART=1` in ``environment`` turns it off too.
        public var autostart: Bool
        /// The kvd executable to autostart; `nil`: `kvd` beside this executable.
        public var daemonPath: String?
        /// How long the first read waits for the values to arrive from kvd, in seconds.
        public var loadTimeout: Double
        /// Receives what reads and non-throwing writes could not do; one line on stderr by default.
        public var diagnostics: @Sendable (KVDiagnostic) -> Void
        /// Where the suite keeps its settings instead of kvd (``inMemory(_:arguments:diagnostics:)``);
        /// when set, ``socketPath``, ``environment``, ``autostart`` and ``daemonPath`` are not used.
        public var memoryStore: KVMemoryStore?

        /// A configuration; each argument is the member of the same name.
        public init(
            socketPath: String? = nil, environment: [String: String] = ProcessFacts.environment(),
            arguments: [String] = CommandLine.arguments, autostart: Bool = true, daemonPath: String? = nil,
            loadTimeout: Double = 5,
            diagnostics: @escaping @Sendable (KVDiagnostic) -> Void = KVDiagnostic.standardError
        ) {
            self.socketPath = socketPath
            self.environment = environment
            self.arguments = arguments
            self.autostart = autostart
            self.daemonPath = daemonPath
            self.loadTimeout = loadTimeout
            self.diagnostics = diagnostics
        }

        /// Settings in `store`, in this process's memory: no kvd, no socket, no files (see
        /// ``KVMemoryStore``). The argument domain is `arguments` (none by default, so a test
        /// runner's command line does not become settings).
        ///
        /// ```swift
        /// let defaults = KVDefaults(suiteName: "com.example.app", configuration: .inMemory())!
        /// ```
        public static func inMemory(
            _ store: KVMemoryStore = KVMemoryStore(), arguments: [String] = [],
            diagnostics: @escaping @Sendable (KVDiagnostic) -> Void = KVDiagnostic.standardError
        ) -> Configuration {
            var configuration = Configuration(
                environment: [:], arguments: arguments, autostart: false, diagnostics: diagnostics)
            configuration.memoryStore = store
            return configuration
        }
    }

    /// The suite of this program: its domain is the executable's file name (`habits` for
    /// `/usr/bin/habits`), with characters a domain cannot hold replaced by `_`. Programs that
    /// want a reverse-DNS domain use `KVDefaults(suiteName: "com.example.habits")`.
    public static let standard = KVDefaults(domain: ProcessFacts.executableDomain())

    /// The domain of this suite.
    public let domain: Domain
    /// The domain's name, as Foundation calls it.
    public var suiteName: String { domain.name }
    let configuration: Configuration
    let client: RequestClient
    /// The volatile domains by name, ``argumentDomain`` among them; the registration domain is
    /// ``registration``.
    let volatileDomains: Mutex<[String: [String: Value]]>
    /// Whether ``argumentDomain`` holds any value, so a read can skip its lock; kept by
    /// ``changeVolatileDomains(_:)``.
    private let hasArgumentValues = Atomic<Bool>(false)
    let registration = Mutex<[String: Value]>([:])
    /// The suites added with ``addSuite(named:)``, searched after this suite's domain, in order.
    let addedSuites = Mutex<[Domain]>([])
    /// This process's writes not yet acknowledged, so the watch does not announce them again.
    let ownWrites = OwnWrites()
    private let caches = Mutex<[Domain: DomainCache]>([:])
    /// The caches of ``storedDomains()`` in search order, made on first read; nil after the
    /// added suites change.
    private let searchOrder = Mutex<[(core: DomainCache, source: Source)]?>(nil)
    let observers = Observers()
    let reported = Mutex<[String: Value]>([:])
    /// The async writes' serial queue and thread; blocking writes wait for the async writes
    /// called before them (``WriteQueue/waitForEarlier()``).
    let writeQueue = WriteQueue()

    /// The suite named `suiteName` (a domain name such as `com.example.app`), or ``standard``'s
    /// domain for `nil`; `nil` if the name breaks the domain rule (the reason goes to the
    /// diagnostics handler, as ``KVDiagnostic/Kind/invalidName``).
    public convenience init?(suiteName: String?, configuration: Configuration = Configuration()) {
        guard let suiteName else {
            self.init(domain: ProcessFacts.executableDomain(), configuration: configuration)
            return
        }
        do {
            self.init(domain: try Domain(validating: suiteName), configuration: configuration)
        } catch {
            configuration.diagnostics(
                KVDiagnostic(domain: suiteName, key: nil, kind: .invalidName, message: "\(error)"))
            return nil
        }
    }

    /// The suite of `domain`.
    public init(domain: Domain, configuration: Configuration = Configuration()) {
        self.domain = domain
        self.configuration = configuration
        let arguments = ArgumentDomain.parse(configuration.arguments)
        self.volatileDomains = Mutex([Self.argumentDomain: arguments])
        self.hasArgumentValues.store(!arguments.isEmpty, ordering: .relaxed)
        self.client = RequestClient(configuration)
    }

    // MARK: lookup

    /// Where a value was found.
    enum Source: Equatable {
        case argument
        case suite
        case added(Domain)
        case global
        case registration
    }

    /// The value of `key` by the search order.
    /// With `wait: false` (on a watch thread), a domain still loading counts as empty.
    func lookup(_ key: String, wait: Bool = true) -> (value: Value, source: Source)? {
        if hasArgumentValues.load(ordering: .relaxed),
            let value = volatileDomains.withLock({ $0[Self.argumentDomain]?[key] })
        {
            return (value, .argument)
        }
        for (core, source) in searchCaches() {
            if wait { core.waitUntilLoaded(timeout: configuration.loadTimeout) }
            if let value = core.value(key) { return (value, source) }
        }
        if let value = registration.withLock({ $0[key] }) { return (value, .registration) }
        return nil
    }

    /// The caches of the stored domains in search order (started, not awaited), kept between
    /// reads so a hot read takes no lock but the one of each cache it looks in.
    private func searchCaches() -> [(core: DomainCache, source: Source)] {
        searchOrder.withLock { order in
            if let order { return order }
            let made = storedDomains().map { (core: cache(for: $0.0, wait: false), source: $0.1) }
            order = made
            return made
        }
    }

    /// Runs `change` on the volatile domains; keeps the argument domain's read shortcut right.
    func changeVolatileDomains(_ change: (inout [String: [String: Value]]) -> Void) {
        volatileDomains.withLock { domains in
            change(&domains)
            hasArgumentValues.store(!(domains[Self.argumentDomain]?.isEmpty ?? true), ordering: .relaxed)
        }
    }

    /// Runs `change` on the added suites; the search order is made again on the next read.
    func changeAddedSuites(_ change: (inout [Domain]) -> Void) {
        addedSuites.withLock { change(&$0) }
        searchOrder.withLock { $0 = nil }
    }

    /// The stored domains of the search order, first to last: this suite's, the added suites,
    /// `NSGlobalDomain`; each once.
    func storedDomains() -> [(Domain, Source)] {
        var domains: [(Domain, Source)] = [(domain, .suite)]
        for added in addedSuites.withLock({ $0 }) where added != domain && added != .global {
            domains.append((added, .added(added)))
        }
        if domain != .global { domains.append((.global, .global)) }
        return domains
    }

    /// The cache of `domain`, started (and its first snapshot awaited) on first use.
    func cache(for domain: Domain, wait: Bool = true) -> DomainCache {
        let (cache, isNew) = caches.withLock { caches -> (DomainCache, Bool) in
            if let cache = caches[domain] { return (cache, false) }
            let cache = DomainCache(domain: domain, transport: client.transport, report: configuration.diagnostics)
            caches[domain] = cache
            return (cache, true)
        }
        if isNew {
            cache.setOnChange { [weak self] domain, changes, firstLoad, streamed in
                self?.observers.changed(domain, changes, in: self)
                if !firstLoad { self?.announceIfNotOwn(domain, changes, streamed: streamed) }
            }
        }
        if wait { cache.waitUntilLoaded(timeout: configuration.loadTimeout) }
        return cache
    }

    /// Starts watching (if not yet) the domains this suite reads.
    func startWatching() {
        for (domain, _) in storedDomains() { _ = cache(for: domain) }
    }

    func report(_ key: String?, _ kind: KVDiagnostic.Kind, _ message: String) {
        configuration.diagnostics(KVDiagnostic(domain: domain.name, key: key, kind: kind, message: message))
    }

    /// Reports the problems with a stored value once per value, not at every read of it.
    func reportOnce(_ key: String, stored: Value, _ problems: [(KVDiagnostic.Kind, String)]) {
        guard !problems.isEmpty else { return }
        let fresh = reported.withLock { reported in
            defer { reported[key] = stored }
            return reported[key] != stored
        }
        if fresh { for (kind, message) in problems { report(key, kind, message) } }
    }

    // MARK: writing

    /// Stores `value` under `key` in this suite's domain (`nil` removes the key) and returns when
    /// kvd has it on disk. Throws when the key or value is invalid or kvd cannot store it, and
    /// `.client(.keyLocked)` when the system administrator locked the key. The cache shows the
    /// write only once kvd acknowledged it, so a refused write never shows.
    public func write(_ value: Value?, forKey key: String) throws(KVDefaultsError) {
        let name = try KVDefaultsError.key(key)
        if let value { try KVDefaultsError.validate(value, key: key) }
        try commit(domain, [Change(key: name, value: value)]) { (connection) throws(ClientError) -> Int64 in
            if let value { return try connection.set(domain, name, value) }
            return try connection.delete(domain, name)
        }
    }

    /// Sends `changes` to `domain` with `send` (one commit), applies them to the cache once kvd
    /// acknowledged them, and posts ``didChangeNotification`` once if kvd committed anything
    /// (`announce: false`: the caller posts). Returns the commit's revision, 0 when kvd found
    /// nothing to change (the removal of a missing key). Blocks for one round trip, after the
    /// async writes called before it (``WriteQueue``).
    @discardableResult
    func commit(
        _ domain: Domain, _ changes: [Change], announce: Bool = true,
        _ send: (any SettingsBackend) throws(ClientError) -> Int64
    ) throws(KVDefaultsError) -> Int64 {
        writeQueue.waitForEarlier()
        let id = ownWrites.begin(domain, changes)
        var acknowledged: Int64?
        defer { ownWrites.end(id, acknowledgedAt: acknowledged) }
        let revision = try client.call(send, ifNotFound: { 0 })
        if let cache = cacheIfWatching(domain) {
            if revision != 0 { acknowledged = revision }  // its watch event may still be on the way
            cache.apply(changes, revision: revision)
        }
        if announce, revision != 0 { postDidChange() }
        return revision
    }

    /// Commits the changes `build` makes from `domain` as it is (one `List`), as one `Apply`
    /// that kvd refuses if the domain changed after the `List`; then lists and builds again, up
    /// to 5 times. Blocks for two round trips per attempt.
    func commitConditionally(
        _ domain: Domain, announce: Bool = true, _ build: (DomainListing) throws(KVDefaultsError) -> [Change]
    ) throws(KVDefaultsError) {
        writeQueue.waitForEarlier()
        for attempt in 1...5 {
            let listing = try client.call { (connection) throws(ClientError) in
                try connection.list(domain)
            } ifNotFound: {
                DomainListing(values: [:], unreadable: [:], revision: 0)
            }
            let changes = try build(listing)
            guard !changes.isEmpty else { return }
            do {
                try commit(domain, changes, announce: announce) { (connection) throws(ClientError) in
                    try connection.apply(domain, changes, ifRevision: listing.revision)
                }
                return
            } catch .client(.revisionMismatch) where attempt < 5 {
                continue
            }
        }
    }

    /// The cache of `domain` if it was started, without starting it.
    func cacheIfWatching(_ domain: Domain) -> DomainCache? {
        caches.withLock { $0[domain] }
    }

    /// Fetches the whole domain from kvd and applies it to the cache at once, without waiting
    /// for the watch: afterwards every write acknowledged to any process before the call is
    /// visible. Returns false if kvd cannot be reached.
    @discardableResult
    public func synchronize() -> Bool {
        startWatching()
        var ok = true
        for (domain, _) in storedDomains() {
            do {
                let listing = try client.call { (connection) throws(ClientError) in
                    try connection.list(domain)
                } ifNotFound: {
                    DomainListing(values: [:], unreadable: [:], revision: 0)
                }
                var snapshot: [String: Value] = [:]
                for (key, value) in listing.values { snapshot[key.name] = value }
                let sources = Dictionary(uniqueKeysWithValues: listing.sources.map { ($0.key.name, $0.value) })
                cache(for: domain).reconcile(snapshot, revision: listing.revision, streamed: false, sources: sources)
            } catch {
                ok = false
            }
        }
        return ok
    }
}

/// Why a write failed. Reads never throw.
public enum KVDefaultsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The key breaks the key rule (1–1024 bytes of UTF-8, no NUL).
    case invalidKey(String, reason: String)
    /// The domain name breaks the domain rule (`Domain(validating:)`).
    case invalidDomain(String, reason: String)
    /// The value cannot be stored (not a property-list type, a non-finite number, ...).
    case invalidValue(key: String, reason: String)
    /// The stored value did not read cleanly as the key's type (`report` says what was skipped,
    /// unknown, newer or read as a fallback, and where), and the save would have lost that, so
    /// nothing was written. Save with `unread: .keep` to keep those parts, `unread: .replace`
    /// (or ``KVDefaults/reset(_:)`` first) to replace them on purpose.
    case wouldLoseStoredData(key: String, report: KVReadReport)
    /// kvd could not be reached or refused the write; nothing changed.
    case client(ClientError)

    public var description: String {
        switch self {
        case .invalidKey(let key, let reason): "invalid key \"\(key)\": \(reason)"
        case .invalidDomain(let name, let reason): "invalid domain name \"\(name)\": \(reason)"
        case .invalidValue(let key, let reason): "cannot store \"\(key)\": \(reason)"
        case .wouldLoseStoredData(let key, let report):
            "\"\(key)\" was not overwritten, because its stored value holds data this app did not read (\(Self.summary(report)))"
                + (report.newerVersion.map {
                    "; a newer version of the app (schema version \($0)) wrote it, so update the app"
                } ?? "")
                + "; save with unread: .keep to keep that data, or unread: .replace (or reset the key) to replace it"
        case .client(let error): error.description
        }
    }

    private static func summary(_ report: KVReadReport) -> String {
        let shown = report.findings.prefix(3).map(\.description).joined(separator: "; ")
        return report.findings.count > 3 ? shown + "; and \(report.findings.count - 3) more" : shown
    }

    /// Checks what typed JSON cannot say (finite reals, dates in range) before a write.
    static func validate(_ value: Value, key: String) throws(KVDefaultsError) {
        do { try value.validate() } catch { throw .invalidValue(key: key, reason: error.description) }
    }

    static func key(_ name: String) throws(KVDefaultsError) -> Key {
        do { return try Key(validating: name) } catch { throw .invalidKey(name, reason: error.reason) }
    }
}
