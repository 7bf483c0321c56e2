#!/usr/bin/env bash
# Checks the man pages in man/ (run by `make test`):
#  - `mandoc -T lint -W warning` reports nothing for each page;
#  - every command that `kvctl --help` lists has an entry in kvctl(1)'s COMMANDS, and every flag
#    that `kvctl --help` or `kvctl help COMMAND` prints (global options, type flags, command
#    flags) appears in kvctl(1); every option `kvd --help` prints appears in kvd(8); every
#    command and flag of `habits help` appears in habits(1).
# The lists come from the programs' help output, so a command or flag added to a program
# without its page fails here. Needs the debug build (`swift build`) and mandoc.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
command -v mandoc >/dev/null || { echo "check-man: mandoc is missing: apt-get install mandoc (or make deps)" >&2; exit 1; }
bin=${KVD_BIN_DIR:-$($SWIFT build --show-bin-path)}
for program in kvctl kvd habits; do
  [ -x "$bin/$program" ] || { echo "check-man: $bin/$program is missing: run swift build first" >&2; exit 1; }
done
status=0
for page in man/*.[0-9]; do
  if ! out=$(mandoc -T lint -W warning "$page" 2>&1) || [ -n "$out" ]; then
    echo "check-man: $page is not lint-clean (mandoc -T lint -W warning):" >&2
    echo "$out" >&2
    status=1
  fi
done
python3 - "$bin" <<'PY' || status=1
import re, subprocess, sys

bin_dir = sys.argv[1]

def run(*args):
    return subprocess.run([f"{bin_dir}/{args[0]}", *args[1:]], capture_output=True, text=True, check=True).stdout

def rendered(page):
    # Wide lines, no hyphenation or wrapping in the middle of a flag.
    text = subprocess.run(["mandoc", "-T", "ascii", "-O", "width=400", page], capture_output=True, text=True, check=True).stdout
    return re.sub(r".\x08", "", text)  # drop overstrike (bold/underline)

FLAG = re.compile(r"(?<![\w$-])(--?[A-Za-z][A-Za-z0-9-]*)")

def flags(text):
    return set(FLAG.findall(text))

def section(text, name):
    match = re.search(rf"^{name}\n(.*?)(?=^[A-Z][A-Z ]+\n)", text, re.S | re.M)
    return match.group(1) if match else ""

def has_flag(page_text, flag):
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", page_text) is not None

def has_entry(section_text, command):
    return re.search(rf"^\s+{re.escape(command)}(\s|$)", section_text, re.M) is not None

problems = []
kvctl_page = rendered("man/kvctl.1")
top = run("kvctl", "--help")
commands = re.findall(r"^  ([a-z][a-z-]*)\b", top.split("Commands:", 1)[1].split("\n\n", 1)[0], re.M)
if not commands:
    problems.append("kvctl --help lists no commands under 'Commands:' (has its layout changed?)")
wanted = flags(top)
for command in commands:
    if not has_entry(section(kvctl_page, "COMMANDS"), command):
        problems.append(f"kvctl(1) COMMANDS has no entry for the command '{command}' that kvctl --help lists")
    wanted |= flags(run("kvctl", "help", command))
for flag in sorted(wanted):
    if not has_flag(kvctl_page, flag):
        problems.append(f"kvctl(1) never mentions {flag}, which kvctl's help prints")

kvd_page = rendered("man/kvd.8")
for flag in sorted(flags(run("kvd", "--help"))):
    if not has_flag(kvd_page, flag):
        problems.append(f"kvd(8) never mentions {flag}, which kvd --help prints")

habits_page = rendered("man/habits.1")
habits_help = run("habits", "help")
for command in re.findall(r"^  ([a-z]+)\b", habits_help.split("commands:", 1)[1].split("\n\n", 1)[0], re.M):
    if not has_entry(section(habits_page, "COMMANDS"), command):
        problems.append(f"habits(1) COMMANDS has no entry for the command '{command}' that habits help lists")
for flag in sorted(flags(habits_help)):
    if not has_flag(habits_page, flag):
        problems.append(f"habits(1) never mentions {flag}, which habits help prints")

for problem in problems:
    print(f"check-man: {problem} (add it to the page in man/)", file=sys.stderr)
if problems:
    sys.exit(1)
print(f"check-man: kvctl(1) covers {len(commands)} commands and {len(wanted)} flags, kvd(8) and habits(1) their help")
PY
exit $status
