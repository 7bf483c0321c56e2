// Compiled into the module KVStorage (see fuzz/build.sh), so internal functions are in reach;
// KVProtocol is linked in.
import FoundationEssentials
import KVProtocol
import KVValues

/// Fuzz target: what kvd acknowledges is read back. The input is one varlink call.
///
/// Invariants, for every `Set` or `Apply` that kvd accepts (the request validates, the store
/// plans it, and ``CommitLimits`` lets it through): its log record scans back to the same
/// change with no damage; the domain it makes is written as a domain file that loads to the
/// same state, within the file reader's limit; and the `Watch` reply of the commit and the
/// `List` reply of the domain are read by the client's parser to the same changes and values.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCommit(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let message = Array(UnsafeBufferPointer(start: data, count: size))
    guard let call = try? VarlinkCall(message: message), let request = try? DefaultsRequest(call: call) else {
        return 0
    }
    let domain: Domain
    let mutation: Mutation
    switch request {
    case .set(let named, let key, let value, _): (domain, mutation) = (named, .set(key, value, ifRevision: nil))
    case .apply(let named, let changes, _): (domain, mutation) = (named, .apply(changes, ifRevision: nil))
    default: return 0
    }
    let view = DomainView(nil)
    guard let planned = try? MutationPlanner.changes(of: mutation, in: domain, current: view), !planned.changes.isEmpty
    else { return 0 }
    let changes = planned.changes
    let record = LogRecord(revision: 7, domain: domain, kind: mutation.kind, changes: changes)
    var line: [UInt8] = []
    var entryBytes: [Int] = []
    let sizes = LogFormat.append(record, to: &line, entryBytes: &entryBytes)
    guard let budget = try? CommitLimits.check(sizes, planned, entryBytes: entryBytes[...], in: domain, view: view)
    else { return 0 }  // refused: never acknowledged
    checkLog(record, line)
    var state = DomainState()
    state.apply(changes, entryBytes: entryBytes[...], budgetBytes: budget, at: 7)
    checkDomainFile(domain, state)
    checkReplies(changes, state)
    return 0
}

private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes.prefix(2000), as: UTF8.self) }

private func checkLog(_ record: LogRecord, _ line: [UInt8]) {
    let log = LogFormat.header(baseRevision: 6) + line
    guard let scan = try? LogFormat.scan(log), scan.damage.isEmpty, scan.tornTail == nil, scan.records == [record]
    else {
        fail("an accepted change's log record does not scan back to it: \(text(line))")
    }
}

private func checkDomainFile(_ domain: Domain, _ state: DomainState) {
    let file = DomainFile.encode(domain, state, savedAt: Date(timeIntervalSince1970: 0))
    if file.count > StorageFormat.maxDomainFileBytes {
        fail("a domain file of \(file.count) bytes is over the reader's limit")
    }
    guard let loaded = try? DomainFile.decode(file, domain: domain), loaded.state == state, loaded.warnings.isEmpty
    else {
        fail("an accepted change's domain file does not load back to it: \(text(file))")
    }
}

private func checkReplies(_ changes: [Change], _ state: DomainState) {
    let watch = WatchReply(revision: 7, changes: changes, initial: false).reply.encoded().dropLast()
    guard watch.count <= Limits.messageBytes, let read = try? VarlinkReply(message: watch),
        case .array(let items)? = read.parameters["changes"],
        items.map({ item in item["value"].flatMap { try? Value(typedJSON: $0) } }) == changes.map(\.value)
    else { fail("the Watch reply of an accepted change is not read back: \(text(Array(watch)))") }
    let values = state.snapshot.values
    let list = VarlinkReply.list(values, revision: 7).encoded().dropLast()
    guard list.count <= Limits.messageBytes, let reply = try? VarlinkReply(message: list),
        case .object(let members)? = reply.parameters["values"], members.count == values.count,
        values.allSatisfy({ key, value in members[key.name].flatMap { try? Value(typedJSON: $0) } == value })
    else { fail("the List reply of an accepted change's domain is not read back: \(text(Array(list)))") }
}
