/// Which of dconf's files a user gets, and in which order, by the dconf profile the user's kvd
/// names (its `DCONF_PROFILE`, sent with the Mirror call; none: `user`): the named profile in
/// `DCONF/profile/` (a path there by its name), else `user`'s. Where dconf gives a profile name
/// that does not exist, or a path elsewhere (a file of the user's own), no system database at
/// all, kvd gives `user`'s: a user's environment never lifts the site's locks. Pure.
struct DconfSelection: Equatable, Sendable {
    /// dconf's folder (`--dconf-dir`).
    var root: String
    /// Each profile's system databases, in its order (the profile's file name: its name).
    var profiles: [String: [String]]

    static let defaultProfile = "user"

    /// The profile a peer gets: the one it names, if it is one of the site's, else `user`'s
    /// (nil only when the site has no `user` profile either).
    func profileName(for peer: DropInPeer?) -> String? {
        let fallback = profiles[Self.defaultProfile] == nil ? nil : Self.defaultProfile
        guard var name = peer?.dconfProfile else { return fallback }
        if name.hasPrefix("/") {
            guard name.hasPrefix(root + "/profile/") else { return fallback }
            name = String(name.dropFirst(root.count + "/profile/".count))
        }
        return profiles[name] == nil || name.contains("/") ? fallback : name
    }

    /// The database whose keyfile or lock file is at `path`, or nil for a file that is not one
    /// of dconf's.
    func database(of path: String) -> String? {
        let prefix = root + "/db/"
        guard path.hasPrefix(prefix) else { return nil }
        let folder = path.dropFirst(prefix.count).prefix { $0 != "/" }
        return folder.hasSuffix(".d") ? String(folder.dropLast(2)) : nil
    }

    /// The flags a peer's profile adds after its files' (one a profile, by name): peers of
    /// different profiles differ in them, since their files combine in a different order.
    func flags(for name: String?) -> [Bool] { profiles.keys.sorted().map { $0 == name } }

    /// The profile named by `flags` (as ``flags(for:)`` made them), if any.
    func profileName(in flags: ArraySlice<Bool>) -> String? {
        zip(profiles.keys.sorted(), flags).first { $0.1 }?.0
    }

    /// The order of a file in the combination for `profile` (``DropInSet/read(_:keeping:rank:)``):
    /// dconf's beneath kvd's own (0), and each database beneath those named before it in the
    /// profile, as dconf lets an earlier database win.
    func rank(_ path: String, profile: String?) -> Int {
        guard path.hasPrefix(root + "/") || path == root else { return 0 }
        let databases = profile.flatMap { profiles[$0] } ?? []
        guard let database = database(of: path), let index = databases.firstIndex(of: database) else {
            return -1 - databases.count
        }
        return -1 - index
    }
}
