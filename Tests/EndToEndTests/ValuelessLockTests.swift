import Foundation
import Testing

/// A key the system layer locks without giving it a value reads as missing, but a client must still
/// know it is not writable (the GSettings backend's `get_writable`). A user's kvd names it in
/// `Watch` replies (a change with no value and the source "locked", in the current values and when
/// the lock comes or goes) and in `List`'s `sources`.
@Suite(.needsSystemAccounts)
struct ValuelessLockTests {
    @Test func aLockWithoutAValueIsNamedInWatchAndList() throws {
        let scene = try SystemScene()
        let domain = "org.ex.valueless"
        let user = try scene.startUser(scene.accounts.user)
        #expect(try user.kvctl("set", domain, "own", "mine").status == 0)
        #expect(try user.kvctl("set", domain, "hidden", "mine too").status == 0)
        let watcher = try user.connect()
        defer { watcher.close() }
        let initial = try watcher.call("io.kvd.Defaults.Watch", ["domain": domain], more: true)
        #expect(Self.changes(initial).keys.sorted() == ["hidden", "own"], "\(initial)")

        // A lock on a key with no value anywhere: the watcher hears of it, with no value.
        #expect(try scene.systemCall("io.kvd.System.Lock", ["domain": domain, "key": "ghost"]).error == nil)
        let ghost = try Self.nextChanges(of: watcher)
        #expect(
            ghost["ghost"]?["source"] as? String == "locked" && ghost["ghost"]?["value"] == nil,
            "the watcher saw \(ghost)\n\(scene.logs())")
        // A lock over the user's own value, with no system value: the value goes, the lock shows.
        #expect(try scene.systemCall("io.kvd.System.Lock", ["domain": domain, "key": "hidden"]).error == nil)
        let hidden = try Self.nextChanges(of: watcher)
        #expect(
            hidden["hidden"]?["source"] as? String == "locked" && hidden["hidden"]?["value"] == nil,
            "the watcher saw \(hidden)")
        #expect(try user.get(domain, "ghost").error == "io.kvd.Defaults.NotFound")

        // A new watch and a List name both among the current values.
        let other = try user.connect()
        defer { other.close() }
        let current = try other.call("io.kvd.Defaults.Watch", ["domain": domain], more: true)
        let items = Self.changes(current)
        #expect(
            items["ghost"]?["source"] as? String == "locked" && items["ghost"]?["value"] == nil
                && items["hidden"]?["source"] as? String == "locked" && items["own"]?["value"] as? String == "mine",
            "\(current)")
        let list = try user.call("io.kvd.Defaults.List", ["domain": domain])
        let sources = list.parameters["sources"] as? [String: String]
        let values = list.parameters["values"] as? [String: Any]
        #expect(sources == ["ghost": "locked", "hidden": "locked"], "\(list)")
        #expect(values?.keys.sorted() == ["own"], "\(list)")
        let keyWatch = try user.connect()
        defer { keyWatch.close() }
        let one = try keyWatch.call("io.kvd.Defaults.Watch", ["domain": domain, "key": "ghost"], more: true)
        #expect(Self.changes(one).keys.sorted() == ["ghost"], "a watch of the key: \(one)")

        // Unlocked: a change without a source (the key is the user's again: no value, or theirs).
        #expect(try scene.systemCall("io.kvd.System.Unlock", ["domain": domain, "key": "ghost"]).error == nil)
        let unlocked = try Self.nextChanges(of: watcher)
        #expect(
            unlocked.keys.contains("ghost") && unlocked["ghost"]?["source"] == nil
                && unlocked["ghost"]?["value"] == nil, "the watcher saw \(unlocked)")
        #expect(try scene.systemCall("io.kvd.System.Unlock", ["domain": domain, "key": "hidden"]).error == nil)
        let back = try Self.nextChanges(of: watcher)
        #expect(
            back["hidden"]?["value"] as? String == "mine too" && back["hidden"]?["source"] == nil,
            "the watcher saw \(back)")
    }

    /// The changes of a reply, by key.
    static func changes(_ reply: [String: Any]) -> [String: [String: Any]] {
        let items = reply.parameters["changes"] as? [[String: Any]] ?? []
        return items.reduce(into: [:]) { $0[$1["key"] as? String ?? "?"] = $1 }
    }

    /// The changes of the next Watch reply (empty if none arrives within 10 s).
    static func nextChanges(of watcher: RawClient) throws -> [String: [String: Any]] {
        guard let reply = try watcher.reply(within: 10) else { return [:] }
        return changes(reply)
    }
}
