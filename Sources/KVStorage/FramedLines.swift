import KVSystem
import KVValues

/// The files of the state folder made of checksummed JSON lines, framed as the log frames them
/// (`CRC SP JSON LF`): a header `{"format": F, "formatVersion": V, ...}`, any number of lines,
/// then `{"end": N}`, N the count of lines before it (``SystemLayerFile``,
/// ``KeptDropInsFile``). Written whole under a temporary name and renamed into place: a reader
/// finds the old file or the new one; a file that fails any check is not used at all. Pure.
enum FramedLines {
    struct DecodeError: Error { var reason: String }

    /// The end line after `lines` lines (the header counted).
    static func end(lines: Int) -> [UInt8] { LogFormat.frame(.object(["end": .integer(Int64(lines))])) }

    /// The header and the lines between it and the end, after checking every line's checksum,
    /// the header's format and version, the count and that nothing follows the end.
    static func decode(_ bytes: [UInt8], format: String, version: Int64) throws(DecodeError) -> (
        header: JSON, lines: [JSON]
    ) {
        var position = 0
        var header: JSON?
        var lines: [JSON] = []
        while true {
            guard position < bytes.count else { throw DecodeError(reason: "it ends before its last line") }
            guard let (payload, next) = LogFormat.line(in: bytes, at: position) else {
                throw DecodeError(reason: "the line at byte \(position) is torn or fails its checksum")
            }
            let json: JSON
            do { json = try JSONParser.parse(bytes[payload], limits: LogFormat.limits) } catch {
                throw DecodeError(reason: "the line at byte \(position) is not JSON: \(error)")
            }
            position = next
            guard let found = header else {
                guard json["format"] == .string(format), json["formatVersion"] == .integer(version) else {
                    throw DecodeError(reason: "its first line is not a \(format) header of version \(version)")
                }
                header = json
                continue
            }
            if case .integer(let count)? = json["end"] {
                guard count == lines.count + 1 else {
                    throw DecodeError(reason: "its end says \(count) lines, it holds \(lines.count + 1)")
                }
                guard position == bytes.count else { throw DecodeError(reason: "bytes follow its last line") }
                return (found, lines)
            }
            lines.append(json)
        }
    }

    /// Replaces the file at `path` with `bytes` durably (temporary file, rename, folder synced).
    static func save(_ bytes: [UInt8], to path: String, in directory: String, fileSystem: any FileSystem)
        throws(SystemError)
    {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        try fileSystem.replaceFile(path, temporary: directory + "/." + name + ".tmp", with: bytes)
        try fileSystem.syncDirectory(directory)
    }

    /// The bytes of the regular file at `path` (nil: none there), `what` naming it in errors.
    static func read(_ path: String, limit: Int64, what: String, fileSystem: any FileSystem) throws(StorageError)
        -> [UInt8]?
    {
        do {
            return try fileSystem.readRegularFile(path, limit: limit)
        } catch {
            switch error {
            case .notRegular(let kind): throw .failure("\(what) \(path) is \(kind), not a regular file")
            case .tooLarge(let size): throw .failure("\(what) \(path) holds \(size) bytes, more than kvd reads")
            case .system(let error): throw .failure("cannot read \(what) \(path): \(error)")
            }
        }
    }
}
