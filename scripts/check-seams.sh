#!/bin/sh
# Fails when code outside the seams talks to the OS or to error names directly (issue 10):
#  1. No object file of KVDaemon, KVConnection or KVClient calls a socket, epoll, eventfd, signalfd, read,
#     write, close, accept, connect, file or process function of the C library: those go through
#     KVSystem's `SystemCalls` (LinuxSystem.swift is the only file that calls them). Checked on
#     the compiled objects' undefined symbols (`nm -u`), so no call can hide from it. Allowed:
#     Systemd.swift (libsystemd's seam; `fstat` of stderr), Thread.swift (`pthread_create`).
#  2. No file of KVCtl, HabitsKit, KVConnection or KVClient but KVConnection/ClientError.swift names a varlink
#     error: kvd's error replies are decoded once, into ClientError's cases.
# Needs a debug build (`swift build`); prints each offence and exits 1 if there is one.
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-$(${SWIFT:-swift} build --show-bin-path)}
FORBIDDEN='^(socket|socketpair|bind|listen|accept|accept4|connect|read|recv|recvmsg|write|writev|send|sendmsg|close|shutdown|epoll_create1?|epoll_ctl|epoll_wait|eventfd|signalfd|fcntl|open|open64|openat|unlink|rename|stat|stat64|lstat|lstat64|mkdir|opendir|readdir|readdir64|readlink|access|posix_spawn|waitpid|usleep|umask|pthread_sigmask|signal|pipe|pipe2|dup|dup2)$'
status=0
for module in KVDaemon KVConnection KVClient; do
    for source in Sources/$module/*.swift; do
        object="$BIN/$module.build/$(basename "$source").o"
        if [ ! -f "$object" ]; then
            echo "check-seams: $object is missing; build first (swift build)"; exit 1
        fi
        calls=$(nm -u "$object" | awk '{print $2}' | grep -E "$FORBIDDEN" | tr '\n' ' ' || true)
        if [ -n "$calls" ]; then
            echo "$source calls the OS directly: $calls(go through SystemCalls, Sources/KVSystem)"
            status=1
        fi
    done
done
names=$(grep -rnE 'Interface\.Error\.|"(io\.kvd\.Defaults|org\.varlink\.service)\.[A-Z][A-Za-z]*"' \
    Sources/KVCtl Sources/HabitsKit Sources/KVConnection Sources/KVClient | grep -v '^Sources/KVConnection/ClientError.swift:' || true)
if [ -n "$names" ]; then
    echo "$names"
    echo "check-seams: the lines above name varlink errors; match ClientError's cases instead (decoded in KVConnection/ClientError.swift)"
    status=1
fi
exit $status
