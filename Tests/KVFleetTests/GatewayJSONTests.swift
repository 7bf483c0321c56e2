import Foundation
import Testing

@testable import KVFleet

/// The gateway's JSON quirks, on answers as etcd 3.4 writes them (the ones real etcd rarely
/// produces on demand: an error inside the watch stream).
@Suite struct GatewayJSONTests {
    func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try GatewayJSON.decode(type, from: Data(text.utf8))
    }

    /// A gRPC status message comes percent-encoded (what FoundationEssentials does not decode).
    @Test func grpcMessagesArePercentDecodedAndMalformedOnesKept() {
        #expect(GatewayTransport.percentDecoded("etcdserver%3A%20key%20not%20found") == "etcdserver: key not found")
        #expect(GatewayTransport.percentDecoded("caf%C3%A9 100%25") == "café 100%")
        #expect(GatewayTransport.percentDecoded("plain") == "plain")
        for malformed in ["50%", "%4", "%zz", "%+1", "%FF"] {  // cut, not hex, a sign, not UTF-8
            #expect(GatewayTransport.percentDecoded(malformed) == malformed)
        }
    }

    @Test func zeroValuesLeftOutReadAsZero() throws {
        let failedTxn = try decode(
            TxnResponseJSON.self, #"{"header":{"cluster_id":"1","member_id":"2","revision":"17","raft_term":"3"}}"#)
        #expect(failedTxn.succeeded == nil && failedTxn.header?.revision?.value == 17)
        let line = try decode(
            WatchLineJSON.self,
            #"{"result":{"header":{"revision":"9"},"events":[{"kv":{"key":"YQ==","mod_revision":"9"}},{"type":"DELETE","kv":{"key":"Yg==","mod_revision":"9"}}]}}"#
        )
        let message = try EtcdGateway.message(try #require(line.result))
        #expect(
            message
                == .events(
                    [
                        EtcdEvent(kind: .put, keyValue: EtcdKeyValue(key: Array("a".utf8), value: [], modRevision: 9)),
                        EtcdEvent(
                            kind: .delete, keyValue: EtcdKeyValue(key: Array("b".utf8), value: [], modRevision: 9)),
                    ], headerRevision: 9))
        let progress = try decode(WatchLineJSON.self, #"{"result":{"header":{"revision":"12"}}}"#)
        #expect(try EtcdGateway.message(try #require(progress.result)) == .progress(revision: 12))
    }

    @Test func errorsReadFromUnaryAnswersAndFromTheStream() throws {
        let unary = try decode(
            GatewayErrorJSON.self,
            #"{"error":"etcdserver: mvcc: required revision has been compacted","code":11,"message":"etcdserver: mvcc: required revision has been compacted"}"#
        )
        #expect(unary.kind == .failed(.compacted(0)))
        let stream = try decode(
            WatchLineJSON.self,
            #"{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}}"#
        )
        #expect(stream.error?.kind == .unavailable(certainlyNotApplied: true))
        let token = try decode(GatewayErrorJSON.self, #"{"error":"etcdserver: invalid auth token","code":16}"#)
        #expect(token.kind == .invalidToken)
    }

    /// Range answers are read with kvd's own parser: the same quirks (int64 as strings or
    /// numbers, base64, zero values left out), and a clear error for anything else.
    @Test func rangeAnswersReadWithTheirQuirks() throws {
        func read(_ text: String) throws -> RangeResponseJSON { try RangeResponseJSON.read(Data(text.utf8)) }
        let page = try read(
            #"{"header":{"cluster_id":"14841639068965178418","revision":"101"},"kvs":[{"key":"YQ==","create_revision":2,"mod_revision":"7","value":"MQ=="},{"key":"Yg==","mod_revision":8}],"more":true,"count":"3"}"#
        )
        #expect(page.header?.revision?.value == 101 && page.more == true)
        #expect(
            page.kvs?.map(\.keyValue) == [
                EtcdKeyValue(key: Array("a".utf8), value: Array("1".utf8), modRevision: 7),
                EtcdKeyValue(key: Array("b".utf8), value: [], modRevision: 8),
            ])
        let empty = try read(#"{"header":{"revision":"5"}}"#)
        #expect(empty.kvs == nil && empty.more == nil && empty.header?.revision?.value == 5)
        for bad in [
            #"{"kvs":[{"key":"not base64!"}]}"#, #"{"kvs":{}}"#, #"{"header":{"revision":"x"}}"#, #"{"more":"yes"}"#,
            "not json",
        ] {
            #expect(throws: EtcdError.self, "\(bad)") { _ = try read(bad) }
        }
    }

    /// The gRPC range messages: a request as protobuf writes it, and an answer with fields kvd
    /// skips (cluster id, create revision, version, count) between the ones it reads.
    @Test func grpcRangeMessagesAreProtobufsWireFormat() throws {
        let request = EtcdGRPC.rangeRequest(key: Array("a".utf8), end: Array("b".utf8), revision: 300, limit: 2)
        #expect([UInt8](request) == [0, 0, 0, 0, 11, 0x0A, 1, 0x61, 0x12, 1, 0x62, 0x18, 2, 0x20, 0xAC, 0x02])
        func field(_ number: UInt8, _ bytes: [UInt8]) -> [UInt8] { [number << 3 | 2, UInt8(bytes.count)] + bytes }
        let header: [UInt8] = [0x08, 0x81, 0x01] + [0x18, 0xAC, 0x02]  // cluster_id 129, revision 300
        let kv1 = field(1, Array("a".utf8)) + [0x10, 5, 0x18, 7, 0x20, 1] + field(5, Array("1".utf8))
        let kv2 = field(1, Array("b".utf8)) + [0x18, 8]
        let message = field(1, header) + field(2, kv1) + field(2, kv2) + [0x18, 1, 0x20, 3]
        let framed = Data([0, 0, 0, 0, UInt8(message.count)] + message)
        let page = try EtcdGRPC.rangeResponse(framed)
        #expect(page.revision == 300 && page.more)
        #expect(
            page.keyValues == [
                EtcdKeyValue(key: Array("a".utf8), value: Array("1".utf8), modRevision: 7),
                EtcdKeyValue(key: Array("b".utf8), value: [], modRevision: 8),
            ])
        for bad in [
            Data([1, 0, 0, 0, 0]), Data([0, 0, 0, 0, 9, 0x0A]), Data([0, 0, 0, 0, 2, 0x0A, 5]),
            Data([0, 0, 0, 0, 1, 0x0B]),
        ] {
            #expect(throws: EtcdError.self, "\([UInt8](bad))") { _ = try EtcdGRPC.rangeResponse(bad) }
        }
    }
}
