#!/bin/sh
# scripts/release.sh VERSION [--skip-test] [--dry-run]: checks that this commit is release VERSION
# and creates the annotated tag vVERSION on it (docs/releases.md says what a release promises).
#
# Refuses (exit 1, one line on stderr saying what is missing) unless
#  - Sources/KVProtocol/Version.swift, kvd's one source of its version, says VERSION;
#  - CHANGELOG.md has a section "## VERSION — YYYY-MM-DD" and, above it, an "## Unreleased" one;
#  - api/KVClient.api is the baseline of VERSION (its header: "# This one: VERSION") and
#    api/KVClient.breaks lists no break (scripts/docs.sh --update-api writes both);
#  - the work tree is clean and the tag vVERSION does not exist yet;
#  - kvd, kvctl, kvctl-plist, habits and kvd-dconf-import print VERSION for --version, and the
#    kvd.pc that make libkvd writes says Version: VERSION;
#  - `make test` passes. --skip-test skips it, and says so on every line it prints after.
# --dry-run checks everything and creates no tag. Usage errors exit 2.
set -eu
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
usage() { echo "usage: scripts/release.sh X.Y.Z [--skip-test] [--dry-run]" >&2; exit 2; }
refuse() { echo "release: $* — no tag made" >&2; exit 1; }
version= skip_test=0 dry_run=0
for argument; do
    case $argument in
        --skip-test) skip_test=1 ;;
        --dry-run) dry_run=1 ;;
        -*) usage ;;
        *) [ -z "$version" ] || usage; version=$argument ;;
    esac
done
echo "$version" | grep -Eq '^[0-9]+\.[0-9]+\.[0-9]+$' || usage
tag=v$version

# What the repository says, cheapest first.
source_version=$(scripts/version.sh)
[ "$source_version" = "$version" ] || refuse "Sources/KVProtocol/Version.swift says $source_version, not $version"
grep -Eq "^## $(echo "$version" | sed 's/\./\\./g') — [0-9]{4}-[0-9]{2}-[0-9]{2}\$" CHANGELOG.md ||
    refuse "CHANGELOG.md has no section \"## $version — YYYY-MM-DD\""
grep -q '^## Unreleased$' CHANGELOG.md || refuse "CHANGELOG.md has no \"## Unreleased\" section above $version's"
baseline=$(python3 scripts/check-api.py --baseline-version)
[ "$baseline" = "$version" ] ||
    refuse "api/KVClient.api is the API baseline of $baseline, not $version (run scripts/docs.sh --update-api and commit it)"
! grep -qv '^#' api/KVClient.breaks ||
    refuse "api/KVClient.breaks still lists breaks; the baseline of $version must take them (scripts/docs.sh --update-api)"
[ -z "$(git status --porcelain)" ] || refuse "the work tree has changes that are not committed"
! git rev-parse -q --verify "refs/tags/$tag" >/dev/null || refuse "the tag $tag exists already"

# What the programs say.
$SWIFT build >/dev/null || refuse "swift build failed"
bin=$($SWIFT build --show-bin-path)
for program in kvd kvctl kvctl-plist habits; do
    said=$("$bin/$program" --version) || refuse "$program --version failed"
    [ "$said" = "$program $version" ] || refuse "$program --version says \"$said\", not \"$program $version\""
done
make -s libkvd giokvd >/dev/null || refuse "make libkvd giokvd failed"
said=$(.build/clib/gio/kvd-dconf-import --version)
[ "$said" = "kvd-dconf-import $version" ] || refuse "kvd-dconf-import --version says \"$said\""
grep -qx "Version: $version" .build/clib/kvd.pc || refuse ".build/clib/kvd.pc does not say Version: $version"

note=
if [ "$skip_test" = 1 ]; then
    note=" (WITHOUT make test: --skip-test)"
    echo "release: --skip-test: make test NOT run; $tag is checked by hand only" >&2
else
    make test || refuse "make test failed"
fi

if [ "$dry_run" = 1 ]; then
    echo "release: $version is ready to tag as $tag$note; --dry-run: no tag made"
    exit 0
fi
# The tag's message: the CHANGELOG section of this version.
message=$(awk -v head="## $version — " 'index($0, head) == 1 { on = 1; print "kvd " substr($0, 4); next }
    on && /^## / { exit } on { print }' CHANGELOG.md)
git tag -a --cleanup=verbatim "$tag" -m "$message" || refuse "git tag failed"
echo "release: tagged $(git rev-parse --short HEAD) as $tag$note; push it with: git push origin $tag"
