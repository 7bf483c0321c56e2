import Glibc

/// Replies to the fast path's `Get` calls (``DefaultsRequest/fastGet(_:)``), by the exact bytes
/// of the call, so that a hot key's next `Get` is one hash, one compare and one copy: no name
/// is validated, no dictionary searched, no JSON written.
///
/// An entry holds while nothing a `Get` reads has changed: it is stamped with the store's
/// revision (every committed change moves it, the locks of the system instance included) and
/// the system layer's ``SystemLayer/version``, both read *before* the reply was made, and is
/// used only while both are unchanged. A reply made from state newer than its stamp is
/// therefore never served (the stamp is already stale), and a reply older than the state is
/// impossible (the state changed, so the stamp did).
///
/// Direct-mapped: ``slotCount`` slots, a call's slot by its hash, a newer call replacing an
/// older one in its slot. Calls over ``maxCallBytes`` and replies over ``maxReplyBytes`` are
/// not kept, so the cache holds at most about 1.3 MiB. Loop thread only.
struct GetReplyCache {
    /// What an entry's reply was made from.
    struct Stamp: Equatable {
        var revision: Int64
        var layerVersion: Int
    }

    private struct Entry {
        var call: [UInt8]
        var reply: [UInt8]
        var stamp: Stamp
    }

    static let slotCount = 1024
    static let maxCallBytes = 256
    static let maxReplyBytes = 1024

    private var slots = [Entry?](repeating: nil, count: slotCount)
    /// Calls answered from the cache (the tests check that it was used).
    private(set) var hits = 0

    /// The slot `call` belongs in (FNV-1a of its bytes).
    static func slot(of call: ArraySlice<UInt8>) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        call.withUnsafeBufferPointer { bytes in
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        }
        return Int(truncatingIfNeeded: hash ^ (hash >> 32)) & (slotCount - 1)
    }

    /// The reply kept in `slot` for exactly `call`, made at `stamp`; nil if there is none.
    mutating func reply(_ slot: Int, for call: ArraySlice<UInt8>, at stamp: Stamp) -> [UInt8]? {
        guard let entry = slots[slot], entry.stamp == stamp, entry.call.count == call.count else { return nil }
        let same = entry.call.withUnsafeBytes { kept in
            call.withUnsafeBytes { memcmp(kept.baseAddress!, $0.baseAddress!, kept.count) == 0 }
        }
        guard same else { return nil }
        hits &+= 1
        return entry.reply
    }

    /// Keeps `reply` (the whole message, NUL included) for `call` in `slot`, made at `stamp`.
    mutating func keep(_ reply: ArraySlice<UInt8>, for call: ArraySlice<UInt8>, in slot: Int, at stamp: Stamp) {
        guard call.count <= Self.maxCallBytes, reply.count <= Self.maxReplyBytes else { return }
        slots[slot] = Entry(call: Array(call), reply: Array(reply), stamp: stamp)
    }
}
