import Foundation
import KVConnection
import KVProtocol
import KVSystem
import KVValues
import Testing

/// The contract cases of `Tests/Contract/` (its README says the format) on the Swift side;
/// libkvd runs the same files (`clib/libkvd/tests/contract_cases.c`, `make contract-c`), so the
/// two clients' socket rules, names, typed JSON and error replies stay in step. A case marked `known_difference` with side "swift" must give what the marker says here.
@Suite struct ContractCaseTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Contract")

    static func cases(_ file: String, _ list: String? = nil) throws -> [JSON] {
        let data = try Data(contentsOf: folder.appendingPathComponent(file))
        var root = try JSONParser.parse(Array(data))
        if let list, let inner = root[list] { root = inner }
        guard case .array(let cases)? = root["cases"] else {
            Issue.record("\(file): no cases")
            return []
        }
        return cases
    }

    static func text(_ json: JSON, _ member: String) -> String? {
        if case .string(let value)? = json[member] { return value }
        return nil
    }

    static func number(_ json: JSON, _ member: String) -> Int64? {
        if case .integer(let value)? = json[member] { return value }
        return nil
    }

    /// What this side must give for `member`: the case's, or what a Swift-side known difference says.
    static func expected(_ json: JSON, _ member: String) -> String? {
        if let difference = json["known_difference"], text(difference, "side") == "swift",
            let mine = text(difference, member)
        {
            return mine
        }
        return text(json, member)
    }

    /// `fill` repeated up to `length` bytes after `prefix` (a fill of several bytes is not cut).
    static func filled(prefix: String, fill: String, length: Int) -> String {
        var out = prefix
        while !fill.isEmpty, out.utf8.count + fill.utf8.count <= length { out += fill }
        return out
    }

    @Test func socketPaths() throws {
        let uid = getuid()
        for item in try Self.cases("socket-path.json") {
            var environment: [String: String] = [:]
            if case .object(let members)? = item["environment"] {
                for (name, value) in members { if case .string(let text) = value { environment[name] = text } }
            }
            let want = (Self.expected(item, "expect") ?? "").replacingOccurrences(of: "{uid}", with: "\(uid)")
            let got = Paths.socket(explicit: Self.text(item, "explicit"), environment: environment, uid: uid)
            #expect(got == want, "\(Self.text(item, "name") ?? "?")")
        }
        for item in try Self.cases("socket-path.json", "addresses") {
            let path = Self.filled(
                prefix: Self.text(item, "prefix") ?? "", fill: Self.text(item, "fill") ?? "",
                length: Int(Self.number(item, "length") ?? 0))
            let fits = item["fits"] == .bool(true)
            #expect((UnixSocketAddress(path) != nil) == fits, "\(Self.text(item, "name") ?? "?")")
        }
    }

    @Test func names() throws {
        for item in try Self.cases("names.json") {
            let name: String?
            if let hex = Self.text(item, "hex") {
                let bytes = stride(from: 0, to: hex.count, by: 2).map { offset -> UInt8 in
                    let start = hex.index(hex.startIndex, offsetBy: offset)
                    return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16) ?? 0
                }
                name = String(validating: bytes, as: UTF8.self)  // not UTF-8: no Swift String, so invalid
            } else if let fill = Self.text(item, "fill") {
                name = Self.filled(prefix: "", fill: fill, length: Int(Self.number(item, "length") ?? 0))
            } else {
                name = Self.text(item, "name")
            }
            var reason: String?
            if let name {
                do {
                    if Self.text(item, "kind") == "domain" {
                        _ = try Domain(validating: name)
                    } else {
                        _ = try Key(validating: name)
                    }
                } catch { reason = error.reason }
            } else {
                reason = "not UTF-8"
            }
            let label =
                "\(Self.text(item, "kind") ?? "?") \(String((name ?? "(bytes)").prefix(60))) (\(name?.utf8.count ?? 0) bytes)"
            #expect(
                (reason == nil ? "valid" : "invalid") == Self.expected(item, "expect"), "\(label): \(reason ?? "valid")"
            )
            if let words = Self.text(item, "reason"), let reason {
                #expect(reason.contains(words), "\(label): the reason \"\(reason)\" does not say \"\(words)\"")
            }
        }
    }

    @Test func typedJSON() throws {
        for item in try Self.cases("typed-json.json") {
            let name = Self.text(item, "name") ?? "?"
            var text = Self.text(item, "json") ?? ""
            if let bytes = Self.number(item, "string_bytes") {
                text = "\"" + String(repeating: "a", count: Int(bytes)) + "\""
            }
            if let nest = Self.number(item, "nest") {
                let open = Self.text(item, "open") ?? ""
                let close = Self.text(item, "close") ?? ""
                text =
                    String(repeating: open, count: Int(nest)) + (Self.text(item, "inner") ?? "")
                    + String(repeating: close, count: Int(nest))
            }
            let value = try? Value(typedJSONText: Array(text.utf8))
            let want = Self.expected(item, "expect")
            #expect((value == nil ? "invalid" : "ok") == want, "\(name)")
            if let value, want == "ok", let written = Self.expected(item, "written") {
                #expect(JSONWriter(sortKeys: true).string(value.typedJSON) == written, "\(name) (written)")
            }
        }
    }

    /// The client's error as the cases name it, and the number it carries.
    static func kind(_ error: ClientError) -> (String, Int64?) {
        switch error {
        case .notFound: ("notFound", nil)
        case .invalidName: ("invalidName", nil)
        case .invalidValue: ("invalidValue", nil)
        case .revisionMismatch(let current): ("revisionMismatch", current)
        case .storageFailure: ("storageFailure", nil)
        case .tooLarge(let limit): ("tooLarge", limit)
        case .unreadableValue: ("unreadableValue", nil)
        case .keyLocked: ("keyLocked", nil)
        case .permissionDenied: ("permissionDenied", nil)
        case .outcomeUnknown: ("outcomeUnknown", nil)
        case .historyTruncated: ("historyTruncated", nil)
        case .methodNotFound: ("methodNotFound", nil)
        case .remote: ("remote", nil)
        default: ("\(error)", nil)
        }
    }

    @Test func errorReplies() throws {
        for item in try Self.cases("error-replies.json") {
            let name = Self.text(item, "error") ?? ""
            var parameters: [String: JSON] = [:]
            if case .object(let members)? = item["parameters"] { parameters = members }
            let (kind, detail) = Self.kind(ClientError(errorReply: VarlinkReply.failure(name, parameters)))
            #expect(kind == Self.expected(item, "kind"), "\(name) \(parameters)")
            #expect(detail == Self.number(item, "detail"), "\(name) \(parameters): detail")
        }
    }
}
