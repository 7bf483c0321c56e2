// Compiled into the module KVStorage (see fuzz/build.sh), so internal functions are in reach.
import KVValues

/// Fuzz target: the write-ahead log scanner (``LogFormat/scan(_:)``) that recovery runs.
///
/// Invariants: the end of the records it replays lies inside the file; with nothing skipped
/// and no torn tail, only zeros (reserved space) follow it; with nothing skipped, the file up
/// to there scans alone to the same records; revisions rise strictly, and the revision the
/// store takes (``LogScan/highestRevision``) is at least every record's; re-encoding the header
/// and records gives a log that scans to the same records.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLog(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let scan = try? LogFormat.scan(bytes) else { return 0 }
    guard scan.validLength <= bytes.count else {
        fail("validLength \(scan.validLength) is past the end (\(bytes.count))")
    }
    if scan.damage.isEmpty, scan.tornTail == nil, bytes[scan.validLength...].contains(where: { $0 != 0 }) {
        fail("no damage reported, yet the scan stopped before bytes other than reserved zeros")
    }
    var last = scan.baseRevision
    for record in scan.records {
        if record.revision <= last { fail("revisions do not rise: \(record.revision) after \(last)") }
        last = record.revision
    }
    if scan.highestRevision < last { fail("the store's revision \(scan.highestRevision) is below a record's \(last)") }
    if scan.damage.isEmpty {
        guard let prefix = try? LogFormat.scan(Array(bytes[..<scan.validLength])), prefix.damage.isEmpty,
            prefix.tornTail == nil,
            prefix.records == scan.records, prefix.baseRevision == scan.baseRevision
        else { fail("the valid prefix does not scan to the same records") }
    }
    let rebuilt = LogFormat.header(baseRevision: scan.baseRevision) + scan.records.flatMap(LogFormat.encode)
    guard let again = try? LogFormat.scan(rebuilt), again.damage.isEmpty, again.tornTail == nil,
        again.records == scan.records,
        again.validLength == rebuilt.count
    else { fail("re-encoded records do not scan back: \(String(decoding: rebuilt, as: UTF8.self))") }
    return 0
}
