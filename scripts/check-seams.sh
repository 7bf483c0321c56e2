#!/bin/sh
# Fails when code outside the seams talks to the OS or to error names directly,
# in every library and executable target (Sources/, Examples/Habits/, bench/, Tests/Probes/):
#  1. No object file outside KVSystem (and the C shims) calls a system call of the C library:
#     files, sockets, epoll, processes, signals, sleeping and user ids go through KVSystem's
#     `SystemCalls` and `FileSystem` (LinuxSystem*.swift make the calls). Checked on the compiled
#     objects' undefined symbols by scripts/check-nm.sh (its header lists what is allowed).
#  2. No file outside KVProtocol (which declares the interface), KVDaemon (which sends the
#     errors) and KVConnection/ClientError.swift names a varlink error: kvd's error replies are
#     decoded once, into ClientError's cases.
# Needs a debug build (`swift build`); prints each offence and exits 1 if there is one.
set -eu
cd "$(dirname "$0")/.."
status=0
scripts/check-nm.sh || status=1
folders=$(for folder in Sources/*/ Examples/Habits/*/ bench/kvbench*/ Tests/Probes/*/; do
    case $(basename "$folder") in KVProtocol | KVDaemon) ;; *) printf '%s ' "${folder%/}" ;; esac
done)
# shellcheck disable=SC2086 # one argument per folder
names=$(grep -rnE 'Interface\.Error\.|"(io\.kvd\.Defaults|org\.varlink\.service)\.[A-Z][A-Za-z]*"' $folders \
    | grep -v '^Sources/KVConnection/ClientError.swift:' || true)
if [ -n "$names" ]; then
    echo "$names"
    echo "check-seams: the lines above name varlink errors; match ClientError's cases instead (decoded in KVConnection/ClientError.swift)"
    status=1
fi
exit $status
