import Glibc
import KVFleet
import KVProtocol
import KVStorage
import KVSystem
import KVValues

/// The whole daemon: options → store → listening socket → server loop → orderly exit.
public enum Daemon {
    /// Runs kvd with `arguments` (program name excluded); returns the exit status.
    /// Blocks until the daemon stops. Every system call goes through `system`.
    public static func main(arguments: [String], environment: [String: String], system: any SystemCalls = LinuxSystem())
        -> Int32
    {
        Poller.blockTerminationSignals(system)
        closeInheritedDescriptors(environment: environment, system: system)
        let options: DaemonOptions
        switch Result(catching: { () throws(UsageError) in try DaemonOptions.parse(arguments, environment: environment)
        })
        {
        case .success(.help):
            print(DaemonOptions.usage)
            return 0
        case .success(.version):
            print("kvd \(DaemonOptions.version)")
            return 0
        case .success(.run(let parsed)):
            options = parsed
        case .failure(let error):
            let text = "kvd: \(error)\n\(DaemonOptions.usage.split(separator: "\n").first!)\n(see kvd --help)\n"
            Array(text.utf8).withUnsafeBytes { _ = try? system.writeAll(STDERR_FILENO, $0) }
            return 2
        }
        let log = Logger(
            toJournal: Systemd.stderrIsJournal(environment: environment), verbose: options.verbose, system: system)
        if case .system(let policy) = options.role, system.groupID(named: policy.adminGroup) == nil {
            log.warning(
                "there is no group \"\(policy.adminGroup)\" (--admin-group): only root may change the system instance")
        }
        return run(options, log: log, system: system)
    }

    /// Serves with `options` until stopped; returns the exit status. Blocks.
    static func run(_ options: DaemonOptions, log: Logger, system: any SystemCalls) -> Int32 {
        let store: Store
        do {
            let storeOptions = StoreOptions(historyKeep: options.historyKeep, historyDays: options.historyDays)
            store = try Store(
                directory: options.stateDirectory, options: storeOptions,
                log: { level, message in log.log(level, message) })
        } catch {
            log.error("cannot open the state folder: \(error)")
            Systemd.notify("STATUS=cannot open the state folder: \(error)")
            return 1
        }
        defer { store.close() }
        let socket: ListeningSocket
        do {
            socket = try ListeningSocket.open(
                path: options.socketPath, shared: options.isSystem, log: log, system: system)
        } catch {
            log.error("\(error)")
            return 1
        }
        let started: (server: Server, mirror: FleetMirror?)
        do throws(StartFailure) {
            started = try start(options, store: store, socket: socket, log: log, system: system)
        } catch {
            socket.close()
            log.error(error.message)
            if let status = error.status { Systemd.notify("STATUS=" + status) }
            return 1
        }
        return serve(started.server, mirror: started.mirror, store: store, options: options, log: log)
    }

    /// Why kvd stopped before serving: logged, and told to systemd when there is a `status`.
    struct StartFailure: Error {
        var message: String
        var status: String?
    }

    /// The server on `socket` and, on a system instance with a fleet, its mirror (started).
    static func start(
        _ options: DaemonOptions, store: Store, socket: ListeningSocket, log: Logger, system: any SystemCalls
    ) throws(StartFailure) -> (server: Server, mirror: FleetMirror?) {
        let fleet = try fleet(options, store: store, log: log)
        var limits = Server.Limits()
        limits.maxClientMemory = options.maxClientMemory
        limits.identifiesWriters = options.recordsWriters
        limits.identifiesPeers = options.recordsWriters
        limits.sandboxReadable = options.sandboxReadable
        let server: Server
        do {
            server = try Server(
                store: store, socket: socket, log: log, idleExit: options.idleExit, limits: limits, system: system,
                role: options.role, fleet: fleet?.layout,
                systemLayerFile: options.isSystem ? nil : SystemLayerFile(directory: options.stateDirectory),
                dconfProfile: options.dconfProfile)
        } catch {
            throw StartFailure(message: "event loop failed: \(error)")
        }
        if case .system(let policy) = options.role {
            server.startDropIns(
                directory: policy.configDirectory, adminGroup: policy.adminGroup, fileSystem: system,
                kept: KeptDropInsFile(directory: options.stateDirectory, fileSystem: system),
                dconfDirectory: policy.dconfDirectory)
        }
        let mirror = fleet.map {
            FleetMirror(
                store: store, reflector: $0.reflector, layout: $0.layout, gateway: $0.gateway, log: log,
                announce: server.announcer)
        }
        if let fleet, let mirror {
            server.fleetIsUp(FleetWriter(store: store, etcd: fleet.etcd, layout: fleet.layout, mirror: mirror))
        }
        do throws(StorageError) {
            try mirror?.recordPatterns()
        } catch {
            throw StartFailure(message: "the fleet: cannot record its domain patterns: \(error)")
        }
        mirror?.start()
        return (server, mirror)
    }

    /// The fleet `options` ask for (`nil`: none), refused while the store holds values of its
    /// own in the fleet's domains.
    static func fleet(_ options: DaemonOptions, store: Store, log: Logger) throws(StartFailure) -> FleetSetup? {
        let fleet: FleetSetup?
        do {
            fleet = try FleetSetup(options, log: log)
        } catch {
            throw StartFailure(message: "\(error)", status: "\(error)")
        }
        if let fleet {
            let local = FleetMirror.localDomains(in: store, layout: fleet.layout)
            guard local.isEmpty else {
                throw StartFailure(
                    message: FleetMirror.refusal(local, layout: fleet.layout), status: FleetMirror.refusalStatus(local))
            }
        }
        return fleet
    }

    /// Runs `server` until it stops, then closes in order; returns the exit status.
    static func serve(_ server: Server, mirror: FleetMirror?, store: Store, options: DaemonOptions, log: Logger)
        -> Int32
    {
        let listening = server.socket.activated ? "socket from systemd" : options.socketPath
        let what = options.isSystem ? "the system instance: serving" : "serving"
        log.info("\(what) \(listening), state in \(options.stateDirectory), revision \(store.revision)")
        Systemd.notify("READY=1\nSTATUS=serving \(store.domains().count) domain(s) at revision \(store.revision)")
        let outcome = Result { () throws(SystemError) in try server.run() }
        switch outcome {
        case .success(let reason): log.info("exiting: \(reason)")
        case .failure(let error): log.error("event loop failed: \(error)")
        }
        // The state folder's lock goes first: a client refused at an idle exit may be starting
        // the next kvd. Then the socket, perhaps a fresh one by now.
        mirror?.stop()
        store.close()
        server.socket.close()
        guard case .success(let reason) = outcome else { return 1 }
        Systemd.notify("STOPPING=1\nSTATUS=\(reason)")
        return 0
    }

    /// Closes every descriptor above standard error except the sockets systemd passed, so a
    /// daemon started from a script or a test never holds the starter's pipes open.
    static func closeInheritedDescriptors(environment: [String: String], system: any SystemCalls) {
        var keep: Int32 = 0
        if let pid = environment["LISTEN_PID"].flatMap(Int32.init), pid == system.processID {
            keep = environment["LISTEN_FDS"].flatMap(Int32.init) ?? 0
        }
        for fd in system.openDescriptors() where fd > 2 && fd >= 3 + keep { system.close(fd) }
    }

    /// The process environment as a dictionary.
    public static func currentEnvironment() -> [String: String] {
        Paths.processEnvironment()
    }
}

/// The fleet of a system instance started with `--etcd`: etcd's client, the layout of kvd's
/// keys in it, and the reflector that mirrors them. Built before the loop starts, so a bad
/// option (an unreadable auth file, a bad pattern) stops kvd with its reason.
struct FleetSetup {
    let layout: FleetLayout
    let reflector: FleetReflector
    let gateway: EtcdGateway
    var etcd: any EtcdAPI { gateway }

    /// `nil` when `options` ask for no fleet.
    init?(_ options: DaemonOptions, log: Logger) throws(DaemonError) {
        guard case .system(let policy) = options.role, !policy.etcdEndpoints.isEmpty else { return nil }
        let layout: FleetLayout
        do throws(FleetLayoutError) {
            layout = try FleetLayout(prefix: policy.etcdPrefix, domainPatterns: policy.fleetDomains)
        } catch {
            throw DaemonError("the fleet: \(error)")
        }
        do throws(EtcdError) {
            let credentials = try policy.etcdAuthFile.map { path throws(EtcdError) in
                try EtcdCredentials.read(fromFile: path)
            }
            let gateway = try EtcdGateway(
                endpoints: policy.etcdEndpoints, credentials: credentials, caFile: policy.etcdCAFile,
                warn: { log.warning("fleet: \($0)") })
            var reflectorOptions = FleetReflector.Options()
            reflectorOptions.progressInterval = policy.etcdProgressInterval
            self.layout = layout
            self.gateway = gateway
            self.reflector = FleetReflector(etcd: gateway, layout: layout, options: reflectorOptions)
        } catch {
            throw DaemonError("the fleet: \(error)")
        }
    }
}
