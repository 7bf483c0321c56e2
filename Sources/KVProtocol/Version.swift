/// The version of the kvd programs (kvd, kvctl, habits), printed by `--version` and served by
/// `org.varlink.service.GetInfo`. Raised with each release; see CHANGELOG.md.
public enum KVDVersion {
    public static let current = "0.1.0"
}
