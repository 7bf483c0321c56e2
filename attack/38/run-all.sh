#!/bin/sh
# attack/38/run-all.sh — runs every attack script of issue 38 in turn and prints one line each:
# DEFECT (exit 1: the finding reproduces) or OK (exit 0). Root; the builds must exist (lib.sh).
# SLOW=1 adds the two that take minutes (many-keys.sh, writes.sh sync_per_domain_timeout).
cd "$(dirname "$0")"
run() { out=$(timeout 600 sh "$@" 2>&1); status=$?; printf '%-7s %s: %s\n' "$([ $status = 0 ] && echo OK || { [ $status = 1 ] && echo DEFECT || echo "ERR($status)"; })" "$*" "$(echo "$out" | grep -m1 -E 'DEFECT|OK' | cut -c1-160)"; }
for script in retry-overwrites-kvd-change reset-under-dconf-resurrected huge-domain-blocks-move long-path-blocks-move \
    move-back-resets-direct-dconf move-back-retry-overwrites-dconf date-in-kvd-move-back dconf-system-db-imported \
    dconf-locks-bypassed umask-folders-unreadable status-by-existence root-key-roundtrip; do run "$script.sh"; done
run retry-overwrites-kvd-change.sh unreachable
for variant in delete garbage type; do run record-deleted-reimports.sh "$variant"; done
for variant in default lock; do run system-default-record.sh "$variant"; done
run deb-lacks-dconf-cli.sh
run package-removal-leaves-switch.sh
for scenario in fork_queued changed_once other_object_reads exit_without_sync many_objects restart crash_in_flight \
    full_disk no_flicker writable_changed stopped_past_timeout; do run writes.sh "$scenario"; done
if [ -n "${SLOW:-}" ]; then run many-keys.sh; run writes.sh sync_per_domain_timeout; fi
