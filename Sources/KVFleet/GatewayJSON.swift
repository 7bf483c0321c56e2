import FoundationEssentials
import KVValues

/// The JSON of etcd's gRPC gateway (etcd 3.4, `/v3/...`): protobuf's JSON mapping, with its
/// quirks. Keys and values are base64; 64-bit integers are strings (numbers are accepted too);
/// a field holding its zero value is left out: a failed txn has no `succeeded`, a PUT event no
/// `type`, an empty range no `kvs`, an empty value no `value`, watch id 0 no `watch_id`.
enum GatewayJSON {
    static func encode(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        // Encoding these plain structs of strings, bools and arrays cannot fail.
        return (try? encoder.encode(value)) ?? Data("{}".utf8)
    }

    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws(EtcdError) -> T {
        // Each response type names its snake_case members itself: the decoder's
        // convertFromSnakeCase strategy cost more than the rest of a listing together.
        let decoder = JSONDecoder()
        do {
            return try decoder.decode(type, from: data)
        } catch {
            let text = String(decoding: data.prefix(200), as: UTF8.self)
            throw .protocolError("cannot read the gateway's answer (\(error)): \(text)")
        }
    }

    static func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
}

/// An `int64` as the gateway writes it: a string of digits (or, leniently, a number).
struct GatewayInt64: Decodable, Sendable {
    var value: Int64

    init(value: Int64) { self.value = value }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            guard let value = Int64(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an int64: \(text)")
            }
            self.value = value
        } else {
            value = try container.decode(Int64.self)
        }
    }
}

/// Bytes as the gateway writes them: base64.
struct GatewayBytes: Decodable, Sendable {
    var bytes: [UInt8]

    init(bytes: [UInt8]) { self.bytes = bytes }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let data = Data(base64Encoded: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not base64: \(text.prefix(40))")
        }
        bytes = [UInt8](data)
    }
}

// MARK: Requests (int64 written as strings, bytes as base64; nil fields left out)

struct RangeRequestJSON: Encodable {
    var key: String
    var rangeEnd: String?
    var revision: String?
    var limit: String?
}

struct CompareJSON: Encodable {
    var key: String
    var target = "MOD"
    var result = "EQUAL"
    var modRevision: String
}

struct PutJSON: Encodable {
    var key: String
    var value: String
}

struct DeleteRangeJSON: Encodable {
    var key: String
    var rangeEnd: String?
}

struct RequestOpJSON: Encodable {
    var requestPut: PutJSON?
    var requestDeleteRange: DeleteRangeJSON?
}

struct TxnRequestJSON: Encodable {
    var compare: [CompareJSON]
    var success: [RequestOpJSON]
    var failure: [RequestOpJSON]
}

struct AuthenticateRequestJSON: Encodable {
    var name: String
    var password: String
}

struct WatchCreateJSON: Encodable {
    var key: String
    var rangeEnd: String?
    var startRevision: String
    var progressNotify = true
}

struct WatchRequestJSON: Encodable {
    var createRequest: WatchCreateJSON
}

extension EtcdTransaction {
    var json: TxnRequestJSON {
        TxnRequestJSON(
            compare: comparisons.map { comparison in
                switch comparison {
                case .modRevision(let key, let revision):
                    CompareJSON(key: GatewayJSON.base64(key), modRevision: String(revision))
                case .modRevisionBelow(let key, let revision):
                    CompareJSON(key: GatewayJSON.base64(key), result: "LESS", modRevision: String(revision))
                }
            },
            success: success.map(\.json), failure: failure.map(\.json))
    }
}

extension EtcdTransaction.Operation {
    var json: RequestOpJSON {
        switch self {
        case .put(let key, let value):
            RequestOpJSON(requestPut: PutJSON(key: GatewayJSON.base64(key), value: GatewayJSON.base64(value)))
        case .delete(let key):
            RequestOpJSON(requestDeleteRange: DeleteRangeJSON(key: GatewayJSON.base64(key)))
        case .deleteRange(let key, let end):
            RequestOpJSON(
                requestDeleteRange: DeleteRangeJSON(key: GatewayJSON.base64(key), rangeEnd: GatewayJSON.base64(end)))
        }
    }
}

// MARK: Responses (every field optional: zero values are left out)

struct HeaderJSON: Decodable {
    var revision: GatewayInt64?
    var memberId: String? = nil
    /// etcd's cluster ID (a uint64, as text).
    var clusterId: String? = nil

    private enum CodingKeys: String, CodingKey {
        case revision
        case memberId = "member_id"
        case clusterId = "cluster_id"
    }

    /// The cluster ID as a number, when the header has one.
    var cluster: UInt64? { clusterId.flatMap { UInt64($0) } }
}

struct KeyValueJSON: Decodable {
    var key: GatewayBytes?
    var value: GatewayBytes?
    var modRevision: GatewayInt64?

    private enum CodingKeys: String, CodingKey {
        case key, value
        case modRevision = "mod_revision"
    }

    var keyValue: EtcdKeyValue {
        EtcdKeyValue(key: key?.bytes ?? [], value: value?.bytes ?? [], modRevision: modRevision?.value ?? 0)
    }
}

struct RangeResponseJSON {
    var header: HeaderJSON?
    var kvs: [KeyValueJSON]?
    var more: Bool?
}

struct TxnResponseJSON: Decodable {
    var header: HeaderJSON?
    var succeeded: Bool?
}

struct AuthenticateResponseJSON: Decodable {
    var token: String?
}

struct EventJSON: Decodable {
    /// "DELETE", or left out for a PUT (the enum's zero value).
    var type: String?
    var kv: KeyValueJSON?

    var event: EtcdEvent {
        EtcdEvent(
            kind: type == "DELETE" ? .delete : .put,
            keyValue: kv?.keyValue ?? EtcdKeyValue(key: [], value: [], modRevision: 0))
    }
}

struct WatchResponseJSON: Decodable {
    var header: HeaderJSON?
    var created: Bool?
    var canceled: Bool?
    var compactRevision: GatewayInt64?
    var cancelReason: String?
    var events: [EventJSON]?

    private enum CodingKeys: String, CodingKey {
        case header, created, canceled, events
        case compactRevision = "compact_revision"
        case cancelReason = "cancel_reason"
    }
}

/// One line of the watch stream: `{"result": {...}}`, or `{"error": {...}}` when the stream fails.
struct WatchLineJSON: Decodable {
    var result: WatchResponseJSON?
    var error: GatewayErrorJSON?
}

/// An error answer. Unary calls: `{"error": "etcdserver: ...", "message": "...", "code": 11}`;
/// inside a stream: `{"grpc_code": 14, "http_code": 503, "message": "...", "http_status": "..."}`.
struct GatewayErrorJSON: Decodable {
    var message: String
    var code: Int?

    private enum CodingKeys: String, CodingKey {
        case error, message, code
        case grpcCode = "grpc_code"
    }

    init(message: String, code: Int?) {
        self.message = message
        self.code = code
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let nested = try? container.decode(GatewayErrorJSON.self, forKey: .error) {
            self = nested
            return
        }
        let message = try? container.decode(String.self, forKey: .message)
        let error = try? container.decode(String.self, forKey: .error)
        self.message = [message, error].compactMap { $0 }.first { !$0.isEmpty } ?? ""
        code = (try? container.decode(Int.self, forKey: .code)) ?? (try? container.decode(Int.self, forKey: .grpcCode))
    }
}

// MARK: The range answer, read with kvd's own parser

extension RangeResponseJSON {
    /// Reads a range answer with kvd's JSON parser rather than `JSONDecoder`: a listing's pages
    /// are the large answers the gateway sends, and decoding them through `Decodable` took most
    /// of a first listing's time. Same rules: int64 as a string or a number, bytes as base64,
    /// zero values left out.
    static func read(_ data: Data) throws(EtcdError) -> RangeResponseJSON {
        let reader = RangeReader(data: data)
        let json: JSON
        do {
            json = try JSONParser.parse(data, limits: JSONLimits(maxDepth: 8, maxBytes: max(data.count, 1)))
        } catch {
            throw reader.refuse("\(error)")
        }
        var response = RangeResponseJSON()
        if let header = json["header"] {
            var cluster: String? = nil
            if case .string(let text)? = header["cluster_id"] { cluster = text }
            response.header = HeaderJSON(
                revision: try reader.int64(header["revision"], "header.revision"), clusterId: cluster)
        }
        response.kvs = try reader.keyValues(json["kvs"])
        switch json["more"] {
        case nil, .null?: break
        case .bool(let more)?: response.more = more
        default: throw reader.refuse("more is not a bool")
        }
        return response
    }
}

/// The members of one range answer (`data`), read as the gateway writes them.
private struct RangeReader {
    let data: Data

    func refuse(_ why: String) -> EtcdError {
        .protocolError(
            "cannot read the gateway's range answer (\(why)): \(String(decoding: data.prefix(200), as: UTF8.self))")
    }

    /// An int64, as a string or a number; `nil` when left out.
    func int64(_ member: JSON?, _ name: String) throws(EtcdError) -> GatewayInt64? {
        switch member {
        case nil, .null?: return nil
        case .integer(let number)?: return GatewayInt64(value: number)
        case .string(let text)?:
            guard let number = Int64(text) else { throw refuse("\(name) is not an int64") }
            return GatewayInt64(value: number)
        default: throw refuse("\(name) is not an int64")
        }
    }

    /// Bytes, as base64 text; `nil` when left out.
    func bytes(_ member: JSON?, _ name: String) throws(EtcdError) -> GatewayBytes? {
        switch member {
        case nil, .null?: return nil
        case .string(let text)?:
            guard let data = Data(base64Encoded: text) else { throw refuse("\(name) is not base64") }
            return GatewayBytes(bytes: [UInt8](data))
        default: throw refuse("\(name) is not base64 text")
        }
    }

    /// `kvs`: each key, value and mod revision; `nil` when left out.
    func keyValues(_ member: JSON?) throws(EtcdError) -> [KeyValueJSON]? {
        switch member {
        case nil, .null?: return nil
        case .array(let items)?:
            var kvs: [KeyValueJSON] = []
            kvs.reserveCapacity(items.count)
            for item in items {
                kvs.append(
                    KeyValueJSON(
                        key: try bytes(item["key"], "kvs.key"), value: try bytes(item["value"], "kvs.value"),
                        modRevision: try int64(item["mod_revision"], "kvs.mod_revision")))
            }
            return kvs
        default: throw refuse("kvs is not an array")
        }
    }
}
