#!/usr/bin/env bash
# The fleet end to end on one machine: a 3-member etcd cluster on 127.0.0.1, two "hosts" (two
# system instances, `kvd --system --etcd`, each with its own state folder and socket, as two
# machines would have), a setting pushed on one and seen on the other, a lock made with etcdctl,
# then the etcd member a host uses killed: the fleet goes on.
# Every step checks what it shows and the script exits non-zero at the first one that differs.
# Usage: scripts/demo-fleet.sh BIN_DIR   (scripts/demo.sh runs it at its end)
set -euo pipefail
bin=${1:-.build/debug}
bin=$(cd "$bin" && pwd)

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
fail() { printf '\033[1;31mdemo-fleet: %s\033[0m\n' "$*" >&2; exit 1; }
for tool in etcd etcdctl python3; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs etcd-server and etcd-client)"
done

work=$(mktemp -d /tmp/kvd-fleet-demo-XXXXXX)
pids=()
cleanup() {
  local status=$?
  set +e
  for pid in "${pids[@]}"; do kill -CONT "$pid" 2>/dev/null; kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  if [ "$status" -ne 0 ]; then
    for log in "$work"/*.log; do [ -s "$log" ] && { echo "--- $log"; tail -n 20 "$log"; }; done
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap "exit 130" INT TERM

# Six free ports on 127.0.0.1: a client and a peer port per member.
read -r -a ports <<<"$(python3 -c '
import socket
socks = [socket.socket() for _ in range(6)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks: s.close()')"
client() { echo "http://127.0.0.1:${ports[$((2 * $1))]}"; }
peer() { echo "http://127.0.0.1:${ports[$((2 * $1 + 1))]}"; }
cluster="m0=$(peer 0),m1=$(peer 1),m2=$(peer 2)"
endpoints="$(client 0),$(client 1),$(client 2)"
export ETCDCTL_API=3

step "A 3-member etcd cluster on 127.0.0.1 (Debian's etcd-server), with progress notifications"
member_pids=()
start_member() {
  etcd --name "m$1" --data-dir "$work/m$1" --listen-client-urls "$(client "$1")" --advertise-client-urls "$(client "$1")" \
    --listen-peer-urls "$(peer "$1")" --initial-advertise-peer-urls "$(peer "$1")" --initial-cluster "$cluster" \
    --initial-cluster-state new --initial-cluster-token "$(basename "$work")" --heartbeat-interval 50 --election-timeout 500 \
    --experimental-watch-progress-notify-interval 1s --logger zap --log-level warn >>"$work/m$1.log" 2>&1 &
  member_pids[$1]=$!
  pids+=("$!")
}
for m in 0 1 2; do start_member "$m"; done
for _ in $(seq 100); do etcdctl --endpoints "$endpoints" endpoint health >/dev/null 2>&1 && break; sleep 0.2; done
etcdctl --endpoints "$endpoints" endpoint health
etcdctl --endpoints "$endpoints" member list -w table

step "Two hosts: each a system instance mirroring com.corp.* from etcd (own state, own socket)"
start_host() {
  mkdir -p "$work/$1"
  "$bin/kvd" --system --socket "$work/$1/system.sock" --state-dir "$work/$1/state" --etcd "$endpoints" \
    --fleet-domain 'com.corp.*' --etcd-progress-interval 1 >>"$work/$1.log" 2>&1 &
  pids+=("$!")
  for _ in $(seq 100); do [ -S "$work/$1/system.sock" ] && return; sleep 0.05; done
  fail "host $1 did not start"
}
start_host a
start_host b
echo "host a: kvd --system --socket $work/a/system.sock --etcd $endpoints --fleet-domain 'com.corp.*'"
echo "host b: the same with $work/b/system.sock"
on() { local host=$1; shift; "$bin/kvctl" --system --socket "$work/$host/system.sock" "$@"; }

# settled HOST EXPECTED ARGS...: waits (10 s at most) until `kvctl --system ARGS` on HOST prints EXPECTED.
settled() {
  local host=$1 expected=$2 out=""; shift 2
  for _ in $(seq 200); do
    out=$(on "$host" "$@" 2>&1) && [ "$out" = "$expected" ] && { printf 'host %s $ kvctl --system %s\n%s\n' "$host" "$*" "$out"; return; }
    sleep 0.05
  done
  fail "host $host: kvctl --system $* printed '$out', expected '$expected'"
}

step "An admin sets a fleet value on host a: it is written to etcd, and host b has it"
printf 'host a $ kvctl --system set com.corp.mail server imap.corp.example\n'
on a set com.corp.mail server imap.corp.example
printf '$ etcdctl get kvd/values/com.corp.mail/server\n'
etcdctl --endpoints "$endpoints" get kvd/values/com.corp.mail/server
settled b imap.corp.example get com.corp.mail server

step "An admin locks it with etcdctl alone (key kvd/locks/DOMAIN/KEY): both hosts lock it"
printf '$ etcdctl put kvd/locks/com.corp.mail/server 1\n'
etcdctl --endpoints "$endpoints" put kvd/locks/com.corp.mail/server 1
settled a "com.corp.mail server" locks
settled b "com.corp.mail server" locks

step "The etcd member host b uses is killed (SIGKILL): host b fails over and goes on"
in_use=$(on b --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["fleet"]["memberInUse"])')
for m in 0 1 2; do [ "$(client "$m")" = "$in_use" ] && victim=$m; done
echo "host b uses $in_use (member m$victim): kill -9 ${member_pids[$victim]}"
{ kill -9 "${member_pids[$victim]}" && wait "${member_pids[$victim]}"; } 2>/dev/null || true
for _ in $(seq 100); do
  etcdctl --endpoints "$endpoints" put kvd/values/com.corp.mail/port 993 >/dev/null 2>&1 && break
  sleep 0.2
done
printf '$ etcdctl put kvd/values/com.corp.mail/port 993\n'
settled b 993 get com.corp.mail port
printf 'host b $ kvctl --system set com.corp.mail timeout -int 30\n'
on b set com.corp.mail timeout -int 30
settled a 30 get com.corp.mail timeout
printf 'host b $ kvctl --system status\n'
status=$(on b status)
echo "$status"
grep -q "member in use: $in_use" <<<"$status" && fail "host b still uses the killed member"
grep -q "failed over from etcd member $in_use" "$work/b.log" || fail "host b's log does not tell of the fail-over"
printf 'host b journal: %s\n' "$(grep -m1 "failed over" "$work/b.log")"
echo
echo "demo-fleet: finished"
