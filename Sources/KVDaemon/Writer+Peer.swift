import KVSystem
import KVValues

extension Writer {
    /// What history keeps of `peer`, the process on the other end of a connection as kvd read it
    /// when it accepted the connection (``PeerProcess/begin(_:system:ownRoot:cgroups:)``): its uid and
    /// pid, its program (the executable's path, else its command name) and its app id, each text
    /// bounded (``Writer/maxTextBytes``). A peer kvd could not confirm has no program nor app.
    init(peer: PeerProcess) {
        self.init(
            uid: peer.credentials.uid, pid: peer.credentials.pid, program: peer.program ?? peer.command,
            app: peer.app?.id)
    }
}
