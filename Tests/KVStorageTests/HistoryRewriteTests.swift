import KVSystem
import KVTestSupport
import KVValues
import Testing

@testable import KVStorage

/// The prune that copies the lines it keeps (``HistoryRewrite``) must write exactly the file the
/// full rewrite writes (read every entry, normalize, prune, encode them all), and leave every file
/// it cannot read that way to the full read.
@Suite struct HistoryRewriteTests {
    static let domain = KVStorageTests.domain("com.example.rewrite")

    /// A rewrite of `x.history` in `folder`'s state folder (made here).
    static func rewrite(in folder: TemporaryFolder) -> HistoryRewrite {
        try! LinuxSystem().makeDirectory(folder.state, permissions: 0o700)
        return HistoryRewrite(
            fileSystem: LinuxSystem(), domain: domain, path: folder.file("x.history"),
            temporary: folder.file(".x.history.tmp"))
    }
    static let names = ["a", "b", "ключ", "k.with.dots", "emoji😀", "q\"uote", "back\\slash", "tab\tkey"]

    static func randomValue(_ generator: inout SeededGenerator, depth: Int = 0) -> Value {
        switch Int.random(in: 0..<(depth < 2 ? 8 : 6), using: &generator) {
        case 0: .integer(Int64.random(in: -1_000_000...1_000_000, using: &generator))
        case 1: .real(Double.random(in: -10...10, using: &generator))
        case 2: .bool(Bool.random(using: &generator))
        case 3: .string(String(repeating: "x", count: Int.random(in: 0...300, using: &generator)))
        case 4: .string(["{", "}", "\"", "\\", "[", "]", ",", "é", "\n"].randomElement(using: &generator)! + "v")
        case 5: .string("")
        case 6:
            .array(
                (0..<Int.random(in: 0...3, using: &generator)).map { _ in randomValue(&generator, depth: depth + 1) })
        default:
            .dictionary(["k}": randomValue(&generator, depth: depth + 1), "[x": .string("\"}")])
        }
    }

    /// A random history: rising revisions, one to three keys a revision, some removals, times
    /// over a few days (or none), writers with texts that need escapes.
    static func randomEntries(_ generator: inout SeededGenerator, names: [String]) -> [HistoryEntry] {
        var entries: [HistoryEntry] = []
        for revision in 1...Int64.random(in: 1...120, using: &generator) {
            let time: Int64? =
                Int.random(in: 0..<8, using: &generator) == 0 ? nil : revision * 3_600_000 * 6
            let writer: Writer? =
                Bool.random(using: &generator)
                ? Writer(uid: 1000, pid: 42, program: "/usr/bin/a \"b\"\\c", app: "org.example.é") : nil
            for name in Set(
                (0..<Int.random(in: 1...3, using: &generator)).map { _ in names.randomElement(using: &generator)! })
            {
                let value: Value? = Int.random(in: 0..<5, using: &generator) == 0 ? nil : randomValue(&generator)
                entries.append(
                    HistoryEntry(revision: revision, time: time, key: key(name), value: value, writer: writer))
            }
        }
        return entries
    }

    /// The file the full rewrite writes of a file holding `bytes`, with `adding`.
    static func fullRewrite(
        _ bytes: [UInt8], adding: [HistoryEntry], keep: Int, days: Int, now: Int64, maxBytes: Int
    ) -> [UInt8] {
        let content = try! HistoryFormat.read(bytes, domain: domain)
        let all = HistoryRetention.normalized(content.entries + adding)
        let pruned = HistoryRetention.prune(
            all, since: content.since, keep: keep, days: days, now: now, maxBytes: maxBytes)
        var out = HistoryFormat.header(domain, since: pruned.since)
        for entry in pruned.entries { HistoryFormat.append(entry, to: &out) }
        return out
    }

    /// Whether two history files hold the same: the same `since` and entries, in order (the
    /// members of a header or of an object value are written in no fixed order).
    static func same(_ one: [UInt8], _ other: [UInt8]) -> Bool {
        guard let a = try? HistoryFormat.read(one, domain: domain),
            let b = try? HistoryFormat.read(other, domain: domain)
        else { return false }
        return a.since == b.since && a.entries == b.entries && a.tornTail == nil && b.tornTail == nil
            && one.count == other.count
    }

    static func write(_ bytes: [UInt8], to path: String) {
        let fd = try! LinuxSystem().open(path, [.write, .create, .truncate], permissions: 0o600)
        try! LinuxSystem().write(fd, bytes)
        LinuxSystem().close(fd)
    }

    static func read(_ path: String) -> [UInt8] {
        try! LinuxSystem().readRegularFile(path, limit: .max)!
    }

    /// Random files (entries, `since` lines, a header's since) pruned by count, days and bytes
    /// (a third of them at a bound that a run of the newest lines fills exactly or but a byte,
    /// where "fits" and "does not fit" meet): the copied
    /// file holds what the full rewrite's holds, and is as long. Keys with escapes are declined
    /// by the scan, and only those. [Seen failing with a file line measured one byte short, and
    /// trapping with the copy starting one byte late.]
    @Test func theCopiedFileEqualsTheFullRewrite() {
        var generator = SeededGenerator.forTest()
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let rewrite = Self.rewrite(in: folder)
        var declined = 0
        for round in 0..<300 {
            let names = Array(Self.names.shuffled(using: &generator).prefix(Int.random(in: 1...6, using: &generator)))
            let entries = Self.randomEntries(&generator, names: names)
            let split = Int.random(in: 0...entries.count, using: &generator)
            var file = HistoryFormat.header(Self.domain, since: Int64.random(in: 0...5, using: &generator))
            for (index, entry) in entries[..<split].enumerated() {
                if index % 17 == 16 { file += LogFormat.frame(.object(["since": .integer(entry.revision)])) }
                HistoryFormat.append(entry, to: &file)
            }
            let adding = Array(entries[split...])
            let keep = Int.random(in: 0...4, using: &generator)
            let days = keep == 0 ? Int.random(in: 1...3, using: &generator) : Int.random(in: 0...3, using: &generator)
            let now = (entries.last?.revision ?? 0) * 3_600_000 * 6
            var maxBytes =
                Bool.random(using: &generator) ? Int.max : Int.random(in: 0...(file.count + 4000), using: &generator)
            if round % 3 == 0 {  // a bound a run of the newest lines fills exactly, or but a byte
                var scratch: [UInt8] = []
                var sums = [0]
                for entry in entries.reversed() {
                    sums.append(sums.last! + HistoryRetention.lineBytes(entry, scratch: &scratch))
                }
                maxBytes = max(sums.randomElement(using: &generator)! - Int.random(in: 0...1, using: &generator), 0)
            }
            Self.write(file, to: rewrite.path)
            let expected = Self.fullRewrite(file, adding: adding, keep: keep, days: days, now: now, maxBytes: maxBytes)
            guard let scan = rewrite.scan() else {
                declined += 1
                #expect(
                    entries[..<split].contains {
                        $0.key.name.contains("\"") || $0.key.name.contains("\\") || $0.key.name.contains("\t")
                    },
                    "round \(round): declined a file of plain keys")
                continue
            }
            let lines = scan.lines + adding.enumerated().map { HistoryLine(new: $1, index: $0) }
            #expect(HistoryRetention.isNormalized(lines))
            let (kept, since) = HistoryRewrite.prune(
                lines, adding: adding, since: scan.since, keep: keep, days: days, now: now, maxBytes: maxBytes)
            let length = try! rewrite.write(kept, since: since, adding: adding)
            let written = Self.read(rewrite.path)
            #expect(
                Self.same(written, expected), "round \(round): keep \(keep), days \(days), at most \(maxBytes) bytes")
            #expect(Int(length) == written.count)
        }
        #expect(declined > 10 && declined < 240, "declined \(declined) of 300")
    }

    /// A file of several pieces (lines across the 256 KiB boundaries, long values, runs of lines
    /// dropped longer than a piece): the copy still equals the full rewrite.
    @Test func aFileOfManyPiecesIsCopiedWhole() {
        var generator = SeededGenerator.forTest()
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let rewrite = Self.rewrite(in: folder)
        var file = HistoryFormat.header(Self.domain, since: 0)
        var entries: [HistoryEntry] = []
        for revision in Int64(1)...6000 {
            let name = revision % 500 == 0 ? "rare\(revision % 3)" : "hot\(revision % 4)"
            let size = Int.random(in: 0...(revision % 97 == 0 ? 300_000 : 400), using: &generator)
            let entry = HistoryEntry(
                revision: revision, time: nil, key: key(name), value: .string(String(repeating: "y", count: size)))
            entries.append(entry)
            HistoryFormat.append(entry, to: &file)
        }
        #expect(file.count > 4 * HistoryRewrite.pieceBytes)
        for (keep, maxBytes) in [(3, Int.max), (1000, file.count / 3), (2, 100)] {
            Self.write(file, to: rewrite.path)
            let expected = Self.fullRewrite(file, adding: [], keep: keep, days: 0, now: 0, maxBytes: maxBytes)
            let scan = rewrite.scan()!
            #expect(scan.lines.count == entries.count)

            let (kept, since) = HistoryRewrite.prune(
                scan.lines, adding: [], since: scan.since, keep: keep, days: 0, now: 0, maxBytes: maxBytes)
            _ = try! rewrite.write(kept, since: since, adding: [])
            #expect(Self.same(Self.read(rewrite.path), expected), "keep \(keep), at most \(maxBytes) bytes")
        }
    }

    /// What the full read refuses or cuts (a torn last line, a corrupt line with lines after it,
    /// another domain's header, a line of a shape the parser does not read) the scan declines, so
    /// that the fold reads the file whole and handles it as it always did.
    @Test func aTornOrUnreadableFileIsLeftToTheFullRead() {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let rewrite = Self.rewrite(in: folder)
        var whole = HistoryFormat.header(Self.domain, since: 0)
        for revision in Int64(1)...5 {
            HistoryFormat.append(
                HistoryEntry(revision: revision, time: revision, key: key("k"), value: .integer(revision)), to: &whole)
        }
        Self.write(whole, to: rewrite.path)
        #expect(rewrite.scan()?.lines.count == 5)
        Self.write(Array(whole.dropLast(7)), to: rewrite.path)
        #expect(rewrite.scan() == nil, "a torn last line")
        var corrupt = whole
        corrupt[whole.count - 80] ^= 1
        Self.write(corrupt, to: rewrite.path)
        #expect(rewrite.scan() == nil, "a line failing its checksum")
        var other = HistoryFormat.header(KVStorageTests.domain("com.example.other"), since: 0)
        other += whole[HistoryFormat.header(Self.domain, since: 0).count...]
        Self.write(other, to: rewrite.path)
        #expect(rewrite.scan() == nil, "another domain's header")
        Self.write(
            whole + LogFormat.frame(.object(["revision": .integer(6), "key": .string("k"), "value": .null])),
            to: rewrite.path)
        #expect(rewrite.scan() == nil, "a null value")
        Self.write(whole + LogFormat.frame(.object(["revision": .integer(0), "key": .string("k")])), to: rewrite.path)
        #expect(rewrite.scan() == nil, "a revision that is not positive")
        try! LinuxSystem().unlink(rewrite.path)
        #expect(rewrite.scan() == nil, "no file")
    }
}
