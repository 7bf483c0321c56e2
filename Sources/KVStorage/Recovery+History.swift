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
}
