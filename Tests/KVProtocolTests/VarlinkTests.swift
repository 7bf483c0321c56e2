import KVTestSupport
import KVValues
import Testing

@testable import KVProtocol

@Suite struct FramingTests {
    private func feed(_ framer: inout MessageFramer, _ text: String) {
        Array(text.utf8).withUnsafeBytes { framer.append($0) }
    }

    @Test func splitsPipelinedMessagesAndKeepsPartialOnes() throws {
        var framer = MessageFramer()
        feed(&framer, "{\"a\":1}\0{\"b\":2}\0{\"c\"")
        #expect(try framer.next().map { Array($0) } == Array("{\"a\":1}".utf8))
        #expect(try framer.next().map { Array($0) } == Array("{\"b\":2}".utf8))
        #expect(try framer.next() == nil)
        feed(&framer, ":3}\0")
        #expect(try framer.next().map { Array($0) } == Array("{\"c\":3}".utf8))
        #expect(framer.pendingByteCount == 0)
    }

    @Test func refusesAMessageOverTheLimit() throws {
        var framer = MessageFramer(limit: 10)
        feed(&framer, String(repeating: "x", count: 11))
        #expect(throws: VarlinkError.tooLarge(limit: 10)) { try framer.next() }
    }

    /// The limit counts the message without its NUL: exactly the limit is a message, one byte
    /// more is `tooLarge` whether or not its NUL came in the same read.
    @Test func aMessageOfExactlyTheLimitIsTakenAndOneByteMoreIsRefused() throws {
        var exact = MessageFramer(limit: 10)
        feed(&exact, String(repeating: "x", count: 10))
        #expect(try exact.next() == nil)
        feed(&exact, "\0")
        #expect(try exact.next().map { $0.count } == 10)
        for text in [
            String(repeating: "x", count: 11), String(repeating: "x", count: 11) + "\0",
            "{}\0" + String(repeating: "x", count: 11) + "\0",
        ] {
            var over = MessageFramer(limit: 10)
            feed(&over, text)
            if text.hasPrefix("{}") { #expect(try over.next().map { Array($0) } == Array("{}".utf8)) }
            #expect(throws: VarlinkError.tooLarge(limit: 10), "\(text.debugDescription)") { try over.next() }
        }
    }

    /// A client that keeps calls queued (the daemon takes one, waits for its commit, reads one
    /// more chunk, ...) never lets the buffer empty or run out of complete messages: the bytes
    /// already handled must still be released.
    @Test func aPipelineThatNeverLetsTheBufferEmptyKeepsMemoryBounded() throws {
        let message =
            Array(#"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"k","value":1}}"#.utf8) + [0]
        var stream: [UInt8] = []
        for _ in 0..<(8 << 20) / message.count { stream.append(contentsOf: message) }
        let chunk = 64 << 10
        var framer = MessageFramer()
        var offset = 0
        var worst = 0
        var handled = 0
        while offset < stream.count {
            if framer.pendingByteCount <= chunk {
                let end = min(offset + chunk - 7, stream.count)  // reads end inside a message
                stream[offset..<end].withUnsafeBytes { framer.append($0) }
                offset = end
            }
            if try framer.next() != nil { handled += 1 }
            worst = max(worst, framer.retainedByteCount)
        }
        #expect(handled > 0)
        #expect(worst <= 4 * chunk, "the framer held \(worst) bytes for at most \(2 * chunk) in flight")
    }

    /// Property over random streams, read sizes and ways of consuming: the framer returns exactly
    /// the stream's NUL-separated messages, and after every read it holds no more memory than
    /// ``MessageFramer/keptCapacity`` or twice what is in flight (unconsumed messages and the
    /// unfinished one), whatever the consumer does.
    @Test(arguments: 0..<24)
    func retainedMemoryFollowsWhatIsInFlight(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let limit = 1 << 20
        var expected: [[UInt8]] = []
        var stream: [UInt8] = []
        while stream.count < 6 << 20 {
            let size = random.below(10) == 0 ? random.below(limit + 1) : random.below(300)
            let body = [UInt8](repeating: UInt8(ascii: "a") + UInt8(expected.count % 26), count: size)
            expected.append(body)
            stream += body + [0]
        }
        var framer = MessageFramer(limit: limit)
        var received: [[UInt8]] = []
        var offset = 0
        while offset < stream.count || framer.pendingByteCount > 0 {
            let end = min(offset + 1 + random.below(64 << 10), stream.count)
            stream[offset..<end].withUnsafeBytes { framer.append($0) }
            offset = end
            // The allocator rounds a buffer's capacity up (an mmap'd one to its page): a page of slack.
            let bound = max(MessageFramer.keptCapacity, 2 * framer.pendingByteCount + 4096)
            try #require(
                framer.retainedByteCount <= bound,
                "holds \(framer.retainedByteCount) bytes for \(framer.pendingByteCount) in flight")
            // Consume as the daemon may: everything, a few (its turn ended, a commit waits), or none.
            let take = offset == stream.count ? Int.max : [Int.max, 1, 3, 0][random.below(4)]
            var taken = 0
            while taken < take, let message = try framer.next() {
                received.append(Array(message))
                taken += 1
            }
            if offset == stream.count, taken == 0 { break }
        }
        #expect(
            received.count == expected.count && received == expected,
            "the framer split the stream differently from its NULs")
    }
}

@Suite struct CallTests {
    @Test func callRoundTrips() throws {
        let call = VarlinkCall(
            method: "io.kvd.Defaults.Get", parameters: ["domain": .string("d"), "key": .string("k")], more: true)
        var bytes = call.encoded()
        #expect(bytes.removeLast() == 0)
        #expect(try VarlinkCall(message: bytes) == call)
    }

    @Test(arguments: [
        "[]", "{}", "{\"method\": 1}", "{\"method\":\"x\",\"parameters\":[]}", "{\"method\":\"x\",\"more\":\"yes\"}",
        "nope",
    ])
    func malformedCallsAreRefused(text: String) {
        #expect(throws: VarlinkError.self) { try VarlinkCall(message: Array(text.utf8)) }
    }

    @Test func everyRequestRoundTripsThroughItsCall() throws {
        let domain = try Domain(validating: "com.example.app")
        let key = try Key(validating: "k")
        let requests: [DefaultsRequest] = [
            .get(domain, key), .set(domain, key, .array([.integer(1), .real(2.5)]), ifRevision: 4),
            .set(domain, key, .bool(true), ifRevision: nil), .delete(domain, key), .delete(domain, nil),
            .apply(domain, [Change(key: key, value: .string("v")), Change(key: key, value: nil)], ifRevision: 0),
            .list(domain), .domains, .watch(domain, nil), .watch(domain, key), .getInfo,
            .getInterfaceDescription("io.kvd.Defaults"),
        ]
        for request in requests {
            #expect(try DefaultsRequest(call: request.call) == request)
        }
    }

    private func refusal(_ method: String, _ parameters: [String: JSON], more: Bool = false) -> VarlinkReply? {
        do {
            _ = try DefaultsRequest(call: VarlinkCall(method: method, parameters: parameters, more: more))
            return nil
        } catch {
            return error.reply
        }
    }

    @Test func badRequestsGetTheRightError() {
        #expect(refusal("io.kvd.Defaults.Nope", [:])?.error == "org.varlink.service.MethodNotFound")
        #expect(refusal("io.kvd.Defaults.Get", ["domain": .string("d")])?.parameters["parameter"] == .string("key"))
        #expect(
            refusal("io.kvd.Defaults.Get", ["domain": .integer(1), "key": .string("k")])?.error
                == "org.varlink.service.InvalidParameter")
        #expect(
            refusal("io.kvd.Defaults.Get", ["domain": .string("../etc"), "key": .string("k")])?.error
                == "io.kvd.Defaults.InvalidName")
        #expect(
            refusal(
                "io.kvd.Defaults.Set",
                ["domain": .string("d"), "key": .string("k"), "value": .object(["$x": .integer(1)])])?.error
                == "io.kvd.Defaults.InvalidValue")
        #expect(
            refusal("io.kvd.Defaults.Set", ["domain": .string("d"), "key": .string("k")])?.error
                == "org.varlink.service.InvalidParameter")
        #expect(refusal("io.kvd.Defaults.Watch", ["domain": .string("d")])?.error == "org.varlink.service.ExpectedMore")
        #expect(
            refusal(
                "io.kvd.Defaults.Set",
                ["domain": .string("d"), "key": .string("k"), "value": .integer(1), "ifRevision": .string("1")])?.error
                == "org.varlink.service.InvalidParameter")
    }

    @Test func interfaceDeclaresTheContract() {
        for line in [
            "interface io.kvd.Defaults", "type Change (key: string, value: ?object)",
            "method Set(domain: string, key: string, value: object, ifRevision: ?int) -> (revision: int)",
            "method Delete(domain: string, key: ?string) -> (revision: int)",
            "method Apply(domain: string, changes: []Change, ifRevision: ?int) -> (revision: int)",
            "method List(domain: string) -> (values: [string]object, revision: int)",
            "method Domains() -> (domains: []string)",
            "method Watch(domain: string, key: ?string) -> (revision: int, changes: []Change, initial: bool,"
                + " partial: ?bool, systemRevision: ?int, writer: ?Writer)",
            "type Writer (uid: ?int, pid: ?int, program: ?string, app: ?string)",
            "method Blame(domain: string, key: ?string) -> (entries: []BlameEntry, keepsNone: ?bool)",
            "error NotFound (domain: string, key: ?string)", "error TooLarge (limit: int)",
        ] {
            #expect(DefaultsInterface.description.contains(line), "missing: \(line)")
        }
        // The system layer: Get's source, declared so that every varlink client (Python's keeps
        // only declared members) sees it; KeyLocked; io.kvd.System's methods.
        #expect(
            DefaultsInterface.description.contains(
                "method Get(domain: string, key: string) -> (value: object, revision: int, source: string)\n"))
        #expect(DefaultsInterface.description.contains("error KeyLocked (domain: string, key: string)"))
        for method in [
            "method Lock(domain: string, key: string)", "method Unlock(domain: string, key: string)",
            "method Locks(domain: ?string)",
        ] {
            #expect(SystemInterface.description.contains(method), "missing: \(method)")
        }
    }
}
