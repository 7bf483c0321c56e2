import FoundationEssentials

extension EtcdGateway {
    /// How long a watch stream may stay silent before it counts as broken: twice the progress
    /// interval, plus a quarter of it for delivery. (etcd skips one progress tick after a tick
    /// that had events, so a healthy stream can be silent for just under twice the interval.)
    public static func idleLimit(progressInterval: Duration) -> Duration {
        progressInterval * 2 + progressInterval / 4
    }

    /// Watches on the member in use. Until etcd confirms the watch ("created"), a member that
    /// cannot be reached, is unavailable or stays silent is skipped for the next one; after
    /// that, a stream that breaks or stays silent for ``idleLimit(progressInterval:)`` throws
    /// ``EtcdError/unreachable(_:)`` and the next call starts with the next member (resume from
    /// the last revision seen + 1). The "created" message itself is not handed on: its header
    /// revision is not progress (older events may still follow).
    public func watch(
        from key: [UInt8], end: [UInt8], startRevision: Int64, progressInterval: Duration,
        receive: (EtcdWatchMessage) -> Bool
    ) throws(EtcdError) {
        try watch(
            from: key, end: end, startRevision: startRevision, progressInterval: progressInterval, checksCluster: true,
            receive: receive)
    }

    /// ``watch(from:end:startRevision:progressInterval:receive:)``; `checksCluster`: whether
    /// the answers' cluster ID is compared (not for ``compactRevision(key:)``, whose errors
    /// are swallowed).
    func watch(
        from key: [UInt8], end: [UInt8], startRevision: Int64, progressInterval: Duration, checksCluster: Bool,
        receive: (EtcdWatchMessage) -> Bool
    ) throws(EtcdError) {
        let request = WatchRequestJSON(
            createRequest: WatchCreateJSON(
                key: GatewayJSON.base64(key), rangeEnd: end.isEmpty ? nil : GatewayJSON.base64(end),
                startRevision: String(startRevision)))
        let body = GatewayJSON.encode(request)
        let limit = Self.idleLimit(progressInterval: progressInterval).seconds
        var reasons: [String] = []
        for (index, url) in membersInTurn() {
            var renewed = false
            while true {
                let token = try currentToken(renew: renewed)
                switch try watchOnce(
                    url.appendingPathComponent("/v3/watch"), body, token: token, member: index, idleLimit: limit,
                    checksCluster: checksCluster, receive)
                {
                case .endedByReceiver:
                    return
                case .tokenRejected(let reason):
                    guard credentials != nil, !renewed else { throw recorded(.authentication(reason)) }
                    renewed = true
                    continue
                case .notStarted(let reason):
                    reasons.append(reason)
                    noteFailure(reason, member: index)
                }
                break
            }
        }
        throw .unreachable(reasons.joined(separator: "; "))
    }

    enum WatchOutcome {
        case endedByReceiver
        /// The watch never started on this member (the reason): try the next one.
        case notStarted(String)
        /// etcd refused the token (expired, or unknown to this member).
        case tokenRejected(String)
    }

    /// One stream on one member, until `receive` says stop or the stream ends.
    private func watchOnce(
        _ url: URL, _ body: Data, token: String?, member: Int, idleLimit: TimeInterval, checksCluster: Bool,
        _ receive: (EtcdWatchMessage) -> Bool
    ) throws(EtcdError) -> WatchOutcome {
        let stream = WatchStream(transport, url, body: body, token: token)
        defer { stream.close() }
        var created = false
        let origin = url.memberName
        while true {
            switch stream.next(idle: idleLimit) {
            case .idle:
                let reason = "\(origin): no watch message for \(idleLimit) s (the member hangs, or the network)"
                return try broken(reason, created: created, member: member)
            case .ended(let status, let body, let failure):
                if status != 0 && status != 200 {
                    let error = try GatewayJSON.decode(GatewayErrorJSON.self, from: body)
                    return try rejected(error, origin, created: created, member: member)
                }
                return try broken(
                    failure?.reason ?? "\(origin): etcd closed the watch stream", created: created, member: member)
            case .line(let data):
                let line = try GatewayJSON.decode(WatchLineJSON.self, from: data)
                if let error = line.error { return try rejected(error, origin, created: created, member: member) }
                guard let response = line.result else {
                    throw recorded(.protocolError("a watch line with neither result nor error"))
                }
                if let outcome = try cancelled(response) { return outcome }
                if checksCluster { try checkCluster(response.header?.cluster) }
                if response.created == true {
                    created = true
                    continue
                }
                if !receive(try Self.message(response)) { return .endedByReceiver }
            }
        }
    }

    /// A broken stream: before "created", try the next member; after it, the caller resumes.
    private func broken(_ reason: String, created: Bool, member: Int) throws(EtcdError) -> WatchOutcome {
        guard created else { return .notStarted(reason) }
        noteFailure(reason, member: member)
        throw .unreachable(reason)
    }

    private func rejected(_ error: GatewayErrorJSON, _ origin: String, created: Bool, member: Int) throws(EtcdError)
        -> WatchOutcome
    {
        switch error.kind {
        case .invalidToken: return .tokenRejected(error.message)
        case .unavailable: return try broken("\(origin): \(error.message)", created: created, member: member)
        case .failed(let failure): throw recorded(failure)
        }
    }

    /// A cancel: compaction throws; a refused token is retried; anything else is unexpected.
    private func cancelled(_ response: WatchResponseJSON) throws(EtcdError) -> WatchOutcome? {
        guard response.canceled == true else { return nil }
        if let revision = response.compactRevision?.value, revision > 0 { throw .compacted(revision) }
        let reason = response.cancelReason ?? "no reason given"
        // etcd 3.4 cancels a watch whose token it cannot check with "permission denied".
        if reason.contains("permission denied") || reason.contains("invalid auth token") {
            return .tokenRejected(reason)
        }
        throw recorded(.protocolError("etcd cancelled the watch: \(reason)"))
    }

    /// Events (as etcd grouped them), or a progress notification (no events).
    static func message(_ response: WatchResponseJSON) throws(EtcdError) -> EtcdWatchMessage {
        let revision = try revision(response.header)
        guard let events = response.events, !events.isEmpty else { return .progress(revision: revision) }
        return .events(events.map(\.event), headerRevision: revision)
    }

    /// etcd's compact revision, found by watching `key` from revision 1 (etcd cancels that watch
    /// and names it); 0 when that fails. Used after a range read was refused as compacted.
    func compactRevision(key: [UInt8]) -> Int64 {
        do throws(EtcdError) {
            try watch(from: key, end: [], startRevision: 1, progressInterval: requestTimeout / 2, checksCluster: false)
            { _ in false }
        } catch .compacted(let revision) {
            return revision
        } catch {}
        return 0
    }
}
