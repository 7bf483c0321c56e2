"""The shared-machine row of make bench: another user's Get on the
system instance while one uid floods it.

The system instance runs as root, holding an 8 MB domain (2,000 keys in the smoke mode) and a
16 KiB key. One uid that is not an admin holds 64 connections to it: a third send messages far
over the 64 KiB a reader may send (1 MiB, reconnecting after each TooLarge), a third List the 8 MB
domain over and over (reading each reply), a third pipeline 2,000 Gets of the 16 KiB key and
never read (reconnecting when shed). Meanwhile kvbench, as another uid, measures Get latency
against the same instance, and once more with no flood. Target: the flooded p99 at most 10 ms.

It switches uids (to 61001 and 61002, which need no account), so it runs as root only and is
skipped otherwise. Everything lives in a folder of /tmp others may enter (0755), removed after.
"""
import json
import os
import select
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import time

FLOODER = 61001
READER = 61002
CONNECTIONS = 64


def call(sock, method, parameters):
    message = {"method": method, "parameters": parameters}
    sock.sendall(json.dumps(message).encode() + b"\0")
    reply = b""
    while not reply.endswith(b"\0"):
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise RuntimeError(f"the system instance closed the connection during {method}")
        reply += chunk
    return json.loads(reply[:-1])


def become(uid, cpus):
    """A preexec_fn (or a forked child's first step): no groups, the uid as its own gid, pinned."""
    def step():
        if cpus:
            os.sched_setaffinity(0, cpus)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return step


def flood(path, big_domain, hot_key, seconds):
    """The flooder's loop (in a forked child that became FLOODER): until `seconds` pass."""
    get = json.dumps({"method": "io.kvd.Defaults.Get", "parameters": {"domain": "bench.flood", "key": hot_key}}).encode() + b"\0"
    listing = json.dumps({"method": "io.kvd.Defaults.List", "parameters": {"domain": big_domain}}).encode() + b"\0"
    junk = b'{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"k","value":"' + b"x" * (1 << 20) + b'"}}\0'
    selector = selectors.DefaultSelector()
    unread = select.poll()  # Get flooders whose calls are all sent: watched only for being shed
    unread_socks = {}

    def open_one(kind):
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
            return
        sock.setblocking(False)
        pending = {"big": junk, "list": listing, "get": get * 2000}[kind]
        selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, [kind, pending])

    def reopen(sock, kind):
        sock.close()
        open_one(kind)

    kinds = ["big", "list", "get"]
    for index in range(CONNECTIONS):
        open_one(kinds[index % 3])
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for key, events in selector.select(timeout=0.05):
            sock, state = key.fileobj, key.data
            kind = state[0]
            closed = False
            if events & selectors.EVENT_WRITE and state[1]:
                try:
                    sent = sock.send(state[1][:1 << 16])
                    state[1] = state[1][sent:]
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    closed = True
            if not closed and events & selectors.EVENT_READ:
                try:
                    chunk = sock.recv(1 << 20)
                    closed = not chunk
                    if kind == "list" and chunk.endswith(b"\0"):
                        state[1] = listing
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    closed = True
            if closed:
                selector.unregister(sock)
                reopen(sock, kind)
            elif kind == "get" and not state[1]:
                selector.unregister(sock)
                unread.register(sock, select.POLLRDHUP)
                unread_socks[sock.fileno()] = sock
            elif not state[1]:
                selector.modify(sock, selectors.EVENT_READ, state)
            else:
                selector.modify(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, state)
        for fd, _ in unread.poll(0):
            unread.unregister(fd)
            reopen(unread_socks.pop(fd), "get")


class FloodRow:
    def __init__(self, bench):
        self.bench = bench
        self.keys = 2_000 if bench.quick else 80_000  # 100-byte values: 8 MB

    def run(self):
        if os.geteuid() != 0:
            self.bench.skip("shared machine row", "needs root to play two users (it switches to uids 61001 and 61002)")
            return
        folder = tempfile.mkdtemp(prefix="kvd-bench-flood-")
        os.chmod(folder, 0o755)
        try:
            self.measure(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def measure(self, folder):
        bench = self.bench
        sock = os.path.join(folder, "system.sock")
        kvbench = os.path.join(folder, "kvbench")
        shutil.copy2(bench.tool("kvbench"), kvbench)  # the checkout may be closed to other users
        os.chmod(kvbench, 0o755)
        system = bench.start([bench.tool("kvd"), "--system", "--socket", sock, "--state-dir", bench.path("flood-state"),
                              "--admin-group", "root"], sock, "kvd-system-flood")
        bench.populate(sock, "varlink", self.keys, "bench.flood.big")
        with socket.socket(socket.AF_UNIX) as admin:
            admin.connect(sock)
            reply = call(admin, "io.kvd.Defaults.Set", {"domain": "bench.flood", "key": "hot", "value": "h" * (16 << 10)})
            if "error" in reply:
                raise RuntimeError(f"cannot set the hot key: {reply}")
        # As root (an admin), kvbench writes the key its reader reads (k0 of bench.flood.get).
        bench.run_json([kvbench, "--socket", sock, "--op", "get", "--clients", "1", "--seconds", "0.05", "--runs", "1",
                        "--domain", "bench.flood.get", "--json"])
        reader = [kvbench, "--socket", sock, "--op", "get", "--clients", "1", "--seconds", str(bench.seconds), "--runs", "1",
                  "--domain", "bench.flood.get", "--json"]
        quiet, flooded = [], []
        for _ in range(bench.runs):
            quiet.append(self.read_as_other(reader))
            flooder = os.fork()
            if flooder == 0:
                try:
                    become(FLOODER, None)()  # not pinned: it competes with kvd, not with the reader
                    flood(sock, "bench.flood.big", "hot", bench.seconds + 3)
                finally:
                    os._exit(0)
            try:
                time.sleep(1.0)  # the flood's connections open and fill up
                flooded.append(self.read_as_other(reader))
            finally:
                os.kill(flooder, signal.SIGKILL)
                os.waitpid(flooder, 0)
        alone = bench.summarize("shared machine", "another user's Get, nobody flooding", quiet)
        mine = bench.summarize("shared machine", f"another user's Get, one uid flooding ({CONNECTIONS} connections)", flooded)
        bench.target("shared machine", "another user's Get p99 (ms) while one uid floods", mine["p99_us"] / 1000, 10.0, "<=",
                     f"p99 with nobody flooding: {alone['p99_us'] / 1000:.2f} ms; the flood: 1 MiB calls, Lists of an 8 MB domain, "
                     "pipelined Gets never read")
        bench.stop(system)

    def read_as_other(self, argv):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=self.bench.env,
                              preexec_fn=become(READER, self.bench.client_cpus))
        if done.returncode != 0:
            raise RuntimeError(f"kvbench as uid {READER} failed: {(done.stdout + done.stderr).strip()[:400]}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")][0]
