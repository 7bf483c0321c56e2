import KVValues

/// `Permit`, `Revoke` and `Permits`: what users grant sandboxed apps, validated at the edge (an
/// app id by ``AppID``'s rule, a pattern by ``DomainPattern``'s; a bad one is `InvalidName`).
extension DefaultsRequest {
    /// The request of the call to `method` (one of the three) with parameters `p`.
    static func permits(_ method: String, _ p: Parameters) throws(RequestError) -> DefaultsRequest {
        switch method {
        case "io.kvd.Defaults.Permit":
            let permit = Permit(
                app: try p.app(), pattern: try p.pattern(), readOnly: try p.optionalBool("readOnly") ?? false)
            return .permit(permit)
        case "io.kvd.Defaults.Revoke":
            return .revoke(try p.app(), try p.pattern())
        default:
            guard let name = try p.optionalString("app") else { return .permits(nil) }
            return .permits(try Parameters.app(name))
        }
    }

    /// The call of `.permit`, `.revoke` or `.permits` (see ``call``).
    var permitsCall: VarlinkCall {
        let interface = DefaultsInterface.name
        switch self {
        case .permit(let permit):
            var members: [String: JSON] = ["app": .string(permit.app.name), "pattern": .string(permit.pattern.text)]
            if permit.readOnly { members["readOnly"] = .bool(true) }
            return VarlinkCall(method: "\(interface).Permit", parameters: members)
        case .revoke(let app, let pattern):
            return VarlinkCall(
                method: "\(interface).Revoke", parameters: ["app": .string(app.name), "pattern": .string(pattern.text)])
        case .permits(let app):
            return VarlinkCall(method: "\(interface).Permits", parameters: app.map { ["app": .string($0.name)] } ?? [:])
        default:
            preconditionFailure("\(self) is not a permits call")
        }
    }
}

extension Parameters {
    func app() throws(RequestError) -> AppID { try Self.app(try string("app")) }

    static func app(_ name: String) throws(RequestError) -> AppID {
        do { return try AppID(validating: name) } catch { throw RequestError(nameFailure(error)) }
    }

    func pattern() throws(RequestError) -> DomainPattern {
        let text = try string("pattern")
        do { return try DomainPattern(validating: text) } catch { throw RequestError(Self.nameFailure(error)) }
    }
}

extension VarlinkReply {
    /// The reply to `Permits`: `permits`, each `{"app", "pattern", "readOnly"}`, sorted.
    public static func permits(_ permits: [Permit]) -> VarlinkReply {
        VarlinkReply(parameters: ["permits": .array(permits.sorted().map(\.json))])
    }
}

extension Permit {
    /// The `AppPermit` varlink object: `{"app": ..., "pattern": ..., "readOnly": ...}`.
    public var json: JSON {
        .object(["app": .string(app.name), "pattern": .string(pattern.text), "readOnly": .bool(readOnly)])
    }

    /// The grants a `Permits` reply lists; nil when it is not one (a member missing or invalid).
    public static func list(decoding reply: VarlinkReply) -> [Permit]? {
        guard case .array(let items)? = reply.parameters["permits"] else { return nil }
        var permits: [Permit] = []
        for item in items {
            guard case .object(let members) = item, case .string(let app)? = members["app"],
                case .string(let pattern)? = members["pattern"], case .bool(let readOnly)? = members["readOnly"],
                let app = try? AppID(validating: app), let pattern = try? DomainPattern(validating: pattern)
            else { return nil }
            permits.append(Permit(app: app, pattern: pattern, readOnly: readOnly))
        }
        return permits
    }
}
