"""The drop-in row of make bench: a reload of 100 drop-in files holding 10,000 keys
while 50 apps watch, against a kvctl --system Apply of the same keys.

A system instance (this user's, with --config-dir) and one user's kvd following it; 50 Watch
connections on the user's kvd watch the domain. The files are symbolic links into a folder the
system instance does not watch, so only the Reload call reads their new content. Measured: from
the call (Reload, or one Apply of the 10,000 keys through the system instance) to the last
watcher's change. Target: the reload at most 2x the Apply. Smoke mode: 10 files of 10 keys.
"""
import grp
import json
import os
import selectors
import socket
import statistics
import time

WATCHERS = 50


def message(method, parameters, more=False):
    body = {"method": method, "parameters": parameters}
    if more:
        body["more"] = True
    return json.dumps(body).encode() + b"\0"


def call(path, method, parameters):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(path)
        sock.sendall(message(method, parameters))
        reply = b""
        while not reply.endswith(b"\0"):
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError(f"{path} closed the connection during {method}")
            reply += chunk
    answer = json.loads(reply[:-1])
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer}")
    return answer


class Watchers:
    """WATCHERS Watch connections on `domain`, their initial replies read."""

    def __init__(self, path, domain):
        self.socks = []
        for _ in range(WATCHERS):
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(path)
            sock.sendall(message("io.kvd.Defaults.Watch", {"domain": domain}, more=True))
            self.socks.append(sock)
        for sock in self.socks:
            self.read_reply(sock)

    @staticmethod
    def read_reply(sock):
        reply = b""
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("kvd closed a watcher")
            reply += chunk
            if reply.endswith(b"\0"):
                return reply

    def until_each_changed(self, start, deadline=60):
        """Seconds from `start` until the last watcher got one whole reply."""
        selector = selectors.DefaultSelector()
        pending = {sock: b"" for sock in self.socks}
        for sock in self.socks:
            selector.register(sock, selectors.EVENT_READ)
        last = start
        while pending:
            if time.monotonic() - start > deadline:
                raise RuntimeError(f"{len(pending)} watcher(s) saw no change in {deadline} s")
            for key, _ in selector.select(timeout=1):
                sock = key.fileobj
                pending[sock] += sock.recv(1 << 20)
                if pending[sock].endswith(b"\0"):
                    last = time.monotonic()
                    selector.unregister(sock)
                    del pending[sock]
        return last - start

    def close(self):
        for sock in self.socks:
            sock.close()


class DropInRow:
    def __init__(self, bench):
        self.bench = bench
        self.files = 10 if bench.quick else 100
        self.per_file = 10 if bench.quick else 100

    def write(self, staging, version):
        for index in range(self.files):
            values = {f"k{index}-{n}": f"v{version}-{index}-{n}" for n in range(self.per_file)}
            with open(os.path.join(staging, f"{index:03d}-bench.json"), "w") as f:
                json.dump({"bench.dropins": values}, f)

    def check_read(self, sys_sock):
        """Fails at once, naming them, when the system instance did not read every file (a name
        or mode it refuses), rather than after the watchers' deadline."""
        status = call(sys_sock, "io.kvd.System.Status", {})["parameters"].get("dropIns", {})
        refused = status.get("problems", []) + status.get("skipped", [])
        if refused or len(status.get("files", [])) != self.files:
            raise RuntimeError(f"the system instance did not read every drop-in file: {status}")

    def run(self):
        bench = self.bench
        folder = bench.path("dropins-run")
        config, staging = os.path.join(folder, "etc"), os.path.join(folder, "staging")
        for path in (folder, config, config + "/defaults.d", config + "/locks.d", staging):
            os.makedirs(path, mode=0o755, exist_ok=True)
        self.write(staging, 0)
        for index in range(self.files):
            os.symlink(os.path.join(staging, f"{index:03d}-bench.json"), os.path.join(config, "defaults.d", f"{index:03d}-bench.json"))
        sys_sock = os.path.join(folder, "system.sock")
        admins = grp.getgrgid(os.getgid()).gr_name  # the bench's own user may reload and Apply
        system = bench.start([bench.tool("kvd"), "--system", "--socket", sys_sock, "--state-dir", bench.path("dropins-state"),
                              "--config-dir", config, "--admin-group", admins], sys_sock, "kvd-system-dropins")
        user, sock = bench.start_kvd("kvd-dropins", system_socket=sys_sock)
        keys = self.files * self.per_file
        reload_times, apply_times = [], []
        for run in range(1, bench.runs + 2):  # the first of each is a warm-up
            watchers = Watchers(sock, "bench.dropins")
            self.write(staging, run)
            start = time.monotonic()
            call(sys_sock, "io.kvd.System.Reload", {})
            if run == 1:
                self.check_read(sys_sock)
            took = watchers.until_each_changed(start)
            watchers.close()
            watchers = Watchers(sock, "bench.apply")
            changes = [{"key": f"k{n}", "value": f"v{run}-{n}"} for n in range(keys)]
            start = time.monotonic()
            call(sys_sock, "io.kvd.Defaults.Apply", {"domain": "bench.apply", "changes": changes})
            applied = watchers.until_each_changed(start)
            watchers.close()
            if run > 1:
                reload_times.append(took)
                apply_times.append(applied)
        bench.stop(user)
        bench.stop(system)
        reload_ms = statistics.median(reload_times) * 1000
        apply_ms = statistics.median(apply_times) * 1000
        print(f"  reload of {self.files} files ({keys:,} keys), {WATCHERS} watchers: {reload_ms:.1f} ms to the last; "
              f"Apply of the same keys: {apply_ms:.1f} ms", flush=True)
        bench.target("drop-in reload", f"time to the last of {WATCHERS} watchers: reload of {self.files} files / Apply of "
                     f"{keys:,} keys", reload_ms / apply_ms, 2.0, "<=",
                     f"reload {reload_ms:.1f} ms, Apply {apply_ms:.1f} ms (medians of {len(reload_times)})")
