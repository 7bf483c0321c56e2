#!/usr/bin/env python3
"""The link check (make test): every reference in the documents and comments points somewhere.

Usage: scripts/check-links.py [FILE...]   (default: every file below; exit 1 on a broken one)

It reads README.md, ARCHITECTURE.md, CONTRIBUTING.md, CHANGELOG.md (its links only: its history
names files that are gone), docs/, bench/README.md, man/, and the files of Sources/, Examples/, bench/, clib/,
Tests/, tests/, scripts/, fuzz/, systemd/, packaging/, the Makefile and Package.swift, and finds
 - Markdown links `[text](target)` that are not URLs: the file (relative to the document) must
   exist, and a `#anchor` must be one of its headings (GitHub's anchors: lower case, spaces to
   `-`, punctuation but `-` and `_` dropped);
 - cited paths: `Sources/...`, `docs/...`, `scripts/...` and the other top folders, and the top
   files (`README.md`, `CONTRIBUTING.md`, ...), relative to the repository; a `.md` path may carry a
   `#anchor`; a path with `*` or `$` in it is a pattern and is skipped;
 - cited sections: `README "Limits"`, `docs/x.md's "Section"`, `CONTRIBUTING.md, "Section"`: the
   file must have a heading of that text (backticks ignored);
 - in a Markdown file, a section cited by name alone (see "Streams"): a heading of the same file;
 - DocC's `<doc:Article>` in Sources/: the article must be in the same .docc folder.
Each broken one is printed as FILE:LINE: what, and where it points. This file is not read (its
own examples point nowhere on purpose).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DOCUMENTS = ["README.md", "ARCHITECTURE.md", "CONTRIBUTING.md", "CHANGELOG.md", "bench/README.md"]
TREES = ["docs", "man", "Sources", "Examples", "bench", "clib", "Tests", "scripts", "fuzz", "systemd", "packaging"]
TOP_FOLDERS = "Sources|Examples|Tests|scripts|clib|docs|bench|api|man|packaging|systemd|fuzz"
TOP_FILES = "README|CONTRIBUTING|ARCHITECTURE|CHANGELOG|CONTRACT"
MARKDOWN_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
CITED_PATH = re.compile(
    rf"(?<![\w./$<-])((?:(?:{TOP_FOLDERS})/[\w.+/-]*[\w+]|(?:{TOP_FILES})\.md|LICENSE|Makefile|Package\.swift)(?:#[\w-]+)?)")
CITED_SECTION = re.compile(
    rf"(?<![\w/.-])((?:{TOP_FILES})(?:\.md)?|docs/[\w/.-]+\.md|bench/README\.md)(?:'s)?,? (?:section )?"
    r"(?:\"|\\\(dq|“)([^\"“”\\\n]{2,80})(?:\"|\\\(dq|”)")
DOCC_LINK = re.compile(r"<doc:([\w-]+)>")
SEE_SECTION = re.compile(r"(?<![\w/.-])[Ss]ee (?:the )?\"([^\"\n]{3,80})\"(?! (?:in|of) )")


def slug(heading):
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path, cache={}):
    if path not in cache:
        found, in_code = [], False
        with open(path, encoding="utf-8", errors="replace") as file:
            for line in file:
                if line.startswith("```"):
                    in_code = not in_code
                elif not in_code and line.startswith("#"):
                    found.append(line.lstrip("#").strip())
        cache[path] = found
    return cache[path]


def anchors(path):
    seen, result = {}, set()
    for heading in headings(path):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def check_anchor(target_file, anchor, where, problems):
    if not target_file.endswith(".md"):
        return
    if anchor not in anchors(target_file):
        problems.append(f"{where}: no heading with anchor #{anchor} in {os.path.relpath(target_file, ROOT)}")


def section_file(name):
    if name in ("README", "CONTRIBUTING", "ARCHITECTURE", "CHANGELOG", "CONTRACT"):
        name += ".md"
    return os.path.join(ROOT, name)


def check_line(path, number, line, problems, is_markdown, cite_paths):
    where = f"{os.path.relpath(path, ROOT)}:{number}"
    if is_markdown:
        for target in MARKDOWN_LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(resolved):
                problems.append(f"{where}: link to {target}, which is not in the repository")
            elif anchor:
                check_anchor(resolved, anchor, where, problems)
        for section in SEE_SECTION.findall(line):
            wanted = section.replace("`", "").strip().lower()
            if not any(heading.replace("`", "").strip().lower() == wanted for heading in headings(path)):
                problems.append(f"{where}: cites section \"{section}\", which is no heading of this file")
    if not cite_paths:
        return
    for match in CITED_PATH.finditer(line):
        cited = match.group(1).rstrip(".")
        if line[match.end():match.end() + 2] in (".{", ".*") or line[match.end():match.end() + 1] in ("{", "*", "$"):
            continue  # a pattern: bench/results.{json,md}, Sources/*/...
        if any(re.fullmatch(r"[A-Z][A-Z_]{2,}", part) and part not in ("README", "LICENSE") for part in cited.split("/")):
            continue  # a placeholder: fuzz/corpus/TARGET
        file_part, _, anchor = cited.partition("#")
        resolved = os.path.join(ROOT, file_part)
        if not os.path.exists(resolved):
            problems.append(f"{where}: cites {file_part}, which is not in the repository")
        elif anchor:
            check_anchor(resolved, anchor, where, problems)
    for name, section in CITED_SECTION.findall(line):
        target = section_file(name)
        if section.startswith(("$", "/")) or not os.path.exists(target):
            continue  # reported as a cited path
        wanted = section.replace("`", "").strip().lower()
        if not any(heading.replace("`", "").strip().lower() == wanted for heading in headings(target)):
            problems.append(f"{where}: cites section \"{section}\" of {name}, which has no such heading")
    if "/Sources/" in path or path.startswith(os.path.join(ROOT, "Sources")):
        for article in DOCC_LINK.findall(line):
            folder = path if os.path.isdir(path) else os.path.dirname(path)
            while folder.startswith(ROOT) and not folder.endswith(".docc"):
                folder = os.path.dirname(folder)
            docc = folder if folder.endswith(".docc") else None
            if docc and not os.path.exists(os.path.join(docc, article + ".md")):
                problems.append(f"{where}: <doc:{article}> names no article in {os.path.relpath(docc, ROOT)}")


def files_to_check():
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split("\n")
    chosen = []
    for name in tracked:
        if not name or not os.path.isfile(os.path.join(ROOT, name)):
            continue
        if name in DOCUMENTS or name in ("Makefile", "Package.swift") or name.split("/")[0] in TREES:
            chosen.append(name)
    return chosen


def is_text(path):
    with open(path, "rb") as file:
        return b"\0" not in file.read(8192)


def main():
    names = sys.argv[1:] or files_to_check()
    problems = []
    for name in names:
        path = os.path.join(ROOT, name)
        if not is_text(path) or "/corpus/" in name or name == "scripts/check-links.py":
            continue
        is_markdown = name.endswith(".md")
        cite_paths = name != "CHANGELOG.md"
        with open(path, encoding="utf-8", errors="replace") as file:
            for number, line in enumerate(file, 1):
                check_line(path, number, line, problems, is_markdown, cite_paths)
    for problem in problems:
        print(f"check-links: {problem}")
    if problems:
        print(f"check-links: {len(problems)} reference(s) point nowhere; fix the reference or the target")
        return 1
    print(f"check-links: every link, cited file and cited section in {len(names)} files holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
