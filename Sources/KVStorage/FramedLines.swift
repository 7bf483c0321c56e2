import KVSystem
import KVValues

/// The files of the state folder made of checksummed JSON lines, framed as the log frames them
/// (`CRC SP JSON LF`): a header `{"format": F, "formatVersion": V, ...}`, any number of lines,
/// then `{"end": N}`, N the count of lines before it (``SystemLayerFile``,
/// ``KeptDropInsFile``). Written whole under a temporary name and renamed into place: a reader
/// finds the old file or the new one; a file that fails any check is not used at all. Pure.
enum FramedLines {
    struct DecodeError: Error { var reason: String }

    /// The header line of `format` at `version`, with `members` besides.
    static func header(format: String, version: Int64, _ members: [String: JSON] = [:]) -> [UInt8] {
        LogFormat.frame(
            .object(members.merging(["format": .string(format), "formatVersion": .integer(version)]) { $1 }))
    }

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

    /// One such file of the state folder: where it is, its format, and how it is named in
    /// messages (`what`, like "the system layer").
    struct File: Sendable {
        let directory: String
        let fileSystem: any FileSystem
        let name: String
        let format: String
        let version: Int64
        /// The largest file read.
        let limit: Int64
        let what: String

        var path: String { directory + "/" + name }

        /// Replaces the file with `bytes` durably: a temporary file (`.NAME.tmp`), written and
        /// synced, renamed into place, then the folder synced.
        func save(_ bytes: [UInt8]) throws(StorageError) {
            do {
                try fileSystem.replaceFile(path, temporary: directory + "/." + name + ".tmp", with: bytes)
                try fileSystem.syncDirectory(directory)
            } catch {
                throw .failure("cannot save \(what) to \(path): \(error)")
            }
        }

        /// What `decode` makes of the file's header and lines; nil when there is no file.
        /// Throws ``StorageError/failure(_:)`` saying why when it is there but cannot be used.
        func load<T>(_ decode: (JSON, [JSON]) throws(DecodeError) -> T) throws(StorageError) -> T? {
            let bytes: [UInt8]
            do {
                guard let read = try fileSystem.readRegularFile(path, limit: limit) else { return nil }
                bytes = read
            } catch {
                switch error {
                case .notRegular(let kind): throw .failure("\(what) saved in \(path) is \(kind), not a regular file")
                case .tooLarge(let size):
                    throw .failure("\(what) saved in \(path) holds \(size) bytes, more than kvd reads")
                case .system(let error): throw .failure("cannot read \(what) saved in \(path): \(error)")
                }
            }
            do {
                let (header, lines) = try FramedLines.decode(bytes, format: format, version: version)
                return try decode(header, lines)
            } catch {
                throw .failure("\(what) saved in \(path) is damaged (\(error.reason)); it is not used")
            }
        }
    }
}
