import Foundation
import Testing

@testable import KVValues

/// GSettingsPath, the Swift copy of the GSettings backend's key mapping, against the C one
/// (clib/gio/mapping.c, compiled here with a small driver) on the same paths: tricky ones and
/// many made at random from the bytes that matter (`/ . _ -`, digits, a two-byte character,
/// segments long enough to pass the domain's 255 bytes).
@Suite struct GSettingsPathTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..")
        .standardizedFileURL.path

    static let driver = """
        #include "giokvd.h"
        #include <stdio.h>
        #include <string.h>
        int main(void) {
            char line[4096];
            while (fgets(line, sizeof line, stdin)) {
                line[strcspn(line, "\\n")] = 0;
                char *domain = NULL, *key = NULL;
                if (giokvd_map_key(line, &domain, &key, NULL)) printf("%s\\t%s\\n", domain, key);
                else printf("-\\n");
                g_free(domain);
                g_free(key);
            }
            return 0;
        }
        """

    static let tricky = [
        "/org/gnome/desktop/interface/clock-format", "/a", "/", "", "x/y", "/org/gnome/", "/org//gnome/key",
        "/-org/x/key", "/org/-x/key", "/org.gnome/x_y/key", "/org/gn ome/k ey", "/org/é/clé", "//key", "/a/b/c/d/e/f",
        "/" + String(repeating: "a", count: 254) + "/key", "/" + String(repeating: "a", count: 255) + "/key",
        "/" + String(repeating: "a", count: 256) + "/key",
        "/" + String(repeating: "a", count: 200) + "/"
            + String(repeating: "b", count: 60) + "/key", "/0/1/2", "/_/k", "/a/b/",
    ]

    @Test func swiftMapsEveryPathAsTheBackendsC() throws {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["/", "/", "a", "b", "org", "-", "_", ".", "0", "é", " ", String(repeating: "x", count: 90)]
        var paths = Self.tricky
        for _ in 0..<2000 {
            let count = Int.random(in: 1...12, using: &generator)
            paths.append("/" + (0..<count).map { _ in pieces.randomElement(using: &generator)! }.joined())
        }
        let c = try cMapping(paths)
        #expect(c.count == paths.count)
        for (path, expected) in zip(paths, c) {
            let swift = GSettingsPath.map(path).map { "\($0.domain)\t\($0.key)" } ?? "-"
            #expect(swift == expected, "\(path)")
        }
    }

    /// Each path's domain and key by clib/gio/mapping.c ("-" where it maps none).
    func cMapping(_ paths: [String]) throws -> [String] {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("mapping-\(getpid())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Self.driver.write(toFile: folder + "/driver.c", atomically: true, encoding: .utf8)
        try paths.joined(separator: "\n").appending("\n").write(
            toFile: folder + "/in", atomically: true, encoding: .utf8)
        let script = """
            set -e
            cc -o "$1/driver" -I"$2/clib/gio" -I"$2/clib/libkvd/include" $(pkg-config --cflags glib-2.0) \
                "$1/driver.c" "$2/clib/gio/mapping.c" $(pkg-config --libs glib-2.0)
            "$1/driver" < "$1/in"
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script, "sh", folder, Self.root]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        return String(decoding: output, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            .dropLast().map(String.init)
    }
}
