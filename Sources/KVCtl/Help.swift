/// kvctl's help: one usage line and one explanation per command.
enum Help {
    struct Entry {
        var name: String
        var aliases: [String]
        var usage: String
        var summary: String
        var details: String
    }

    static let entries: [Entry] = [
        Entry(
            name: "get", aliases: ["read"], usage: "get DOMAIN [KEY [--effective]]",
            summary: "print a value, or the whole domain",
            details: """
                Prints the value of KEY in DOMAIN, or with no KEY the whole domain as a typed JSON
                object. Plain output: a string as itself; an integer as digits; a real always with
                a '.' or an exponent (1.0, 2.5e-07); a bool as true or false; a date as RFC 3339
                in UTC; data as lowercase hex (what -data takes back); an array or dictionary as
                indented typed JSON. With --json, any value as typed JSON on one line.
                With --system, the admins' layer only (set with kvctl --system or etcd); with
                --system and --effective, the value every user is given: the admins' value,
                else the drop-in files' (files for some users or groups only left out). A
                user's get already gives the value in effect.
                """),
        Entry(
            name: "set", aliases: ["write"], usage: "set DOMAIN KEY [TYPE-FLAG] VALUE...",
            summary: "store a value: a string, unless a type flag says otherwise",
            details: """
                VALUE is a string unless a type flag comes first:
                  -string S           a string (use it for strings that start with '-')
                  -int N, -integer N  a signed 64-bit integer
                  -float X            a real, even for -float 1
                  -bool B, -boolean B true/false, yes/no or 1/0 (any case)
                  -date D             an RFC 3339 date-time, like 2026-11-29T17:00:00Z
                  -data HEX           bytes as hex digits, two per byte, like 68690a
                  -array E...         an array; each element a string unless a flag precedes
                                      it: -array a -int 2 -bool yes
                  -array-add E...     append to the array at KEY (created if missing)
                  -dict K V...        a dictionary of K V pairs (V as array elements)
                  -dict-add K V...    merge pairs into the dictionary at KEY (created if missing)
                  --json TYPED_JSON   any value as typed JSON, like '{"$data": "aGk="}'
                -array-add and -dict-add read, change and write back only if nothing changed
                meanwhile (retried a few times).
                """),
        Entry(
            name: "delete", aliases: [], usage: "delete DOMAIN [KEY]",
            summary: "remove a key, or the whole domain",
            details: "Removes KEY from DOMAIN, or with no KEY the whole domain."),
        Entry(
            name: "domains", aliases: [], usage: "domains",
            summary: "list the domains, one a line",
            details: "Prints the names of all domains, sorted, one a line (with --json, a JSON array)."),
        Entry(
            name: "keys", aliases: [], usage: "keys DOMAIN",
            summary: "list a domain's keys, one a line",
            details: """
                Prints the keys of DOMAIN, sorted, one a line, including keys whose stored values
                kvd cannot read. A backslash or control character in a key is printed escaped
                (\\\\, \\n, \\t, \\r, \\xHH), so each line is one key; --json prints the exact names
                as a JSON array.
                """),
        Entry(
            name: "read-type", aliases: [], usage: "read-type DOMAIN KEY",
            summary: "print the type of a value",
            details: "Prints one of: string integer real bool date data array dictionary."),
        Entry(
            name: "rename", aliases: [], usage: "rename DOMAIN OLD NEW",
            summary: "rename a key atomically",
            details: """
                Moves the value of OLD to NEW in one atomic change; a value already at NEW is
                replaced. Fails if the domain changes meanwhile and retrying does not help.
                """),
        Entry(
            name: "export", aliases: [], usage: "export DOMAIN FILE|- [--format json|xml|binary] [--effective]",
            summary: "write the whole domain as typed JSON or a property list",
            details: """
                Writes your own values of DOMAIN as an indented typed JSON object to FILE, or to
                stdout for -; with --effective, every value you read, the system's defaults and
                locked values included (importing that file makes them your own values). With --format xml or binary, as a property list instead (what macOS
                `defaults import` reads); XML keeps dates to the second, so a date with a fraction
                is refused there (use binary). FILE is replaced atomically; an existing file keeps its mode and owner, a
                symbolic link is written through to its target, and a new file gets mode 0600
                (the values may hold secrets). If kvd cannot read some stored values, the file is
                written without them and kvctl names them and exits 1 (as does get DOMAIN).
                """),
        Entry(
            name: "import", aliases: [], usage: "import DOMAIN FILE|-",
            summary: "replace the whole domain from typed JSON or a property list, atomically",
            details: """
                Reads a typed JSON object, or an XML or binary property list (recognised by its
                first bytes: bplist00, <?xml or <plist; what macOS `defaults export` writes), from
                FILE (or stdin for -) and makes DOMAIN hold exactly
                its values, in one atomic change: keys in the file are set, keys not in the file
                are removed (like macOS `defaults import`), unreadable ones too (named on stderr).
                It changes only your own values: system defaults stay defaults, and a key the
                administrator locks is left out (named, exit 1) while the rest is imported.
                Use set to merge single keys. A property-list value kvd cannot hold exactly (an
                integer beyond 64 bits, a date outside 0001-9999 or not a calendar date, a lone
                surrogate, a UID from a keyed archive) is refused naming its key, and nothing is
                imported.
                """),
        Entry(
            name: "watch", aliases: [], usage: "watch DOMAIN [KEY]",
            summary: "print changes as they happen, until interrupted",
            details: """
                Prints the current values, then each change as it happens, one line each:
                  KEY = VALUE      (VALUE as compact typed JSON)
                  KEY removed
                A change is followed by who made it ("  by PROGRAM (app APP, pid P, uid U)",
                the parts kvd knows; see blame), not the current values. With --json, one
                object per line: {"revision": N, "key": K, "value": V, "writer": {...}}, without
                "value" for a removal, and with "initial": true for the current values.
                Runs until interrupted (Ctrl-C). If kvd restarts, kvctl reconnects and prints
                one line for each key that changed meanwhile, so no change is missed.
                """),
        Entry(
            name: "source", aliases: [], usage: "source DOMAIN KEY",
            summary: "say where a value comes from: user, system or locked",
            details: """
                Prints where the value get prints comes from, and what can be done about it:
                  user: your own value
                  system: the machine's default (your own value would override it: kvctl set ...)
                  locked: set by the system administrator and locked (who can lift it, and
                          how: kvctl --system unlock DOMAIN KEY, or the drop-in file that
                          locks it, with the system instance's admin group)
                With --json: {"domain": D, "key": K, "source": S, "value": V}.
                With --system: where the system instance's value and lock come from: admin (set
                with kvctl --system or etcd), a drop-in file (named), or none. With --json:
                {"domain": D, "key": K, "value": "admin"|"file", "file": F, "lock": ..., "lockFile": F}.
                """),
        Entry(
            name: "lock", aliases: [], usage: "lock DOMAIN KEY",
            summary: "(with --system) lock a key for every user of the machine",
            details: """
                Needs --system, and root or a member of the group kvd-admin. Every user then reads
                the system instance's value of KEY (or none), and every write to it is refused
                (kvctl exits 1 naming the lock); a user's own value is kept, unseen, and comes
                back with unlock. Set the value first: kvctl --system set DOMAIN KEY VALUE.
                """),
        Entry(
            name: "unlock", aliases: [], usage: "unlock DOMAIN KEY",
            summary: "(with --system) lift a lock",
            details: """
                Needs --system, and root or a member of the group kvd-admin. Users see their own
                value again, else the machine's default. Fails if KEY is not locked by an admin
                (a drop-in file's lock is lifted in the file: the message names it).
                """),
        Entry(
            name: "locks", aliases: [], usage: "locks [DOMAIN]",
            summary: "(with --system) list the locked keys",
            details: """
                Needs --system; anyone may list. Prints one "DOMAIN KEY" a line for each admin's
                lock and "DOMAIN KEY (file PATH)" for each lock of a drop-in lock file that
                applies to you (a key locked both ways is listed twice), sorted, or with DOMAIN
                only its keys (escaped as keys prints them). With --json, an array of
                {"domain": D, "key": K}, with "file": PATH for a file's lock.
                """),
        Entry(
            name: "status", aliases: [], usage: "status",
            summary: "(with --system) the system instance, its drop-in files and fleet mirror",
            details: """
                Needs --system; anyone may ask. Prints the store's revision and domain count, the
                drop-in files applied and those that could not be read (each with why), and,
                for an instance started with --etcd, the fleet mirror: the etcd members, the one in
                use, what it is doing (listing, watching, waiting to retry), the etcd revision it
                holds and the newest etcd told of (the lag), listings made again after a
                compaction, the last error, and the etcd keys left out because they cannot be
                read (their count and the first 100, escaped as keys prints them). With --json,
                the Status reply as JSON.
                """),
        Entry(
            name: "apply", aliases: [], usage: "apply FILE|- [--check] [--diff] [--prune]",
            summary: "make domains hold what a file says (desired state)",
            details: """
                FILE (or - for stdin) is typed JSON: {"DOMAIN": {"KEY": VALUE, ...}, ...}, the
                format of the system instance's drop-in files; each domain's object as export
                writes it. Every key FILE names gets its value; with --prune, every other key of
                those domains is removed. Each domain changes in one atomic Apply (read again and
                retried if it changed meanwhile). Your own values only: system defaults are never
                copied in, and a key the administrator locks is left out and named (exit 1), the
                rest applied. With --system, the admins' values of the system instance (not its
                drop-in files).
                  --check  change nothing: exit 0 when already equal, 1 when apply would change
                           something, 3 when it failed (config-management tools read this)
                  --diff   print each change: DOMAIN KEY: OLD -> NEW, (none) for no value
                """),
        Entry(
            name: "reload", aliases: [], usage: "reload",
            summary: "(with --system) read the drop-in files again",
            details: """
                Needs --system, and root or a member of the group kvd-admin. The system instance
                reads DIR/defaults.d/NAME.json and DIR/locks.d/NAME again (DIR: kvd --config-dir,
                default /etc/kvd) and replaces the old combination in one step; every user's kvd
                gets the difference as one change. SIGHUP (systemctl reload kvd-system) and a
                change in the folders do the same. Prints the revision and the files; exits 1
                when there is a problem (named: a file not read or refused keeps its last good
                content; the others apply). The rules: kvd(8), docs/drop-in-rules.md.
                """),
        Entry(
            name: "gnome", aliases: [], usage: "gnome enable|disable|status",
            summary: "(with --system) switch the machine's GSettings apps to kvd, or back to dconf",
            details: """
                Needs --system and root; no kvd needs to run. enable writes
                /etc/environment.d/50-kvd-gnome.conf (GSETTINGS_BACKEND=kvd for every new session)
                and /etc/systemd/user/default.target.d/50-kvd-gnome.conf (every login runs
                kvd-gnome-login.service): at their next login each user's dconf values move into
                kvd, once (kvd-dconf-import --login). disable removes the first file: at their next
                login each user's values move back into dconf, once, with what changed under kvd.
                Sessions already running keep their backend until their user logs in again.
                Flatpak apps keep their own keyfile backend either way. status says which backend
                new sessions get and which file sets it, read as a user's session reads
                environment.d, and warns when the switch's file is not what enable writes or a
                later file overrides it.
                """),
        Entry(
            name: "history", aliases: [],
            usage: "history [--forget|--keep-none|--keep] DOMAIN [KEY] [--limit N] [--json]",
            summary: "list the values a domain's keys had, newest first",
            details: """
                Prints the kept changes of DOMAIN (of KEY only, if given), newest first, one a
                line: local time, revision, key, the value as compact typed JSON ("(removed)"
                when the key was removed), and who made it (its program, app id, pid and uid;
                see blame); with --system also, last, the user who made the change.
                kvd keeps at least each key's last 20 values and every value of the last 30 days
                (kvd --history-keep, --history-days); a deleted domain keeps its history.
                --limit N prints the newest N; --json prints an array of {"revision", "time",
                "key", "value", "uid", "writer"} objects (no "value" for a removal). A domain's history
                takes at most the larger of 1 MiB and 8 times the domain; the oldest goes first.
                --forget removes the past values of KEY (of the whole domain, without KEY) from
                every file kvd keeps: history, log, and copies it set aside; the current values
                stay. --keep-none marks KEY (or the whole domain) to keep no history, for tokens
                and passwords: what was kept is forgotten, later values are never kept; --keep
                lifts the mark. Each prints the revision; on the system instance, like History
                itself, for root and members of group kvd-admin only.
                """),
        Entry(
            name: "blame", aliases: [], usage: "blame DOMAIN [KEY]",
            summary: "show who set each current value of a domain",
            details: """
                Prints, for each key DOMAIN holds now (KEY only, if given), one a line: the key,
                the revision and local time that set its value, and who set it: the program
                (its path), app id, pid and uid of the process whose connection asked for it,
                as kvd learnt them from the kernel. "unknown" when history does not say: history
                is off or not kept for the key (history --keep-none), the value is older than
                history or than kvd's writer records, or was forgotten (history --forget).
                --json prints an array of {"key", "revision", "time", "writer"} objects. On the
                system instance, like history, for root and members of group kvd-admin only.
                """),
        Entry(
            name: "permit", aliases: [], usage: "permit [--revoke] APPID DOMAIN-PATTERN [--read-only]",
            summary: "let a sandboxed app reach more domains, or take that back",
            details: """
                A sandboxed app (Flatpak, snap; APPID such as org.example.App) reaches only its own
                domains (APPID and APPID.*), NSGlobalDomain and the public desktop settings (kvd
                --sandbox-readable). This lets it read and write the domains DOMAIN-PATTERN reaches
                too: a domain, the start of one then '*' (org.example.shared.*), or '*' (every
                domain: everything you have). --read-only: read them only. --revoke takes the grant
                back. Prints the revision; kvd keeps grants durably, and no sandboxed app can read
                or change them. See docs/sandboxes.md.
                """),
        Entry(
            name: "permits", aliases: [], usage: "permits [APPID]",
            summary: "list what sandboxed apps were permitted",
            details: """
                Prints each grant (every app's, or APPID's only), one a line: APPID, the
                pattern, and read-write or read-only. --json prints an array of {"app",
                "pattern", "readOnly"} objects.
                """),
        Entry(
            name: "restore", aliases: [], usage: "restore DOMAIN [KEY] --revision N",
            summary: "put a key, or a whole domain, back as it was after revision N",
            details: """
                Writes the value KEY had after revision N as a new change (or removes KEY, if it
                had none then); history itself is never rewritten. With no KEY, makes the whole
                domain as it was after revision N in one atomic change (a deleted domain comes
                back), refused if the domain changes while kvctl restores it: then nothing is
                restored. Find N with: kvctl history DOMAIN. A revision older than what kvd
                keeps is refused, naming the oldest revision it can restore. Only your own
                values are restored (a value equal to the system default becomes your own again);
                a key the administrator locks is left out, named, and the rest restored.
                """),
        Entry(
            name: "backup", aliases: [], usage: "backup FILE|-",
            summary: "write every domain, as of one revision, to one file",
            details: """
                Writes every domain of kvd (with --system, of the system instance) as it was at
                one revision, a consistent snapshot even while others write, to FILE (replaced
                atomically) or with - to stdout, as typed JSON: {"format": "kvd-backup",
                "version": 1, "revision": N, "created": TIME, "domains": {DOMAIN: {KEY: VALUE}}}.
                Says on stderr how many domains and keys, and the revision. Only the instance's
                own values: not the system defaults a user's kvd serves, not locks. A key whose
                stored value kvd cannot read is left out, named, and makes kvctl exit 1.
                Put it back with: kvctl restore-backup FILE --yes.
                """),
        Entry(
            name: "restore-backup", aliases: [], usage: "restore-backup FILE|- [--yes]",
            summary: "put back every domain of a backup file",
            details: """
                Makes each domain of the backup FILE (- reads stdin) hold exactly the values it
                had, one atomic change per domain, written as new changes (history keeps what
                was there before); domains not in the backup stay as they are. The whole file is
                checked first: a damaged file, or one of a newer backup version, restores
                nothing. Without --yes, only says what it would restore (which domains, how
                many keys) and exits 1. Your own values are restored, every domain it can; keys
                the administrator locks are left out; what was not restored is named with the
                reason (exit 1), and a rerun is suggested only when it may succeed.
                """),
        Entry(
            name: "completion", aliases: [], usage: "completion bash|zsh|fish",
            summary: "print a shell completion script",
            details: """
                Prints a script that completes kvctl's commands, options, type flags, and the
                domain and key names of the running kvd (asked with --no-autostart, so Tab never
                starts kvd; --socket and --system on the line are used). Load it with
                source <(kvctl completion bash), source <(kvctl completion zsh) or
                kvctl completion fish | source; make install puts it where each shell looks.
                """),
        Entry(
            name: "help", aliases: [], usage: "help [COMMAND]",
            summary: "explain kvctl, or one command",
            details: "Prints this help, or the help of COMMAND (also: kvctl COMMAND --help)."),
    ]

    static func canonicalName(_ name: String) -> String? {
        entries.first { $0.name == name || $0.aliases.contains(name) }?.name
    }

    static func entry(_ name: String) -> Entry? {
        entries.first { $0.name == name }
    }

    /// The usage line of a command, or of kvctl as a whole.
    static func usageLine(_ command: String?) -> String {
        guard let command, let entry = entry(command) else {
            return
                "usage: kvctl [--socket PATH] [--system] [--json] [--no-autostart] [--null] COMMAND ... (see: kvctl --help)"
        }
        return "usage: kvctl [OPTIONS] \(entry.usage) (see: kvctl help \(entry.name))"
    }

    /// The full help, or one command's.
    static func text(_ command: String?) -> String {
        if let command, let entry = entry(command) {
            let aliases = entry.aliases.isEmpty ? "" : "\nAlias: \(entry.aliases.joined(separator: ", "))\n"
            return
                "usage: kvctl [OPTIONS] \(entry.usage)\n\n\(entry.summary.prefix(1).uppercased() + entry.summary.dropFirst()).\n\n\(entry.details)\n\(aliases)"
        }
        let width = entries.map(\.usage.count).max() ?? 0
        let commands = entries.map { entry in
            let alias = entry.aliases.isEmpty ? "" : " (alias: \(entry.aliases.joined(separator: ", ")))"
            return "  " + entry.usage.padding(to: width) + "  " + entry.summary + alias
        }
        return """
            usage: kvctl [--socket PATH] [--system] [--json] [--no-autostart] [--null] COMMAND ...

            Reads and writes the settings kept by kvd, in the spirit of macOS `defaults`.
            With --system, every command works on the system instance (kvd --system): the
            defaults of every user of the machine, and the keys it locks.

            Commands:
            \(commands.joined(separator: "\n"))

            DOMAIN is a name like com.example.app (A-Z a-z 0-9 . _ -); -g means NSGlobalDomain.

            Options:
              --socket PATH    kvd's socket (else $KVD_SOCKET, else $XDG_RUNTIME_DIR/kvd.sock,
                               else /tmp/kvd-<uid>/kvd.sock, whose folder must be yours
                               with mode 0700)
              --system         the system instance: its socket is --socket, else
                               $KVD_SYSTEM_SOCKET, else /run/kvd/system.sock; never
                               autostarted. Anyone may read; changes need root or a
                               member of the group kvd-admin
              --json           print typed JSON (values, lists, revisions)
              --no-autostart   do not start kvd when nothing listens (also: KVD_NO_AUTOSTART=1)
              --null           domains and keys: each name exactly as stored, then a NUL
              --version        print kvctl's version
              -h, --help       this help; kvctl help COMMAND explains one command

            Exit status: 0 done, 1 not found or failed (also: a locked key, or a change to
            the system instance by someone else than root or kvd-admin), 2 wrong usage.

            More: man kvctl. The protocol kvctl speaks (every method, reply and error), for
            other clients: /usr/share/doc/kvd/docs/reference/protocol.md (docs/reference/ in
            kvd's sources).

            """
    }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
