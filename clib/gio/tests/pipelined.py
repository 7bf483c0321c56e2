"""Varlink calls to the running kvd (KVD_SOCKET) on one connection, pipelined: how the GIO
module's tests set many values at once (test_first_read.py, test_many.py)."""
import json
import os
import socket


def call_all(calls, fail):
    """Sends `calls` (varlink call objects) at once and reads every reply; calls `fail` with a
    message when kvd closes the connection first or any reply is an error."""
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(os.environ["KVD_SOCKET"])
        conn.sendall(b"".join(json.dumps(call).encode() + b"\0" for call in calls))
        data = b""
        while data.count(b"\0") < len(calls):
            chunk = conn.recv(1 << 16)
            if not chunk:
                fail("kvd closed the connection while setting the values")
            data += chunk
        errors = [r for r in data.split(b"\0") if r and b'"error"' in r]
        if errors:
            fail(f"setting the values: {errors[0]!r}")
