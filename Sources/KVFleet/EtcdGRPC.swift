import FoundationEssentials

/// etcd's `Range` as a gRPC call (`/etcdserverpb.KV/Range`, on the same client port as the
/// gateway): the one call kvd makes through gRPC rather than the JSON gateway, because a first
/// listing is all range answers, and the gateway's JSON of 10,000 keys takes etcd about ten
/// times as long to write as the protobuf does (measured: 0.22 s against 0.02 s).
///
/// Only the messages kvd needs, in protobuf's wire format (etcd's `rpc.proto`):
/// `RangeRequest {bytes key = 1; bytes range_end = 2; int64 limit = 3; int64 revision = 4}` and
/// `RangeResponse {ResponseHeader header = 1; repeated KeyValue kvs = 2; bool more = 3}`,
/// `ResponseHeader {uint64 cluster_id = 1; int64 revision = 3}`, `KeyValue {bytes key = 1; int64 mod_revision = 3;
/// bytes value = 5}`; other fields are skipped. A gRPC message is framed by one byte (0: not
/// compressed) and its length in 4 bytes, big-endian.
enum EtcdGRPC {
    static let rangePath = "/etcdserverpb.KV/Range"

    /// The framed `RangeRequest`.
    static func rangeRequest(key: [UInt8], end: [UInt8], revision: Int64?, limit: Int) -> Data {
        var message: [UInt8] = []
        appendBytes(1, key, to: &message)
        if !end.isEmpty { appendBytes(2, end, to: &message) }
        if limit > 0 { appendVarint(3, UInt64(limit), to: &message) }
        if let revision, revision > 0 { appendVarint(4, UInt64(revision), to: &message) }
        let length = UInt32(message.count)
        return Data(
            [0, UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
                + message)
    }

    /// Reads a framed `RangeResponse`.
    static func rangeResponse(_ data: Data) throws(EtcdError) -> (
        keyValues: [EtcdKeyValue], more: Bool, revision: Int64?, cluster: UInt64?
    ) {
        let bytes = [UInt8](data)
        guard bytes.count >= 5, bytes[0] == 0 else { throw refuse("not one uncompressed gRPC message") }
        let length = Int(bytes[1]) << 24 | Int(bytes[2]) << 16 | Int(bytes[3]) << 8 | Int(bytes[4])
        guard bytes.count == 5 + length else {
            throw refuse("a message of \(bytes.count - 5) bytes framed as \(length)")
        }
        var keyValues: [EtcdKeyValue] = []
        var more = false
        var revision: Int64?
        var cluster: UInt64?
        var reader = Reader(bytes: bytes[5...])
        while let field = try reader.next() {
            switch field {
            case .bytes(1, let header):
                var inner = Reader(bytes: header)
                while let item = try inner.next() {
                    if case .varint(3, let value) = item { revision = Int64(bitPattern: value) }
                    if case .varint(1, let value) = item { cluster = value }
                }
            case .bytes(2, let kv):
                var inner = Reader(bytes: kv)
                var keyValue = EtcdKeyValue(key: [], value: [], modRevision: 0)
                while let item = try inner.next() {
                    switch item {
                    case .bytes(1, let key): keyValue.key = Array(key)
                    case .varint(3, let value): keyValue.modRevision = Int64(bitPattern: value)
                    case .bytes(5, let value): keyValue.value = Array(value)
                    default: break
                    }
                }
                keyValues.append(keyValue)
            case .varint(3, let value):
                more = value != 0
            default:
                break
            }
        }
        return (keyValues, more, revision, cluster)
    }

    static func refuse(_ why: String) -> EtcdError { .protocolError("cannot read etcd's gRPC range answer: \(why)") }

    private static func appendVarint(_ field: Int, _ value: UInt64, to message: inout [UInt8]) {
        appendRawVarint(UInt64(field << 3), to: &message)
        appendRawVarint(value, to: &message)
    }

    private static func appendBytes(_ field: Int, _ bytes: [UInt8], to message: inout [UInt8]) {
        appendRawVarint(UInt64(field << 3 | 2), to: &message)
        appendRawVarint(UInt64(bytes.count), to: &message)
        message += bytes
    }

    private static func appendRawVarint(_ value: UInt64, to message: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            message.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        message.append(UInt8(value))
    }

    /// One field of a protobuf message.
    enum Field {
        case varint(Int, UInt64)
        case bytes(Int, ArraySlice<UInt8>)
        /// A fixed-size field (wire types 1 and 5), skipped.
        case fixed(Int)
    }

    /// Reads the fields of one protobuf message in order.
    struct Reader {
        var bytes: ArraySlice<UInt8>

        mutating func next() throws(EtcdError) -> Field? {
            guard !bytes.isEmpty else { return nil }
            let tag = try varint()
            let number = Int(tag >> 3)
            switch tag & 7 {
            case 0:
                return .varint(number, try varint())
            case 2:
                let length = try varint()
                guard length <= UInt64(bytes.count) else { throw EtcdGRPC.refuse("a field longer than its message") }
                let field = bytes.prefix(Int(length))
                bytes = bytes.dropFirst(Int(length))
                return .bytes(number, field)
            case 1, 5:
                let size = tag & 7 == 1 ? 8 : 4
                guard bytes.count >= size else { throw EtcdGRPC.refuse("a fixed field past the end") }
                bytes = bytes.dropFirst(size)
                return .fixed(number)
            default:
                throw EtcdGRPC.refuse("wire type \(tag & 7)")
            }
        }

        private mutating func varint() throws(EtcdError) -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while let byte = bytes.first {
                bytes = bytes.dropFirst()
                guard shift < 64 else { break }
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
            throw EtcdGRPC.refuse("a varint past the end")
        }
    }
}
