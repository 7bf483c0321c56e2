#!/usr/bin/env python3
"""A varlink client (the `varlink` package) that test_sandbox.py runs inside a bubblewrap sandbox.

Usage: sandbox_client.py SOCKET CALLS_JSON
  CALLS_JSON: [[METHOD, {PARAMETERS}], ...] of io.kvd.Defaults; prints one JSON line per call:
  {"reply": {...}} or {"error": "org.varlink.service.PermissionDenied"}.
  sandbox_client.py SOCKET --watch-all UNTIL_DOMAIN: a WatchAll(current: true); prints the domains of
  each first reply, "watching" after the first, then the domain of every event until one of UNTIL_DOMAIN.
  sandbox_client.py SOCKET --fork-exit DIR CALLS_JSON: connects, forks; the parent exits at once;
  (kvd stopped meanwhile: the client creates DIR/described and waits for DIR/stopped before it
  connects) the child, once the parent is gone, creates DIR/ready, waits for DIR/go, then makes the calls on
  the connection its parent made.
  sandbox_client.py SOCKET --leader-exits CALLS_JSON: the main thread (the thread group's leader)
  exits on its own (`exit(2)`), so that `/proc/PID/root` can no longer be followed; another thread
  of the process, still running, then connects and makes the calls.
"""
import json
import os
import sys
import time

import varlink


def call_all(kv, calls):
    for method, parameters in calls:
        try:
            reply = getattr(kv, method)(**parameters)
            print(json.dumps({"reply": reply}, default=str), flush=True)
        except varlink.VarlinkError as error:
            print(json.dumps({"error": error.error()}), flush=True)


def watch_all(kv, until):
    announced = False
    for reply in kv.WatchAll(None, True, _more=True):
        domain = reply.get("domain")
        if reply.get("initial"):
            print(json.dumps({"initial": domain, "withheld": reply.get("withheld")}), flush=True)
        else:
            print(json.dumps({"event": domain}), flush=True)
            if domain == until:
                return
        if not announced:
            announced = True
            print(json.dumps("watching"), flush=True)


def fork_exit(client, folder, calls):
    """This process stays (as an app's main process does); a child connects, forks a grandchild
    and exits; the grandchild makes the calls on its parent's connection."""
    client.get_interface("io.kvd.Defaults")
    open(os.path.join(folder, "described"), "w").close()
    while not os.path.exists(os.path.join(folder, "stopped")):
        time.sleep(0.01)
    child = os.fork()
    if child == 0:
        with client.open("io.kvd.Defaults") as kv:
            parent = os.getpid()
            if os.fork() != 0:
                os._exit(0)
            while os.getppid() == parent:
                time.sleep(0.01)
            open(os.path.join(folder, "ready"), "w").close()
            while not os.path.exists(os.path.join(folder, "go")):
                time.sleep(0.01)
            call_all(kv, calls)
            open(os.path.join(folder, "done"), "w").close()
            os._exit(0)
    os.waitpid(child, 0)
    while not os.path.exists(os.path.join(folder, "done")):
        time.sleep(0.01)


def leader_exits(client, calls):
    """Connects from a second thread once the first (the leader) has exited alone."""
    import ctypes
    import threading

    def second():
        status = "/proc/self/task/%d/status" % os.getpid()
        while "State:\tZ" not in open(status).read():  # the leader is a zombie: the process goes on
            time.sleep(0.01)
        with client.open("io.kvd.Defaults") as kv:
            call_all(kv, calls)
        sys.stdout.flush()
        os._exit(0)

    threading.Thread(target=second).start()
    ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: this thread only


def main():
    socket, rest = sys.argv[1], sys.argv[2:]
    client = varlink.Client(address="unix:" + socket)
    if rest[0] == "--leader-exits":
        leader_exits(client, json.loads(rest[1]))
        return
    if rest[0] == "--fork-exit":
        fork_exit(client, rest[1], json.loads(rest[2]))
        return
    with client.open("io.kvd.Defaults") as kv:
        if rest[0] == "--watch-all":
            watch_all(kv, rest[1])
        else:
            call_all(kv, json.loads(rest[0]))


main()
