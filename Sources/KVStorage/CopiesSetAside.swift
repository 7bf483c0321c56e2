import KVSystem
import KVValues

/// The copies of the state folder's files set aside (``StorageFormat/isBackup(_:)``) as
/// forgetting history scrubs them (``Store/submitHistoryChange(_:completion:)``). No state;
/// blocks on I/O.
enum CopiesSetAside {
    /// Removes or rewrites the copies set aside (``StorageFormat/isBackup(_:)``) that may hold
    /// past values of `key` of `domain` (of every key, if nil): the domain's history copies
    /// are removed, and so are its domain file copies (for a key: those that name it); a copy
    /// of a log (`kvd.wal` or `kvd.wal.next`) is rewritten without the lines that name the domain (and the key), torn or
    /// not. Then syncs the folder.
    static func scrub(_ domain: Domain, in folder: StateFolder, key: Key?) throws(SystemError) {
        var domainName: [UInt8] = []
        var keyName: [UInt8] = []
        JSONWriter.writeString(domain.name, into: &domainName)
        if let key { JSONWriter.writeString(key.name, into: &keyName) }
        let historyCopy = HistoryFormat.fileName(for: domain) + StorageFormat.backupMarker
        let domainCopy =
            String(StorageFormat.fileName(for: domain).dropLast(StorageFormat.domainSuffix.count))
            + StorageFormat.backupMarker
        let logCopies = [StorageFormat.logFileName, StorageFormat.nextLogFileName].map {
            $0 + StorageFormat.backupMarker
        }
        var changed = false
        for name in try folder.fileSystem.contentsOfDirectory(folder.directory) where StorageFormat.isBackup(name) {
            let json = name.hasSuffix(StorageFormat.domainSuffix)
            if name.hasPrefix(historyCopy), !json {
                try folder.fileSystem.unlink(folder.path(name))
                changed = true
            } else if name.hasPrefix(domainCopy), json {
                if key != nil {
                    guard let bytes = try readCopy(name, in: folder), Self.contains(bytes, keyName) else { continue }
                }
                try folder.fileSystem.unlink(folder.path(name))
                changed = true
            } else if logCopies.contains(where: name.hasPrefix), !json, let bytes = try readCopy(name, in: folder) {
                let kept = Self.lines(of: bytes) { line in
                    !(Self.contains(line, domainName) && (key == nil || Self.contains(line, keyName)))
                }
                guard kept.count != bytes.count else { continue }
                try folder.fileSystem.replaceFile(
                    folder.path(name), temporary: folder.path("." + name + ".tmp"), with: kept)
                changed = true
            }
        }
        if changed { try folder.fileSystem.syncDirectory(folder.directory) }
    }

    private static func readCopy(_ name: String, in folder: StateFolder) throws(SystemError) -> [UInt8]? {
        do { return try folder.fileSystem.readRegularFile(folder.path(name), limit: .max) } catch {
            if case .system(let failure) = error { throw failure }
            return nil  // not a regular file: kvd never wrote it
        }
    }

    /// The lines of `bytes` (split at LF, the last one maybe unterminated) that `keep` takes.
    static func lines(of bytes: [UInt8], keeping keep: (ArraySlice<UInt8>) -> Bool) -> [UInt8] {
        var out: [UInt8] = []
        var start = 0
        while start < bytes.count {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? bytes.count
            if keep(bytes[start..<end]) { out.append(contentsOf: bytes[start..<end]) }
            start = end
        }
        return out
    }

    static func contains(_ bytes: some Collection<UInt8>, _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, bytes.count >= needle.count else { return needle.isEmpty }
        let bytes = Array(bytes)
        var index = 0
        while let first = bytes[index...].firstIndex(of: needle[0]), first + needle.count <= bytes.count {
            if bytes[first..<(first + needle.count)].elementsEqual(needle) { return true }
            index = first + 1
        }
        return false
    }
}
