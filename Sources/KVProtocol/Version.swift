/// The version of kvd: the one place it is written. Every program's `--version` (kvd, kvctl,
/// kvctl-plist, habits), `org.varlink.service.GetInfo`, and, read from this line by
/// `scripts/version.sh`, the .deb, kvd.pc, libkvd's file name, kvd-dconf-import and
/// `scripts/release.sh`. Semantic versioning; what each part promises: docs/releases.md.
public enum KVDVersion {
    public static let current = "0.2.0"
}
