"""attack/38b/varlink.py — a bare varlink client for the attack scripts (NUL-framed JSON on a
Unix socket): what a hostile local program would send, with no kvd library in between."""
import json
import socket
import sys
import time


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def send(s, method, parameters=None, more=False):
    call = {"method": method, "parameters": parameters or {}}
    if more:
        call["more"] = True
    s.sendall(json.dumps(call).encode() + b"\0")


def replies(s, timeout=30):
    """Yields each reply (parsed) until the connection closes or a reply has no `continues`."""
    s.settimeout(timeout)
    buffer = b""
    while True:
        while b"\0" not in buffer:
            chunk = s.recv(1 << 20)
            if not chunk:
                return
            buffer += chunk
        message, buffer = buffer.split(b"\0", 1)
        reply = json.loads(message)
        yield reply
        if not reply.get("continues"):
            return


def mirror_flood(path, seconds, profile):
    """Opens a connection, asks for a Mirror, reads nothing and closes it; again and again."""
    end = time.time() + seconds
    count = 0
    while time.time() < end:
        try:
            s = connect(path)
            send(s, "io.kvd.System.Mirror", {"dconfProfile": "%s%d" % (profile, count)}, more=True)
            s.recv(1)  # the first byte of the reply: the Mirror was made
            s.close()
            count += 1
        except OSError:
            time.sleep(0.01)
    print("mirrors asked: %d" % count)




def fill(path, domains, bytes_each, keys_each=10):
    """Writes `domains` domains of `keys_each` string values, `bytes_each` bytes in all, by Apply."""
    s = connect(path)
    value = "v" * (bytes_each // keys_each)
    for n in range(domains):
        changes = [{"key": "k%d" % k, "value": value} for k in range(keys_each)]
        send(s, "io.kvd.Defaults.Apply", {"domain": "io.kvd.fill.d%05d" % n, "changes": changes})
        reply = next(replies(s))
        if "error" in reply:
            raise SystemExit("Apply failed: %s" % reply)


def first_reply_ms(path, method, parameters, more):
    """The milliseconds until the first reply of one call."""
    s = connect(path)
    start = time.time()
    send(s, method, parameters, more=more)
    s.settimeout(120)
    s.recv(1)
    return int((time.time() - start) * 1000)


if __name__ == "__main__":
    if sys.argv[1] == "mirror-flood":
        mirror_flood(sys.argv[2], float(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "x")
    elif sys.argv[1] == "fill":
        fill(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "first-reply":
        current = {"current": True} if sys.argv[3] == "watchall-current" else {}
        method = "io.kvd.Defaults.WatchAll" if sys.argv[3].startswith("watchall") else "io.kvd.Defaults.Get"
        params = current if method.endswith("WatchAll") else {"domain": "io.kvd.fill.d00000", "key": "k0"}
        print(first_reply_ms(sys.argv[2], method, params, method.endswith("WatchAll")))
