import KVSystem
import KVValues

/// Who history records as the writer of a connection's changes, read in two steps: what kvd
/// learnt of the peer when it accepted the connection (``PeerProcess/identify(_:system:)``), and
/// its program, read once, at the connection's first write
/// (``PeerProcess/nameProgram(connection:system:)``: the connection's own process, never another
/// that took its pid). A connection that never writes never pays for the second.
struct PeerWriter {
    private var state: State

    private enum State {
        /// The peer as accepted; its program still to be read.
        case accepted(PeerProcess)
        /// What history records, for the connection's life (nil: unknown, or not recorded).
        case known(Writer?)
    }

    /// `peer`: who connected (nil: even its credentials could not be read); `records`:
    /// ``DaemonOptions/recordsWriters`` (off only for the benchmark's comparison: nil is kept).
    init(_ peer: PeerProcess?, records: Bool) {
        if records, let peer {
            state = .accepted(peer)
        } else {
            state = .known(nil)
        }
    }

    /// The writer of connection `fd`'s changes: read the first time it is asked for (the
    /// connection's first write), then kept.
    mutating func writer(of fd: Int32, system: any SystemCalls) -> Writer? {
        switch state {
        case .known(let writer):
            return writer
        case .accepted(var peer):
            peer.nameProgram(connection: fd, system: system)
            let writer = Writer(peer: peer)
            state = .known(writer)
            return writer
        }
    }
}

extension Writer {
    /// What history keeps of `peer`: its uid and pid, its program (the executable's path, else
    /// its command name) and its app id, each text bounded (``Writer/maxTextBytes``).
    init(peer: PeerProcess) {
        self.init(
            uid: peer.credentials.uid, pid: peer.credentials.pid, program: peer.program ?? peer.command,
            app: peer.app?.id)
    }
}
