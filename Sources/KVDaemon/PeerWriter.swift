import KVSystem
import KVValues

extension Writer {
    /// What history keeps of `peer`: its uid and pid, its program (the executable's path, else
    /// its command name) and its app id, each text bounded (``Writer/maxTextBytes``).
    init(peer: PeerProcess) {
        self.init(
            uid: peer.credentials.uid, pid: peer.credentials.pid, program: peer.program ?? peer.command,
            app: peer.app?.id)
    }
}
