/// Why a drop-in file was not read, in one line.
struct DropInReadError: Error, Equatable, Sendable, CustomStringConvertible {
    var description: String
    /// A problem only when there is a last good content to keep (a folder missing that held
    /// files: moved away, or not mounted yet); a folder that never held any is no problem.
    var onlyIfKept = false
    /// What a dconf lock file surely means despite its error (``DconfFiles/locks(_:)``): applied
    /// with its last good content, or alone when it has none, so that a typo never leaves a
    /// key it names writable.
    var partial: DropInContent?
    /// The databases a dconf profile with a typo may mean (``DconfFiles/profile(_:)``): read
    /// while no profile was read good since kvd started.
    var guess: DconfFiles.ProfileGuess?

    /// A folder that is missing: what it held still applies, if anything.
    static let missingFolder = DropInReadError(
        description:
            "missing (moved away, or not mounted yet?): to take a folder's values and locks away, remove its files, not the folder",
        onlyIfKept: true)
}
