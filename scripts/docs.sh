#!/bin/sh
# make docs: the DocC archive of KVClient, with the toolchain's docc (no SwiftPM plugin), into
# .build/docs/KVClient.doccarchive. Fails on any DocC warning and on a public symbol of KVClient
# without a doc comment (scripts/check-docs.py). Builds in its own scratch folder, so the
# symbol-graph flags do not make the next `swift build` start over. Then compares KVClient's API
# with api/KVClient.api (scripts/check-api.py): a removed or changed symbol fails.
set -eu
SWIFT=${SWIFT:-swift}
DOCC=${DOCC:-$(dirname "$(command -v "$SWIFT")")/docc}
scratch=.build/docs
graphs=$PWD/$scratch/symbol-graphs
# A module's graph is written only when it compiles, and KVClient's graph also holds what it
# re-exports (KVConnection): KVClient is compiled again each time, so no graph is ever stale.
rm -rf "$graphs" "$scratch/KVClient.doccarchive"
touch Sources/KVClient/Exports.swift
mkdir -p "$graphs/all" "$graphs/KVClient"
$SWIFT build --target KVClient --scratch-path "$scratch" \
  -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$graphs/all" >/dev/null
cp "$graphs"/all/KVClient*.symbols.json "$graphs/KVClient/"
python3 scripts/check-docs.py "$graphs/KVClient"
# The API-breaking-changes check against api/KVClient.api (the last release's API);
# `scripts/docs.sh --update-api` rewrites the baseline on a release.
python3 scripts/check-api.py "$graphs/KVClient" ${1:+--update}
"$DOCC" convert Sources/KVClient/KVClient.docc --additional-symbol-graph-dir "$graphs/KVClient" \
  --output-path "$scratch/KVClient.doccarchive" --fallback-display-name KVClient \
  --fallback-bundle-identifier io.kvd.KVClient --warnings-as-errors --analyze
echo "docs: $scratch/KVClient.doccarchive"
