import KVValues

extension DefaultsRequest {
    /// The varlink call that carries this request (the client side of ``init(call:)``).
    public var call: VarlinkCall {
        func method(_ name: String, _ parameters: [String: JSON?], more: Bool = false) -> VarlinkCall {
            VarlinkCall(method: name, parameters: parameters.compactMapValues { $0 }, more: more)
        }
        let interface = DefaultsInterface.name
        switch self {
        case .get(let domain, let key):
            return method("\(interface).Get", ["domain": .string(domain.name), "key": .string(key.name)])
        case .set(let domain, let key, let value, let ifRevision):
            // In this order, so that the daemon's fast path (``fastSet(_:)``) takes it.
            var members: JSONMembers = [
                "domain": .string(domain.name), "key": .string(key.name), "value": value.typedJSON,
            ]
            if let ifRevision { members.pairs.append((name: "ifRevision", value: .integer(ifRevision))) }
            return VarlinkCall(method: "\(interface).Set", parameterMembers: members)
        case .delete(let domain, let key):
            return method("\(interface).Delete", ["domain": .string(domain.name), "key": key.map { .string($0.name) }])
        case .apply(let domain, let changes, let ifRevision):
            return method(
                "\(interface).Apply",
                [
                    "domain": .string(domain.name), "changes": .array(changes.map(\.json)),
                    "ifRevision": ifRevision.map(JSON.integer),
                ])
        case .list(let domain):
            return method("\(interface).List", ["domain": .string(domain.name)])
        case .listAll(let domain):
            return method("\(interface).ListAll", ["domain": .string(domain.name)])
        case .domains:
            return method("\(interface).Domains", [:])
        case .watch(let domain, let key):
            return method(
                "\(interface).Watch", ["domain": .string(domain.name), "key": key.map { .string($0.name) }], more: true)
        case .snapshot(let domain):
            return method("\(interface).Snapshot", ["domain": .string(domain.name)])
        case .watchAll(let prefix, let current):
            return method(
                "\(interface).WatchAll",
                ["prefix": prefix.map { .string($0.name) }, "current": current ? .bool(true) : nil],
                more: true)
        case .getInfo:
            return method("\(ServiceInterface.name).GetInfo", [:])
        case .getInterfaceDescription(let name):
            return method("\(ServiceInterface.name).GetInterfaceDescription", ["interface": .string(name)])
        case .lock(let domain, let key):
            return method("\(SystemInterface.name).Lock", ["domain": .string(domain.name), "key": .string(key.name)])
        case .unlock(let domain, let key):
            return method("\(SystemInterface.name).Unlock", ["domain": .string(domain.name), "key": .string(key.name)])
        case .locks(let domain):
            return method("\(SystemInterface.name).Locks", ["domain": domain.map { .string($0.name) }])
        case .mirror(let profile):
            return method(
                "\(SystemInterface.name).Mirror", profile.map { ["dconfProfile": .string($0)] } ?? [:], more: true)
        case .status:
            return method("\(SystemInterface.name).Status", [:])
        case .reload:
            return method("\(SystemInterface.name).Reload", [:])
        case .systemSource(let domain, let key):
            return method("\(SystemInterface.name).Source", ["domain": .string(domain.name), "key": .string(key.name)])
        case .backup:
            return method("\(interface).Backup", [:], more: true)
        case .blame(let domain, let key):
            return method("\(interface).Blame", ["domain": .string(domain.name), "key": key.map { .string($0.name) }])
        case .forgetHistory(let domain, let key):
            return method(
                "\(interface).ForgetHistory", ["domain": .string(domain.name), "key": key.map { .string($0.name) }])
        case .keepHistory(let domain, let key, let keep):
            return method(
                "\(interface).KeepHistory",
                ["domain": .string(domain.name), "key": key.map { .string($0.name) }, "keep": .bool(keep)])
        case .permit, .revoke, .permits:
            return permitsCall
        case .history(let domain, let key, let limit, let atRevision, let before):
            return method(
                "\(interface).History",
                [
                    "domain": .string(domain.name), "key": key.map { .string($0.name) },
                    "limit": limit.map(JSON.integer),
                    "atRevision": atRevision.map(JSON.integer), "beforeRevision": before.map(JSON.integer),
                ])
        }
    }
}
