import KVSystem

/// The owner and mode rule by which the system instance trusts a drop-in file or a folder on
/// the way to it (`docs/drop-in-rules.md`): whoever could write it could dictate every user's
/// locks and values, so only root, kvd's own user, and the admin group (`--admin-group`) may.
///
/// - It belongs to root, to kvd's user, or to a member of the admin group (who may change the
///   instance anyway, and whose files in a folder the group may write are theirs).
/// - Others may not write it, except a folder above the config folder whose sticky bit is set
///   (as `/tmp`): there, others cannot rename or remove what root owns.
/// - Its group may write it only when that group is root's (gid 0) or the admin group.
///
/// A symbolic link is judged by what it leads to (a file on its opened descriptor, a folder by
/// `stat`). Pure; thread-safe.
struct DropInTrust {
    /// Root and kvd's user.
    var owners: [UInt32]
    /// Whether a user is a member of the admin group (asked only of other owners).
    var isAdmin: (UInt32) -> Bool = { _ in false }
    /// The admin group's gid, nil when there is no such group.
    var adminGroupID: UInt32?
    /// The admin group's name, for messages.
    var adminGroup: String

    /// Why the owner of `status` may not be trusted, or nil: the one rule for a symbolic link
    /// (whose mode means nothing; its owner may replace it even in a sticky folder).
    func ownerRefusal(of status: FileStatus, subject: String) -> String? {
        guard !owners.contains(status.owner), !isAdmin(status.owner) else { return nil }
        return
            "\(subject) belongs to uid \(status.owner), neither root nor kvd's user nor a member of the admin group \(adminGroup)"
    }

    /// Why `status` may not be trusted, in words about `subject` ("it", "the file it links
    /// to"), or nil. `stickyAllowed`: whether a sticky folder others may write is accepted (a
    /// folder above the config folder).
    func refusal(of status: FileStatus, subject: String = "it", stickyAllowed: Bool = false) -> String? {
        let mode = String(status.permissions & 0o7777, radix: 8)
        if let refused = ownerRefusal(of: status, subject: subject) { return refused }
        let sticky = status.permissions & 0o1000 != 0
        if status.permissions & 0o002 != 0, !(stickyAllowed && sticky && status.kind == .directory) {
            return "others may write \(subject) (mode \(mode))"
        }
        if status.permissions & 0o020 != 0, status.group != 0, status.group != adminGroupID {
            return
                "the group of \(subject) (gid \(status.group)) may write it (mode \(mode)), and is neither root's nor the admin group \(adminGroup)"
        }
        return nil
    }
}
