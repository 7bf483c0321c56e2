// Compiled into the module KVStorage (see fuzz/build.sh), so internal functions are in reach.
import FoundationEssentials
import KVValues

/// Fuzz target: the domain-file loader (``DomainFile/decode(_:domain:)``), every version, read
/// both as `com.example.fuzz.json` and as a `~` file (domain named inside).
///
/// Invariants: a file that loads is written back by ``DomainFile/encode(_:_:savedAt:)`` as a
/// current-version file that loads to the same state (values, unreadable values and keys no
/// request can name kept verbatim with the same reason, revisions, budget) with nothing to
/// warn about but those, and writing that again gives the same bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDomainFile(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let named = try? DomainFile.decode(bytes, domain: nil) { check(named) }
    guard let loaded = try? DomainFile.decode(bytes, domain: Domain(constant: "com.example.fuzz")) else {
        return 0
    }
    check(loaded)
    return 0
}

private func check(_ loaded: LoadedDomain) {
    let domain = loaded.domain
    loaded.state.entries.forEachEntry { _, entry in
        guard entry.revision > max(loaded.state.revision, 1) else { return }
        fail("a key's revision \(entry.revision) is above its domain's \(loaded.state.revision)")
    }
    let savedAt = Date(timeIntervalSince1970: 0)
    let written = DomainFile.encode(domain, loaded.state, savedAt: savedAt)
    guard let reread = try? DomainFile.decode(written, domain: domain) else {
        fail("a written domain file does not load: \(String(decoding: written, as: UTF8.self))")
    }
    guard reread.version == StorageFormat.domainFormatVersion, reread.state == loaded.state else {
        fail("the domain changed in a write and load: \(String(decoding: written, as: UTF8.self))")
    }
    if DomainFile.encode(domain, reread.state, savedAt: savedAt) != written {
        fail("writing a loaded file again changed it")
    }
    if reread.copyReason != nil { fail("a written file has a key twice") }
}
