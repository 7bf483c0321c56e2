import KVSystem

/// How the loop learns who is on the other end of a connection it accepts
/// (``PeerProcess/begin(_:system:ownRoot:cgroups:)``): it owns what that reads once, kvd's own
/// root (a peer that sees it runs in no Flatpak sandbox), and what it keeps across connections,
/// the names of the cgroups seen (``CgroupNames``), and the pidfds it is done with until the
/// loop has sent its replies (``closeSpent()``). Loop thread only.
final class PeerIdentifier {
    let system: any SystemCalls
    /// kvd's own root (`/`, with the mount it is reached through); nil if unknown (then every
    /// peer's root is looked into).
    let ownRoot: RootView?
    private var cgroups: CgroupNames
    /// The pidfds of the peers identified since ``closeSpent()`` last ran.
    private var spent: [Int32] = []

    init(system: any SystemCalls) {
        self.system = system
        self.ownRoot = try? RootView.own(system)
        self.cgroups = CgroupNames(system: system)
    }

    /// The pidfds of identified peers stay open until the pass's replies are out, at most this
    /// many (past it they are closed at once), and none once kvd runs out of descriptors.
    static let maxSpent = 16

    /// Who is on the other end of `fd`, as far as the loop may wait to learn it. Out of
    /// descriptors with pidfds still open, closes them and tries again, so that keeping them
    /// refuses nobody.
    func begin(_ fd: Int32) throws(Errno) -> PeerProcess.Identification {
        if spent.count >= Self.maxSpent { closeSpent() }
        do {
            return try PeerProcess.begin(fd, system: system, ownRoot: ownRoot, cgroups: &cgroups, spent: &spent)
        } catch  where error.isOutOfDescriptors && !spent.isEmpty {
            closeSpent()
            return try PeerProcess.begin(fd, system: system, ownRoot: ownRoot, cgroups: &cgroups, spent: &spent)
        }
    }

    /// Closes the pidfds of the peers identified since it last ran: called once a pass's replies
    /// are out, so that closing them (which frees the kernel's file of each) delays none, and
    /// when kvd runs out of descriptors. Returns whether it closed any.
    @discardableResult
    func closeSpent() -> Bool {
        guard !spent.isEmpty else { return false }
        for pidfd in spent { system.close(pidfd) }
        spent.removeAll(keepingCapacity: true)
        return true
    }

    deinit { closeSpent() }
}
