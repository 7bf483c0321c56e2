import FoundationEssentials
import KVTestSupport
import KVValues
import Testing

@testable import KVClient

// The unread-data property: for random nested values with random damage, unknown members, newer
// versions and unknown enum cases, read → change one field → save never loses a stored part the
// read did not understand: the save keeps it, or refuses.

enum Mood: String, Codable, Sendable, DecodableWithFallback {
    case calm, busy, tired
    static let decodingFallback = Mood.calm
}

struct ItemV1: VersionedValue, Equatable {
    static let schemaVersion = 1
    var id: Int
    var name: String
}

struct Item: VersionedValue, Equatable {
    typealias Previous = ItemV1
    static let schemaVersion = 2
    var id: Int
    var title: String
    var done: Bool?
    @KeepsUnknownCase var priority: Priority = .normal
    var mood: Mood?

    init(id: Int, title: String, done: Bool?, priority: Priority, mood: Mood?) {
        (self.id, self.title, self.done, self.mood) = (id, title, done, mood)
        self.priority = priority
    }

    init(migrating old: ItemV1) { self.init(id: old.id, title: old.name, done: nil, priority: .normal, mood: nil) }
}

struct Meta: Codable, Sendable, Equatable {
    var owner: String
    var note: String?
}

struct Shelf: Codable, Sendable, Equatable {
    var label: String
    var items: [Item]
    var counts: [String: Int]
    var mood: Mood?
    var meta: Meta
}

/// Whose member something is, found again in the saved value by identity, not position.
enum Owner: Equatable {
    case root, meta
    case item(id: Int)
}

/// A part put into the stored value that the read cannot understand, and how to find it after
/// the save.
enum Injected {
    case member(Owner, name: String, value: Node)
    case element(Node)
    case itemPriority(id: Int, raw: String)
    case mood(Owner, raw: String)
    case note(Node)
    case entry(name: String, value: Node)
}

/// One random case: the stored node, what was injected, and the parts the change touches.
struct Scenario {
    var stored: Node
    var injected: [Injected] = []
    var nextID = 1000

    init(_ generator: inout SeededGenerator) throws {
        var items: [Item] = []
        for id in 0..<Int.random(in: 0...4, using: &generator) {
            items.append(
                Item(
                    id: id, title: "T\(id)", done: [true, false, nil].randomElement(using: &generator)!,
                    priority: [.low, .normal, .high].randomElement(using: &generator)!,
                    mood: [.busy, nil].randomElement(using: &generator)!))
        }
        var counts: [String: Int] = [:]
        for index in 0..<Int.random(in: 0...3, using: &generator) { counts["c\(index)"] = index }
        let shelf = Shelf(
            label: "L", items: items, counts: counts, mood: [.tired, nil].randomElement(using: &generator)!,
            meta: Meta(owner: "O", note: ["n", nil].randomElement(using: &generator)!))
        stored = try NodeEncoder().encode(shelf)
        if Bool.random(using: &generator), !items.isEmpty { asV1(Int.random(in: 0..<items.count, using: &generator)) }
        for _ in 0..<Int.random(in: 0...3, using: &generator) { inject(&generator) }
    }

    /// Stores item `index` as version 1 (read and migrated: understood).
    mutating func asV1(_ index: Int) {
        editItems({ elements in
            guard case .object(let members) = elements[index], let id = members["id"] else { return }
            elements[index] = .object(["schemaVersion": .integer(1), "id": id, "name": .string("old")])
        })
    }

    mutating func inject(_ generator: inout SeededGenerator) {
        let tag = Int.random(in: 0..<1_000_000, using: &generator)
        let ids = itemIDs
        switch Int.random(in: 0..<7, using: &generator) {
        case 0:
            let owner = ([.root, .meta] + ids.map { Owner.item(id: $0) }).randomElement(using: &generator)!
            let name = "x\(tag)"
            edit(owner) { $0[name] = .string("u\(tag)") }
            injected.append(.member(owner, name: name, value: .string("u\(tag)")))
        case 1, 2:
            nextID += 1
            let element: Node =
                tag % 2 == 0
                ? .object([
                    "schemaVersion": .integer(2), "id": .integer(Int64(nextID)), "title": .integer(Int64(tag)),
                    "priority": .string("low"),
                ])
                : .object([
                    "schemaVersion": .integer(3), "id": .integer(Int64(nextID)), "headline": .string("new \(tag)"),
                ])
            editItems({ $0.insert(element, at: Int.random(in: 0...$0.count, using: &generator)) })
            injected.append(.element(element))
        case 3 where !ids.isEmpty:
            let id = ids.randomElement(using: &generator)!
            edit(.item(id: id)) { $0["priority"] = .string("p\(tag)") }
            injected.removeAll { if case .itemPriority(id, _) = $0 { true } else { false } }
            injected.append(.itemPriority(id: id, raw: "p\(tag)"))
        case 4:
            let owner = ([.root] + ids.map { Owner.item(id: $0) }).randomElement(using: &generator)!
            edit(owner) { $0["mood"] = .string("m\(tag)") }
            injected.removeAll { if case .mood(owner, _) = $0 { true } else { false } }
            injected.append(.mood(owner, raw: "m\(tag)"))
        case 5:
            edit(.meta) { $0["note"] = .integer(Int64(tag)) }
            injected.removeAll { if case .note = $0 { true } else { false } }
            injected.append(.note(.integer(Int64(tag))))
        default:
            editCounts({ $0["bad\(tag)"] = .string("v\(tag)") })
            injected.append(.entry(name: "bad\(tag)", value: .string("v\(tag)")))
        }
    }

    /// The ids of the stored items (all versions).
    var itemIDs: [Int] {
        guard case .object(let root) = stored, case .array(let elements)? = root["items"] else { return [] }
        return elements.compactMap { element in
            guard case .object(let members) = element, case .integer(let id)? = members["id"], id < 1000 else {
                return nil
            }
            return Int(id)
        }
    }

    mutating func editItems(_ body: (inout [Node]) -> Void) {
        guard case .object(var root) = stored, case .array(var elements)? = root["items"] else {
            Issue.record("the stored shelf has no items array to edit: \(stored)")
            return
        }
        body(&elements)
        root["items"] = .array(elements)
        stored = .object(root)
    }

    mutating func editCounts(_ body: (inout [String: Node]) -> Void) {
        guard case .object(var root) = stored, case .object(var counts)? = root["counts"] else {
            Issue.record("the stored shelf has no counts object to edit: \(stored)")
            return
        }
        body(&counts)
        root["counts"] = .object(counts)
        stored = .object(root)
    }

    mutating func edit(_ owner: Owner, _ body: (inout [String: Node]) -> Void) {
        guard case .object(var root) = stored else {
            Issue.record("the stored shelf is not an object: \(stored)")
            return
        }
        switch owner {
        case .root:
            body(&root)
        case .meta:
            guard case .object(var meta)? = root["meta"] else {
                Issue.record("the stored shelf has no meta object to edit: \(root)")
                return
            }
            body(&meta)
            root["meta"] = .object(meta)
        case .item(let id):
            guard case .array(var elements)? = root["items"] else {
                Issue.record("the stored shelf has no items array to edit: \(root)")
                return
            }
            for index in elements.indices {
                guard case .object(var members) = elements[index], members["id"] == .integer(Int64(id)) else {
                    continue
                }
                body(&members)
                elements[index] = .object(members)
            }
            root["items"] = .array(elements)
        }
        stored = .object(root)
    }
}

/// The one change the app makes, and which injected parts it replaces on purpose.
struct AppChange {
    var describe: String
    var excuses: (Injected) -> Bool = { _ in false }
    var check: (Node) -> Bool = { _ in true }

    static func random(_ shelf: inout Shelf, _ generator: inout SeededGenerator) -> AppChange {
        let index = shelf.items.isEmpty ? nil : Int.random(in: 0..<shelf.items.count, using: &generator)
        let id = index.map { shelf.items[$0].id }
        switch Int.random(in: 0..<8, using: &generator) {
        case 0 where index != nil:
            shelf.items[index!].done = !(shelf.items[index!].done ?? false)
            return AppChange(describe: "toggle done of item \(id!)")
        case 1 where index != nil:
            shelf.items[index!].priority = .high
            return AppChange(
                describe: "set priority of item \(id!)",
                excuses: { if case .itemPriority(id!, _) = $0 { true } else { false } })
        case 2 where index != nil:
            shelf.items[index!].mood = .busy
            return AppChange(
                describe: "set mood of item \(id!)",
                excuses: { if case .mood(.item(id: id!), _) = $0 { true } else { false } })
        case 3 where index != nil:
            shelf.items.remove(at: index!)
            return AppChange(
                describe: "remove item \(id!)",
                excuses: { injected in
                    switch injected {
                    case .member(.item(id: id!), _, _), .itemPriority(id!, _), .mood(.item(id: id!), _): true
                    default: false
                    }
                })
        case 4:
            shelf.items.insert(
                Item(id: 5000, title: "new", done: nil, priority: .low, mood: nil),
                at: Int.random(in: 0...shelf.items.count, using: &generator))
            return AppChange(describe: "insert an item", check: { Check.item(5000, in: $0) != nil })
        case 5:
            shelf.mood = .busy
            return AppChange(
                describe: "set the shelf's mood", excuses: { if case .mood(.root, _) = $0 { true } else { false } })
        case 6:
            shelf.meta.note = "written"
            return AppChange(
                describe: "set the note", excuses: { if case .note = $0 { true } else { false } },
                check: { Check.object(.meta, in: $0)?["note"] == .string("written") })
        default:
            shelf.label = "changed"
            return AppChange(
                describe: "change the label", check: { Check.object(.root, in: $0)?["label"] == .string("changed") })
        }
    }
}

/// Finding injected parts in a saved node, by identity.
enum Check {
    static func item(_ id: Int, in node: Node) -> [String: Node]? {
        guard case .object(let root) = node, case .array(let elements)? = root["items"] else { return nil }
        for case .object(let members) in elements where members["id"] == .integer(Int64(id)) { return members }
        return nil
    }

    static func object(_ owner: Owner, in node: Node) -> [String: Node]? {
        guard case .object(let root) = node else { return nil }
        switch owner {
        case .root: return root
        case .meta:
            guard case .object(let meta)? = root["meta"] else { return nil }
            return meta
        case .item(let id): return item(id, in: node)
        }
    }

    /// Whether `injected` is still in `saved` (nil: its owner is gone, so there is nothing to ask).
    static func kept(_ injected: Injected, in saved: Node) -> Bool {
        switch injected {
        case .member(let owner, let name, let value): return object(owner, in: saved)?[name] == value
        case .element(let node):
            guard case .object(let root) = saved, case .array(let elements)? = root["items"] else { return false }
            return elements.contains(node)
        case .itemPriority(let id, let raw): return item(id, in: saved)?["priority"] == .string(raw)
        case .mood(let owner, let raw): return object(owner, in: saved)?["mood"] == .string(raw)
        case .note(let node): return object(.meta, in: saved)?["note"] == node
        case .entry(let name, let value):
            guard case .object(let root) = saved, case .object(let counts)? = root["counts"] else { return false }
            return counts[name] == value
        }
    }
}

@Suite struct UnreadDataPropertyTests {
    @Test func readChangeSaveNeverLosesWhatTheReadDidNotUnderstand() throws {
        var generator = SeededGenerator(state: 18)
        var tally = (cases: 0, damaged: 0, refused: 0, keptWhileDamaged: 0, savedWhileDamaged: 0)
        for round in 0..<600 {
            let scenario = try Scenario(&generator)
            let stored = try scenario.stored.value()
            let read = KVDefaults.typedRead(Shelf.self, stored, argument: false)
            var shelf = try #require(read.value, "round \(round): the shelf itself always reads")
            let change = AppChange.random(&shelf, &generator)
            let written = try NodeEncoder().encode(shelf)
            let clean = !read.findings.contains(where: \.blocksWrite)
            tally.cases += 1
            if !scenario.injected.isEmpty { tally.damaged += 1 }
            for policy in [KVDefaults.UnreadPolicy.refuse, .keep] {
                let context =
                    "round \(round), \(policy), \(change.describe), injected \(scenario.injected), stored \(stored)"
                let saved: Value?
                do {
                    saved = try WriteGuard.prepare(
                        written, as: Shelf.self, over: .value(stored), unread: policy, key: "shelf")
                } catch .wouldLoseStoredData(_, let report) {
                    #expect(!clean, "a clean read was refused: \(report); \(context)")
                    #expect(!report.findings.isEmpty)
                    tally.refused += 1
                    continue
                } catch {
                    Issue.record("\(error); \(context)")
                    continue
                }
                let node = Node(try #require(saved))
                for injected in scenario.injected where !change.excuses(injected) {
                    #expect(Check.kept(injected, in: node), "lost \(injected); saved \(node); \(context)")
                }
                #expect(change.check(node), "the app's change is missing: \(node); \(context)")
                if clean { #expect(node == written, "a clean save writes exactly the app's value; \(context)") }
                if !scenario.injected.isEmpty {
                    tally.savedWhileDamaged += 1
                    if !clean { tally.keptWhileDamaged += 1 }
                }
            }
        }
        // Enough of each outcome that the property was put to the test.
        #expect(tally.damaged > 300 && tally.refused > 200 && tally.keptWhileDamaged > 50, "\(tally)")
    }
}
