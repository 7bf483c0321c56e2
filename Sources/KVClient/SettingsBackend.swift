import KVValues

/// What a suite's calls (writes, `List`, `Get` before a typed save, `History`) go through: a
/// ``Connection`` to kvd, or a ``KVMemoryStore``. The methods mean what `io.kvd.Defaults`'s
/// methods of the same names mean (docs/reference/protocol.md): one store-wide revision, `ifRevision` checked
/// against the key's (for `apply`: the domain's) last change, `0` for "must not exist", and
/// `NotFound` for a missing key.
protocol SettingsBackend: Sendable {
    /// A key's value and the revision at which it last changed; `.notFound` if missing.
    func get(_ domain: Domain, _ key: Key) throws(ClientError) -> (value: Value, revision: Int64)
    /// Stores `value` (if the key's last change is at `ifRevision`); returns the commit's revision.
    func set(_ domain: Domain, _ key: Key, _ value: Value, ifRevision: Int64?) throws(ClientError) -> Int64
    /// Removes `key`, or the whole domain for nil; `.notFound` if there is nothing to remove.
    func delete(_ domain: Domain, _ key: Key?) throws(ClientError) -> Int64
    /// Commits `changes` at once (if the domain's last change is at `ifRevision`).
    func apply(_ domain: Domain, _ changes: [Change], ifRevision: Int64?) throws(ClientError) -> Int64
    /// The domain's values and the revision at which it last changed.
    func list(_ domain: Domain) throws(ClientError) -> DomainListing
    /// The kept changes of `domain` (of `key` only, if given), newest first, at most `limit`.
    func historyRecords(_ domain: Domain, key: Key?, limit: Int?) throws(ClientError) -> [HistoryRecord]
    /// Removes the past values of `key` (every key of `domain`, if nil) from the history; the
    /// current values stay. Returns the store's revision.
    @discardableResult
    func forgetHistory(_ domain: Domain, key: Key?) throws(ClientError) -> Int64
    /// Marks `key` (or the whole domain) to keep no history (`keep` false: what was kept is
    /// forgotten at once), or to keep it again. Returns the store's revision.
    @discardableResult
    func keepHistory(_ domain: Domain, key: Key?, _ keep: Bool) throws(ClientError) -> Int64
}

extension SettingsBackend {
    /// An unconditional ``set(_:_:_:ifRevision:)``.
    func set(_ domain: Domain, _ key: Key, _ value: Value) throws(ClientError) -> Int64 {
        try set(domain, key, value, ifRevision: nil)
    }
}

extension Connection: SettingsBackend {
    func historyRecords(_ domain: Domain, key: Key?, limit: Int?) throws(ClientError) -> [HistoryRecord] {
        try history(domain, key: key, limit: limit).entries
    }
}
