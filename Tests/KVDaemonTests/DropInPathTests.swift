import Foundation
import Glibc
import KVSystem
import Testing

@testable import KVDaemon

/// ``DropInPath``'s walk on real links: every folder that decides what a path names.
struct DropInPathWalkTests {
    let root: String

    init() {
        var template = Array("/tmp/kvd-walk-XXXXXX".utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    func walk(_ path: String) throws -> DropInPath.Walk {
        try DropInPath(system: LinuxSystem()).walk(path)
    }

    @Test func theFoldersOnTheWayToEachLinksTargetDecide() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        for name in ["a", "a/b", "c", "d"] { mkdir(root + "/" + name, 0o755) }
        symlink("../../c", root + "/a/b/up")  // relative, from a/b
        symlink(root + "/d/file", root + "/c/hop")  // absolute
        let walk = try walk(root + "/a/b/up/hop")
        #expect(walk.resolved == root + "/d/file")
        for folder in ["/", root, root + "/a", root + "/a/b", root + "/c", root + "/d"] {
            #expect(walk.folders.contains(folder), "\(folder) decides: \(walk.folders)")
        }
        #expect(Set(walk.folders).count == walk.folders.count)
    }

    @Test func aLoopOfLinksEndsTheWalk() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        symlink(root + "/y", root + "/x")
        symlink(root + "/x", root + "/y")
        #expect(throws: DropInPath.Failure.tooManyLinks) { try walk(root + "/x/file") }
    }

    @Test func parents() {
        #expect(DropInPath.parent(of: "/") == "/")
        #expect(DropInPath.parent(of: "/a") == "/")
        #expect(DropInPath.parent(of: "/a/b") == "/a")
        #expect(DropInPath.parent(of: "./a") == ".")
        #expect(DropInPath.parent(of: ".") == "./..")
        #expect(DropInPath.parent(of: "./..") == "./../..")
    }
}
