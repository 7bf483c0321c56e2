#!/bin/sh
# clib/gio/tests/switch-regressions.sh — the attack on the GNOME switch and the move at login
# (attack/38-switch-writes.md) kept as regression tests: each script there exits 0 once its
# defect is fixed and 1 (saying DEFECT) while it is present. These are the fixed ones; the others
# are open (the findings file and the issue say which). Needs root and the debug builds (as
# switch.sh); run by `make giokvd-test`. `many-keys.sh 2000 30`: 2,000 resets moved back within
# 30 s (one `dconf reset` each took about a minute); `writes.sh sync_per_domain_timeout` waits one
# write timeout (25 s), not one per domain.
set -eu
[ "$(id -u)" = 0 ] || { echo "switch-regressions: SKIPPED: needs root"; exit 0; }
here=$(cd "$(dirname "$0")" && pwd)
attack=$(cd "$here/../../../attack/38" && pwd)
failed=0
for test in "retry-overwrites-kvd-change.sh" "retry-overwrites-kvd-change.sh unreachable" \
    move-back-resets-direct-dconf.sh "system-default-record.sh default" "system-default-record.sh lock" \
    long-path-blocks-move.sh huge-domain-blocks-move.sh dconf-system-db-imported.sh umask-folders-unreadable.sh \
    deb-lacks-dconf-cli.sh package-removal-leaves-switch.sh \
    "record-deleted-reimports.sh delete" "record-deleted-reimports.sh garbage" "record-deleted-reimports.sh type" \
    move-back-retry-overwrites-dconf.sh date-in-kvd-move-back.sh "many-keys.sh 2000 30" reset-under-dconf-resurrected.sh \
    status-by-existence.sh "writes.sh fork_queued" "writes.sh sync_per_domain_timeout"; do
    # shellcheck disable=SC2086
    if out=$(sh "$attack"/$test 2>&1); then
        echo "ok $test"
    else
        why=$(echo "$out" | grep -E 'DEFECT|setup' | head -2)
        echo "switch-regressions: FAIL: $test: ${why:-$(echo "$out" | tail -3)}" >&2
        failed=1
    fi
done
exit $failed
