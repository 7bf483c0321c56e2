#!/usr/bin/env python3
"""The architecture check (make test): ARCHITECTURE.md's target table is Package.swift's targets.

Usage: scripts/check-architecture.py [ARCHITECTURE.md [Package.swift]]

Reads the table of ARCHITECTURE.md whose header starts `| target | owns | depends on |` (each row:
the target's name in backticks, what it owns, its dependencies in backticks or `—`, who uses it)
and the targets of Package.swift (`.target`, `.executableTarget`, `.systemLibrary`, each with its
`dependencies: [...]`; test targets are left out: they mirror the targets). Fails (exit 1),
naming each difference, when a target is in one and not the other, or when a row's dependencies
are not the target's. A row may name a system library it links (`libcurl`) that is not a target:
names that are not targets of the package in a "depends on" cell are ignored only when they
start with `lib`.
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TARGET_CALL = re.compile(r"\.(target|executableTarget|systemLibrary)\(\s*name:\s*\"([^\"]+)\"(.*?)\)\s*(?:,|\])",
                         re.S)


def package_targets(path):
    with open(path) as file:
        text = re.sub(r"//[^\n]*", "", file.read())
    targets = {}
    for match in TARGET_CALL.finditer(text):
        _, name, rest = match.groups()
        dependencies = re.search(r"dependencies:\s*\[(.*?)\]", rest, re.S)
        targets[name] = set(re.findall(r"\"([^\"]+)\"", dependencies.group(1))) if dependencies else set()
    return targets


def architecture_targets(path):
    with open(path) as file:
        lines = file.read().split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("| target | owns | depends on |")), None)
    if start is None:
        raise SystemExit(f"check-architecture: {path} has no table headed \"| target | owns | depends on | ...\"")
    rows = {}
    for number, line in enumerate(lines[start + 2:], start + 3):
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) < 3:
            raise SystemExit(f"check-architecture: {path}:{number}: a row needs target, owns, depends on")
        name = re.match(r"`([^`]+)`", cells[0])
        if not name:
            raise SystemExit(f"check-architecture: {path}:{number}: the target is not in backticks")
        rows[name.group(1)] = (number, set(re.findall(r"`([^`]+)`", cells[2])) | set(
            word for word in re.findall(r"\b(lib\w+)\b", cells[2])))
    return rows


def main():
    architecture = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "ARCHITECTURE.md")
    package = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "Package.swift")
    targets, rows = package_targets(package), architecture_targets(architecture)
    problems = []
    for name in sorted(set(targets) - set(rows)):
        problems.append(f"{name} is a target of Package.swift but has no row in ARCHITECTURE.md")
    for name in sorted(set(rows) - set(targets)):
        problems.append(f"ARCHITECTURE.md:{rows[name][0]}: {name} is not a target of Package.swift")
    for name in sorted(set(rows) & set(targets)):
        number, said = rows[name]
        said = {dependency for dependency in said if not (dependency.startswith("lib") and dependency not in targets)}
        if said != targets[name]:
            missing, extra = sorted(targets[name] - said), sorted(said - targets[name])
            problems.append(f"ARCHITECTURE.md:{number}: {name} depends on {', '.join(sorted(targets[name])) or 'nothing'}"
                            f" in Package.swift" + (f"; the row leaves out {', '.join(missing)}" if missing else "")
                            + (f"; the row adds {', '.join(extra)}" if extra else ""))
    for problem in problems:
        print(f"check-architecture: {problem}")
    if problems:
        print("check-architecture: ARCHITECTURE.md's target table and Package.swift disagree; fix the one that is wrong")
        return 1
    print(f"check-architecture: ARCHITECTURE.md's table matches Package.swift's {len(targets)} targets and their dependencies")
    return 0


if __name__ == "__main__":
    sys.exit(main())
