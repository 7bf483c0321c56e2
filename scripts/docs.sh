#!/bin/sh
# make docs: the DocC archive of KVClient, with the toolchain's docc (no SwiftPM plugin), into
# .build/docs/KVClient.doccarchive. Fails on any DocC warning and on a public symbol of KVClient
# without a doc comment (scripts/check-docs.py). Builds in its own scratch folder, so the
# symbol-graph flags do not make the next `swift build` start over.
set -eu
SWIFT=${SWIFT:-swift}
DOCC=${DOCC:-$(dirname "$(command -v "$SWIFT")")/docc}
scratch=.build/docs
graphs=$PWD/$scratch/symbol-graphs
# The graphs are written when a module compiles: kept between runs, since an up-to-date build writes none.
rm -rf "$graphs/KVClient" "$scratch/KVClient.doccarchive"
mkdir -p "$graphs/all" "$graphs/KVClient"
$SWIFT build --target KVClient --scratch-path "$scratch" \
  -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$graphs/all" >/dev/null
cp "$graphs"/all/KVClient*.symbols.json "$graphs/KVClient/"
python3 scripts/check-docs.py "$graphs/KVClient"
"$DOCC" convert Sources/KVClient/KVClient.docc --additional-symbol-graph-dir "$graphs/KVClient" \
  --output-path "$scratch/KVClient.doccarchive" --fallback-display-name KVClient \
  --fallback-bundle-identifier io.kvd.KVClient --warnings-as-errors --analyze
echo "docs: $scratch/KVClient.doccarchive"
