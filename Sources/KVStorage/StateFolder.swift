import Glibc
import KVSystem
import KVValues

/// The state folder as the storage types reach it: its file system, its path, the log to report
/// to, and the operations on names in it that several of them share (setting a file aside,
/// copying one aside). Holds no mutable state: a value, shared by ``WriteAheadLog``,
/// ``StateFiles``, ``HistoryFiles`` and ``Recovery``. Every method blocks on I/O.
struct StateFolder: Sendable {
    let fileSystem: any FileSystem
    let directory: String
    let log: @Sendable (LogLevel, String) -> Void

    func path(_ name: String) -> String { directory + "/" + name }

    /// Removes `name`; nothing if it is missing.
    func removeIfPresent(_ name: String) throws(SystemError) {
        do { try fileSystem.unlink(path(name)) } catch  where error.code == ENOENT {}
    }

    /// Renames `fileName` (whatever kind of entry it is) to a free backup name beside it,
    /// durably, and returns the backup's name.
    func moveAside(_ fileName: String) throws(SystemError) -> String {
        let stamp = StorageFormat.timestamp()
        var attempt = 1
        while exists(StorageFormat.backupName(for: fileName, stamp: stamp, attempt: attempt)) { attempt += 1 }
        let name = StorageFormat.backupName(for: fileName, stamp: stamp, attempt: attempt)
        try fileSystem.rename(path(fileName), to: path(name))
        try fileSystem.syncDirectory(directory)
        return name
    }

    /// Whether anything is named `name` in the folder (a link is not followed, a FIFO not
    /// waited on).
    private func exists(_ name: String) -> Bool {
        do {
            fileSystem.close(try fileSystem.open(path(name), [.noFollow, .nonBlocking], permissions: 0))
            return true
        } catch {
            return error.code != ENOENT
        }
    }

    /// Copies `bytes` (the content of `fileName`) to a new backup file beside it, durably,
    /// and returns the backup's name.
    func backUp(_ bytes: [UInt8], of fileName: String) throws(SystemError) -> String {
        let stamp = StorageFormat.timestamp()
        var attempt = 1
        while true {
            let name = StorageFormat.backupName(for: fileName, stamp: stamp, attempt: attempt)
            do {
                let descriptor = try fileSystem.open(
                    path(name), [.write, .create, .exclusive, .noFollow], permissions: 0o600)
                defer { fileSystem.close(descriptor) }
                try fileSystem.write(descriptor, bytes)
                try fileSystem.fsync(descriptor)
            } catch  where error.code == EEXIST {
                attempt += 1
                continue
            }
            try fileSystem.syncDirectory(directory)
            return name
        }
    }
}
