// The raw limit: a server that echoes every byte it receives, one thread per connection, so a
// round trip costs two context switches and two socket copies and nothing else.
import Glibc

func serveEcho(_ path: String) -> Never {
    unlink(path)
    let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var address = unixAddress(path)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard bound == 0, listen(listener, 128) == 0 else {
        print("kvbench: cannot listen on \(path): \(String(cString: strerror(errno)))")
        exit(1)
    }
    while true {
        let fd = accept(listener, nil, nil)
        if fd < 0 { continue }
        _ = startThread {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 { break }
                if buffer.withUnsafeBytes({ send(fd, $0.baseAddress, count, Int32(MSG_NOSIGNAL)) }) != count { break }
            }
            close(fd)
        }
    }
}
