import KVValues

/// The entries of one domain a request can name, kept compact: each key, its revision, its
/// size and its value's compact typed JSON (keys sorted in objects, so equal values are equal
/// bytes) back to back in one byte array, found through an open-addressing table of offsets
/// sized to the keys. A value is decoded when read (``entry(_:)``), or its bytes are copied
/// as they are (``withValueJSON(_:_:)``).
///
/// A key's record: revision (8 bytes), size (4), content length (4), key length (4), kind (1:
/// ``Kind``), the key's UTF-8, the content (the typed JSON, or an unreadable value's text), and
/// for an unreadable value its reason's length (4) and UTF-8. Integers little-endian.
/// A replaced or removed record stays in the array as garbage until the array is full (then,
/// with an eighth of it garbage, the array is rewritten without it instead of growing) or half
/// of it is garbage: at most a quarter more than the records take, amortized a few copies of
/// each byte written.
///
/// A value type: copies share the storage until one is changed (copy-on-write), then the
/// changed one copies both arrays once.
struct EntryTable: Sendable {
    private enum Kind: UInt8 {
        case value = 0
        case unreadable = 1
    }

    private static let headerBytes = 21
    /// A slot's value for a removed record (probing goes past it); 0 is an empty slot.
    private static let tombstone = UInt32.max

    private var records: [UInt8] = []
    /// Each used slot holds a record's offset plus one; linear probing from the key's hash.
    private var slots: [UInt32] = []
    /// How many keys the table holds.
    private(set) var count = 0
    private var tombstones = 0
    /// Bytes of `records` held by replaced or removed records.
    private var garbage = 0

    var isEmpty: Bool { count == 0 }

    /// The bytes the table's two arrays have allocated (their capacity), for tests and
    /// measurements.
    var allocatedBytes: Int { records.capacity + slots.capacity * MemoryLayout<UInt32>.stride }

    /// The revision and size of `key`'s entry, nil if none (decodes nothing).
    subscript(key: Key) -> EntryInfo? {
        guard let offset = offset(of: key) else { return nil }
        return EntryInfo(revision: int64(at: offset), bytes: Int(uint32(at: offset + 8)))
    }

    /// `key`'s entry with its value decoded; nil if none.
    func entry(_ key: Key) -> StoredEntry? {
        offset(of: key).map(decodedEntry(at:))
    }

    /// Calls `body` with `key`'s stored typed JSON (valid only during the call) and revision,
    /// or says why there is none: missing (nil) or unreadable.
    func withValueJSON<R>(_ key: Key, _ body: (StoredJSON) -> R) -> R {
        guard let offset = offset(of: key) else { return body(.missing) }
        return records.withUnsafeBufferPointer { buffer in
            let layout = Layout(buffer, offset)
            switch layout.kind {
            case .value:
                return body(.value(UnsafeBufferPointer(rebasing: buffer[layout.content]), revision: layout.revision))
            case .unreadable: return body(.unreadable(reason: layout.reason))
            }
        }
    }

    /// Every key, in no order.
    var keys: [Key] {
        var keys: [Key] = []
        keys.reserveCapacity(count)
        forEachOffset { keys.append(key(at: $0)) }
        return keys
    }

    /// Calls `body` with each key and its entry, its value decoded, in no order.
    func forEachEntry(_ body: (Key, StoredEntry) -> Void) {
        forEachOffset { body(key(at: $0), decodedEntry(at: $0)) }
    }

    /// Calls `body` with each key's name, revision and stored content (typed JSON, or an
    /// unreadable value's text, with whether it is that), in no order; no value is decoded.
    func forEachStored(
        _ body: (_ name: String, _ revision: Int64, _ content: ArraySlice<UInt8>, _ unreadable: Bool) -> Void
    ) {
        forEachOffset { offset in
            let layout = records.withUnsafeBufferPointer { Layout($0, offset) }
            body(
                String(decoding: records[layout.key], as: UTF8.self), layout.revision, records[layout.content],
                layout.kind == .unreadable)
        }
    }

    /// Stores `entry` under `key`, replacing any. With `json`, a value is stored as those bytes:
    /// its compact typed JSON with keys sorted, as the table would write it (a log record's
    /// bytes, ``RecordSizes/soleValue``), copied, not encoded again.
    mutating func set(_ key: Key, _ entry: StoredEntry, json: UnsafeRawBufferPointer? = nil) {
        var name = key.name
        name.withUTF8 { keyBytes in
            let offset = append(UnsafeRawBufferPointer(keyBytes), entry, json: json)
            growSlotsIfNeeded()
            let (slot, found) = find(UnsafeRawBufferPointer(keyBytes), hash: key.nameHash)
            if let found {
                garbage += recordBytes(at: found)
            } else {
                count += 1
                if slots[slot] == Self.tombstone { tombstones -= 1 }
            }
            slots[slot] = UInt32(offset + 1)
        }
        compactIfWasteful()
    }

    /// Removes `key`'s entry; returns whether there was one.
    @discardableResult
    mutating func remove(_ key: Key) -> Bool {
        var name = key.name
        let removed: Bool = name.withUTF8 { keyBytes in
            guard !slots.isEmpty,
                case (let slot, let found?) = find(UnsafeRawBufferPointer(keyBytes), hash: key.nameHash)
            else {
                return false
            }
            garbage += recordBytes(at: found)
            slots[slot] = Self.tombstone
            (count, tombstones) = (count - 1, tombstones + 1)
            return true
        }
        if count == 0 {
            self = EntryTable()  // frees both arrays
        } else if removed {
            compactIfWasteful()
        }
        return removed
    }
}

extension EntryTable: Equatable {
    /// Equal when they hold the same keys with the same revisions, sizes and contents.
    static func == (lhs: EntryTable, rhs: EntryTable) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var equal = true
        lhs.forEachOffset { offset in
            guard equal else { return }
            let mine = lhs.records.withUnsafeBufferPointer { Layout($0, offset) }
            let key = lhs.records[mine.key]
            guard let other = key.withUnsafeBytes({ rhs.find($0, hash: NameHash.of($0)).found }) else {
                equal = false
                return
            }
            let theirs = rhs.records.withUnsafeBufferPointer { Layout($0, other) }
            equal =
                mine.revision == theirs.revision && mine.kind == theirs.kind
                && lhs.records[mine.content].elementsEqual(rhs.records[theirs.content])
                && lhs.uint32(at: offset + 8) == rhs.uint32(at: other + 8)
        }
        return equal
    }
}

// MARK: - Records

extension EntryTable {
    /// Where a record's parts lie in the records.
    private struct Layout {
        let revision: Int64
        let kind: Kind
        let key: Range<Int>
        let content: Range<Int>
        /// An unreadable value's reason ("" for a value).
        let reason: String

        init(_ buffer: UnsafeBufferPointer<UInt8>, _ offset: Int) {
            let raw = UnsafeRawBufferPointer(buffer)
            revision = Int64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: Int64.self))
            let contentCount = Int(
                UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)))
            let keyCount = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 16, as: UInt32.self)))
            kind = Kind(rawValue: raw[offset + 20]) ?? .value
            key = (offset + EntryTable.headerBytes)..<(offset + EntryTable.headerBytes + keyCount)
            content = key.upperBound..<(key.upperBound + contentCount)
            if kind == .unreadable {
                let reasonCount = Int(
                    UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: content.upperBound, as: UInt32.self)))
                let start = content.upperBound + 4
                reason = String(decoding: buffer[start..<(start + reasonCount)], as: UTF8.self)
            } else {
                reason = ""
            }
        }

        /// The bytes the whole record takes.
        var bytes: Int { content.upperBound - (key.lowerBound - EntryTable.headerBytes) + reasonBytes }
        private var reasonBytes: Int { kind == .unreadable ? 4 + reason.utf8.count : 0 }
    }

    private func int64(at offset: Int) -> Int64 {
        records.withUnsafeBytes { Int64(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: Int64.self)) }
    }

    private func uint32(at offset: Int) -> UInt32 {
        records.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
    }

    private func recordBytes(at offset: Int) -> Int {
        records.withUnsafeBufferPointer { Layout($0, offset).bytes }
    }

    private func key(at offset: Int) -> Key {
        let layout = records.withUnsafeBufferPointer { Layout($0, offset) }
        // Only keys that passed `Key(validating:)` are stored.
        guard let key = try? Key(validating: String(decoding: records[layout.key], as: UTF8.self)) else {
            preconditionFailure("a stored key is not a valid key")
        }
        return key
    }

    private func decodedEntry(at offset: Int) -> StoredEntry {
        let layout = records.withUnsafeBufferPointer { Layout($0, offset) }
        let bytes = Int(uint32(at: offset + 8))
        switch layout.kind {
        case .unreadable:
            return StoredEntry(
                content: .unreadable(raw: Array(records[layout.content]), reason: layout.reason),
                revision: layout.revision, bytes: bytes)
        case .value:
            return StoredEntry(
                content: Self.decode(records[layout.content]), revision: layout.revision, bytes: bytes)
        }
    }

    /// The value of stored typed JSON; what the table stores always decodes (it was encoded
    /// from a value), else the reason is kept as an unreadable value's would be.
    static func decode(_ json: some Collection<UInt8>) -> StoredContent {
        do throws(ValueError) {
            return .value(try Value(typedJSONText: json, limits: DomainFile.valueLimits))
        } catch {
            return .unreadable(raw: Array(json), reason: error.description)
        }
    }

    /// Appends the record of `key` and `entry` to the records, growing them by a quarter when
    /// full (an array's own growth would double them), and returns its offset.
    private mutating func append(_ key: UnsafeRawBufferPointer, _ entry: StoredEntry, json: UnsafeRawBufferPointer?)
        -> Int
    {
        // a value's JSON is at most its entry's size (which counts the key too): room enough
        let contentBound: Int
        switch entry.content {
        case .value: contentBound = entry.bytes
        case .unreadable(let raw, let reason): contentBound = raw.count + 4 + reason.utf8.count
        }
        makeRoom(for: Self.headerBytes + key.count + contentBound)
        let offset = records.count
        records.append(contentsOf: Self.blankHeader)  // filled in place: one append, not 21
        records.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt64(bitPattern: entry.revision).littleEndian, toByteOffset: offset, as: UInt64.self)
            raw.storeBytes(
                of: UInt32(truncatingIfNeeded: entry.bytes).littleEndian, toByteOffset: offset + 8, as: UInt32.self)
            // offset + 12: the content's length, once written
            raw.storeBytes(
                of: UInt32(truncatingIfNeeded: key.count).littleEndian, toByteOffset: offset + 16, as: UInt32.self)
            raw[offset + 20] = (entry.content.isValue ? Kind.value : .unreadable).rawValue
        }
        records.append(contentsOf: key)
        let contentStart = records.count
        switch (entry.content, json) {
        case (.value, let json?):
            records.append(contentsOf: json)
        case (.value(let value), nil):
            JSONWriter(sortKeys: true).write(value.typedJSON, into: &records)  // straight in: no copy
        case (.unreadable(let raw, _), _):
            records.append(contentsOf: raw)
        }
        let contentCount = UInt32(records.count - contentStart).littleEndian
        records.withUnsafeMutableBytes { $0.storeBytes(of: contentCount, toByteOffset: offset + 12, as: UInt32.self) }
        if case .unreadable(_, let reason) = entry.content {
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: reason.utf8.count).littleEndian) {
                records.append(contentsOf: $0)
            }
            records.append(contentsOf: reason.utf8)
        }
        precondition(records.count < Int(UInt32.max) - 1, "a domain's entries take at most 4 GiB")
        return offset
    }

    /// Makes room for `needed` more bytes: from the garbage when an eighth of the records is,
    /// else by growing them a quarter.
    private mutating func makeRoom(for needed: Int) {
        guard records.capacity < records.count + needed else { return }
        if garbage * 8 >= records.count {
            compact(reserving: needed)
        } else {
            records.reserveCapacity(records.count + needed + max(records.count / 4, 256))
        }
    }

    /// A record's header before it is filled in.
    private static let blankHeader = [UInt8](repeating: 0, count: headerBytes)
}

// MARK: - Slots

extension EntryTable {
    private func offset(of key: Key) -> Int? {
        guard !slots.isEmpty else { return nil }
        var name = key.name
        return name.withUTF8 { find(UnsafeRawBufferPointer($0), hash: key.nameHash).found }
    }

    /// The slot holding the record of the key whose UTF-8 is `key` and whose ``NameHash`` is
    /// `hash` (``Key/nameHash``: the key is not hashed again), and its offset; when there is
    /// none, the slot to put it in (the first removed one probed, else the empty one that ended
    /// the probe). The table always has an empty slot.
    private func find(_ key: UnsafeRawBufferPointer, hash: Int) -> (slot: Int, found: Int?) {
        let mask = slots.count - 1
        var slot = hash & mask
        var free: Int?
        return records.withUnsafeBytes { records in
            while true {
                let stored = slots[slot]
                if stored == 0 { return (free ?? slot, nil) }
                if stored == Self.tombstone {
                    if free == nil { free = slot }
                } else {
                    let offset = Int(stored) - 1
                    let keyCount = Int(
                        UInt32(littleEndian: records.loadUnaligned(fromByteOffset: offset + 16, as: UInt32.self)))
                    let start = offset + Self.headerBytes
                    if keyCount == key.count,
                        UnsafeRawBufferPointer(rebasing: records[start..<(start + keyCount)]).elementsEqual(key)
                    {
                        return (slot, offset)
                    }
                }
                slot = (slot + 1) & mask
            }
        }
    }

    /// Calls `body` with each record's offset, in slot order.
    private func forEachOffset(_ body: (Int) -> Void) {
        for stored in slots where stored != 0 && stored != Self.tombstone { body(Int(stored) - 1) }
    }

    /// Makes room for one more key: at most three quarters of the slots used or removed.
    private mutating func growSlotsIfNeeded() {
        let used = count + tombstones + 1
        guard used * 4 > slots.count * 3 else { return }
        var capacity = 8
        while (count + 1) * 2 > capacity { capacity *= 2 }  // at most half full after a rebuild
        rebuildSlots(capacity: capacity)
    }

    private mutating func rebuildSlots(capacity: Int) {
        var offsets: [Int] = []
        offsets.reserveCapacity(count)
        forEachOffset { offsets.append($0) }
        slots = Array(repeating: 0, count: capacity)
        tombstones = 0
        let mask = capacity - 1
        records.withUnsafeBytes { records in
            for offset in offsets {
                let keyCount = Int(
                    UInt32(littleEndian: records.loadUnaligned(fromByteOffset: offset + 16, as: UInt32.self)))
                let start = offset + Self.headerBytes
                var slot = NameHash.of(UnsafeRawBufferPointer(rebasing: records[start..<(start + keyCount)])) & mask
                while slots[slot] != 0 { slot = (slot + 1) & mask }
                slots[slot] = UInt32(offset + 1)
            }
        }
    }

    /// Rewrites the records without garbage once it is half of them (removals; replacements
    /// make room from it when the records are full).
    private mutating func compactIfWasteful() {
        guard garbage >= 4096, garbage * 2 >= records.count else { return }
        compact(reserving: 0)
    }

    /// Rewrites the records without garbage, with room for `needed` more bytes and a quarter of
    /// growth; the slots keep their places and get the new offsets.
    private mutating func compact(reserving needed: Int) {
        let live = records.count - garbage
        var compacted: [UInt8] = []
        compacted.reserveCapacity(live + needed + max(live / 4, 256))
        for index in slots.indices where slots[index] != 0 && slots[index] != Self.tombstone {
            let offset = Int(slots[index]) - 1
            let length = recordBytes(at: offset)
            slots[index] = UInt32(compacted.count + 1)
            compacted.append(contentsOf: records[offset..<(offset + length)])
        }
        records = compacted
        garbage = 0
    }
}
