#!/usr/bin/env python3
"""Fails when a Swift function body or a Swift file is longer than the house allows.

The limits (CONTRIBUTING.md, "Size"):
  - a function body (func, init, deinit, subscript) under Sources/ or fuzz/: at most
    FUNCTION_LINES lines of code between its braces (blank and comment-only lines not counted);
  - a file under Sources/, Tests/ or fuzz/: at most FILE_LINES lines.

A longer function is split where it mixes concerns (parse, then check, then act); a longer file
gives up a type with its own private state. The ALLOWED lists below are empty; an entry that is
no longer needed fails too, so the lists stay honest.

Usage: scripts/check-size.py [--list]   (--list prints every function over the limit, allowed or not)
"""

import os
import re
import sys

FUNCTION_LINES = 40
FILE_LINES = 400
ROOTS = ["Sources", "Tests", "fuzz"]

# Exceptions, each with its reason: none; split a piece rather than list it. A function is
# "path:Type.name" ("path:name" for a free function); a file is its path.
ALLOWED_FUNCTIONS: set[str] = set()
ALLOWED_FILES: set[str] = set()

DECLARATION = re.compile(r"\b(func|init|deinit|subscript)\b")
TYPE = re.compile(r"\b(class|struct|enum|extension|actor|protocol)\s+([A-Za-z_][A-Za-z0-9_.]*)")


def strip(text):
    """Two copies of the text, newlines kept: comments and string literals blanked (so braces
    count), and comments only blanked (so a line of a string counts as code)."""
    out, kept = [], []
    i, n = 0, len(text)

    def skip_string(i):
        # i is at the opening quote run (after any #s). Returns the index after the literal.
        hashes = 0
        j = i
        while j > 0 and text[j - 1] == "#":
            hashes += 1
            j -= 1
        multi = text.startswith('"""', i)
        quote = '"""' if multi else '"'
        i += len(quote)
        close = quote + "#" * hashes
        escape = "\\" + "#" * hashes
        while i < n:
            if text.startswith(escape + "(", i):
                i = skip_code(i + len(escape) + 1, ")")
                continue
            if text.startswith(escape, i):
                i += len(escape) + 1
                continue
            if text.startswith(close, i):
                return i + len(close)
            if not multi and text[i] == "\n":
                return i
            i += 1
        return i

    def skip_code(i, closer):
        # Skips code inside an interpolation up to its matching closer; returns the index after it.
        depth = 0
        while i < n:
            c = text[i]
            if c == '"':
                i = skip_string(i)
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    return i + 1
                depth -= 1
            i += 1
        return i

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            kept.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            kept.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = skip_string(i)
            out.append('"' + re.sub(r"[^\n]", " ", text[i + 1 : j - 1]) + '"' if j - i >= 2 else text[i:j])
            kept.append(text[i:j])
            i = j
        else:
            out.append(c)
            kept.append(c)
            i += 1
    return "".join(out), "".join(kept)


def functions(path):
    """(qualified name, body lines, first line) of each function body in the file."""
    code, kept = strip(open(path, encoding="utf-8").read())
    # Whether each line holds code (not blank, not only a comment).
    counts = [1 if line.strip() else 0 for line in kept.split("\n")]
    found = []
    line_of = [0] * (len(code) + 1)
    line = 1
    for index, c in enumerate(code):
        line_of[index] = line
        if c == "\n":
            line += 1
    line_of[len(code)] = line
    # Types enclosing each brace, to qualify names.
    stack = []  # entries: (kind, name) for each open brace; kind "type", "func" or "other"
    pending_type = None
    pending_func = None  # (name, start index, paren depth at declaration)
    paren = 0
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c.isalpha() or c == "_":
            j = i
            while j < n and (code[j].isalnum() or code[j] == "_"):
                j += 1
            word = code[i:j]
            before = code[:i].rstrip()[-1:] if i else ""
            if word in ("class", "struct", "enum", "extension", "actor", "protocol") and before != ".":
                m = TYPE.match(code, i)
                if m:
                    pending_type = m.group(2).split(".")[-1]
                    pending_func = None
            elif word in ("func", "init", "deinit", "subscript") and before not in (".",):
                if word == "func":
                    m = re.compile(r"func\s+([^\s(<]+)").match(code, i)
                    name = m.group(1) if m else "?"
                else:
                    following = code[j:].lstrip()[:1]
                    if word == "init" and following not in ("(", "?", "!", "<"):
                        i = j
                        continue
                    name = word
                pending_func = (name, i, paren)
                pending_type = None
            elif word in ("var", "let", "case") and pending_func and paren == pending_func[2]:
                pending_func = None  # a requirement without a body, then something else
            i = j
            continue
        if c in "([":
            paren += 1
        elif c in ")]":
            paren -= 1
        elif c == "{":
            if pending_func and paren == pending_func[2]:
                stack.append(("func", pending_func[0], i))
                pending_func = None
            elif pending_type and paren == 0:
                stack.append(("type", pending_type, i))
                pending_type = None
            else:
                stack.append(("other", None, i))
        elif c == "}":
            if pending_func and paren == pending_func[2]:
                pending_func = None
            if stack:
                kind, name, start = stack.pop()
                if kind == "func":
                    types = [entry[1] for entry in stack if entry[0] == "type"]
                    qualified = ".".join(types[-1:] + [name])
                    body = sum(counts[line_of[start] : line_of[i] - 1])
                    found.append((qualified, body, line_of[start]))
        i += 1
    return found


def main():
    listing = "--list" in sys.argv[1:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    problems = []
    seen_functions, seen_files = set(), set()
    for top in ROOTS:
        for folder, _, names in sorted(os.walk(top)):
            for name in sorted(names):
                if not name.endswith(".swift"):
                    continue
                path = os.path.join(folder, name)
                lines = open(path, encoding="utf-8").read().count("\n")
                if lines > FILE_LINES:
                    if path in ALLOWED_FILES:
                        seen_files.add(path)
                    else:
                        problems.append(
                            f"{path}: {lines} lines (at most {FILE_LINES}): extract a type (with its own private state)"
                        )
                if top == "Tests":
                    continue  # a test reads as one scenario, top to bottom: only its file is held
                for qualified, body, line in functions(path):
                    if body <= FUNCTION_LINES:
                        continue
                    key = f"{path}:{qualified}"
                    if listing:
                        print(f"{path}:{line}: {qualified} {body}")
                    if key in ALLOWED_FUNCTIONS:
                        seen_functions.add(key)
                    else:
                        problems.append(
                            f"{path}:{line}: {qualified} has a body of {body} lines (at most {FUNCTION_LINES}):"
                            " split it where it mixes concerns"
                        )
    for stale in sorted(ALLOWED_FUNCTIONS - seen_functions):
        problems.append(f"scripts/check-size.py: {stale} is within the limit now: take it off ALLOWED_FUNCTIONS")
    for stale in sorted(ALLOWED_FILES - seen_files):
        problems.append(f"scripts/check-size.py: {stale} is within the limit now: take it off ALLOWED_FILES")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(
        f"check-size: every function body within {FUNCTION_LINES} lines, every file within {FILE_LINES}"
        f" ({len(ALLOWED_FUNCTIONS)} functions and {len(ALLOWED_FILES)} files allowed over, to split)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
