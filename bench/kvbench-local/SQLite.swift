// SQLite, loaded at run time (dlopen of libsqlite3.so.0) so that building kvd never needs its
// headers, and a machine without it skips the SQLite row instead of failing to build.
import Glibc
import KVSystem

struct SQLite {
    typealias Open = @convention(c) (UnsafePointer<CChar>, UnsafeMutablePointer<OpaquePointer?>) -> Int32
    typealias Exec =
        @convention(c) (OpaquePointer, UnsafePointer<CChar>, OpaquePointer?, OpaquePointer?, OpaquePointer?) -> Int32
    typealias Prepare =
        @convention(c) (
            OpaquePointer, UnsafePointer<CChar>, Int32, UnsafeMutablePointer<OpaquePointer?>, OpaquePointer?
        ) -> Int32
    typealias BindText = @convention(c) (OpaquePointer, Int32, UnsafePointer<CChar>, Int32, OpaquePointer?) -> Int32
    typealias Statement = @convention(c) (OpaquePointer) -> Int32

    let open: Open
    let exec: Exec
    let prepare: Prepare
    let bindText: BindText
    let step: Statement
    let reset: Statement
    let close: Statement

    /// The library's functions, or nil (with the reason) when it cannot be loaded.
    static func load() -> (SQLite?, String) {
        let system = LinuxSystem()
        let library: SharedLibrary
        do {
            library = try system.openLibrary("libsqlite3.so.0")
        } catch {
            return (nil, "libsqlite3.so.0 cannot be loaded: \(error)")
        }
        func symbol<T>(_ name: String, _ type: T.Type) -> T? {
            system.symbol(name, in: library).map { unsafeBitCast($0, to: type) }
        }
        guard let open = symbol("sqlite3_open", Open.self), let exec = symbol("sqlite3_exec", Exec.self),
            let prepare = symbol("sqlite3_prepare_v2", Prepare.self),
            let bind = symbol("sqlite3_bind_text", BindText.self),
            let step = symbol("sqlite3_step", Statement.self), let reset = symbol("sqlite3_reset", Statement.self),
            let close = symbol("sqlite3_close", Statement.self)
        else { return (nil, "libsqlite3.so.0 lacks a function kvbench-local needs") }
        return (
            SQLite(open: open, exec: exec, prepare: prepare, bindText: bind, step: step, reset: reset, close: close), ""
        )
    }
}

/// A durable upsert of one 100-byte value in a WAL database with `synchronous=FULL`, as a
/// `(latency) -> Void` loop body; fails the program on any SQLite error.
final class SQLiteWriter {
    let sqlite: SQLite
    var db: OpaquePointer?
    var statement: OpaquePointer?
    let key = strdup("k0")!
    let value = strdup(String(repeating: "x", count: 100))!

    init(sqlite: SQLite, path: String) {
        self.sqlite = sqlite
        check(sqlite.open(path, &db), "open \(path)")
        for sql in [
            "PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
            "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID",
        ] {
            check(sqlite.exec(db!, sql, nil, nil, nil), sql)
        }
        check(
            sqlite.prepare(db!, "INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", -1, &statement, nil), "prepare")
        check(sqlite.bindText(statement!, 1, key, 2, nil), "bind")
        check(sqlite.bindText(statement!, 2, value, 100, nil), "bind")
    }

    func check(_ code: Int32, _ what: String) {
        if code != 0 {
            print("kvbench-local: SQLite \(what) failed with code \(code)")
            exit(1)
        }
    }

    func set() {
        let code = sqlite.step(statement!)
        if code != 101 { check(code, "step") }
        check(sqlite.reset(statement!), "reset")
    }
}
