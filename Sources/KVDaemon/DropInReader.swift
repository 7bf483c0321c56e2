import Glibc
import KVStorage
import KVSystem

/// Reads the drop-in folders of a system instance, `DIR/defaults.d` and `DIR/locks.d` (`DIR`:
/// `--config-dir`, default `$KVD_CONFIG_DIR`, else `/etc/kvd`), through the ``FileSystem`` seam.
///
/// Each folder's files are taken in name order (byte order). Skipped, as dconf and run-parts
/// skip them: names starting with `.`, editor backups and package-manager leftovers (ending in
/// `~`, `.swp`, `.swo`, `.swx`, `.bak`, `.orig`, `.rej`, `.tmp`, `.rpmnew`, `.rpmsave`, holding
/// `.dpkg-` or `.ucf-`, or `#name#`); in `defaults.d`, every name not ending in `.json`. A
/// missing folder holds no file. Bounded: at most ``maxFiles`` files a folder, ``maxFileBytes``
/// a file and ``maxTotalBytes`` in all; a file past a bound is a problem, not read. A symbolic
/// link is followed; anything but a regular file is a problem. A folder that belongs to
/// neither root nor kvd's user, or that others may write, is not read at all (whoever could
/// write there could dictate locks): its one problem says why.
///
/// Blocks on the reads (local files, bounded); called on the loop thread at start and reload.
struct DropInReader {
    static let maxFileBytes = 4 << 20
    static let maxTotalBytes = 32 << 20
    static let maxFiles = 1000

    let directory: String
    let fileSystem: any FileSystem
    let system: any SystemCalls

    var defaultsFolder: String { directory + "/defaults.d" }
    var locksFolder: String { directory + "/locks.d" }

    /// Every file to combine: `defaults.d`'s, then `locks.d`'s, each in name order.
    func read() -> [DropInFile] {
        var budget = Self.maxTotalBytes
        return files(in: defaultsFolder, .defaults, budget: &budget) + files(in: locksFolder, .locks, budget: &budget)
    }

    private func files(in folder: String, _ kind: DropInFile.Kind, budget: inout Int) -> [DropInFile] {
        if let refusal = folderRefusal(folder) {
            return [DropInFile(path: folder, kind: kind, bytes: .failure(DropInReadError(description: refusal)))]
        }
        let names: [String]
        do { names = try fileSystem.contentsOfDirectory(folder) } catch {
            if error.code == ENOENT { return [] }
            return [DropInFile(path: folder, kind: kind, bytes: .failure(.init(description: "\(error)")))]
        }
        let wanted = names.filter { !Self.isIgnored($0, kind) }.sorted {
            Array($0.utf8).lexicographicallyPrecedes($1.utf8)
        }
        var found: [DropInFile] = []
        for (index, name) in wanted.enumerated() {
            let path = folder + "/" + name
            guard index < Self.maxFiles else {
                found.append(
                    DropInFile(
                        path: path, kind: kind,
                        bytes: .failure(.init(description: "more than \(Self.maxFiles) files in \(folder): not read"))))
                continue
            }
            let bytes = readFile(path, limit: min(Self.maxFileBytes, budget))
            if case .success(let content) = bytes { budget -= content.count }
            found.append(DropInFile(path: path, kind: kind, bytes: bytes))
        }
        return found
    }

    /// Whether a file named `name` is left out (see the type's comment).
    static func isIgnored(_ name: String, _ kind: DropInFile.Kind) -> Bool {
        if name.hasPrefix(".") || name.hasSuffix("~") || (name.hasPrefix("#") && name.hasSuffix("#")) { return true }
        let suffixes = [".swp", ".swo", ".swx", ".bak", ".orig", ".rej", ".tmp", ".rpmnew", ".rpmsave"]
        if suffixes.contains(where: name.hasSuffix) || name.contains(".dpkg-") || name.contains(".ucf-") { return true }
        return kind == .defaults && !name.hasSuffix(".json")
    }

    /// Why `folder` may not be trusted, or nil (also when it does not exist).
    private func folderRefusal(_ folder: String) -> String? {
        guard let status = try? system.status(folder, followingLinks: true) else { return nil }
        let rule = OwnershipRule(kind: nil, owners: [0, system.userID], forbiddenPermissions: 0o022)
        switch rule.violation(of: status) {
        case nil, .kind: return nil
        case .owner(let owner): return "the folder belongs to uid \(owner), neither root nor kvd's user: not read"
        case .permissions(let mode): return "others may write the folder (mode \(String(mode, radix: 8))): not read"
        }
    }

    /// The bytes of the regular file at `path` (following a link), at most `limit` of them.
    /// C: `open(O_NONBLOCK)`, `fstat`, `read`.
    private func readFile(_ path: String, limit: Int) -> Result<[UInt8], DropInReadError> {
        let descriptor: FileDescriptor
        do { descriptor = try fileSystem.open(path, [.nonBlocking], permissions: 0) } catch {
            return .failure(.init(description: "cannot open it: \(error)"))
        }
        defer { fileSystem.close(descriptor) }
        do {
            let status = try fileSystem.status(descriptor)
            guard status.kind == .regular else { return .failure(.init(description: "not a regular file")) }
            guard status.size <= limit else { return .failure(tooLarge(status.size, limit)) }
            var content: [UInt8] = []
            while true {
                let chunk = try fileSystem.read(descriptor, upTo: 1 << 20)
                if chunk.isEmpty { return .success(content) }
                content += chunk
                guard content.count <= limit else { return .failure(tooLarge(Int64(content.count), limit)) }
            }
        } catch {
            return .failure(.init(description: "cannot read it: \(error)"))
        }
    }

    private func tooLarge(_ size: Int64, _ limit: Int) -> DropInReadError {
        limit < Self.maxFileBytes
            ? DropInReadError(
                description: "the drop-in files together pass \(Self.maxTotalBytes >> 20) MiB: not read (\(size) bytes)"
            )
            : DropInReadError(
                description: "\(size) bytes, more than a drop-in file may hold (\(Self.maxFileBytes >> 20) MiB)")
    }
}
