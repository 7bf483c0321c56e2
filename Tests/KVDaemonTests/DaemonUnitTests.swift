import Glibc
import KVProtocol
import KVStorage
import KVSystem
import KVValues
import Testing

@testable import KVDaemon

@Suite struct OptionsTests {
    private func parse(_ arguments: [String], _ environment: [String: String] = ["HOME": "/home/u"]) throws(UsageError)
        -> DaemonOptions.Parsed
    {
        try DaemonOptions.parse(arguments, environment: environment)
    }

    @Test func defaultsFollowTheContract() throws {
        guard case .run(let options) = try parse([], ["XDG_RUNTIME_DIR": "/run/user/7", "HOME": "/home/u"]) else {
            Issue.record("expected run")
            return
        }
        #expect(options.socketPath == "/run/user/7/kvd.sock")
        #expect(options.stateDirectory == "/home/u/.config/kvd")
        #expect(options.idleExit == .seconds(30))
    }

    @Test func flagsOverrideTheEnvironment() throws {
        let parsed = try parse(
            ["--socket", "/s", "--state-dir=/d", "--idle-exit", "0"], ["KVD_SOCKET": "/x", "KVD_STATE_DIR": "/y"])
        #expect(
            parsed
                == .run(
                    DaemonOptions(
                        socketPath: "/s", stateDirectory: "/d", idleExit: nil, verbose: false,
                        role: .user(systemSocket: "/run/kvd/system.sock"))))
        #expect(
            try parse(["--idle-exit", "1.5"])
                == .run(
                    DaemonOptions(
                        socketPath: Paths.socket(explicit: nil, environment: [:]),
                        stateDirectory: "/home/u/.config/kvd", idleExit: .milliseconds(1500), verbose: false,
                        role: .user(systemSocket: "/run/kvd/system.sock"))))
    }

    @Test func badUsageSaysWhatIsWrong() {
        #expect(throws: UsageError("unknown argument \"--bogus\"")) { try parse(["--bogus"]) }
        #expect(throws: UsageError("--socket needs a value")) { try parse(["--socket"]) }
        #expect(throws: UsageError.self) { try parse(["--idle-exit", "soon"]) }
        #expect(throws: UsageError.self) { try parse(["--idle-exit", "-1"]) }
    }

    @Test func helpAndVersion() throws {
        #expect(try parse(["--help"]) == .help)
        #expect(try parse(["--version"]) == .version)
        #expect(DaemonOptions.usage.contains("--idle-exit"))
    }
}

@Suite struct RequestHandlerTests {
    final class TempStore {
        let path: String
        let store: Store
        init() throws {
            var template = Array("/tmp/kvd-handler-XXXXXX".utf8CString)
            path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
            store = try Store(directory: path)
        }
        deinit {
            store.close()
            // Every file (domain and history files of any name, a saved system layer).
            if let folder = opendir(path) {
                while let entry = readdir(folder) {
                    let name = withUnsafeBytes(of: entry.pointee.d_name) {
                        String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
                    }
                    if name != ".", name != ".." { unlink(path + "/" + name) }
                }
                closedir(folder)
            }
            rmdir(path)
        }
    }

    private func request(_ method: String, _ parameters: [String: JSON]) throws -> DefaultsRequest {
        try DefaultsRequest(call: VarlinkCall(method: "io.kvd.Defaults." + method, parameters: parameters))
    }

    /// The reply of `outcome`; fails the test when `call` was not answered at once.
    private func answer(_ outcome: RequestHandler.Outcome, _ call: String) throws -> VarlinkReply {
        guard case .reply(let reply) = outcome else {
            throw TestFailure("\(call) must be answered at once, not become \(outcome)")
        }
        return reply
    }

    @Test func readsAreAnsweredAndWritesBecomeMutations() throws {
        let temp = try TempStore()
        let handler = RequestHandler(store: temp.store)
        let domain = try Domain(validating: "d")
        let key = try Key(validating: "k")
        guard
            case .commit(domain, .set(key, .integer(5), ifRevision: nil)) = handler.handle(
                try request("Set", ["domain": .string("d"), "key": .string("k"), "value": .integer(5)]))
        else {
            Issue.record("Set must become a commit")
            return
        }
        let commit = try temp.store.commit(domain, .set(key, .integer(5), ifRevision: nil))
        let reply = try answer(
            handler.handle(try request("Get", ["domain": .string("d"), "key": .string("k")])), "Get")
        #expect(
            reply.parameters == [
                "value": .integer(5), "revision": .integer(commit.revision), "source": .string("user"),
            ])
        let missing = try answer(
            handler.handle(try request("Get", ["domain": .string("d"), "key": .string("nope")])), "Get")
        #expect(missing.error == "io.kvd.Defaults.NotFound" && missing.parameters["key"] == .string("nope"))
        let list = try answer(handler.handle(try request("List", ["domain": .string("other")])), "List")
        #expect(list.error == "io.kvd.Defaults.NotFound")
    }

    @Test func storageErrorsMapToContractErrors() throws {
        let domain = try Domain(validating: "d")
        #expect(
            RequestHandler.reply(to: .revisionMismatch(current: 7))
                == .failure("io.kvd.Defaults.RevisionMismatch", ["revision": .integer(7)]))
        #expect(RequestHandler.reply(to: .failure("disk full")).error == "io.kvd.Defaults.StorageFailure")
        #expect(
            RequestHandler.reply(to: .notFound(domain, nil))
                == .failure("io.kvd.Defaults.NotFound", ["domain": .string("d")]))
    }

    @Test func interfaceDescriptionsAreServed() throws {
        let temp = try TempStore()
        let handler = RequestHandler(store: temp.store)
        let reply = try answer(handler.handle(.getInterfaceDescription("io.kvd.Defaults")), "GetInterfaceDescription")
        #expect(reply.parameters["description"] == .string(DefaultsInterface.description))
        let unknown = try answer(handler.handle(.getInterfaceDescription("com.nope")), "GetInterfaceDescription")
        #expect(unknown.error == "org.varlink.service.InterfaceNotFound")
    }
}

/// An empty path is a usage error, not the default path.
@Suite struct EmptyPathOptionUnitTests {
    @Test(arguments: [
        (["--socket", ""], "--socket needs a PATH"), (["--socket="], "--socket needs a PATH"),
        (["--state-dir", ""], "--state-dir needs a DIR"), (["--state-dir="], "--state-dir needs a DIR"),
    ])
    func anEmptyPathIsAUsageError(arguments: [String], expected: String) {
        let error = #expect(throws: UsageError.self) {
            try DaemonOptions.parse(arguments, environment: ["HOME": "/home/u"])
        }
        #expect(
            error?.description.hasPrefix(expected) == true && error?.description.contains("empty") == true,
            "\(String(describing: error))")
    }

    @Test func emptyVariablesStillCountAsUnset() throws {
        let parsed = try DaemonOptions.parse(
            [],
            environment: ["HOME": "/home/u", "KVD_SOCKET": "", "KVD_STATE_DIR": "", "XDG_RUNTIME_DIR": "/run/user/7"])
        #expect(
            parsed
                == .run(
                    DaemonOptions(
                        socketPath: "/run/user/7/kvd.sock", stateDirectory: "/home/u/.config/kvd",
                        idleExit: .seconds(30), verbose: false,
                        role: .user(systemSocket: "/run/kvd/system.sock"))))
    }
}
