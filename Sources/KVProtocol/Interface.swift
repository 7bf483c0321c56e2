import KVValues

/// The varlink interfaces kvd serves, with their descriptions as served by
/// `org.varlink.service.GetInterfaceDescription`.
public enum DefaultsInterface {
    public static let name = "io.kvd.Defaults"

    /// The interface description; declares everything the contract fixes.
    public static let description = """
        # kvd: domain/key property-list values, durable and versioned.
        # The contract: a reply to Set, Delete, Apply, ForgetHistory or KeepHistory means the
        # change is durable; an error means nothing changed (OutcomeUnknown: maybe). Releases
        # only add: methods, errors, optional (?) parameters and reply members, which a client
        # ignores when it does not know them. Replies come in call order.
        # Every method, reply, error, stream and page: docs/reference/protocol.md in kvd's sources.
        # Values are typed JSON: strings, bools, integers (no '.'/exponent), reals (always with
        # '.' or an exponent), arrays, dictionaries ({"$dict": {...}} when a key starts with '$'),
        # {"$date": "RFC 3339"} and {"$data": "base64"}.
        interface io.kvd.Defaults

        # One key's new value; no value means the key is removed.
        type Change (key: string, value: ?object)

        # A key's value as the layers combine (a locked system value, else the user's value,
        # else the system default); the revision at which the user's own value last changed
        # (0 when the user has none); and where the value comes from: "user", "system" (a
        # default of the machine's system instance) or "locked" (the system's value of a key
        # it locked). A locked key with no system value is NotFound.
        method Get(domain: string, key: string) -> (value: object, revision: int, source: string)

        # Sets one key. With ifRevision, only if the key last changed at that revision (0: absent).
        method Set(domain: string, key: string, value: object, ifRevision: ?int) -> (revision: int)

        # Removes one key, or the whole domain when no key is given.
        method Delete(domain: string, key: ?string) -> (revision: int)

        # Commits all changes atomically. With ifRevision, only if the domain last changed then.
        method Apply(domain: string, changes: []Change, ifRevision: ?int) -> (revision: int)

        # All values of a domain. A user's kvd with a system layer adds sources: the keys whose
        # value is not the user's, each "system" or "locked", and every key locked without a
        # system value, as "locked", though it has no value and is not in values.
        method List(domain: string) -> (values: [string]object, revision: int)

        # List, and also the keys whose stored values kvd cannot read (it keeps them as they are
        # in the domain file), each with the reason; those keys are not in values.
        method ListAll(domain: string) -> (values: [string]object, revision: int, unreadable: [string]string)

        # The names of all domains.
        method Domains() -> (domains: []string)

        # Needs "more": the first reply (initial: true) has the current values, each later
        # reply the changes of one commit, or of the system layer (then revision is the
        # user's store revision, unchanged, and systemRevision grows). A change whose value
        # does not come from the user carries "source": "system" or "locked" beside key and
        # value. Current values larger than one piece (about 1 MiB) come in several replies:
        # the first with initial: true, later ones with initial: false, all but the last with
        # partial: true. systemRevision (a user's kvd that follows a system instance): the
        # system instance's revision the reply reflects; replies come in increasing order of
        # (revision, systemRevision), compared by revision first. A key locked without a system
        # value (it reads as NotFound, and writes get KeyLocked) comes as a change with no value
        # and "source": "locked": in the current values, and whenever its lock comes or goes (a
        # change with no value and no source then means it is unlocked, still without a value).
        # writer: who made a commit's changes, when known (never in the first replies nor in a
        # change of the system layer; on the system instance only to admins, and to the user
        # who made it).
        method Watch(domain: string, key: ?string) -> (revision: int, changes: []Change, initial: bool, partial: ?bool, systemRevision: ?int, writer: ?Writer)

        # Needs "more": Watch for every domain whose name starts with prefix (every domain when
        # none is given), on one connection. The first reply (initial: true, no domain, no
        # changes) gives the revision and systemRevision the stream starts from; each later
        # reply names its domain and has the changes of one commit to it, or of the system
        # layer to it, as a Watch of that domain gets them (same sources, locks, order). Read
        # a domain's current values apart (Snapshot, or Watch for one too large for it) and
        # skip the replies at or before the (revision, systemRevision) they were read at.
        # With current: true, the stream starts with those domains' current values instead, all
        # at the revision and systemRevision of its first reply: before that reply come replies
        # with initial: true and partial: true, each naming a domain and holding its current
        # values (as a Snapshot of it; a domain absent from them is empty), or naming none and
        # listing in withheld domains left out (over 256 KiB each, or past 4 MiB in all): read
        # those apart. That last first reply then carries withheld (maybe empty); an older kvd
        # sends no withheld and no current values.
        method WatchAll(prefix: ?string, current: ?bool) -> (revision: int, domain: ?string, changes: []Change, initial: bool, partial: ?bool, systemRevision: ?int, withheld: ?[]string, writer: ?Writer)

        # A domain's current values as the first reply of a Watch of it (initial: true; the
        # same sources and locks without a value; no domain is no changes), in one reply:
        # revision is the store's, systemRevision the system layer's, the read was made at.
        # TooLarge when they take more than one reply (a Watch sends them in pieces).
        method Snapshot(domain: string) -> (revision: int, changes: []Change, initial: bool, systemRevision: ?int)

        # One kept change of one key: the revision that made it, when (RFC 3339; none for a
        # value the key already had when kvd began to keep its domain's history), the new value
        # (none: the key was removed), who made it (writer; none when unknown: kvd's own change,
        # or one older than writer records) and uid, the writer's uid.
        type HistoryEntry (revision: int, time: ?string, key: string, value: ?object, uid: ?int, writer: ?Writer)

        # Who made a change: the process on the other end of the connection that asked for it,
        # as the kernel and /proc named it when kvd accepted the connection: its uid, pid,
        # program (the executable's path, else its command name; at most 255 bytes) and app id
        # (Flatpak, snap, or an XDG app unit's; at most 255 bytes). Each part only when known.
        type Writer (uid: ?int, pid: ?int, program: ?string, app: ?string)

        # One current key of a domain and who set its value: the revision that set it, and when
        # history holds that change, when (RFC 3339) and its writer. No writer: unknown (history
        # off, the key or domain keeps none, the value older than history or writer records, or
        # forgotten).
        type BlameEntry (key: string, revision: int, time: ?string, writer: ?Writer)

        # For each key the domain holds now (only key, if given), sorted, who set it (from
        # history). keepsNone as in History. NotFound when the domain (or key) holds no value;
        # TooLarge when the entries do not fit one reply (ask for one key). On the system
        # instance, for admins only (others get org.varlink.service.PermissionDenied).
        method Blame(domain: string, key: ?string) -> (entries: []BlameEntry, keepsNone: ?bool)

        # The kept changes of a domain (of one key, if given), newest first, at most limit, only
        # those older than beforeRevision if given; a deleted domain keeps its history. A reply
        # carries what fits one message: when older entries were left out (never part of one
        # commit's), nextBeforeRevision is set; call again with it as beforeRevision for the
        # next page. With atRevision, the domain (or key) as it was after that revision: for
        # each key that had a value then, the entry that set it (TooLarge if that does not fit
        # one reply). oldestRevision: the oldest revision whose state can be rebuilt (0: the
        # whole history is kept). History is kept when kvd folds its log into the domain
        # files: every committed change is there, and no other. A domain's history takes at
        # most the larger of 1 MiB and 8 times the domain: past it, the oldest entries go
        # first (a key's current value stays). keepsNone: the domain (or the key) is marked to
        # keep no history (KeepHistory). On the system instance, for admins only (others get
        # org.varlink.service.PermissionDenied).
        method History(domain: string, key: ?string, limit: ?int, atRevision: ?int, beforeRevision: ?int) -> (entries: []HistoryEntry, oldestRevision: int, nextBeforeRevision: ?int, keepsNone: ?bool)

        # Removes the past values of a key (of every key of the domain, if none is given) from
        # every file kvd keeps: the history file, the log (compacted at once), and the copies
        # it set aside (rewritten without them, or removed). The values the domain still has
        # stay in its history, as values of no known time; states are kept from the newest
        # forgotten revision on. Durable when answered: no crash brings them back. Works with
        # history off too. revision: the store's revision then. Writes' rules apply (on the
        # system instance, for admins only).
        method ForgetHistory(domain: string, key: ?string) -> (revision: int)

        # Marks a key (every key of the domain, if none is given) to keep no history
        # (keep: false; what was kept is forgotten at once, as by ForgetHistory; later changes
        # are in the log only until its next fold), or to keep history again (keep: true).
        # The mark is durable, and stays while history is off. Writes' rules apply.
        method KeepHistory(domain: string, key: ?string, keep: bool) -> (revision: int)

        # Needs "more": every domain at one revision (a consistent snapshot, for a backup): one
        # reply per domain with its values, and unreadable: the keys whose stored values kvd
        # cannot read, with the reason (not in values); a domain too large for one reply comes
        # in several, each with some of its keys; then a last reply with no domain. revision
        # is the same in every reply. The instance's own values only: not the system layer's
        # defaults, not the locks.
        method Backup() -> (revision: int, domain: ?string, values: [string]object, unreadable: ?[string]string)

        # What a user granted a sandboxed app (kvctl permit) beyond its own domains: the domains
        # pattern reaches (a domain name; the start of one then "*"; "*" alone: every domain),
        # to read, and to write unless readOnly.
        type AppPermit (app: string, pattern: string, readOnly: bool)

        # Grants the sandboxed app app (a Flatpak or snap app id) the domains pattern reaches,
        # replacing what it was granted for that pattern. Durable when answered. A sandboxed
        # caller gets org.varlink.service.PermissionDenied (so do all three methods); on the
        # system instance, writes' rules apply.
        method Permit(app: string, pattern: string, readOnly: ?bool) -> (revision: int)

        # Takes back what Permit granted app for pattern; NotFound (domain: the pattern, key:
        # the app id) when it granted nothing. Durable when answered.
        method Revoke(app: string, pattern: string) -> (revision: int)

        # What users granted: every app's, or only app's, sorted by app and pattern. On the
        # system instance, for admins only.
        method Permits(app: ?string) -> (permits: []AppPermit)

        error NotFound (domain: string, key: ?string)
        error InvalidName (name: string, reason: string)
        error InvalidValue (reason: string)
        error RevisionMismatch (revision: int)
        error StorageFailure (reason: string)
        error TooLarge (limit: int)
        # The key's stored value cannot be read (it is kept as it is); nothing changed.
        error UnreadableValue (domain: string, key: string, reason: string)
        # The machine's administrator locked the key (kvctl --system lock); nothing changed.
        # Root or a member of the group kvd-admin can lift it: kvctl --system unlock DOMAIN KEY.
        error KeyLocked (domain: string, key: string)
        # History no longer has the state asked for: states from oldestRevision on can be rebuilt.
        error HistoryTruncated (domain: string, oldestRevision: int)
        # A change to a fleet domain was sent to etcd and its answer was lost, and reading the
        # keys back could not tell whether etcd made it: it may or may not have changed (unlike
        # StorageFailure, which means nothing changed). Read the value back before retrying.
        error OutcomeUnknown (reason: string)

        """

    /// Fully qualified error names.
    public enum Error {
        public static let notFound = "io.kvd.Defaults.NotFound"
        public static let invalidName = "io.kvd.Defaults.InvalidName"
        public static let invalidValue = "io.kvd.Defaults.InvalidValue"
        public static let revisionMismatch = "io.kvd.Defaults.RevisionMismatch"
        public static let storageFailure = "io.kvd.Defaults.StorageFailure"
        public static let tooLarge = "io.kvd.Defaults.TooLarge"
        public static let unreadableValue = "io.kvd.Defaults.UnreadableValue"
        public static let keyLocked = "io.kvd.Defaults.KeyLocked"
        public static let historyTruncated = "io.kvd.Defaults.HistoryTruncated"
        public static let outcomeUnknown = "io.kvd.Defaults.OutcomeUnknown"
    }
}

/// `io.kvd.System`: served by the system instance (`kvd --system`) beside `io.kvd.Defaults`.
public enum SystemInterface {
    public static let name = "io.kvd.System"

    public static let description = """
        # kvd's system instance: defaults for every user of the machine, and the keys it locks.
        # Anyone may read; only root and members of the group kvd-admin may change anything
        # (io.kvd.Defaults writes, Lock, Unlock): others get org.varlink.service.PermissionDenied.
        # The caller is known from the kernel (SO_PEERCRED) when its connection is accepted.
        interface io.kvd.System

        # One lock of a key: an admin's (no file), or a drop-in lock file's (file: its path).
        # A key holding "*" is a glob.
        type Lock (domain: string, key: string, file: ?string)

        # A change to one key's lock.
        type LockChange (key: string, locked: bool)

        # Locks a key for every user: users' kvd then serve the system value (or none) and
        # refuse every write to it with io.kvd.Defaults.KeyLocked. Durable when answered.
        # A key holding "*" is a glob: it locks every key it matches ("*" alone, the domain).
        method Lock(domain: string, key: string) -> (revision: int)

        # Lifts a lock; io.kvd.Defaults.NotFound if the key is not locked.
        method Unlock(domain: string, key: string) -> (revision: int)

        # The locks, of one domain or of all, sorted by domain and key: the admins' locks, and
        # the drop-in lock files' that apply to the caller (each with its file; a key locked
        # both ways is listed twice, the admin's lock first).
        method Locks(domain: ?string) -> (locks: []Lock)

        # Needs "more": how users' kvd follow the system layer. First the snapshot, in replies
        # of about 1 MiB (one entry at least; a domain may take several), each with a domain's
        # values (changes) or its locked keys (locks), then one with synced: true and no
        # domain; after that, each reply the changes of one commit. revision: the snapshot's
        # revision, then each commit's. A reader applies the snapshot once synced arrives.
        # The values and locks are the admins' over the drop-in files' (those for everyone and
        # those for the caller's uid and groups, as the kernel gave them). A locked key holding
        # "*" is a glob ("*" alone: the whole domain). batch: true says the next reply belongs
        # to the same change (a reload of the drop-in files): a reader applies them together.
        method Mirror(dconfProfile: ?string) -> (revision: int, domain: ?string, changes: []Change, locks: []LockChange, synced: bool, batch: ?bool)

        # The fleet mirror of a system instance started with --etcd: the etcd members given,
        # the one in use, what the mirror is doing (starting, listing, watching, waiting to
        # retry, stopped), the etcd revision it holds and the newest one etcd told of (lag:
        # the difference), the listings made again after a compaction, the last failure, and
        # the etcd keys left out because they cannot be read (each with its reason; at most the
        # first 100 in etcd key order, each key cut to 200 characters; problemCount counts
        # them all).
        type FleetStatus (
          endpoints: []string,
          memberInUse: ?string,
          phase: string,
          appliedRevision: int,
          seenRevision: int,
          lag: int,
          relists: int,
          lastError: ?string,
          problems: []string,
          problemCount: ?int,
          prefix: string,
          domains: []string
        )

        # The drop-in files (DIR/defaults.d/NAME.json and DIR/locks.d/NAME, DIR: kvd's
        # --config-dir, default /etc/kvd; the rules: docs/drop-in-rules.md, kvd(8)): the folder,
        # the files applied at the last read in the order they combine (the later wins), those
        # that could not be read or were refused with why (one that was good before keeps its
        # last good content, kept durably across restarts), the generation of the combination,
        # and the names in the folders that are not read (skipped; hidden names are left out, and
        # so are editors' and package managers' leftovers in kvd's own folders, not in dconf's).
        # A reason never quotes a file's content.
        type DropInProblem (file: string, reason: string)
        type DropInStatus (
          directory: string,
          files: []string,
          problems: []DropInProblem,
          generation: int,
          skipped: ?[]string
        )

        # The instance's store revision, how many domains it holds, its fleet mirror (none
        # without --etcd), and its drop-in files.
        method Status() -> (revision: int, domains: int, fleet: ?FleetStatus, dropIns: ?DropInStatus)

        # Admins: reads the drop-in files again (as SIGHUP and a change in the folders do) and
        # replaces the old combination in one step: every mirror gets the difference as one
        # batch of replies (all but the last with batch: true) at one new revision, answered
        # once that revision is durable; the current revision when users would see no change.
        # The files form a layer beneath what admins set (values and locks through this
        # interface or etcd): neither overwrites the other.
        method Reload() -> (revision: int)

        # Where the system value and lock of a key come from: value "admin" (set through kvctl
        # or etcd), "file" (a drop-in file) or none; file: the drop-in file holding a value for
        # the key (beneath an admin's, if value is "admin"), and fileValue its value (typed
        # JSON); lock "admin", "file" or none, with lockFile the file whose line locks it (a key
        # or a glob; also when an admin locks it too); adminGroup: the group whose members may
        # change the instance and its files (--admin-group). The files counted are those that
        # reach the caller (files for some users or groups: those among them). Anyone may call
        # it (users' kvctl names the file of a lock).
        method Source(domain: string, key: string) -> (
          value: ?string,
          file: ?string,
          fileValue: ?object,
          lock: ?string,
          lockFile: ?string,
          adminGroup: ?string
        )

        """
}

/// `org.varlink.service`, which every varlink service implements.
public enum ServiceInterface {
    public static let name = "org.varlink.service"

    public static let description = """
        # The Varlink Service Interface is provided by every varlink service. It
        # describes the service and the interfaces it implements.
        interface org.varlink.service

        # Get a list of all the interfaces a service provides and information
        # about the implementation.
        method GetInfo() -> (
          vendor: string,
          product: string,
          version: string,
          url: string,
          interfaces: []string
        )

        # Get the description of an interface that is implemented by this service.
        method GetInterfaceDescription(interface: string) -> (description: string)

        # The requested interface was not found.
        error InterfaceNotFound (interface: string)

        # The requested method was not found
        error MethodNotFound (method: string)

        # The interface defines the requested method, but the service does not
        # implement it.
        error MethodNotImplemented (method: string)

        # One of the passed parameters is invalid.
        error InvalidParameter (parameter: string)

        # Client is denied access
        error PermissionDenied ()

        # Method is expected to be called with 'more' set to true, but wasn't
        error ExpectedMore ()

        """

    /// Fully qualified error names.
    public enum Error {
        public static let interfaceNotFound = "org.varlink.service.InterfaceNotFound"
        public static let methodNotFound = "org.varlink.service.MethodNotFound"
        public static let methodNotImplemented = "org.varlink.service.MethodNotImplemented"
        public static let invalidParameter = "org.varlink.service.InvalidParameter"
        public static let expectedMore = "org.varlink.service.ExpectedMore"
        public static let permissionDenied = "org.varlink.service.PermissionDenied"
    }
}
