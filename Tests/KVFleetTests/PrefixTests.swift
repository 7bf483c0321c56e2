import KVFleet
import Testing

@Suite struct PrefixTests {
    @Test func aPrefixRangeEndsAfterEveryKeyWithThePrefix() {
        #expect(etcdPrefixEnd(Array("kvd/".utf8)) == Array("kvd0".utf8))
        #expect(etcdPrefixEnd([0x61, 0xFF]) == [0x62])
        #expect(etcdPrefixEnd([0xFF, 0xFF]) == [0])
    }
}
