import CCurl
import FoundationEssentials
import KVValues
import Synchronization

/// HTTP exchanges with etcd members through libcurl, blocking: a POST of JSON and its answer,
/// whole (``post(_:body:token:)``) or streamed (``stream(_:body:token:sink:)``).
///
/// Not FoundationNetworking's URLSession: it reads an HTTP trailer as the start of a new header
/// and then stops the process ("Transfer completed, but there's no response"), and every error
/// answer of etcd 3.4's gateway ends with one (`Grpc-Trailer-Content-Type`). libcurl (which
/// URLSession wraps) reads trailers fine, speaks HTTPS, and keeps connections open between calls.
///
/// Thread-safe: each exchange takes an idle libcurl handle from a small pool (or makes one).
/// gRPC calls have their own pool: a handle keeps its connections, and an HTTP/2 connection
/// must not carry the gateway's HTTP/1.1 calls.
final class GatewayTransport: Sendable {
    /// How one exchange went, short of an answer.
    enum Failure: Error, Sendable {
        /// No connection was made: the request certainly did not reach etcd.
        case notSent(String)
        /// The request may have reached etcd, but no (whole) answer came.
        case noAnswer(String)
        /// A gRPC call met a server that does not speak HTTP/2 (an HTTP/1.1 proxy, say).
        case notHTTP2(String)

        var reason: String {
            switch self {
            case .notSent(let reason), .noAnswer(let reason), .notHTTP2(let reason): reason
            }
        }
    }

    let timeout: TimeInterval
    /// libcurl's codes for a gRPC call that met no HTTP/2 (or a connection that broke): weird
    /// reply, HTTP/2 framing, empty reply, send and receive failures, HTTP/2 stream.
    static let notHTTP2Codes: Set<Int32> = [8, 16, 52, 55, 56, 92]
    /// The certificate authorities an https member must be signed by (PEM); nil: the system's.
    let caFile: String?
    /// Idle handles, gRPC ones (true) apart.
    private let idle = Mutex<[Bool: [Handle]]>([:])

    init(timeout: Duration, caFile: String? = nil) {
        self.timeout = timeout.seconds
        self.caFile = caFile
        _ = ccurl_global_init()
    }

    /// POSTs `body` to `url` (with `token` as the `Authorization` header when given) and waits
    /// at most the timeout for the whole answer.
    func post(_ url: URL, body: Data, token: String?) throws(Failure) -> (status: Int, body: Data) {
        let sink = BodySink { _ in true }
        let status = try exchange(url, body: body, token: token, timeout: timeout, sink: sink)
        return (status, sink.collected)
    }

    /// Calls the gRPC method at `url` (`https://member/etcdserverpb.KV/Range`) with `body`, one
    /// framed protobuf message, over HTTP/2; `token` goes as etcd's `token` metadata. The
    /// answer's gRPC status is nil when it carried none (the member does not speak gRPC there).
    func grpc(_ url: URL, body: Data, token: String?) throws(Failure) -> (
        status: Int, grpcStatus: Int?, message: String, body: Data
    ) {
        let sink = BodySink { _ in true }
        var result = ccurl_grpc_result()
        let status = try exchange(url, body: body, token: token, timeout: timeout, sink: sink, grpc: &result)
        let message = withUnsafeBytes(of: result.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return (
            status, result.status < 0 ? nil : Int(result.status), Self.percentDecoded(message),
            sink.collected
        )
    }

    /// `text` with its `%XX` escapes decoded (a gRPC status message is sent so), or `text` as
    /// it is if an escape is malformed or the bytes are not UTF-8.
    static func percentDecoded(_ text: String) -> String {
        var bytes: [UInt8] = []
        var rest = text.utf8[...]
        while let byte = rest.popFirst() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = rest.popFirst().flatMap(Hex.digit), let low = rest.popFirst().flatMap(Hex.digit) else {
                return text
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self) ?? text
    }

    /// POSTs `body` to `url` and hands the answer's bytes to `sink` as they arrive, until the
    /// answer ends or `sink` says stop (then returns the status; no timeout but the connection's).
    func stream(_ url: URL, body: Data, token: String?, sink: BodySink) throws(Failure) -> Int {
        try exchange(url, body: body, token: token, timeout: 0, sink: sink)
    }

    private func exchange(
        _ url: URL, body: Data, token: String?, timeout: TimeInterval, sink: BodySink,
        grpc: UnsafeMutablePointer<ccurl_grpc_result>? = nil
    ) throws(Failure) -> Int {
        let kind = grpc != nil
        let handle = idle.withLock { $0[kind]?.popLast() } ?? Handle()
        guard let raw = handle.raw else {
            let reason = ccurl_load_error().map { String(cString: $0) } ?? "libcurl has no handle (out of memory?)"
            throw .notSent("\(url.absoluteString): \(reason)")
        }
        var status = 0
        var error = [CChar](repeating: 0, count: 512)
        sink.attach(raw)
        let context = Unmanaged.passUnretained(sink).toOpaque()
        let bytes = body.map { CChar(bitPattern: $0) } + [0]
        let code = ccurl_post(
            raw, url.absoluteString, bytes, bytes.count - 1, token, caFile, Int(timeout * 1000),
            Int(self.timeout * 1000), onBody, onProgress,
            context, &status, &error, grpc)
        withExtendedLifetime(sink) {}
        idle.withLock { if $0[kind, default: []].count < 8 { $0[kind, default: []].append(handle) } }
        guard code != 0 else { return status }
        if sink.stopped { return status }
        let message =
            error[0] == 0
            ? String(cString: ccurl_strerror(code))
            : String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let reason = "\(url.absoluteString): \(message)"
        switch code {
        case _ where grpc != nil && Self.notHTTP2Codes.contains(code):
            throw .notHTTP2(reason)
        // unsupported, bad URL, resolve, connect, TLS
        case 1, 3, 6, 7, 35, 51, 53, 54, 58, 59, 60, 64, 66, 77, 80, 83, 90, 91: throw .notSent(reason)
        default: throw .noAnswer(reason)
        }
    }

    /// One libcurl easy handle, freed with the object.
    private final class Handle: @unchecked Sendable {
        let raw: UnsafeMutableRawPointer?
        init() { raw = ccurl_new() }
        deinit { if let raw { ccurl_free(raw) } }
    }
}

/// Where an answer's body goes: collected whole, or handed on in chunks to `receive` (which
/// returns false to stop the transfer). ``stop()`` from any thread ends it within about a second.
final class BodySink: @unchecked Sendable {
    private struct State {
        var body = Data()
        var stopRequested = false
        /// The libcurl handle transferring, as its address (0: none yet).
        var handle = 0
    }

    private let state = Mutex(State())
    private let receive: (Data) -> Bool
    private let collect: Bool

    /// `receive` runs on the transferring thread; nil body chunks are never passed.
    init(collect: Bool = true, receive: @escaping (Data) -> Bool) {
        self.collect = collect
        self.receive = receive
    }

    var collected: Data { state.withLock { $0.body } }
    var stopped: Bool { state.withLock { $0.stopRequested } }

    func stop() { state.withLock { $0.stopRequested = true } }

    fileprivate func attach(_ handle: UnsafeMutableRawPointer) {
        let address = Int(bitPattern: handle)
        state.withLock { $0.handle = address }
    }

    /// The answer's HTTP status; valid inside `receive`.
    var status: Int {
        state.withLock { state -> Int in
            guard let handle = UnsafeMutableRawPointer(bitPattern: state.handle) else { return 0 }
            return ccurl_status(handle)
        }
    }

    fileprivate func take(_ chunk: Data) -> Bool {
        if collect { state.withLock { $0.body.append(chunk) } }
        guard receive(chunk) else {
            stop()
            return false
        }
        return !stopped
    }
}

private func onBody(
    _ bytes: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let bytes, let context else { return 0 }
    let sink = Unmanaged<BodySink>.fromOpaque(context).takeUnretainedValue()
    return sink.take(Data(bytes: bytes, count: size * count)) ? size * count : 0
}

private func onProgress(_ context: UnsafeMutableRawPointer?) -> Int32 {
    guard let context else { return 1 }
    return Unmanaged<BodySink>.fromOpaque(context).takeUnretainedValue().stopped ? 1 : 0
}

/// What an etcd error answer means to the caller.
enum GatewayErrorKind: Equatable {
    /// The member cannot serve now (no leader, timed out, leader changed): try another one.
    case unavailable(certainlyNotApplied: Bool)
    /// The token expired or is unknown to this member: authenticate again and retry once.
    case invalidToken
    case failed(EtcdError)
}

extension GatewayErrorJSON {
    /// gRPC codes the gateway passes on (google.golang.org/grpc/codes).
    private static let resourceExhausted = 8, unauthenticated = 16, permissionDenied = 7, unavailable = 14

    /// Sorts etcd's message (etcd 3.4's rpctypes wording, with or without "etcdserver: ").
    var kind: GatewayErrorKind {
        let text = message
        if text.contains("invalid auth token") { return .invalidToken }
        if text.contains("required revision has been compacted") { return .failed(.compacted(0)) }
        if text.contains("request is too large") || text.contains("too many operations in txn request")
            || text.contains("received message larger than max") || code == Self.resourceExhausted
        {
            return .failed(.tooLarge(text))
        }
        if code == Self.unauthenticated || code == Self.permissionDenied || text.contains("permission denied")
            || text.contains("authentication failed") || text.contains("user name is empty")
        {
            return .failed(.authentication(text))
        }
        if text.contains("no leader") || text.contains("not capable") { return .unavailable(certainlyNotApplied: true) }
        if code == Self.unavailable { return .unavailable(certainlyNotApplied: false) }
        return .failed(.protocolError(text.isEmpty ? "an error without a message (code \(code ?? -1))" : text))
    }
}

extension URL {
    /// host:port, naming a member in messages.
    var memberName: String { "\(host ?? "?"):\(port.map(String.init) ?? "?")" }
}

extension Duration {
    /// The duration in seconds, as Foundation counts time.
    var seconds: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
