#!/usr/bin/env python3
"""The API-breaking-changes check of KVClient, against the committed baseline api/KVClient.api.

Usage: scripts/check-api.py SYMBOL-GRAPH-DIR [--update] [--verbose]
       scripts/check-api.py --baseline-version     (prints the version api/KVClient.api describes)

`swift package diagnose-api-breaking-changes` needs the last release as a git ref, which a
shallow CI clone or a checkout without tags does not have; so the baseline is a file: one line
per public symbol of KVClient's symbol graph (with what it re-exports: KVConnection, `Value`),
its kind, its path and its declaration as the compiler prints it. scripts/docs.sh (`make docs`,
`make test`) writes the graph and runs this.

Fails (exit 1) when a symbol of the baseline is gone or its declaration changed: a break for apps
built on the released version. Symbols that are new are listed and pass (adding API is not a
break). On a release — the version raised in Sources/KVProtocol/Version.swift and CHANGELOG.md's
Unreleased section named — run `scripts/docs.sh --update-api` (this script with --update): it
writes the baseline for that version (its header names the version and the commit) and empties
api/KVClient.breaks; commit both with the release (scripts/release.sh checks that the baseline
names the version released and that no break is pending). A break made on purpose goes in
CHANGELOG.md under "Changed (breaking for KVClient)", raises the major version (the minor one
before 1.0: docs/releases.md), and its baseline line is copied into api/KVClient.breaks (the
breaks accepted since the last release).
"""
import glob
import json
import os
import re
import subprocess
import sys

BASELINE = os.path.join(os.path.dirname(__file__), "..", "api", "KVClient.api")
ACCEPTED = os.path.join(os.path.dirname(__file__), "..", "api", "KVClient.breaks")
VERSION_SWIFT = os.path.join(os.path.dirname(__file__), "..", "Sources", "KVProtocol", "Version.swift")
HEADER = """# KVClient's public API, the baseline of scripts/check-api.py (one symbol a line: kind, path,
# declaration). A release updates it (scripts/docs.sh --update-api); a line that disappears or
# changes is an API break for apps built on the version this file describes.
"""
VERSION_LINE = re.compile(r"^# This one: (\d+\.\d+\.\d+)\b")


BREAKS_HEADER = """# The breaks of api/KVClient.api accepted since that release, each said in CHANGELOG.md under
# "Changed (breaking for KVClient)": the baseline's line, copied. A release empties this file.
"""


def api_lines(folder):
    lines = set()
    for path in sorted(glob.glob(os.path.join(folder, "KVClient*.symbols.json"))):
        with open(path) as file:
            graph = json.load(file)
        for symbol in graph["symbols"]:
            if symbol["accessLevel"] not in ("public", "open"):
                continue
            declaration = "".join(fragment["spelling"] for fragment in symbol.get("declarationFragments", []))
            lines.add(f"{symbol['kind']['identifier']} {'.'.join(symbol['pathComponents'])}: {' '.join(declaration.split())}")
    return lines


def source_version():
    """The version in Sources/KVProtocol/Version.swift (kvd's one source of its version)."""
    with open(VERSION_SWIFT) as file:
        found = re.search(r'static let current = "(\d+\.\d+\.\d+)"', file.read())
    return found.group(1) if found else None


def baseline_version():
    """The version api/KVClient.api's header names ("# This one: X.Y.Z ..."), or None."""
    with open(BASELINE) as file:
        for line in file:
            found = VERSION_LINE.match(line)
            if found:
                return found.group(1)
    return None


def write_baseline(current):
    version = source_version()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    os.makedirs(os.path.dirname(BASELINE), exist_ok=True)
    with open(BASELINE, "w") as file:
        file.write(HEADER + f"# This one: {version} (generated from commit {commit or 'unknown'} and the work tree on it).\n")
        file.write("".join(line + "\n" for line in sorted(current)))
    with open(ACCEPTED, "w") as file:
        file.write(BREAKS_HEADER)
    print(f"check-api: wrote {len(current)} symbols to api/KVClient.api, the baseline of {version}; emptied api/KVClient.breaks")


def main():
    if sys.argv[1:] == ["--baseline-version"]:
        print(baseline_version() or "none")
        return 0
    arguments = [argument for argument in sys.argv[1:] if not argument.startswith("--")]
    if len(arguments) != 1:
        print(__doc__)
        return 2
    current = api_lines(arguments[0])
    if not current:
        print(f"check-api: no KVClient symbol graph in {arguments[0]}")
        return 1
    if "--update" in sys.argv:
        write_baseline(current)
        return 0
    with open(BASELINE) as file:
        baseline = {line.rstrip("\n") for line in file if line.strip() and not line.startswith("#")}
    with open(ACCEPTED) as file:
        accepted = {line.rstrip("\n") for line in file if line.strip() and not line.startswith("#")}
    gone, new = sorted(baseline - current - accepted), sorted(current - baseline)
    for line in sorted((baseline - current) & accepted):
        print(f"check-api: accepted break (api/KVClient.breaks, CHANGELOG.md): {line}")
    if new and "--verbose" in sys.argv:
        for line in new:
            print(f"check-api: new (not a break): {line}")
    for line in gone:
        print(f"check-api: BREAKING, removed or changed: {line}")
    if gone:
        print("check-api: KVClient's API breaks the baseline api/KVClient.api (the last release). Put back what apps use, "
              "or, for a break on purpose, copy its line into api/KVClient.breaks and say so in CHANGELOG.md (see scripts/check-api.py)")
        return 1
    print(f"check-api: no break of api/KVClient.api ({len(baseline)} symbols) but those accepted; {len(new)} symbols new or changed "
          "since (--verbose lists them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
