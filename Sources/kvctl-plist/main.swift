import Foundation
import KVValues

/// kvctl-plist: converts between property lists and the contract's typed JSON for
/// `kvctl import` and `kvctl export --format xml|binary`.
///
/// A separate program because property lists need Foundation's `PropertyListSerialization`
/// (FoundationEssentials' `PropertyListDecoder` cannot tell `<integer>2</integer>` from
/// `<real>2</real>`), and linking full Foundation into kvctl would triple its size and slow every
/// start. kvctl runs it only for property lists.
///
///     kvctl-plist read            plist (XML or binary) on stdin -> typed JSON object on stdout
///     kvctl-plist write xml|binary  typed JSON object on stdin -> plist on stdout
///
/// Exit status 0, or 1 with one line on stderr naming the key that cannot be converted (nothing
/// is written to stdout then). Blocks until stdin ends.
enum PlistTool {
    struct Refusal: Error {
        var message: String
        init(_ message: String) { self.message = message }
    }

    static func main(_ arguments: [String]) -> Int32 {
        do {
            let input = FileHandle.standardInput.readDataToEndOfFile()
            let output: Data
            switch arguments {
            case ["read"]: output = Data(try typedJSON(fromPlist: input).utf8)
            case ["write", "xml"]: output = try plist(fromTypedJSON: input, format: .xml)
            case ["write", "binary"]: output = try plist(fromTypedJSON: input, format: .binary)
            default: throw Refusal("usage: kvctl-plist read | kvctl-plist write xml|binary (kvctl runs it for plist import and export)")
            }
            FileHandle.standardOutput.write(output)
            return 0
        } catch let refusal as Refusal {
            FileHandle.standardError.write(Data((refusal.message + "\n").utf8))
        } catch {
            FileHandle.standardError.write(Data("\(error)\n".utf8))
        }
        return 1
    }

    /// The dictionary at the top of a property list as one typed JSON object.
    static func typedJSON(fromPlist data: Data) throws -> String {
        let object: Any
        do {
            object = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
        } catch {
            let reason = (error as NSError).userInfo["NSDebugDescription"] as? String ?? "\(error)"
            throw Refusal("not a property list kvd can read: \(reason)")
        }
        guard let dictionary = object as? [String: Any] else {
            throw Refusal("the property list holds \(kind(object)), but import needs a dictionary of key: value")
        }
        let value = try value(dictionary, at: [])
        return JSONWriter(sortKeys: true).string(value.typedJSON)
    }

    /// A property-list object as a kvd value; `path` names where it sits (first the key).
    static func value(_ object: Any, at path: [String]) throws -> Value {
        // Before any cast: an NSNumber 1 would cast to Bool, and a Bool to NSNumber.
        if type(of: object) == Bool.self, let bool = object as? Bool { return .bool(bool) }
        switch object {
        case let number as NSNumber: return try Self.number(number, at: path)
        case let string as String: return .string(string)
        case let date as Date: return .date(date)
        case let data as Data: return .data(data)
        case let array as [Any]:
            return .array(try array.enumerated().map { try value($0.element, at: path + ["[\($0.offset)]"]) })
        case let dictionary as [String: Any]:
            var members: [String: Value] = [:]
            for (key, object) in dictionary.sorted(by: { $0.key < $1.key }) { members[key] = try value(object, at: path + [key]) }
            return .dictionary(members)
        default:
            throw Refusal("\(place(path)) is \(kind(object)), which kvd cannot hold; nothing imported")
        }
    }

    /// An integer (signed 64-bit), a finite real or a bool, kept apart by the number's C type.
    static func number(_ number: NSNumber, at path: [String]) throws -> Value {
        switch String(cString: number.objCType) {
        case "c", "B": return .bool(number.boolValue)  // a CFBoolean that arrives as an NSNumber
        case "d", "f":
            guard number.doubleValue.isFinite else { throw Refusal("\(place(path)) is the real \(number), which kvd cannot hold (reals are finite); nothing imported") }
            return .real(number.doubleValue)
        case "Q", "L", "I", "S", "C":
            guard number.uint64Value <= UInt64(Int64.max) else {
                throw Refusal("\(place(path)) is the integer \(number), beyond kvd's signed 64-bit integers; nothing imported")
            }
            return .integer(Int64(number.uint64Value))
        default:
            return .integer(number.int64Value)
        }
    }

    /// `the value of "key"`, or of `"key" [2] "inner"`.
    static func place(_ path: [String]) -> String {
        guard let key = path.first else { return "the property list" }
        let inside = path.dropFirst().map { $0.hasPrefix("[") ? $0 : "[\"\($0)\"]" }.joined()
        return "the value of \"\(key)\"\(inside.isEmpty ? "" : " at \(inside)")"
    }

    static func kind(_ object: Any) -> String {
        switch object {
        case is [Any]: "an array"
        case is String: "a string"
        case is NSNumber, is Bool: "a number"
        default:
            String(describing: type(of: object)).contains("UID") ? "a UID (from a keyed archive)" : "a \(type(of: object))"
        }
    }

    /// A typed JSON object (what `kvctl export` writes) as a property list in `format`.
    static func plist(fromTypedJSON data: Data, format: PropertyListSerialization.PropertyListFormat) throws -> Data {
        let value: Value
        do {
            value = try Value(typedJSONText: Array(data), limits: JSONLimits(framingDepth: 2, maxBytes: Int.max))
        } catch {
            throw Refusal("kvctl-plist: the input is not typed JSON: \(error)")
        }
        guard case .dictionary = value else { throw Refusal("kvctl-plist: the input is not a typed JSON object") }
        return try PropertyListSerialization.data(fromPropertyList: try object(value, at: [], format: format), format: format, options: 0)
    }

    /// A kvd value as a property-list object. XML property lists keep dates to the second only,
    /// so a date with a fraction is refused for XML rather than silently rounded.
    static func object(_ value: Value, at path: [String], format: PropertyListSerialization.PropertyListFormat) throws -> Any {
        switch value {
        case .string(let string): return string
        case .integer(let integer): return NSNumber(value: integer)
        case .real(let real): return NSNumber(value: real)
        case .bool(let bool): return bool
        case .date(let date):
            if format == .xml, date.timeIntervalSinceReferenceDate.rounded() != date.timeIntervalSinceReferenceDate {
                throw Refusal(
                    "\(place(path)) is a date with a fraction of a second (\(RFC3339.format(date))), which an XML property list cannot keep (it holds whole seconds): export with --format binary"
                )
            }
            return date
        case .data(let data): return data
        case .array(let elements):
            return try elements.enumerated().map { try object($0.element, at: path + ["[\($0.offset)]"], format: format) }
        case .dictionary(let members):
            var objects: [String: Any] = [:]
            for (key, member) in members.sorted(by: { $0.key < $1.key }) { objects[key] = try object(member, at: path + [key], format: format) }
            return objects
        }
    }
}

exit(PlistTool.main(Array(CommandLine.arguments.dropFirst())))
