// The raw limit: a server that echoes every byte it receives, one thread per connection, so a
// round trip costs two context switches and two socket copies and nothing else.
import Glibc
import KVSystem

func serveEcho(_ path: String) -> Never {
    try? system.unlink(path)
    let listener: Int32
    do {
        listener = try system.listenUnix(path, backlog: 128, nonBlocking: false)
    } catch {
        print("kvbench: cannot listen on \(path): \(error.errno)")
        exit(1)
    }
    while true {
        // accept4 makes the connection non-blocking; its thread reads it blocking.
        guard let fd = try? system.accept(listener) else { continue }
        guard (try? system.setNonBlocking(fd, false)) != nil else {
            system.close(fd)
            continue
        }
        detachThread {
            var buffer = [UInt8](repeating: 0, count: 65536)
            buffer.withUnsafeMutableBytes { raw in
                while true {
                    guard let count = try? system.receive(fd, into: raw), count > 0,
                        (try? system.sendAll(fd, UnsafeRawBufferPointer(rebasing: raw[..<count]))) != nil
                    else { break }
                }
            }
            system.close(fd)
        }
    }
}
