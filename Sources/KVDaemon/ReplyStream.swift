import KVProtocol
import KVValues

/// The first replies of a `Mirror` (the whole system store) or of a `Watch` (a domain's current
/// values, which with the system layer's can be larger than one message), or the replies of a
/// `Backup` (every domain), made a piece at a time as the client reads them, so that what grows
/// with the data is never queued whole.
///
/// The changes to send are taken when the call is answered (a consistent view at one
/// revision; the values are shared with the store's, not copied; a `Backup`'s runs are taken
/// one at a time, see ``init(lazy:make:)``); each piece holds at most about ``pieceBytes`` of
/// them, or one change when that is larger, and is at most one message (the
/// budgets leave room for the envelope, see ``Limits/replyOverhead``). Live replies (commits,
/// changes of the system layer) that come meanwhile wait in ``deferred`` and go out after the
/// last piece, in order. Loop thread only.
final class ReplyStream {
    /// A piece takes changes while they fit in this many bytes as JSON (at least one).
    static let pieceBytes = 1 << 20
    /// Pieces are made while the client has less than this many bytes unsent.
    static let lowWater = 2 << 20

    /// Changes that go out in replies of their own: a domain's values or its locks.
    struct Run {
        var domain: Domain?
        var changes: [Change]
        /// Keys whose stored values cannot be read, with the reason (`Backup` names them in
        /// the run's first piece).
        var unreadable: [Key: String] = [:]
        /// Domains the run's one piece names without their values (a `WatchAll`'s withheld).
        var names: [Domain] = []
    }

    /// The reply carrying `changes`, a part of `run`: `first` and `last` say whether it is the
    /// stream's first or last piece.
    typealias Make = (_ run: Run, _ changes: ArraySlice<Change>, _ first: Bool, _ last: Bool) -> VarlinkReply

    /// The runs after ``current``, made one at a time as the pieces reach them.
    private let runs: AnyIterator<Run>
    /// The run the next piece comes from; nil when every piece was made.
    private var current: Run?
    private let make: Make
    private var changeIndex = 0
    private var madeFirst = false
    /// Live replies that came before the last piece was made.
    private(set) var deferred: [Deferred] = []
    /// Bytes in ``deferred``.
    private(set) var deferredBytes = 0

    enum Deferred {
        /// An encoded reply, message and NUL.
        case own([UInt8])
        case shared(SharedReply)
    }

    /// A stream of `runs` (an empty run still makes a piece: a watch of an empty domain).
    convenience init(runs: [Run], make: @escaping Make) {
        self.init(lazy: AnyIterator(runs.makeIterator()), make: make)
    }

    /// A stream of the runs `runs` gives, each taken only when the pieces reach it (after the
    /// last piece of the one before), so at most two are held at once (`Backup`: one domain's
    /// values at a time).
    init(lazy runs: AnyIterator<Run>, make: @escaping Make) {
        self.runs = runs
        self.current = runs.next()
        self.make = make
    }

    /// Whether every piece was made (or, sharing, taken).
    var isDone: Bool { sharing.map { $0.isComplete(at: sharedIndex) } ?? (current == nil) }

    /// Pieces encoded once and shared with other streams of the same replies (a `Mirror`
    /// snapshot, ``MirrorSnapshots``); nil: this stream makes its own.
    private var sharing: SharedPieces?
    private var sharedIndex = 0

    /// A stream of the pieces `pieces` makes once for every stream that shares them.
    convenience init(sharing pieces: SharedPieces) {
        self.init(runs: [], make: { _, _, _, _ in preconditionFailure("a shared stream makes no piece") })
        sharing = pieces
    }

    /// One piece to send: a reply of this stream's own, or one encoded once and shared.
    enum Piece {
        case own(VarlinkReply)
        case shared(SharedReply)
    }

    /// The next piece to send, or nil when every piece was sent.
    func nextPiece() -> Piece? {
        guard let sharing else { return next().map(Piece.own) }
        guard let piece = sharing.piece(sharedIndex) else { return nil }
        sharedIndex += 1
        return .shared(piece)
    }

    /// The next piece, or nil when every piece was made. A piece takes changes while they fit
    /// in ``pieceBytes`` (at least one, however large).
    func next() -> VarlinkReply? {
        guard let run = current else { return nil }
        let start = changeIndex
        var bytes = 0
        while changeIndex < run.changes.count {
            let size = Self.measure(run.changes[changeIndex])
            if changeIndex > start, bytes + size > Self.pieceBytes { break }
            bytes += size
            changeIndex += 1
        }
        let slice = run.changes[start..<changeIndex]
        if changeIndex == run.changes.count {
            current = runs.next()
            changeIndex = 0
        }
        let first = !madeFirst
        madeFirst = true
        return make(run, slice, first, isDone)
    }

    /// What `change` takes in a reply, about (its key and value as JSON, and room for a source):
    /// a string or data is counted without being written (escapes may make a piece a few times
    /// ``pieceBytes``, far below the message limit), anything else written.
    private static func measure(_ change: Change) -> Int {
        let value: Int
        switch change.value {
        case nil: value = 0
        case .string(let text)?: value = text.utf8.count + 2
        case .data(let bytes)?: value = bytes.count / 3 * 4 + 16
        case .array?, .dictionary?: value = JSONWriter().bytes(change.value!.typedJSON).count
        case .integer?, .real?, .bool?, .date?: value = 40
        }
        return change.key.name.utf8.count + value + 48
    }

    /// Keeps a live reply to send after the last piece.
    func keep(_ reply: Deferred, memory: ClientMemory) {
        switch reply {
        case .own(let bytes):
            deferredBytes += bytes.count
        case .shared(let reply):
            reply.hold(memory)
            deferredBytes += reply.bytes.count
        }
        deferred.append(reply)
    }

    /// Hands over the live replies kept (the caller sends them, or drops them with
    /// ``drop(memory:)``).
    func takeDeferred() -> [Deferred] {
        defer { (deferred, deferredBytes) = ([], 0) }
        return deferred
    }

    /// Forgets the live replies kept (the client is gone).
    func drop(memory: ClientMemory) {
        for case .shared(let reply) in takeDeferred() { reply.release(memory) }
    }
}
