/// A reply encoded once and sent to several watchers; charged to ``ClientMemory`` while at
/// least one of them holds it. Loop thread only.
final class SharedReply {
    /// Smaller replies are copied into each watcher's output instead of shared.
    static let minimumShared = 16 << 10
    let bytes: [UInt8]
    @exclusivity(unchecked) private var holders = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    func hold(_ memory: ClientMemory) {
        if holders == 0 { memory.add(bytes.count) }
        holders += 1
    }

    func release(_ memory: ClientMemory) {
        holders -= 1
        if holders == 0 { memory.add(-bytes.count) }
    }
}

/// The bytes all clients hold in kvd, against a budget (``Server/Limits/maxClientMemory``):
/// each connection's input buffer and own unsent replies as of its last
/// ``ClientConnection/recharge()``, and each ``SharedReply`` once. Loop thread only.
final class ClientMemory {
    let budget: Int
    @exclusivity(unchecked) private(set) var total = 0

    init(budget: Int) {
        self.budget = budget
    }

    var isOverBudget: Bool { total > budget }

    func add(_ bytes: Int) {
        total += bytes
    }

    /// "1.5 MiB", "300 B": sizes for log lines.
    static func text(_ bytes: Int) -> String {
        if bytes < 1024 { return "\(bytes) B" }
        let units = ["KiB", "MiB", "GiB"]
        var value = Double(bytes) / 1024
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        let tenths = (value * 10).rounded() / 10
        return "\(tenths) \(units[unit])"
    }
}
