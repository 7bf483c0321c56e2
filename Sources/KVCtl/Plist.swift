import Glibc

/// The property-list formats `kvctl export --format` writes besides typed JSON.
public enum PlistFormat: String, Sendable, Equatable {
    case xml, binary
}

/// Property lists for `import` and `export --format xml|binary`, converted by the `kvctl-plist`
/// program beside kvctl (its strict readers and writers stay out of kvctl, which stays small and
/// starts fast). Each call runs the helper once and blocks until it exits.
enum Plist {
    /// The helper's name; it is looked for beside the running kvctl.
    static let helperName = "kvctl-plist"

    /// Whether `bytes` start like a property list: `bplist00` (binary), or `<?xml`/`<plist`
    /// (XML) after an optional UTF-8 byte order mark and white space.
    static func looksLikePlist(_ bytes: [UInt8]) -> Bool {
        if bytes.starts(with: Array("bplist00".utf8)) { return true }
        var rest = bytes[...]
        if rest.starts(with: [0xEF, 0xBB, 0xBF]) { rest = rest.dropFirst(3) }
        rest = rest.drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        return rest.starts(with: Array("<?xml".utf8)) || rest.starts(with: Array("<plist".utf8))
    }

    /// The property list in `bytes` (from `name`) as typed JSON, ready for import. Fails naming
    /// the key whose value kvd cannot hold (an integer beyond 64 bits, a UID, ...).
    static func typedJSON(fromPlist bytes: [UInt8], name: String) throws(Failure) -> [UInt8] {
        do {
            return try runHelper(["read"], input: bytes)
        } catch {
            throw Failure("\(name): \(error.message)")
        }
    }

    /// A domain's typed JSON object as a property list in `format`.
    static func plist(fromTypedJSON text: String, format: PlistFormat) throws(Failure) -> [UInt8] {
        try runHelper(["write", format.rawValue], input: Array(text.utf8))
    }

    /// Runs the helper with `input` on its stdin; returns its stdout, or fails with its one-line
    /// stderr. The helper reads all its input before writing, so writing then reading cannot
    /// deadlock.
    static func runHelper(_ arguments: [String], input: [UInt8]) throws(Failure) -> [UInt8] {
        let helper = try helperPath()
        var toHelper: [Int32] = [-1, -1]
        var fromHelper: [Int32] = [-1, -1]
        var errors: [Int32] = [-1, -1]
        guard closeOnExecPipe(&toHelper), closeOnExecPipe(&fromHelper), closeOnExecPipe(&errors) else {
            throw Failure("cannot run \(helper): pipe: \(String(cString: strerror(errno)))")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toHelper[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromHelper[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
        let argv = ([helper] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, helper, &actions, nil, argv, environ)
        for descriptor in [toHelper[0], fromHelper[1], errors[1]] { close(descriptor) }
        defer { for descriptor in [fromHelper[0], errors[0]] { close(descriptor) } }
        guard spawned == 0 else {
            close(toHelper[1])
            throw Failure(
                "cannot run \(helper): \(String(cString: strerror(spawned))) (reinstall kvd: kvctl needs it for property lists)"
            )
        }
        let writeError = Files.writeAll(toHelper[1], input)
        close(toHelper[1])
        let output = try Files.readAll(fromHelper[0], name: helper)
        let message = try Files.readAll(errors[0], name: helper)
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0, errno == EINTR {}
        let text = String(decoding: message, as: UTF8.self).split(separator: "\n").first.map(String.init)
        if status & 0x7F != 0 {
            // Killed (out of memory, say) or crashed: its own last words are not a message for the user.
            throw Failure(
                "\(helper) stopped on signal \(status & 0x7F) while converting the property list; nothing was changed")
        }
        guard status == 0, writeError == nil else {
            throw Failure(text ?? "\(helper) failed (exit status \(status >> 8))")
        }
        return output
    }

    /// A pipe whose ends the helper does not inherit (it gets its own copies by `dup2`).
    private static func closeOnExecPipe(_ ends: inout [Int32]) -> Bool {
        guard pipe(&ends) == 0 else { return false }
        return ends.allSatisfy { fcntl($0, F_SETFD, FD_CLOEXEC) == 0 }
    }

    /// `kvctl-plist` beside the running kvctl.
    private static func helperPath() throws(Failure) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else {
            throw Failure("cannot find \(helperName): /proc/self/exe: \(String(cString: strerror(errno)))")
        }
        let executable = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let folder = executable.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(
            separator: "/")
        return folder + "/" + helperName
    }
}
