import KVValues

/// Fuzz target: kvctl-plist's readers (`BinaryPlistReader`, `XMLPlistReader`) and writer
/// (`PlistWriter`).
///
/// Invariants beyond not crashing or running away (each object is visited once per reference
/// within ``PlistLimits/expandedBytes``, recursion within ``PlistLimits/depth``): whatever a
/// reader accepts validates as kvd values, and written back as a binary list, and as XML when it
/// holds no date with a fraction, reads again as the same members.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPlist(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let members: [(key: String, value: Value)]
    do throws(PlistRefusal) {
        if BinaryPlistReader.recognizes(input) {
            members = try BinaryPlistReader(input).topDictionary()
        } else {
            var reader = XMLPlistReader(input)
            members = try reader.topDictionary()
        }
    } catch {
        return 0
    }
    var dictionary: [String: Value] = [:]
    for member in members { dictionary[member.key] = member.value }
    guard dictionary.count == members.count else { fail("a reader accepted a key twice") }
    do { try Value.dictionary(dictionary).validate() } catch {
        fail("a reader accepted a value that does not validate: \(error)")
    }
    guard let binary = try? BinaryPlistReader(PlistWriter.binary(dictionary)).topDictionary() else {
        fail("a written binary list does not read back")
    }
    guard Dictionary(uniqueKeysWithValues: binary.map { ($0.key, $0.value) }) == dictionary else {
        fail("a binary round trip changed the values")
    }
    if let xml = try? PlistWriter.xml(dictionary) {
        var reader = XMLPlistReader(xml)
        guard let again = try? reader.topDictionary() else {
            fail("a written XML list does not read back: \(String(decoding: xml, as: UTF8.self))")
        }
        guard Dictionary(uniqueKeysWithValues: again.map { ($0.key, $0.value) }) == dictionary else {
            fail("an XML round trip changed the values")
        }
    }
    return 0
}
