#!/usr/bin/env python3
"""Fails when a stored property of the storage or loop types could be written outside its file.

The storage and loop types are every class and actor declared under Sources/KVStorage and
Sources/KVDaemon (the state that is shared and outlives a call), and the value types named in
VALUE_OWNERS (state a class holds and hands out only as a copy). Each keeps its mutable state
to itself: each stored `var` it declares is
`private`, `fileprivate`, `private(set)` or `fileprivate(set)`, so the compiler refuses a write
from any other file (an extension in `Type+Concern.swift` included). A type that needs more room
than one file extracts a type with its own state (CONTRIBUTING.md, "Size"). `let` properties are
not checked: a constant reference is the owner's; the referenced type's own state is checked
where it is listed.

Usage: scripts/check-owners.py [--list]   (--list prints every type under Sources/KVStorage and
Sources/KVDaemon with the stored vars other files may write; plain values are allowed those)
"""

import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FOLDERS = ["Sources/KVStorage", "Sources/KVDaemon"]

# Value types held as state and kept as the classes are: "Type": "the file that declares it".
VALUE_OWNERS: dict[str, str] = {
    "State": "Sources/KVStorage/StoreState.swift",  # Store.State, behind the store's lock
    "DomainState": "Sources/KVStorage/DomainState.swift",
    "DomainView": "Sources/KVStorage/DomainState.swift",
    "HistoryFileInfo": "Sources/KVStorage/HistoryFileInfo.swift",
    "RecentCommit": "Sources/KVStorage/HistoryFileInfo.swift",
    "HistoryMark": "Sources/KVStorage/HistoryCache.swift",
    "KeptHistory": "Sources/KVStorage/HistoryCache.swift",
    "SystemLayer": "Sources/KVDaemon/SystemLayer.swift",
}

DECLARATION = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|internal|private|fileprivate|package|final)\s+)*"
                         r"(class|struct|actor|enum)\s+([A-Za-z_]\w*)")
REFERENCE_KINDS = ("class", "actor")
STORED_VAR = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*((?:(?:public|internal|private|fileprivate|package)"
                        r"(?:\(set\))?\s+|static\s+|nonisolated(?:\(unsafe\))?\s+|weak\s+|unowned\s+|lazy\s+)*)var\s+"
                        r"([A-Za-z_]\w*)\b(.*)$")
OWNED_ACCESS = re.compile(r"\b(private|fileprivate)\b")


def code_only(text):
    """The text with comments and string literals blanked (newlines kept), so braces count."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    text = re.sub(r'"""[\s\S]*?"""', lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"//[^\n]*", "", text)


def stored_vars(path):
    """{type name: (kind, [(line, name, access)])} for each class, struct, actor or enum declared in
    `path`: the vars declared directly in its body that are stored (not computed)."""
    with open(path) as file:
        lines = code_only(file.read()).split("\n")
    types, stack, depth = {}, [], 0  # stack: (type name, depth inside its body)
    for number, line in enumerate(lines, 1):
        declared = DECLARATION.match(line)
        if stack and depth == stack[-1][1]:
            var = STORED_VAR.match(line)
            if var and not is_computed(var.group(3), lines, number):
                types[stack[-1][0]][1].append((number, var.group(2), var.group(1).strip()))
        for character in line:
            if character == "{":
                depth += 1
                if declared:
                    stack.append((declared.group(2), depth))
                    types.setdefault(declared.group(2), (declared.group(1), []))
                    declared = None
            elif character == "}":
                if stack and depth == stack[-1][1]:
                    stack.pop()
                depth -= 1
    return types


def is_computed(rest, lines, number):
    """Whether a `var` whose declaration continues with `rest` is computed: a body follows its
    type with no `=`, and the body is not only observers (`willSet`/`didSet`)."""
    if "=" in rest.split("{")[0] or "{" not in rest:
        return False
    body = rest.split("{", 1)[1] + " " + " ".join(lines[number:number + 3])
    return not re.match(r"\s*(willSet|didSet)\b", body)


def main():
    found = {}  # (type name, file): (kind, stored vars); two files may each declare a `State`
    for folder in FOLDERS:
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if name.endswith(".swift"):
                path = os.path.join(folder, name)
                for type_name, declared in stored_vars(os.path.join(ROOT, path)).items():
                    found[(type_name, path)] = declared
    owned = {where for where, (kind, _) in found.items() if kind in REFERENCE_KINDS}
    owned |= set(VALUE_OWNERS.items())
    if "--list" in sys.argv:
        for (type_name, path), (kind, variables) in sorted(found.items(), key=lambda item: item[0][1]):
            open_vars = [f"{name}:{line}" for line, name, access in variables if not OWNED_ACCESS.search(access)]
            if open_vars:
                mark = " (owned)" if (type_name, path) in owned else ""
                print(f"{path}: {kind} {type_name}{mark}: {', '.join(open_vars)}")
        return 0
    problems = []
    for type_name, path in sorted(owned):
        if (type_name, path) not in found:
            problems.append(f"check-owners: {path} declares no {type_name} (update VALUE_OWNERS)")
            continue
        for line, name, access in found[(type_name, path)][1]:
            if not OWNED_ACCESS.search(access):
                problems.append(f"{path}:{line}: {type_name}.{name} can be written from other files: make it "
                                f"private or private(set), and give its writers a method of {type_name}'s")
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"check-owners: the stored vars of {len(owned)} storage and loop types are written only in their files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
