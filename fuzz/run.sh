#!/bin/sh
# Runs every fuzz target for FUZZ_SECONDS seconds each (default 60), one after another, starting
# from the seed corpus in fuzz/corpus/TARGET; new inputs go to .build/fuzz/corpus/TARGET and
# crashes to .build/fuzz/crashes/. Prints the executions per target; fails if any target failed.
set -eu
cd "$(dirname "$0")/.."
OUT=${FUZZ_BUILD:-.build/fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-60}
TARGETS=${FUZZ_TARGETS:-"typed-json varlink domain-file log commit value-parser plist libkvd-json libkvd-current"}
mkdir -p "$OUT/crashes"
# Swift's own crash handler would catch the fault before AddressSanitizer reports it.
export SWIFT_BACKTRACE=enable=no
# Leak checking is off: Swift keeps enum tags in a pointer's spare bits, so LeakSanitizer cannot
# see those references and reports live values as leaked (a loop of a million refused values
# keeps the same RSS).
summary=""
status=0
for target in $TARGETS; do
    mkdir -p "$OUT/corpus/$target"
    log="$OUT/$target.log"
    echo "fuzz: $target for ${SECONDS_EACH}s"
    if "$OUT/bin/$target" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 -detect_leaks=0 -artifact_prefix="$OUT/crashes/$target-" \
        "$OUT/corpus/$target" "fuzz/corpus/$target" >"$log" 2>&1; then
        result=ok
    else
        result=FAILED
        status=1
        grep -E "invariant broken|ERROR: |Fatal error|SUMMARY|Test unit written" "$log" | head -20 || true
        echo "fuzz: $target FAILED; full output in $log"
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    summary="$summary$(printf '%-14s %12s executions  %s' "$target" "${runs:-?}" "$result")\n"
done
printf "fuzz summary (%ss each):\n$summary" "$SECONDS_EACH"
exit $status
