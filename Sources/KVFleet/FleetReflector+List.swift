import KVSystem
import KVValues

extension FleetReflector {
    /// Lists the layout's range at one revision and hands the sink one replace.
    func list(_ loop: inout Loop, _ report: (FleetReflectorEvent) -> Void, _ sink: (FleetUpdate) throws -> Void)
        -> Outcome
    {
        update { $0.phase = .listing }
        var listing = Listing()
        if let ended = listPages(into: &listing) { return ended }
        guard let revision = listing.revision else { return .stopped }
        let (snapshot, problems) = (listing.snapshot, listing.problems)
        do {
            try sink(.replace(snapshot, revision: revision))
        } catch {
            return .failed("committing the fleet listing at revision \(revision) failed: \(error)")
        }
        loop.applied = revision
        loop.needsList = false
        stream.working()
        _ = takeRelistRequest()  // this listing is the one asked for
        noteApplied(revision, .replace(problems))
        update { $0.listings += 1 }
        if !problems.isEmpty { report(.leftOut(Array(problems.values))) }
        return .listed
    }

    /// What the pages of one listing hold, at the revision the first page pinned.
    struct Listing {
        var snapshot = FleetSnapshot()
        var problems: [[UInt8]: FleetProblem] = [:]
        var revision: Int64?
    }

    /// Reads the layout's range page by page at one revision into `listing`; how the listing
    /// ended instead when it did (stopped, compacted, the cluster replaced, failed), else nil.
    private func listPages(into listing: inout Listing) -> Outcome? {
        let (start, end) = layout.range
        var from = start
        while true {
            guard !isStopped else { return .stopped }
            let page: EtcdRangePage
            do {
                page = try etcd.range(from: from, end: end, revision: listing.revision, limit: options.pageSize)
            } catch .compacted {
                return .relist
            } catch .clusterChanged(let was, let now) {
                return .historyReplaced("\(EtcdError.clusterChanged(was: was, now: now)): listing again", revision: 0)
            } catch {
                return .failed("listing the fleet failed: \(error)")
            }
            // Later pages' headers carry etcd's newest revision, not the pinned one.
            noteSeen(page.revision)
            listing.revision = listing.revision ?? page.revision
            for keyValue in page.keyValues { add(keyValue, to: &listing.snapshot, problems: &listing.problems) }
            guard page.more else { return nil }
            guard let last = page.keyValues.last else {
                return .failed("listing the fleet failed: etcd said more keys follow a page with none")
            }
            from = last.key + [0]
        }
    }

    private func add(
        _ keyValue: EtcdKeyValue, to snapshot: inout FleetSnapshot, problems: inout [[UInt8]: FleetProblem]
    ) {
        switch read(keyValue) {
        case .ignored: break
        case .value(let name, let value): snapshot.values[name.domain, default: [:]][name.key] = value
        case .lock(let name): snapshot.locks[name.domain, default: []].insert(name.key)
        case .unreadable(_, let problem): problems[keyValue.key] = problem
        }
    }

    /// What a key as etcd holds it (a listed key, or a put event) gives the mirror.
    enum Reading {
        case ignored
        case value(FleetName, Value)
        case lock(FleetName)
        /// Left out; `name` when only the value is bad (its mirror entry is removed).
        case unreadable(FleetName?, FleetProblem)
    }

    func read(_ keyValue: EtcdKeyValue) -> Reading {
        func problem(_ reason: String) -> FleetProblem {
            FleetProblem(
                etcdKey: String(decoding: keyValue.key, as: UTF8.self), revision: keyValue.modRevision, reason: reason)
        }
        switch layout.name(ofEtcdKey: keyValue.key) {
        case .ignored:
            return .ignored
        case .unreadable(let reason):
            return .unreadable(nil, problem(reason))
        case .fleet(let name) where name.kind == .lock:
            return .lock(name)
        case .fleet(let name):
            do {
                return .value(name, try layout.value(fromEtcdValue: keyValue.value))
            } catch {
                return .unreadable(name, problem("the value is not the contract's typed JSON: \(error)"))
            }
        }
    }
}
