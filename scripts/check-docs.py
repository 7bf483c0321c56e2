#!/usr/bin/env python3
"""Fails when a public symbol of KVClient (and of KVConnection, which it re-exports) has no `///` doc comment.

Usage: scripts/check-docs.py SYMBOL-GRAPH-DIR   (the KVClient*.symbols.json that `swift build
-Xswiftc -emit-symbol-graph` wrote). Symbols declared outside Sources/KVClient and Sources/KVConnection (re-exported from
KVValues) and implementations of Codable and CustomStringConvertible requirements (documented by
their protocol) are not checked. Prints one line per undocumented symbol and exits 1 if any.
"""
import glob
import json
import sys

INHERITED = {"description", "init(from:)", "encode(to:)"}


def main():
    missing = []
    for path in sorted(glob.glob(sys.argv[1] + "/KVClient*.symbols.json")):
        with open(path) as file:
            graph = json.load(file)
        for symbol in graph["symbols"]:
            uri = symbol.get("location", {}).get("uri", "")
            name = symbol["pathComponents"][-1]
            if symbol["accessLevel"] not in ("public", "open") or not any(folder in uri for folder in ("/Sources/KVClient/", "/Sources/KVConnection/")) or name in INHERITED:
                continue
            if not symbol.get("docComment"):
                line = symbol["location"]["position"]["line"] + 1
                missing.append(f"{uri.split('/Sources/', 1)[1]}:{line}: {'.'.join(symbol['pathComponents'])} has no /// doc comment")
    for line in sorted(set(missing)):
        print("Sources/" + line)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
