// kvbench: the load generator of `make bench` (bench/run.py drives it). It measures round trips
// against a running kvd (varlink), Redis (RESP) or the raw ping-pong server it serves itself
// (`--serve-echo`), over Unix sockets, as a client would make them, with N client threads.
// Each run prints ops/s, p50/p99 latency and the CPU the generator itself used.
import Glibc

let options = parseOptions()
if !options.serveEcho.isEmpty { serveEcho(options.serveEcho) }
if options.operation == "populate" {
    let begin = now()
    populate(options)
    let seconds = Double(now() - begin) / 1e9
    print(
        options.json
            ? #"{"op":"populate","keys":\#(options.keys),"seconds":\#(seconds)}"#
            : "populated \(options.keys) keys in \(seconds) s")
    exit(0)
}
if options.operation == "get" { prepareKeys(options) }

func percentile(_ sorted: [UInt32], _ p: Double) -> Double {
    sorted.isEmpty ? 0 : Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
}

for _ in 0..<options.runs {
    let cpuBefore = cpuSeconds()
    let all = options.threads || options.clients == 1 ? runClients(options) : runClientsPolled(options)
    let cpu = cpuSeconds() - cpuBefore
    let throughput = Double(all.count) / options.seconds
    let (p50, p99) = (percentile(all, 0.5), percentile(all, 0.99))
    if options.json {
        print(
            #"{"op":"\#(options.operation)","proto":"\#(options.proto)","clients":\#(options.clients),"ops":\#(all.count),"ops_per_s":\#(throughput),"p50_us":\#(p50),"p99_us":\#(p99),"client_cpu_s":\#(cpu),"seconds":\#(options.seconds)}"#
        )
    } else {
        print(
            "proto=\(options.proto) op=\(options.operation) clients=\(options.clients) ops=\(all.count) ops_per_s=\(Int(throughput)) p50_us=\(p50) p99_us=\(p99) client_cpu_s=\(cpu)"
        )
    }
}
