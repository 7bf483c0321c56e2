import KVValues

/// Keys the machine's system administrator locked (`kvctl --system lock DOMAIN KEY`): every
/// user reads the system's value, and writes to the key fail with
/// ``ClientError/keyLocked(domain:key:)`` (``KVDefaults/set(_:forKey:)`` reports it as
/// ``KVDiagnostic/Kind/keyLocked``). What is locked comes with the values, through the domain's
/// watch, so these answers need no IPC once the domain is loaded (the first one waits for it, as
/// a read does). Locks change while the app runs; typed keys and `updates(...)` see the locked
/// value, and the user's own value again when the lock goes, like any other change.
///
/// ```swift
/// if defaults.objectIsForced(forKey: "proxy") { proxyField.isEnabled = false }
/// defaults.isWritable(forKey: "proxy")   // false while locked
/// ```
extension KVDefaults {
    /// Whether the value the search order finds for `key` is locked by the system administrator
    /// (Foundation's name for a managed preference): the first stored domain of the search order
    /// with a value or a lock for `key` (this suite's, an added suite, `NSGlobalDomain`) has it
    /// locked. A key locked without a system value is forced too, though it reads as absent (or
    /// as a later domain's value). A value from the argument domain (`-key value` on this
    /// process's command line) still wins reads. (swift-corelibs-foundation always answers false.)
    public func objectIsForced(forKey key: String) -> Bool {
        for (domain, _) in storedDomains() {
            let cache = cache(for: domain)
            if cache.isLocked(key) { return true }
            if cache.value(key) != nil { return false }
        }
        return false
    }

    /// Whether the system administrator locked `key` in the domain named `domainName`; false
    /// for a name that is not a valid domain.
    public func objectIsForced(forKey key: String, inDomain domainName: String) -> Bool {
        guard let other = try? Domain(validating: domainName) else { return false }
        return cache(for: other).isLocked(key)
    }

    /// Whether a write of `key` to this suite's domain can succeed as far as this process
    /// knows: false for a key locked in this suite's domain and for a name that is not a valid
    /// key. kvd decides at the write; a lock added meanwhile still refuses it.
    public func isWritable(forKey key: String) -> Bool {
        guard (try? KVValues.Key(validating: key)) != nil else { return false }
        return !cache(for: domain).isLocked(key)
    }
}
