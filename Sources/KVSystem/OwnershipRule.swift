/// The one rule by which kvd trusts a file or folder that others could have made or changed
/// (its state folder, the fallback socket folder, the etcd password file, the folder of the
/// system socket): it must be of the expected kind, belong to one of the expected users, and
/// have none of the forbidden permission bits. Each caller says in its own words what is wrong
/// and what to do. Pure; thread-safe.
///
/// ```swift
/// let rule = OwnershipRule(kind: .directory, owners: [uid], forbiddenPermissions: 0o077)
/// rule.violation(of: try system.status(folder, followingLinks: false))  // nil: trusted
/// ```
public struct OwnershipRule: Sendable, Equatable {
    /// How a status breaks the rule; the first one found, in this order.
    public enum Violation: Sendable, Equatable {
        /// It is not of the expected kind (this kind; a symbolic link is not followed).
        case kind(FileStatus.Kind)
        /// It belongs to this user, none of the expected owners.
        case owner(UInt32)
        /// It has forbidden permission bits: these are its permissions (`st_mode & 07777`).
        case permissions(UInt32)
    }

    /// The kind it must be, or `nil` for any.
    public var kind: FileStatus.Kind?
    /// The users it may belong to.
    public var owners: [UInt32]
    /// The permission bits it must not have, like `0o077` (none for group or others).
    public var forbiddenPermissions: UInt32

    public init(kind: FileStatus.Kind?, owners: [UInt32], forbiddenPermissions: UInt32) {
        self.kind = kind
        self.owners = owners
        self.forbiddenPermissions = forbiddenPermissions
    }

    /// What is wrong with `status` (kind, then owner, then permissions), or `nil` if it may be
    /// trusted.
    public func violation(of status: FileStatus) -> Violation? {
        if let kind, status.kind != kind { return .kind(status.kind) }
        if !owners.contains(status.owner) { return .owner(status.owner) }
        if status.permissions & forbiddenPermissions != 0 { return .permissions(status.permissions) }
        return nil
    }
}
