import KVValues

extension Recovery {
    /// Reads what keeps no history (``HistoryFiles/loadExclusions()``), and with history off
    /// removes the history files (``HistoryFiles/removeFiles()``; a failure is logged, and
    /// tried again at the next start).
    func prepareHistory() throws(StorageError) {
        do { try files.history.loadExclusions() } catch {
            wal.releaseAll()
            throw .failure("cannot read \(folder.path(HistoryExclusions.fileName)): \(error)")
        }
        guard files.history.options == nil else { return }
        do { try files.history.removeFiles() } catch {
            folder.log(.error, "history is off, but its files in \(directory) could not be removed: \(error)")
        }
    }
}
