import Foundation

/// Seed 002's nine habits, byte for byte as the post shows the JSON its v0.1 app wrote.
enum Fixture {
    static let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/seed-002-v0.1-habits.json").path

    static var seed002: Data { FileManager.default.contents(atPath: path)! }
}
