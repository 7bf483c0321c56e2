import Foundation
import Testing

@testable import KVFleet

/// The gateway's JSON quirks, on answers as etcd 3.4 writes them (the ones real etcd rarely
/// produces on demand: an error inside the watch stream).
@Suite struct GatewayJSONTests {
    func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T { try GatewayJSON.decode(type, from: Data(text.utf8)) }

    @Test func zeroValuesLeftOutReadAsZero() throws {
        let failedTxn = try decode(TxnResponseJSON.self, #"{"header":{"cluster_id":"1","member_id":"2","revision":"17","raft_term":"3"}}"#)
        #expect(failedTxn.succeeded == nil && failedTxn.header?.revision?.value == 17)
        let line = try decode(
            WatchLineJSON.self,
            #"{"result":{"header":{"revision":"9"},"events":[{"kv":{"key":"YQ==","mod_revision":"9"}},{"type":"DELETE","kv":{"key":"Yg==","mod_revision":"9"}}]}}"#)
        let message = try EtcdGateway.message(try #require(line.result))
        #expect(
            message
                == .events(
                    [
                        EtcdEvent(kind: .put, keyValue: EtcdKeyValue(key: Array("a".utf8), value: [], modRevision: 9)),
                        EtcdEvent(kind: .delete, keyValue: EtcdKeyValue(key: Array("b".utf8), value: [], modRevision: 9)),
                    ], headerRevision: 9))
        let progress = try decode(WatchLineJSON.self, #"{"result":{"header":{"revision":"12"}}}"#)
        #expect(try EtcdGateway.message(try #require(progress.result)) == .progress(revision: 12))
    }

    @Test func errorsReadFromUnaryAnswersAndFromTheStream() throws {
        let unary = try decode(
            GatewayErrorJSON.self,
            #"{"error":"etcdserver: mvcc: required revision has been compacted","code":11,"message":"etcdserver: mvcc: required revision has been compacted"}"#)
        #expect(unary.kind == .failed(.compacted(0)))
        let stream = try decode(WatchLineJSON.self, #"{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}}"#)
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
                EtcdKeyValue(key: Array("a".utf8), value: Array("1".utf8), modRevision: 7), EtcdKeyValue(key: Array("b".utf8), value: [], modRevision: 8),
            ])
        let empty = try read(#"{"header":{"revision":"5"}}"#)
        #expect(empty.kvs == nil && empty.more == nil && empty.header?.revision?.value == 5)
        for bad in [#"{"kvs":[{"key":"not base64!"}]}"#, #"{"kvs":{}}"#, #"{"header":{"revision":"x"}}"#, #"{"more":"yes"}"#, "not json"] {
            #expect(throws: EtcdError.self, "\(bad)") { _ = try read(bad) }
        }
    }
}
