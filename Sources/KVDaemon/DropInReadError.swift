/// Why a drop-in file was not read, in one line.
struct DropInReadError: Error, Equatable, Sendable, CustomStringConvertible {
    var description: String
    /// A problem only when there is a last good content to keep (a folder missing that held
    /// files: moved away, or not mounted yet); a folder that never held any is no problem.
    var onlyIfKept = false

    /// A folder that is missing: what it held still applies, if anything.
    static let missingFolder = DropInReadError(
        description:
            "missing (moved away, or not mounted yet?): to take a folder's values and locks away, remove its files, not the folder",
        onlyIfKept: true)
}
