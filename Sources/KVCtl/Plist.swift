import KVSystem

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
        let system = Files.system
        let helper = try helperPath()
        let (toHelper, fromHelper, errors) = try pipes(for: helper)
        let spawned = Result { () throws(Errno) in
            try system.spawn(
                helper, arguments: arguments, input: toHelper.read, output: fromHelper.write, error: errors.write)
        }
        for descriptor in [toHelper.read, fromHelper.write, errors.write] { system.close(descriptor) }
        defer { for descriptor in [fromHelper.read, errors.read] { system.close(descriptor) } }
        let child: Int32
        switch spawned {
        case .success(let process): child = process
        case .failure(let error):
            system.close(toHelper.write)
            throw Failure("cannot run \(helper): \(error) (reinstall kvd: kvctl needs it for property lists)")
        }
        let writeError = Files.writeAll(toHelper.write, input)
        system.close(toHelper.write)
        let output = try Files.readAll(fromHelper.read, name: helper)
        let message = try Files.readAll(errors.read, name: helper)
        let status: Int32
        do { status = try system.waitForExit(child) } catch {
            throw Failure("cannot wait for \(helper): \(error.errno)")
        }
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

    /// The helper's three pipes (its input, output and errors), close-on-exec, made with
    /// `system`; if one cannot be made, those made before it are closed.
    static func pipes(for helper: String, system: any SystemCalls = Files.system) throws(Failure) -> (
        input: (read: Int32, write: Int32), output: (read: Int32, write: Int32), errors: (read: Int32, write: Int32)
    ) {
        var made: [(read: Int32, write: Int32)] = []
        do {
            for _ in 0..<3 { made.append(try system.makePipe()) }
        } catch {
            for pipe in made { for descriptor in [pipe.read, pipe.write] { system.close(descriptor) } }
            throw Failure("cannot run \(helper): pipe: \(error)")
        }
        return (made[0], made[1], made[2])
    }

    /// `kvctl-plist` beside the running kvctl.
    private static func helperPath() throws(Failure) -> String {
        guard let executable = Files.system.executablePath() else {
            throw Failure("cannot find \(helperName): /proc/self/exe cannot be read")
        }
        let folder = executable.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(
            separator: "/")
        return folder + "/" + helperName
    }
}
