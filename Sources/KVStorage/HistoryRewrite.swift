import Glibc
import KVSystem
import KVValues

/// A prune of a history file that never holds the file whole nor decodes its entries: it
/// reads the file once in pieces for what retention decides on (``HistoryLine``s), and once
/// more to copy the lines it keeps, byte for byte, after a new header, with the new entries
/// encoded after them; the new file is written in pieces under a temporary name, synced and
/// renamed over the old one. What it keeps is what ``HistoryRetention/prune(_:since:keep:days:now:maxBytes:)``
/// keeps of the decoded entries: the same lines, in the same order (see ``HistoryFiles``).
/// Blocks on I/O; used by one thread at a time (the fold's).
struct HistoryRewrite {
    let fileSystem: any FileSystem
    let domain: Domain
    let path: String
    let temporary: String

    /// The most it holds of either file at a time (a line longer than that, whole).
    static let pieceBytes = 256 << 10

    /// What the file holds, as a prune needs it.
    struct Scan {
        var lines: [HistoryLine] = []
        /// The largest `since` (header or line).
        var since: Int64 = 0
    }

    /// The lines of the file, or nil if it is not one to prune this way: missing, not a
    /// regular file, a header ``HistoryFormat/readHeader(_:domain:)`` refuses, a torn or
    /// corrupt line, or a line ``HistoryLineParser`` does not read. The caller then reads it
    /// whole (``HistoryFormat/read(_:domain:)``), which sets such a file aside or cuts its
    /// torn tail as it always did. Throws nothing: a failure to read is left to that read.
    func scan() -> Scan? {
        guard let descriptor = try? fileSystem.open(path, [.noFollow, .nonBlocking], permissions: 0) else {
            return nil
        }
        defer { fileSystem.close(descriptor) }
        guard (try? fileSystem.status(descriptor))?.kind == .regular else { return nil }
        var reader = PieceReader(fileSystem: fileSystem, descriptor: descriptor)
        while !reader.buffer.contains(UInt8(ascii: "\n")) {
            guard (try? reader.fill()) == true else { return nil }
        }
        guard let (since, start) = try? HistoryFormat.readHeader(reader.buffer, domain: domain) else { return nil }
        var scan = Scan(since: since)
        var position = start  // in the buffer
        // No line end in buffer[position..<searched]: a line longer than a piece is looked
        // through once, not again at each piece read (a 1 MiB line is four).
        var searched = position
        while true {
            guard let end = LogFormat.lineEnd(in: reader.buffer, from: searched) else {
                position -= reader.drop(before: reader.base + Int64(position))
                searched = reader.buffer.count  // all it holds: no line end in it
                guard let more = try? reader.fill() else { return nil }
                if !more { return reader.buffer.isEmpty ? scan : nil }  // bytes after the last line: torn
                continue
            }
            guard let (payload, next) = LogFormat.line(in: reader.buffer, at: position, end: end),
                let parsed = HistoryLineParser.parse(reader.buffer, payload)
            else { return nil }  // corrupt, or not read so
            switch parsed {
            case .since(let since): scan.since = max(scan.since, since)
            case .entry(let entry):
                scan.lines.append(HistoryLine(entry, offset: reader.base + Int64(position), length: next - position))
            }
            (position, searched) = (next, next)
        }
    }

    init(fileSystem: any FileSystem, domain: Domain, path: String, temporary: String) {
        (self.fileSystem, self.domain, self.path, self.temporary) = (fileSystem, domain, path, temporary)
    }

    /// The rewrite of `domain`'s history file in `folder`.
    init(_ folder: StateFolder, _ domain: Domain) {
        let name = HistoryFormat.fileName(for: domain)
        self.init(
            fileSystem: folder.fileSystem, domain: domain, path: folder.path(name),
            temporary: folder.path("." + name + ".tmp"))
    }

    /// A fold's rewrite of the file with `adding` (the fold's new entries), pruned as `options`
    /// and `maxBytes` say, of the keys `keeps` takes: what ``HistoryFiles``' full rewrite
    /// (every entry read, normalized, pruned and encoded) keeps, the same lines in the same
    /// order. Returns what the file then holds, or nil if it did nothing: the file is not one
    /// ``scan()`` reads, or its lines and `adding` are not normalized (not as folds write
    /// them); the caller then rewrites it the full way. The caller syncs the folder.
    func prune(adding: [HistoryEntry], _ options: StoreOptions, maxBytes: Int, _ keeps: (Key) -> Bool)
        throws(SystemError) -> HistoryFileInfo?
    {
        guard let scan = scan() else { return nil }
        let lines = scan.lines + adding.enumerated().map { HistoryLine(new: $1, index: $0) }
        guard HistoryRetention.isNormalized(lines) else { return nil }
        let (kept, since) = Self.prune(
            lines.filter { keeps($0.key) }, adding: adding, since: scan.since, keep: options.historyKeep,
            days: options.historyDays, now: options.clock(), maxBytes: maxBytes)
        let length = try write(kept, since: since, adding: adding)
        return HistoryFileInfo(kept: kept, validLength: length, lastRevision: lines.last?.revision ?? 0)
    }

    /// What ``HistoryRetention/prune(_:since:keep:days:now:maxBytes:)`` keeps of `lines`
    /// (normalized; the new ones are of `adding`), and the new `since`: a line of the file is
    /// measured as the file holds it, a new one encoded.
    static func prune(
        _ lines: [HistoryLine], adding: [HistoryEntry], since: Int64, keep: Int, days: Int, now: Int64, maxBytes: Int
    ) -> (kept: [HistoryLine], since: Int64) {
        var scratch: [UInt8] = []
        let pruned = HistoryRetention.prune(lines, since: since, keep: keep, days: days, now: now, maxBytes: maxBytes) {
            index in
            guard let new = lines[index].newIndex else { return lines[index].length }
            return HistoryRetention.lineBytes(adding[new], scratch: &scratch)
        }
        return (pruned.indices.map { lines[$0] }, pruned.since)
    }

    /// Writes the new file: the header with `since`, then `kept` in order (the lines of the
    /// file copied, new entries of `adding` encoded), in pieces; syncs it and renames it over
    /// the old one (the caller syncs the folder). Returns its length. On failure the
    /// temporary file is removed, and the old file may be in place or the new one.
    func write(_ kept: [HistoryLine], since: Int64, adding: [HistoryEntry]) throws(SystemError) -> Int64 {
        let source = try fileSystem.open(path, [.noFollow], permissions: 0)
        defer { fileSystem.close(source) }
        let target = try createTemporary()
        var length: Int64 = 0
        do {
            defer { fileSystem.close(target) }
            var reader = PieceReader(fileSystem: fileSystem, descriptor: source)
            var out = HistoryFormat.header(domain, since: since)
            for line in kept {
                if let index = line.newIndex {
                    HistoryFormat.append(adding[index], to: &out)
                } else {
                    try reader.copy(line, to: &out, path: path)
                }
                guard out.count >= Self.pieceBytes else { continue }
                try fileSystem.write(target, out)
                length += Int64(out.count)
                out.removeAll(keepingCapacity: true)
            }
            try fileSystem.write(target, out)
            length += Int64(out.count)
            try fileSystem.fsync(target)
        } catch {
            try? fileSystem.unlink(temporary)
            throw error
        }
        try fileSystem.moveTemporary(temporary, to: path)
        return length
    }

    /// A new file at ``temporary`` (whatever was at its name, left by a crash, unlinked first).
    private func createTemporary() throws(SystemError) -> FileDescriptor {
        let options: OpenOptions = [.write, .create, .exclusive, .noFollow]
        do {
            return try fileSystem.open(temporary, options, permissions: 0o600)
        } catch  where error.code == EEXIST {
            try fileSystem.unlink(temporary)
            return try fileSystem.open(temporary, options, permissions: 0o600)
        }
    }
}

/// Reads a file front to back in pieces of ``HistoryRewrite/pieceBytes``, holding the bytes
/// from ``base`` on.
private struct PieceReader {
    let fileSystem: any FileSystem
    let descriptor: FileDescriptor
    private(set) var buffer: [UInt8] = []
    /// The offset in the file of the buffer's first byte.
    private(set) var base: Int64 = 0

    init(fileSystem: any FileSystem, descriptor: FileDescriptor) {
        (self.fileSystem, self.descriptor) = (fileSystem, descriptor)
    }

    /// Reads the next piece into the buffer; false at the end of the file.
    mutating func fill() throws(SystemError) -> Bool {
        let piece = try fileSystem.read(descriptor, upTo: HistoryRewrite.pieceBytes)
        buffer.append(contentsOf: piece)
        return !piece.isEmpty
    }

    /// Lets go of the bytes before file offset `offset` (at most all it holds); returns how
    /// many.
    mutating func drop(before offset: Int64) -> Int {
        let count = Int(min(max(offset - base, 0), Int64(buffer.count)))
        buffer.removeFirst(count)
        base += Int64(count)
        return count
    }

    /// Appends the bytes of `line` (of this file, at or after what it holds) to `out`.
    mutating func copy(_ line: HistoryLine, to out: inout [UInt8], path: String) throws(SystemError) {
        let end = line.offset + Int64(line.length)
        while base + Int64(buffer.count) < end {
            if buffer.count >= HistoryRewrite.pieceBytes { _ = drop(before: line.offset) }
            guard try fill() else {  // shorter than when it was read: only this thread writes it
                throw SystemError("read", path: path, code: EIO)
            }
        }
        let start = Int(line.offset - base)
        out.append(contentsOf: buffer[start..<(start + line.length)])
    }
}
