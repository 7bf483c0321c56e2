import CLinux
import Glibc
import KVSystem

/// Tells the system instance's loop when its drop-in folders change: an inotify instance
/// watching `DIR`, `DIR/defaults.d` and `DIR/locks.d` for files closed after writing, moved in
/// or out, and removed (not for each write: a file is read once it is whole; an admin who
/// writes in place triggers one reload when the file is closed, one who renames a temporary
/// file into place, as editors and config-management tools do, one at the rename). A folder
/// that appears later is watched from the next event in `DIR`; `DIR` moved away or removed is
/// watched again at its path once a folder is there (``rewatch()``, which the server calls
/// while ``watchesDirectory`` is false). Loop thread only.
final class DropInWatcher {
    let fd: Int32
    private let directory: String
    private let system: any SystemCalls

    static let folderEvents = UInt32(
        IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)
    /// Whether a folder at `DIR`'s path is watched: false once `DIR` was moved away or removed
    /// and no folder is at its path yet.
    private(set) var watchesDirectory = true
    /// The folders at the watched paths when they were watched (``identities()``).
    private var watched: [String: FolderIdentity?] = [:]

    struct FolderIdentity: Equatable {
        var device: UInt64
        var inode: UInt64
    }
    /// `IN_CREATE` too: a symbolic or hard link made in place (`ln -s`) is never closed after
    /// writing. A file still being written when the folders settle is read again at its close.
    static let fileEvents = UInt32(
        IN_CREATE | IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB | IN_DELETE_SELF
            | IN_MOVE_SELF)

    /// More folders to watch for files, asked again at each rewatch (dconf's: ``DropInReader/dconfFolders()``).
    private let moreFolders: () -> [String]

    /// Throws when inotify is not available, or `directory` is there and cannot be watched. A
    /// missing `directory` is no failure (``watchesDirectory`` is false): dconf's folders are
    /// watched all the same, and `DIR` once it is made.
    init(directory: String, system: any SystemCalls, moreFolders: @escaping () -> [String] = { [] }) throws(SystemError)
    {
        self.directory = directory
        self.system = system
        self.moreFolders = moreFolders
        fd = try system.retrying("inotify_init1") { () throws(Errno) in try system.inotifyInit() }
        do {
            _ = try system.inotifyAddWatch(fd, directory, mask: Self.folderEvents)
        } catch  where error == .noSuchFileOrDirectory {
            watchesDirectory = false
        } catch {
            system.close(fd)
            throw SystemError("inotify_add_watch \(directory)", error)
        }
        watchFolders()
        watched = identities()
    }

    /// Which folder (device and inode) is at each watched path, nil where none is: `DIR`,
    /// `defaults.d` and `locks.d`, then each of ``moreFolders`` (a dconf database made after
    /// start is a new path here).
    private func identities() -> [String: FolderIdentity?] {
        let paths = [directory, directory + "/defaults.d", directory + "/locks.d"] + moreFolders()
        return Dictionary(
            paths.map { path in
                (
                    path,
                    (try? system.status(path, followingLinks: true)).map {
                        FolderIdentity(device: $0.device, inode: $0.inode)
                    }
                )
            }, uniquingKeysWith: { first, _ in first })
    }

    /// Whether another folder is at one of the watched paths than the one watched, or a folder
    /// to watch came or went (a file system mounted over `DIR` after start, or unmounted: inotify
    /// tells nothing of either; a dconf database or its `locks` made after start); then the new
    /// ones are watched.
    func folderReplaced() -> Bool {
        guard identities() != watched else { return false }
        rewatch()
        return true
    }

    /// Watches `DIR` and the two folders at their paths again (the same watch for a folder
    /// already watched; a new one for a folder that replaced it; none for one missing).
    func rewatch() {
        watchesDirectory = (try? system.inotifyAddWatch(fd, directory, mask: Self.folderEvents)) != nil
        watchFolders()
        watched = identities()
    }

    /// Watches the two folders (again: the same watch if already watched; none if missing).
    private func watchFolders() {
        for folder in ["defaults.d", "locks.d"] {
            _ = try? system.inotifyAddWatch(fd, directory + "/" + folder, mask: Self.fileEvents)
        }
        for folder in moreFolders() { _ = try? system.inotifyAddWatch(fd, folder, mask: Self.fileEvents) }
    }

    /// Reads every pending event; whether there was one.
    func drain() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        var any = false
        while true {
            let count = buffer.withUnsafeMutableBytes { bytes in
                Result { () throws(Errno) in try system.read(fd, into: bytes) }
            }
            guard case .success(let read) = count, read > 0 else { break }
            any = true
        }
        if any { rewatch() }
        return any
    }

    func close() { system.close(fd) }
}
