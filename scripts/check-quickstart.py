#!/usr/bin/env python3
"""The quick-start check (make test): README.md's shell quick start, read from README.md, works.

Usage: scripts/check-quickstart.py [BIN_DIR]   (BIN_DIR: kvd and kvctl; default `swift build
--show-bin-path`)

Takes the ```sh block that follows the line `<!-- quickstart: ... -->` in README.md, starts a real
kvd on a socket and state folder of its own in a temporary folder, and runs the block's lines
one by one with bash, `kvctl` being BIN_DIR's (on PATH first; KVD_SOCKET names the socket,
KVD_NO_AUTOSTART=1 so that nothing else is started). A line ending in `# → TEXT` must print TEXT
(its standard output, stripped); every line must exit 0. Fails (exit 1) naming the line, what it
printed and why; prints how long it took. A second of work: the lines are few.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MARKER = "<!-- quickstart:"


def quickstart_lines(readme):
    with open(readme) as file:
        lines = file.read().split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith(MARKER)), None)
    if start is None or start + 1 >= len(lines) or lines[start + 1].strip() != "```sh":
        raise SystemExit(f"check-quickstart: README.md has no ```sh block after a line starting {MARKER}")
    block = []
    for number in range(start + 2, len(lines)):
        if lines[number].startswith("```"):
            return block
        if lines[number].strip():
            block.append((number + 1, lines[number]))
    raise SystemExit("check-quickstart: README.md's quick-start block does not end")


def wait_for(path, process, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return
        if process.poll() is not None:
            raise SystemExit(f"check-quickstart: kvd exited ({process.returncode}) before it listened")
        time.sleep(0.02)
    raise SystemExit(f"check-quickstart: kvd did not listen on {path} within {seconds} s")


def run(lines, bin_dir, work):
    environment = dict(os.environ, PATH=f"{bin_dir}:{os.environ.get('PATH', '')}", KVD_SOCKET=f"{work}/kvd.sock",
                       KVD_NO_AUTOSTART="1", HOME=work, XDG_CONFIG_HOME=f"{work}/config")
    environment.pop("XDG_RUNTIME_DIR", None)
    failures = []
    for number, line in lines:
        command, _, expected = line.partition("# →")
        result = subprocess.run(["bash", "-c", command], env=environment, cwd=work, capture_output=True, text=True,
                                timeout=30)
        said = result.stdout.strip()
        if result.returncode != 0:
            failures.append(f"README.md:{number}: `{command.strip()}` exited {result.returncode}: "
                            f"{result.stderr.strip() or said}")
        elif expected and said != expected.strip():
            failures.append(f"README.md:{number}: `{command.strip()}` printed {said!r}, not {expected.strip()!r}")
    return failures


def main():
    if len(sys.argv) > 1:
        bin_dir = os.path.abspath(sys.argv[1])
    else:
        swift = os.environ.get("SWIFT", "swift")
        bin_dir = subprocess.run([swift, "build", "--show-bin-path"], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.strip()
    for program in ("kvd", "kvctl"):
        if not os.access(os.path.join(bin_dir, program), os.X_OK):
            raise SystemExit(f"check-quickstart: {bin_dir}/{program} is missing; build first (swift build)")
    lines = quickstart_lines(os.path.join(ROOT, "README.md"))
    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="kvd-quickstart-")
    kvd = subprocess.Popen([f"{bin_dir}/kvd", "--socket", f"{work}/kvd.sock", "--state-dir", f"{work}/state"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(f"{work}/kvd.sock", kvd)
        failures = run(lines, bin_dir, work)
    finally:
        kvd.terminate()
        try:
            kvd.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kvd.kill()
        shutil.rmtree(work, ignore_errors=True)
    for failure in failures:
        print(f"check-quickstart: {failure}")
    if failures:
        print("check-quickstart: README.md's quick start does not work as written; fix the README or kvd")
        return 1
    print(f"check-quickstart: README.md's {len(lines)} quick-start lines ran against a real kvd "
          f"({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
