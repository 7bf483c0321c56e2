#!/usr/bin/env python3
"""A process whose root is a FUSE file system that never answers a lookup, connected to kvd: what
test_sandbox.py's HungRoot tests run (as root; /dev/fuse). kvd identifies a connection by looking
for /.flatpak-info in the process's root, and a lookup there waits for the FUSE daemon.

Usage: hung_fuse_root.py [--overlay] SOCKET MOUNTPOINT CALLS_JSON
  Mounts a FUSE file system on MOUNTPOINT (an empty folder) served by a child process that answers
  INIT, says ENOSYS to every request but LOOKUP and never answers a LOOKUP (it creates
  MOUNTPOINT.lookups at the first); makes MOUNTPOINT its root (chroot), keeping its working folder
  at SOCKET's folder, so it connects to SOCKET by a relative name without a lookup in its root;
  prints "connected", then makes the calls on sandbox_client.py's terms (one JSON line each). The
  FUSE server ends with this process (its descriptor closes, and the kernel fails what still
  waits for it). --overlay: the root is an overlay whose lower layer is that FUSE file system
  (MOUNTPOINT.merged, with MOUNTPOINT.upper and MOUNTPOINT.work), so that a lookup there reaches it.
"""
import ctypes
import json
import os
import socket
import struct
import sys

FUSE_LOOKUP, FUSE_FORGET, FUSE_GETATTR, FUSE_STATFS, FUSE_INIT, FUSE_INTERRUPT, FUSE_BATCH_FORGET = 1, 2, 3, 17, 26, 36, 42
ENOSYS = 38
IN_HEADER = struct.Struct("<IIQQIIIHH")  # len, opcode, unique, nodeid, uid, gid, pid, extlen, padding
OUT_HEADER = struct.Struct("<IiQ")  # len, error, unique


def reply(fuse, unique, error=0, body=b""):
    os.write(fuse, OUT_HEADER.pack(OUT_HEADER.size + len(body), -error, unique) + body)


def serve(fuse, marker):
    """Answers INIT, GETATTR (a folder, 0755) and STATFS (empty), never a LOOKUP (`marker` made
    at the first), ENOSYS to the rest; returns when the file system goes."""
    while True:
        try:
            request = os.read(fuse, 1 << 20)
        except OSError:
            return  # unmounted, or aborted
        length, opcode, unique = IN_HEADER.unpack_from(request)[:3]
        if opcode == FUSE_INIT:
            # major 7, minor 31, max_readahead, flags, max_background, congestion, max_write, time_gran
            body = struct.pack("<IIIIHHII", 7, 31, 0, 0, 16, 12, 4096, 1).ljust(64, b"\0")
            reply(fuse, unique, body=body)
        elif opcode == FUSE_GETATTR:
            # attr_valid, its nsec, dummy; ino, size, blocks, atime, mtime, ctime, their nsec, mode, nlink
            attr = struct.pack("<QQQQQQIIIII", 1, 0, 0, 0, 0, 0, 0, 0, 0, 0o040755, 2).ljust(88, b"\0")
            reply(fuse, unique, body=struct.pack("<QII", 1, 0, 0) + attr)
        elif opcode == FUSE_STATFS:
            reply(fuse, unique, body=struct.pack("<QQQQQIII", 0, 0, 0, 0, 0, 4096, 255, 4096).ljust(80, b"\0"))
        elif opcode == FUSE_LOOKUP:
            open(marker, "w").close()  # and it waits forever
        elif opcode in (FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT):
            continue  # no reply
        else:
            reply(fuse, unique, ENOSYS)


def main():
    overlay = sys.argv[1] == "--overlay"
    if overlay:
        sys.argv.pop(1)
    sock, mountpoint, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    fuse = os.open("/dev/fuse", os.O_RDWR)
    libc = ctypes.CDLL(None, use_errno=True)
    options = f"fd={fuse},rootmode=40000,user_id=0,group_id=0".encode()
    if libc.mount(b"kvd-hung", mountpoint.encode(), b"fuse.kvd-hung", 0, options) != 0:
        raise OSError(ctypes.get_errno(), "mount fuse")
    server = os.fork()
    if server == 0:
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: it ends with this process
        serve(fuse, mountpoint + ".lookups")
        os._exit(0)
    os.close(fuse)
    root = mountpoint
    if overlay:
        root = mountpoint + ".merged"
        for name in (".upper", ".work", ".merged"):
            os.makedirs(mountpoint + name, exist_ok=True)
        layers = f"lowerdir={mountpoint},upperdir={mountpoint}.upper,workdir={mountpoint}.work".encode()
        if libc.mount(b"overlay", root.encode(), b"overlay", 0, layers) != 0:
            raise OSError(ctypes.get_errno(), "mount overlay")
    folder = os.open(os.path.dirname(os.path.abspath(sock)), os.O_RDONLY | os.O_DIRECTORY)
    os.chroot(root)
    os.fchdir(folder)
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(os.path.basename(sock))
    print(json.dumps("connected"), flush=True)
    for method, parameters in calls:
        message = {"method": "io.kvd.Defaults." + method, "parameters": parameters}
        connection.sendall(json.dumps(message).encode() + b"\0")
        answer = b""
        while not answer.endswith(b"\0"):
            chunk = connection.recv(65536)
            if not chunk:
                raise SystemExit("kvd closed the connection")
            answer += chunk
        decoded = json.loads(answer[:-1])
        print(json.dumps({"error": decoded["error"]} if "error" in decoded else {"reply": decoded["parameters"]}),
              flush=True)
    os.kill(server, 9)
    os.waitpid(server, 0)


if __name__ == "__main__":
    main()
