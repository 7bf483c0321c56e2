/// A `/proc/PID/mountinfo` text: the mounts a process sees, one line each
/// (`ID PARENT MAJOR:MINOR ROOT POINT OPTIONS [TAGS...] - TYPE SOURCE SUPER-OPTIONS`). Pure
/// functions of that text, and its one read.
enum Mountinfo {
    /// The fields of one mount that kvd reads, as the text has them.
    struct Mount {
        /// `MAJOR:MINOR` of its device.
        var device: ArraySlice<UInt8>
        /// The folder of its file system at its mount point.
        var root: ArraySlice<UInt8>
        /// Where it is mounted (spaces and the like escaped as `\040`).
        var point: ArraySlice<UInt8>
        /// Its file system's type.
        var type: ArraySlice<UInt8>
    }

    /// The mounts of `text`, in its order; a line without every field is skipped.
    static func mounts(_ text: [UInt8]) -> [Mount] {
        text.split(separator: UInt8(ascii: "\n")).compactMap { line in
            let fields = line.split(separator: UInt8(ascii: " "))
            guard let dash = fields.firstIndex(where: { $0.elementsEqual("-".utf8) }), dash >= 5,
                dash + 1 < fields.count
            else { return nil }
            return Mount(device: fields[2], root: fields[3], point: fields[4], type: fields[dash + 1])
        }
    }

    /// The most of a `mountinfo` read (past it, nothing is told from it).
    static let maxBytes = 4 << 20

    /// The `mountinfo` at `path`, whole; nil when it cannot be read or holds more than
    /// ``maxBytes``. Throws only when kvd has no descriptor left to open it (`EMFILE`, `ENFILE`).
    static func read(_ path: String, _ system: any SystemCalls) throws(Errno) -> [UInt8]? {
        let fd: Int32
        do { fd = try system.openReadOnly(path) } catch {
            if error.isOutOfDescriptors { throw error }
            return nil
        }
        defer { system.close(fd) }
        guard let text = try? system.readToEnd(fd, limit: maxBytes), text.count <= maxBytes else { return nil }
        return text
    }
}
