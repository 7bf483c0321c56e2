import KVTestSupport
import KVValues
import Testing

@testable import KVDaemon

/// kvd's option parser over random command lines. Whatever it is given, it returns options within
/// their documented ranges or a one-line ``UsageError``; it never traps (`--idle-exit 1e16` must
/// not die with SIGILL converting the milliseconds to `Int64`).
@Suite struct OptionParserPropertyTests {
    static let numericFlags = [
        "--idle-exit", "--max-client-memory", "--history-keep", "--history-days", "--max-connections-per-uid",
        "--etcd-progress-interval",
    ]
    static let otherFlags = [
        "--system", "--verbose", "--no-system-layer", "--socket", "--state-dir", "--admin-group", "--etcd",
        "--fleet-domain", "--config-dir",
    ]
    /// Numbers at and around every limit, huge, tiny, negative, not finite, not numbers.
    static let numbers = [
        "0", "1", "-1", "0.0001", "1e-300", "0.05", "0.1", "3600", "3601", "1e16", "-1e16", "1e308", "1e309", "inf",
        "-inf", "nan", "NaN", "9223372036854775807",
        "9223372036854775808", "18446744073709551616", "1000000", "1000001", "1048576", "1048577", "1000000000",
        "1000000001", "1M", "1023K",
        "1024G", "1025G", "8796093022207G", "9999999999999999999G", "256m", "1g", "", " ", "x", "0x10", "1_000", "+5",
        "٣",
    ]

    static func randomCommandLine(_ random: inout SeededGenerator) -> [String] {
        var arguments: [String] = []
        for _ in 0..<(1 + random.below(5)) {
            if random.below(3) > 0 {
                let flag = numericFlags[random.below(numericFlags.count)]
                let value = numbers[random.below(numbers.count)]
                arguments += random.below(4) == 0 ? ["\(flag)=\(value)"] : [flag, value]
            } else {
                let flag = otherFlags[random.below(otherFlags.count)]
                arguments.append(flag)
                if !["--system", "--verbose", "--no-system-layer"].contains(flag) {
                    arguments.append(
                        ["/tmp/x", "", "http://127.0.0.1:2379", "com.corp.*", "kvd-admin"][random.below(5)])
                }
            }
        }
        return arguments
    }

    @Test func everyCommandLineGivesOptionsInRangeOrAOneLineUsageError() {
        var random = SeededGenerator(seed: 23)
        let environment = ["HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000"]
        for _ in 0..<20_000 {
            let arguments = Self.randomCommandLine(&random)
            do {
                guard case .run(let options) = try DaemonOptions.parse(arguments, environment: environment) else {
                    continue
                }
                if let idle = options.idleExit {
                    #expect(idle > .zero && idle <= .seconds(1_000_000_000), "\(arguments)")
                }
                #expect(options.maxClientMemory >= 1 << 20 && options.maxClientMemory <= 1 << 40, "\(arguments)")
                #expect(
                    (0...1_000_000).contains(options.historyKeep) && (0...1_000_000).contains(options.historyDays),
                    "\(arguments)")
                if case .system(let policy) = options.role {
                    #expect((1...(1 << 20)).contains(policy.maxConnectionsPerUID), "\(arguments)")
                    #expect(
                        policy.etcdProgressInterval >= .milliseconds(100)
                            && policy.etcdProgressInterval <= .seconds(3600), "\(arguments)")
                }
            } catch {
                #expect(
                    !error.description.isEmpty && !error.description.contains("\n"),
                    "\(arguments): \(error.description)")
            }
        }
    }

    @Test func outOfRangeNumbersAreUsageErrorsNamingTheRange() {
        let environment = ["HOME": "/home/u"]
        let cases: [([String], String)] = [
            (["--idle-exit", "1e16"], "from 0 (never) to 1000000000"), (["--idle-exit", "inf"], "--idle-exit"),
            (["--idle-exit", "-1"], "--idle-exit"), (["--max-client-memory", "2048G"], "from 1M to 1024G"),
            (["--history-keep", "1000001"], "0 to 1000000"),
            (["--system", "--max-connections-per-uid", "0"], "1 to 1048576"),
            (["--system", "--etcd-progress-interval", "nan"], "0.1 to 3600"),
        ]
        for (arguments, message) in cases {
            #expect(throws: UsageError.self, "\(arguments)") {
                try DaemonOptions.parse(arguments, environment: environment)
            }
            do {
                _ = try DaemonOptions.parse(arguments, environment: environment)
            } catch {
                #expect(error.description.contains(message), "\(arguments): \(error.description)")
            }
        }
        guard
            case .run(let longest)? = try? DaemonOptions.parse(["--idle-exit", "1000000000"], environment: environment)
        else {
            Issue.record("the longest --idle-exit was refused")
            return
        }
        #expect(longest.idleExit == .seconds(1_000_000_000))
    }
}
