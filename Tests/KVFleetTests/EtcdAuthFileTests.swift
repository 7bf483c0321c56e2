import Foundation
import Glibc
import KVFleet
import Testing

/// The etcd password file read through KVSystem's seam: what is not a regular file of its own, or
/// too large, is refused with a message saying why.
@Suite struct EtcdAuthFileTests {
    func refusal(_ path: String) -> String? { etcdAuthFileRefusal(path) }

    @Test func aLinkAFolderAndAnOversizedFileAreRefused() throws {
        let folder = NSTemporaryDirectory() + "kvd-etcd-auth-\(UInt64.random(in: 0...UInt64.max))"
        #expect(mkdir(folder, 0o700) == 0)
        defer {
            for name in ["link", "big", "good"] { unlink(folder + "/" + name) }
            rmdir(folder + "/folder")
            rmdir(folder)
        }
        try "kvd:secret".write(toFile: folder + "/good", atomically: false, encoding: .utf8)
        chmod(folder + "/good", 0o600)
        #expect(symlink(folder + "/good", folder + "/link") == 0)
        #expect(refusal(folder + "/link")?.contains("cannot open the etcd auth file \(folder)/link: ") == true)
        #expect(mkdir(folder + "/folder", 0o700) == 0)
        #expect(refusal(folder + "/folder") == "the etcd auth file \(folder)/folder is not a regular file")
        try String(repeating: "k", count: 70_000).write(toFile: folder + "/big", atomically: false, encoding: .utf8)
        chmod(folder + "/big", 0o600)
        #expect(refusal(folder + "/big")?.contains("is over 64 KiB") == true)
        #expect(refusal(folder + "/good") == nil)
    }
}

/// Why the etcd password file at `path` is refused (`badConfiguration`'s message), or nil when
/// it is read.
func etcdAuthFileRefusal(_ path: String) -> String? {
    do throws(EtcdError) {
        _ = try EtcdCredentials.read(fromFile: path)
        return nil
    } catch {
        guard case .badConfiguration(let message) = error else { return "unexpected: \(error)" }
        return message
    }
}
