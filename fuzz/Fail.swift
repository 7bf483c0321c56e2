import Glibc

/// Reports a broken invariant and aborts, so libFuzzer saves the input as a crash.
func fail(_ message: String) -> Never {
    let line = Array(("invariant broken: " + message + "\n").utf8)
    line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
    abort()
}
