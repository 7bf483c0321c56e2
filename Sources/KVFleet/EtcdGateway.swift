import FoundationEssentials
import Synchronization

/// ``EtcdAPI`` over etcd's JSON gateway (`/v3/...`, etcd 3.4 or later), through libcurl.
///
/// Several endpoints (members of one cluster): each call starts at the member in use and, when
/// that member cannot be reached or cannot serve (no leader, timed out), fails over to the next,
/// trying each once; ``EtcdError/unreachable(_:)`` joins every member's reason. A transaction
/// fails over only when it certainly did not reach etcd (connection refused, no leader);
/// otherwise its outcome is unknown and the call throws ``EtcdError/outcomeUnknown(_:)``.
///
/// With credentials, the gateway asks `/v3/auth/authenticate` for a token before the first call
/// and sends it as the `Authorization` header; on "invalid auth token" (it expired, or the member
/// does not know it) it authenticates again and retries once. When etcd answers that
/// authentication is not enabled (a cluster without auth, or after `etcdctl auth disable`), it
/// calls without a token, telling `warn` once; when etcd then refuses an unauthenticated call
/// (auth enabled again), it authenticates again and retries once.
///
/// Thread-safe: calls may run at once from several threads. Every call blocks its thread for at
/// most `requestTimeout` per member tried (a watch, while its stream lives).
public final class EtcdGateway: EtcdAPI {
    /// What a status command shows.
    public struct Status: Sendable, Equatable {
        public var endpoints: [URL]
        /// The member the next call starts with (the last one that answered, or the next one
        /// after a failure).
        public var memberInUse: URL
        /// The last failure, with the member it came from; nil until one happens.
        public var lastError: String?
    }

    private struct State {
        var current = 0
        var token: String?
        var lastError: String?
        /// Ranges go through the JSON gateway: a member answered a gRPC call without a gRPC
        /// status (a proxy in between that speaks only HTTP/1.1, say).
        var rangesOverJSON = false
        /// etcd said authentication is not enabled: calls go without a token.
        var authDisabled = false
        /// The cluster ID of the answers so far (or the one ``expectCluster(_:)`` gave).
        var cluster: UInt64?
    }

    let endpoints: [URL]
    let credentials: EtcdCredentials?
    let requestTimeout: Duration
    let transport: GatewayTransport
    /// Hears of what the caller should log: calls going unauthenticated.
    let warn: @Sendable (String) -> Void
    private let state = Mutex(State())

    /// Validates `endpoints` (`http://` or `https://` URLs of etcd's client port, at least one).
    /// Connects to nothing yet. `caFile`: the PEM certificate authorities that sign the
    /// members' https certificates (etcdctl's `--cacert`); nil trusts the system's.
    public init(
        endpoints: [String], credentials: EtcdCredentials? = nil, caFile: String? = nil,
        requestTimeout: Duration = .seconds(5),
        warn: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(EtcdError) {
        guard !endpoints.isEmpty else {
            throw .badConfiguration("no etcd endpoint given: pass at least one URL such as http://127.0.0.1:2379")
        }
        var urls: [URL] = []
        for endpoint in endpoints {
            guard let url = URL(string: endpoint), let scheme = url.scheme?.lowercased(),
                scheme == "http" || scheme == "https",
                url.host?.isEmpty == false
            else {
                throw .badConfiguration(
                    "etcd endpoint '\(endpoint)' is not an http:// or https:// URL such as http://10.0.0.1:2379")
            }
            urls.append(url)
        }
        self.endpoints = urls
        self.credentials = credentials
        self.requestTimeout = requestTimeout
        self.warn = warn
        transport = GatewayTransport(timeout: requestTimeout, caFile: caFile)
    }

    /// The cluster ID etcd's answers carry (nil before the first read or watch).
    public var clusterID: UInt64? { state.withLock { $0.cluster } }

    /// Sets the cluster ID expected (the one a mirror was listed from, kept across restarts):
    /// a read or watch answered by another cluster then throws ``EtcdError/clusterChanged(was:now:)``.
    public func expectCluster(_ id: UInt64) { state.withLock { $0.cluster = id } }

    /// Compares an answer's cluster ID with the one before; a change is thrown once (the new
    /// ID is kept). Transactions do not check: one that committed must not be reported failed.
    func checkCluster(_ id: UInt64?) throws(EtcdError) {
        guard let id, id != 0 else { return }
        let was = state.withLock { state in
            defer { state.cluster = id }
            return state.cluster
        }
        if let was, was != id { throw recorded(.clusterChanged(was: was, now: id)) }
    }

    public var status: Status {
        state.withLock { Status(endpoints: endpoints, memberInUse: endpoints[$0.current], lastError: $0.lastError) }
    }

    /// A page of keys, through etcd's gRPC `Range` (``EtcdGRPC``), or through the JSON gateway
    /// once a member has shown it cannot take gRPC.
    public func range(from key: [UInt8], end: [UInt8], revision: Int64?, limit: Int) throws(EtcdError) -> EtcdRangePage
    {
        guard !state.withLock({ $0.rangesOverJSON }) else {
            return try jsonRange(from: key, end: end, revision: revision, limit: limit)
        }
        let data: Data
        do throws(EtcdError) {
            data = try call(
                EtcdGRPC.rangePath, EtcdGRPC.rangeRequest(key: key, end: end, revision: revision, limit: limit),
                idempotent: true, wire: .grpc)
        } catch .compacted {
            throw .compacted(compactRevision(key: key))
        } catch .protocolError(let message) where message.hasPrefix(Self.notGRPC) {
            // Through the gateway instead; from now on only if that worked where gRPC did not.
            let page = try jsonRange(from: key, end: end, revision: revision, limit: limit)
            state.withLock { $0.rangesOverJSON = true }
            return page
        }
        let response = try EtcdGRPC.rangeResponse(data)
        guard let newest = response.revision else {
            throw .protocolError("a gRPC range answer without a header revision")
        }
        try checkCluster(response.cluster)
        return EtcdRangePage(keyValues: response.keyValues, more: response.more, revision: revision ?? newest)
    }

    func jsonRange(from key: [UInt8], end: [UInt8], revision: Int64?, limit: Int) throws(EtcdError) -> EtcdRangePage {
        let request = RangeRequestJSON(
            key: GatewayJSON.base64(key), rangeEnd: end.isEmpty ? nil : GatewayJSON.base64(end),
            revision: revision.map { String($0) }, limit: limit > 0 ? String(limit) : nil)
        let data: Data
        do throws(EtcdError) {
            data = try call("/v3/kv/range", GatewayJSON.encode(request), idempotent: true)
        } catch .compacted {
            throw .compacted(compactRevision(key: key))
        }
        let response = try RangeResponseJSON.read(data)
        let newest = try Self.revision(response.header)
        try checkCluster(response.header?.cluster)
        return EtcdRangePage(
            keyValues: (response.kvs ?? []).map(\.keyValue), more: response.more ?? false, revision: revision ?? newest)
    }

    public func commit(_ transaction: EtcdTransaction) throws(EtcdError) -> (succeeded: Bool, revision: Int64) {
        let data = try call("/v3/kv/txn", GatewayJSON.encode(transaction.json), idempotent: false)
        let response = try GatewayJSON.decode(TxnResponseJSON.self, from: data)
        return (response.succeeded ?? false, try Self.revision(response.header))
    }

    static func revision(_ header: HeaderJSON?) throws(EtcdError) -> Int64 {
        guard let revision = header?.revision?.value else {
            throw .protocolError("an answer without a header revision")
        }
        return revision
    }

    // MARK: Fail-over

    /// POSTs `body` to `path` on the member in use, failing over as the type's comment says;
    /// returns the body of the first 200 answer.
    func call(_ path: String, _ body: Data, idempotent: Bool, wire: Wire = .json) throws(EtcdError) -> Data {
        var reasons: [String] = []
        var withoutHTTP2 = 0
        for (index, url) in membersInTurn() {
            switch try attempt(
                url.appendingPathComponent(path), body, idempotent: idempotent, member: index, wire: wire)
            {
            case .answer(let data):
                state.withLock { $0.current = index }
                return data
            case .tryNext(let reason):
                reasons.append(reason)
                noteFailure(reason, member: index)
            case .notHTTP2(let reason):
                reasons.append(reason)
                withoutHTTP2 += 1
            }
        }
        // No member took the gRPC call as HTTP/2: whatever stands in front of them may not.
        if withoutHTTP2 == reasons.count {
            throw .protocolError(Self.notGRPC + " (\(reasons.joined(separator: "; ")))")
        }
        throw .unreachable(reasons.joined(separator: "; "))
    }

    enum Attempt {
        case answer(Data)
        case tryNext(String)
        /// A gRPC call this member did not take as HTTP/2 (or it broke the connection).
        case notHTTP2(String)
    }

    /// How a call reaches etcd: JSON through the gateway, or a gRPC message over HTTP/2.
    enum Wire {
        case json, grpc
    }

    /// What one exchange brought back.
    enum WireReply {
        case answer(Data)
        case error(GatewayErrorJSON)
        case jsonError(Data)
        /// An answer without a gRPC status: whatever answered does not speak gRPC.
        case notGRPC(Int)
    }

    /// The start of the message of ``WireReply/notGRPC(_:)``, which makes ranges go through
    /// the JSON gateway from then on.
    static let notGRPC = "the member did not answer a gRPC call with a gRPC status"

    private func exchange(_ wire: Wire, _ url: URL, _ body: Data, token: String?) throws(GatewayTransport.Failure)
        -> WireReply
    {
        switch wire {
        case .json:
            let reply = try transport.post(url, body: body, token: token)
            return reply.status == 200 ? .answer(reply.body) : .jsonError(reply.body)
        case .grpc:
            let reply = try transport.grpc(url, body: body, token: token)
            guard let status = reply.grpcStatus else { return .notGRPC(reply.status) }
            return status == 0 ? .answer(reply.body) : .error(GatewayErrorJSON(message: reply.message, code: status))
        }
    }

    /// One member: the answer, a reason to try the next one, or an error for the caller. A
    /// transaction whose outcome is unknown also moves the next call to the next member.
    func attempt(_ url: URL, _ body: Data, idempotent: Bool, member index: Int, wire: Wire) throws(EtcdError) -> Attempt
    {
        var renewed = false
        while true {
            let token = try currentToken(renew: false)
            let reply: WireReply
            do throws(GatewayTransport.Failure) {
                reply = try exchange(wire, url, body, token: token)
            } catch .notHTTP2(let reason) {
                return .notHTTP2(reason)
            } catch {
                guard case .noAnswer = error, !idempotent else { return .tryNext(error.reason) }
                noteFailure(error.reason, member: index)
                throw .outcomeUnknown(error.reason)
            }
            let error: GatewayErrorJSON
            switch reply {
            case .answer(let data): return .answer(data)
            case .error(let answer): error = answer
            case .jsonError(let body): error = try GatewayJSON.decode(GatewayErrorJSON.self, from: body)
            case .notGRPC(let status): throw .protocolError(Self.notGRPC + " (HTTP status \(status))")
            }
            switch error.kind {
            case .invalidToken where credentials != nil && !renewed:
                renewed = true
                _ = try currentToken(renew: true)
            case .invalidToken:
                throw recorded(.authentication(error.message))
            case .failed(.authentication) where credentials != nil && !renewed && state.withLock({ $0.authDisabled }):
                // Unauthenticated since etcd said auth was off: it is on again.
                renewed = true
                state.withLock { $0.authDisabled = false }
                _ = try currentToken(renew: true)
            case .unavailable(let certainlyNotApplied) where idempotent || certainlyNotApplied:
                return .tryNext("\(url.memberName): \(error.message)")
            case .unavailable:
                noteFailure("\(url.memberName): \(error.message)", member: index)
                throw .outcomeUnknown(error.message)
            case .failed(let failure):
                throw recorded(failure)
            }
        }
    }

    /// The members, starting with the one in use, each once.
    func membersInTurn() -> [(Int, URL)] {
        let first = state.withLock { $0.current }
        return (0..<endpoints.count).map { offset in
            let index = (first + offset) % endpoints.count
            return (index, endpoints[index])
        }
    }

    /// Records a member's failure; the next call starts with the member after it.
    func noteFailure(_ reason: String, member index: Int) {
        state.withLock { state in
            state.lastError = reason
            if state.current == index { state.current = (index + 1) % endpoints.count }
        }
    }

    /// Keeps `error` as the last error (compaction is not a failure: relisting is routine).
    func recorded(_ error: EtcdError) -> EtcdError {
        if case .compacted = error { return error }
        state.withLock { $0.lastError = error.description }
        return error
    }

    // MARK: Authentication

    /// The token to send: nil without credentials; authenticates first when there is none yet
    /// (or `renew`).
    func currentToken(renew: Bool) throws(EtcdError) -> String? {
        guard let credentials else { return nil }
        let (token, disabled) = state.withLock { ($0.token, $0.authDisabled) }
        if !renew, disabled { return nil }
        if !renew, let token { return token }
        let body = GatewayJSON.encode(AuthenticateRequestJSON(name: credentials.name, password: credentials.password))
        let data: Data
        do throws(EtcdError) {
            data = try authenticate(body)
        } catch .authentication(let message) where message.contains("authentication is not enabled") {
            let wasDisabled = state.withLock { state in
                defer { (state.authDisabled, state.token) = (true, nil) }
                return state.authDisabled
            }
            if !wasDisabled {
                warn(
                    "etcd says authentication is not enabled: calling it without the credentials of '\(credentials.name)' (--etcd-auth-file) until it asks for them"
                )
            }
            return nil
        }
        guard let token = try GatewayJSON.decode(AuthenticateResponseJSON.self, from: data).token, !token.isEmpty else {
            throw recorded(
                .authentication("etcd gave no token for user '\(credentials.name)' (is authentication enabled?)"))
        }
        state.withLock { (state: inout State) in (state.token, state.authDisabled) = (token, false) }
        return token
    }

    /// POSTs to `/v3/auth/authenticate`, without a token, failing over like ``call(_:_:idempotent:)``.
    private func authenticate(_ body: Data) throws(EtcdError) -> Data {
        var reasons: [String] = []
        for (index, url) in membersInTurn() {
            let reply: (status: Int, body: Data)
            do throws(GatewayTransport.Failure) {
                reply = try transport.post(url.appendingPathComponent("/v3/auth/authenticate"), body: body, token: nil)
            } catch {
                reasons.append(error.reason)
                noteFailure(error.reason, member: index)
                continue
            }
            if reply.status == 200 { return reply.body }
            let error = try GatewayJSON.decode(GatewayErrorJSON.self, from: reply.body)
            if case .unavailable = error.kind {
                reasons.append(error.message)
                noteFailure(error.message, member: index)
                continue
            }
            // Not a failure: currentToken(renew:) goes on without a token.
            if error.message.contains("authentication is not enabled") { throw .authentication(error.message) }
            throw recorded(.authentication(error.message))
        }
        throw recorded(.unreachable(reasons.joined(separator: "; ")))
    }
}
