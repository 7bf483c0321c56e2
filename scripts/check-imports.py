#!/usr/bin/env python3
"""Fails when a target imports another target of this package without declaring it.

SwiftPM builds a target against every module its dependencies bring along, so `import KVProtocol`
in a target that declares only KVClient compiles, and breaks the day KVClient stops depending on
KVProtocol. `swift build --explicit-target-dependency-import-check error` is meant to catch this
but reports nothing with this toolchain, so `make test` runs this instead.

Usage: scripts/check-imports.py [PACKAGE-DUMP.json]   (default: runs `swift package dump-package`)
Prints one line per undeclared import (file:line: what to add where) and exits 1 if any.
"""
import json
import os
import re
import subprocess
import sys

IMPORT = re.compile(r"^\s*(?:@testable\s+|@_implementationOnly\s+|(?:public|package|internal)\s+)?import\s+(?:(?:class|struct|enum|protocol|func|var|let|typealias)\s+)?(\w+)")


def package_dump():
    if len(sys.argv) > 1:
        with open(sys.argv[1]) as file:
            return json.load(file)
    swift = os.environ.get("SWIFT", "swift")
    return json.loads(subprocess.run([swift, "package", "dump-package"], check=True, capture_output=True, text=True).stdout)


def declared(target):
    names = set()
    for dependency in target["dependencies"]:
        for kind in ("byName", "target", "product"):
            if kind in dependency and dependency[kind]:
                names.add(dependency[kind][0])
    return names


def main():
    package = package_dump()
    targets = {target["name"]: target for target in package["targets"]}
    problems = []
    for name, target in sorted(targets.items()):
        if target["type"] == "system":
            continue
        folder = target.get("path") or ("Tests/" if target["type"] == "test" else "Sources/") + name
        allowed = declared(target) | {name}
        for root, _, files in os.walk(folder):
            for file in sorted(files):
                if not file.endswith(".swift"):
                    continue
                path = os.path.join(root, file)
                with open(path, encoding="utf-8") as source:
                    for number, line in enumerate(source, 1):
                        match = IMPORT.match(line)
                        if match and match.group(1) in targets and match.group(1) not in allowed:
                            problems.append(f"{path}:{number}: {name} imports {match.group(1)} without declaring it; "
                                            f"add \"{match.group(1)}\" to {name}'s dependencies in Package.swift")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
