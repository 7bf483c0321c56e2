// The simulated disk's state and what a crash may leave of it: the model behind
// ``SimulatedFileSystem`` (SimulatedFileSystem.swift), which applies each operation to it.

/// What a simulated disk holds: folders (names → inode numbers) and file contents, by inode.
/// Inode 1 is the root folder `/`.
struct Disk: Sendable, Hashable {
    var folders: [Int: [String: Int]] = [1: [:]]
    var files: [Int: [UInt8]] = [:]

    static let root = 1

    /// A disk holding only the (durable) folders of `paths`, like `["/data"]`.
    static func with(folders paths: [String]) -> Disk {
        var disk = Disk()
        for path in paths {
            var folder = root
            for part in path.split(separator: "/").map(String.init) {
                if let next = disk.folders[folder]?[part] {
                    folder = next
                } else {
                    let inode = (disk.folders.keys.max() ?? 1) + 1
                    disk.folders[folder]?[part] = inode
                    disk.folders[inode] = [:]
                    folder = inode
                }
            }
        }
        return disk
    }

    /// The same disk without the folders and files no path reaches.
    func reachable() -> Disk {
        var kept = Disk(folders: [:], files: [:])
        var queue = [Disk.root]
        while let folder = queue.popLast() {
            guard kept.folders[folder] == nil, let entries = folders[folder] else { continue }
            kept.folders[folder] = entries
            for inode in entries.values {
                if folders[inode] != nil { queue.append(inode) } else { kept.files[inode] = files[inode] ?? [] }
            }
        }
        return kept
    }

    /// The inode at `path`, if any.
    func inode(at path: String) -> Int? {
        var inode = Disk.root
        for part in path.split(separator: "/") {
            guard let next = folders[inode]?[String(part)] else { return nil }
            inode = next
        }
        return inode
    }

    /// The names and contents of the files in the folder at `path`.
    func files(in path: String) -> [String: [UInt8]] {
        guard let folder = inode(at: path), let entries = folders[folder] else { return [:] }
        var found: [String: [UInt8]] = [:]
        for (name, inode) in entries where folders[inode] == nil { found[name] = files[inode] ?? [] }
        return found
    }
}

/// One change to a folder's entries, replayable on any version of them.
enum EntryChange: Sendable, Hashable {
    case link(String, Int)
    case remove(String)
    case rename(String, String, Int)

    func apply(to entries: inout [String: Int]) {
        switch self {
        case .link(let name, let inode): entries[name] = inode
        case .remove(let name): entries[name] = nil
        case .rename(let from, let to, let inode):
            entries[from] = nil
            entries[to] = inode
        }
    }
}

/// One operation that changes the simulated disk (reads, opens of existing files, locks and
/// closes change nothing and are not crash points).
enum DiskOperation: Sendable, Hashable {
    /// A change to the entries of folder `folder`; `newFolder` for `mkdir`, `newFile` for a create.
    case entries(folder: Int, EntryChange, newFolder: Int?, newFile: Int?)
    case write(Int, offset: Int, [UInt8])
    case truncate(Int, length: Int)
    /// A successful `fsync`/`fdatasync` of a file or folder.
    case sync(Int)
}

/// The state of a simulated disk as a crash would see it: what is durable, what is only in the
/// page cache, and which unsynced changes could still reach the disk.
struct DiskModel: Sendable {
    /// What a running system sees.
    var current: Disk
    /// What survives a crash for sure: folder entries as of their last sync, file data as of
    /// their last sync.
    var durable: Disk
    /// Folder changes not yet made durable by a sync of their folder, in order.
    var unsyncedEntries: [(folder: Int, change: EntryChange)] = []
    /// The file and content before the most recent write not yet synced, for torn writes.
    var lastWrite: (inode: Int, before: [UInt8], offset: Int, bytes: [UInt8])?

    init(_ disk: Disk) {
        current = disk
        durable = disk
    }

    mutating func apply(_ operation: DiskOperation) {
        switch operation {
        case .entries(let folder, let change, let newFolder, let newFile):
            if let newFolder {
                current.folders[newFolder] = [:]
                durable.folders[newFolder] = [:]
            }
            if let newFile {
                current.files[newFile] = []
                durable.files[newFile] = []
            }
            change.apply(to: &current.folders[folder, default: [:]])
            unsyncedEntries.append((folder, change))
        case .write(let inode, let offset, let bytes):
            let before = current.files[inode] ?? []
            current.files[inode] = Self.writing(bytes, at: offset, into: before)
            lastWrite = (inode, before, offset, bytes)
        case .truncate(let inode, let length):
            var content = current.files[inode] ?? []
            if content.count > length {
                content.removeSubrange(length...)
            } else {
                content += Array(repeating: 0, count: length - content.count)
            }
            current.files[inode] = content
            if lastWrite?.inode == inode { lastWrite = nil }
        case .sync(let inode):
            if let entries = current.folders[inode] {
                durable.folders[inode] = entries
                unsyncedEntries.removeAll { $0.folder == inode }
            } else {
                durable.files[inode] = current.files[inode] ?? []
                if lastWrite?.inode == inode { lastWrite = nil }
            }
        }
    }

    static func writing(_ bytes: [UInt8], at offset: Int, into content: [UInt8]) -> [UInt8] {
        var content = content
        if content.count < offset { content += Array(repeating: 0, count: offset - content.count) }
        let overlap = min(bytes.count, content.count - offset)
        content.replaceSubrange(offset..<(offset + overlap), with: bytes[..<overlap])
        content += bytes[overlap...]
        return content
    }

    /// The disks a crash now could leave, each once:
    /// - folder entries: the durable ones plus each prefix of the unsynced changes (in order, as a
    ///   journaling file system keeps them), and plus all unsynced changes but one (reordering);
    /// - file data: all unsynced data lost, all kept, the last unsynced write torn (1 byte, half,
    ///   all but 1 byte of it kept), and each file's unsynced data lost while the others' is kept.
    func crashStates() -> [Disk] {
        var folderChoices: [[Int: [String: Int]]] = []
        let count = unsyncedEntries.count
        var subsets: [[Int]] = (0...count).map { Array(0..<$0) }
        if count >= 2 { subsets += (0..<count).map { skipped in (0..<count).filter { $0 != skipped } } }
        for subset in subsets {
            var folders = durable.folders
            for folder in current.folders.keys where folders[folder] == nil { folders[folder] = [:] }
            for index in subset {
                let (folder, change) = unsyncedEntries[index]
                change.apply(to: &folders[folder, default: [:]])
            }
            folderChoices.append(folders)
        }
        var fileChoices: [[Int: [UInt8]]] = [durable.files, current.files]
        if let last = lastWrite, last.bytes.count > 1 {
            for kept in Set([1, last.bytes.count / 2, last.bytes.count - 1]) {
                var files = current.files
                files[last.inode] = Self.writing(Array(last.bytes[..<kept]), at: last.offset, into: last.before)
                fileChoices.append(files)
            }
        }
        for (inode, content) in current.files where durable.files[inode] != content {
            var files = current.files
            files[inode] = durable.files[inode] ?? []
            fileChoices.append(files)
        }
        var seen: Set<Disk> = []
        var states: [Disk] = []
        for folders in folderChoices {
            for files in fileChoices {
                let disk = Disk(folders: folders, files: files).reachable()
                if seen.insert(disk).inserted { states.append(disk) }
            }
        }
        return states
    }
}
