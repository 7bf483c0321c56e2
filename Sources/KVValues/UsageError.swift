/// A command-line mistake, said in one line: an unknown option, a missing or malformed argument.
///
/// The one usage error of kvd's programs (kvd, kvctl): each prints `message` with its usage line
/// and exits with status 2, while a failure outside the program exits with 1.
public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, in one line (no program name, no usage line: the program adds them).
    public var message: String

    /// A usage error saying `message`.
    public init(_ message: String) {
        self.message = message
    }

    /// ``message``.
    public var description: String { message }
}
