import KVValues

extension Recovery {
    /// Notes what loading a history file later needs: each domain file's revision (`loaded`,
    /// before the log replay) and the log's base. Reads and writes no history file: each is
    /// read when first needed (``Journal/loadHistory(_:current:revision:recent:)``), so a
    /// start costs nothing per domain. Nothing when history is off.
    func noteHistoryStart(loaded: [Domain: Int64], logBase: Int64) {
        guard journal.historyOptions != nil else { return }
        journal.historyStart = loaded
        journal.historyLogBase = logBase
    }

    /// Reads what keeps no history (``Journal/loadExclusions()``), and with history off
    /// removes the history files (``Journal/removeHistoryFiles()``; a failure is logged, and
    /// tried again at the next start).
    func prepareHistory() throws(StorageError) {
        do { try journal.loadExclusions() } catch {
            journal.releaseAll()
            throw .failure("cannot read \(journal.path(HistoryExclusions.fileName)): \(error)")
        }
        guard journal.historyOptions == nil else { return }
        do { try journal.removeHistoryFiles() } catch {
            journal.log(.error, "history is off, but its files in \(directory) could not be removed: \(error)")
        }
    }
}
