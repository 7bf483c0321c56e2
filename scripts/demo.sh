#!/usr/bin/env bash
# kvd end to end, as a user would see it: systemd-style socket activation, kvctl, durable files,
# a kill -9 that loses nothing, a damaged file kept aside, idle exit, the habits sample; then, as
# root, the system layer (scripts/demo-system.sh). Everything runs in a temporary folder that is
# removed at the end.  Usage: scripts/demo.sh BIN_DIR
set -euo pipefail
bin=${1:-.build/debug}
bin=$(cd "$bin" && pwd)
work=$(mktemp -d /tmp/kvd-demo-XXXXXX)
sock=$work/kvd.sock
state=$work/state
daemon_pid=""
cleanup() { [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
export KVD_SOCKET=$sock KVD_NO_AUTOSTART=1

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }
start() {
  # systemd's own socket-activation tool hands kvd the listening socket exactly as systemd does.
  rm -f "$sock"   # a killed daemon leaves the file; systemd would keep the socket itself
  systemd-socket-activate -l "$sock" "$bin/kvd" --state-dir "$state" --idle-exit "${1:-0}" 2>>"$work/kvd.log" &
  daemon_pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
}

step "Start kvd under socket activation (state in $state)"
start
show "$bin/kvctl" set com.example.app greeting "Hello, kvd"
show "$bin/kvctl" set com.example.app launches -int 1
show "$bin/kvctl" set com.example.app volume -float 0.8
show "$bin/kvctl" set com.example.app lastOpened -date 2026-11-29T17:00:00.250Z
show "$bin/kvctl" set com.example.app recent -array one two three
show "$bin/kvctl" set -g AppleLanguages -array en fr
show "$bin/kvctl" get com.example.app greeting
show "$bin/kvctl" read-type com.example.app volume
show "$bin/kvctl" --json get com.example.app
show "$bin/kvctl" domains

step "Acknowledged means durable: kill -9 right after 200 writes"
for i in $(seq 1 200); do "$bin/kvctl" set com.example.counter "n$i" -int "$i"; done
kill -9 "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true
echo "kvd killed with SIGKILL"
start
printf '$ kvctl keys com.example.counter | wc -l\n'; "$bin/kvctl" keys com.example.counter | wc -l
show "$bin/kvctl" get com.example.counter n200

step "The files are plain, versioned JSON"
kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true   # SIGTERM: flush the log into the files
show cat "$state/com.example.app.json"

step "A damaged file is kept aside; the other domains keep working"
echo '{"format": "kvd-domain", "formatVersion": 1, "values": {tru' > "$state/com.example.app.json"
start
show "$bin/kvctl" get -g AppleLanguages
"$bin/kvctl" get com.example.app greeting || echo "(exit $?: the damaged domain starts empty)"
show ls "$state"
grep -h "unreadable" "$work/kvd.log" | tail -1

step "Idle exit: with no client for 1 s, kvd exits; the next call starts it again"
kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true
start 1
show "$bin/kvctl" get com.example.counter n1     # the first connection starts kvd
sleep 2
if kill -0 "$daemon_pid" 2>/dev/null; then echo "kvd still running"; else echo "kvd exited after 1 s without a client"; fi
wait "$daemon_pid" 2>/dev/null || true
start 1
show "$bin/kvctl" get com.example.counter n2
step "habits: the sample app opens its users' v0.1 data as it is, and stores v2 on the first write"
kill "$daemon_pid" 2>/dev/null; wait "$daemon_pid" 2>/dev/null || true
start
# Seed 002's nine habits, byte for byte as its app's JSONEncoder wrote them into UserDefaults.
seed="$(cd "$(dirname "$0")/.." && pwd)/Tests/HabitsTests/Fixtures/seed-002-v0.1-habits.json"
show head -n 8 "$seed"
echo "# stored as UserDefaults stored it: a data value holding that JSON"
printf '$ kvctl set com.example.habits Habits -data <hex of the file>\n'
"$bin/kvctl" set com.example.habits Habits -data "$(od -An -tx1 -v "$seed" | tr -d ' \n')"
show "$bin/kvctl" read-type com.example.habits Habits
show "$bin/habits" list
show "$bin/habits" done Dishes
printf '$ kvctl get com.example.habits Habits | head -n 17\n'; "$bin/kvctl" get com.example.habits Habits | head -n 17
printf '$ kvctl --json get com.example.habits Habits | grep -o '"'"'"schemaVersion":2'"'"' | wc -l\n'
"$bin/kvctl" --json get com.example.habits Habits | grep -o '"schemaVersion":2' | wc -l
show "$bin/habits" list
kill "$daemon_pid" 2>/dev/null; wait "$daemon_pid" 2>/dev/null || true; daemon_pid=""

step "The system layer: defaults and locks an admin sets for every user (as root)"
"$(dirname "$0")/demo-system.sh" "$bin"

step "The fleet: one setting for many machines, through a 3-member etcd"
"$(dirname "$0")/demo-fleet.sh" "$bin"
echo
echo "demo finished"
