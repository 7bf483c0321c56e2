#!/usr/bin/env bash
# The system layer end to end, as root on a fresh machine: `kvd --system` under socket activation,
# one user's own kvd reading it, an admin who is not root, a default, a lock, an unlock.
# Every step checks what it shows and the script exits non-zero at the first one that differs.
# Usage: scripts/demo-system.sh BIN_DIR   (scripts/demo.sh runs it at its end)
#
# It makes the group kvd-admin and two users, kvd-demo-user and kvd-demo-admin (a member of
# kvd-admin), when they are missing, and removes at the end whichever of them it made; processes
# and the temporary folder are always removed.
set -euo pipefail
bin=${1:-.build/debug}
bin=$(cd "$bin" && pwd)

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
fail() { printf '\033[1;31mdemo-system: %s\033[0m\n' "$*" >&2; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
  echo "demo-system: skipped: the system layer needs root to make the demo's users (run make demo as root)"
  exit 0
fi
for tool in useradd userdel groupadd groupdel usermod setpriv systemd-socket-activate; do
  command -v "$tool" >/dev/null || fail "$tool is missing (util-linux, passwd, systemd)"
done

user=kvd-demo-user admin=kvd-demo-admin group=kvd-admin domain=org.example.browser key=homepage
work=$(mktemp -d /tmp/kvd-system-demo-XXXXXX)
made_group="" made_users="" system_pid="" user_pid=""

cleanup() {
  local status=$?
  set +e   # clean up everything, whatever fails
  [ -n "$user_pid" ] && kill "$user_pid" 2>/dev/null
  [ -n "$system_pid" ] && kill "$system_pid" 2>/dev/null
  wait 2>/dev/null
  if [ "$status" -ne 0 ]; then
    for log in "$work"/*.log; do [ -s "$log" ] && { echo "--- $log"; tail -n 20 "$log"; }; done
  fi
  rm -rf "$work"
  for name in $made_users; do userdel "$name" 2>/dev/null || echo "demo-system: could not remove user $name" >&2; done
  [ -n "$made_group" ] && { groupdel "$group" 2>/dev/null || echo "demo-system: could not remove group $group" >&2; }
  exit "$status"
}
trap cleanup EXIT
trap "exit 130" INT TERM

# --- Set-up: the group, the users, the folders a second uid may reach -------------------------
step "Set-up: group $group, user $user, admin $admin (a member of $group, not root)"
if ! getent group "$group" >/dev/null; then groupadd --system "$group"; made_group=1; echo "made group $group"; fi
for name in "$user" "$admin"; do
  if ! getent passwd "$name" >/dev/null; then
    useradd --system --no-create-home --shell /usr/sbin/nologin --user-group "$name"
    made_users="$made_users $name"
    echo "made user $name"
  fi
done
usermod -a -G "$group" "$admin"
id "$user"; id "$admin"
id -nG "$user" | tr ' ' '\n' | grep -qx "$group" && fail "$user is in $group, so its writes would not be refused; remove it: gpasswd -d $user $group"
id -nG "$admin" | tr ' ' '\n' | grep -qx "$group" || fail "$admin is not in $group after usermod"

# The users can reach the programs, the system socket and their own folder, nothing else of ours.
chmod 0711 "$work"
if ! setpriv --reuid "$user" --regid "$user" --init-groups test -x "$bin/kvctl"; then
  mkdir -m 0755 "$work/bin" && cp "$bin/kvd" "$bin/kvctl" "$work/bin/" && bin=$work/bin
  echo "copied kvd and kvctl to $bin: $user cannot reach the build folder"
fi
mkdir -m 0755 "$work/system"
system_socket=$work/system/system.sock system_state=$work/system/state
mkdir -m 0700 "$work/home"
chown "$user:$user" "$work/home"
user_socket=$work/home/kvd.sock user_state=$work/home/state
export KVD_SYSTEM_SOCKET=$system_socket KVD_NO_AUTOSTART=1   # root's kvctl --system

# Runs a command as NAME with a clean environment: only the paths the demo gives.
as() {
  local name=$1; shift
  setpriv --reuid "$name" --regid "$name" --init-groups -- env -i PATH=/usr/bin:/bin LANG=C.UTF-8 HOME="$work/home" \
    KVD_SOCKET="$user_socket" KVD_SYSTEM_SOCKET="$system_socket" KVD_NO_AUTOSTART=1 "$@"
}
# Prints "NAME$ COMMAND", runs it as NAME (root: as this shell), shows its output, and fails
# unless it exits with STATUS and its output (stdout and stderr) is WANT, or starts with WANT...
# when WANT ends in "...".
check() {
  local name=$1 status=$2 want=$3; shift 3
  printf '%s$ %s\n' "$name" "$(printf '%q ' "$@" | sed -e "s|$bin/||g" -e 's/ $//')"
  local got=0 output
  if [ "$name" = root ]; then output=$("$@" 2>&1) || got=$?; else output=$(as "$name" "$@" 2>&1) || got=$?; fi
  [ -n "$output" ] && printf '%s\n' "$output"
  [ "$got" -ne 0 ] && echo "(exit $got)"
  [ "$got" -eq "$status" ] || fail "expected exit $status from: $*"
  case $want in
    *...) [[ $output == "${want%...}"* ]] || fail "expected output starting with \"${want%...}\" from: $*" ;;
    *) [ "$output" = "$want" ] || fail "expected \"$want\" from: $*" ;;
  esac
}
# A system change reaches a user's kvd through its Watch on the system instance, a moment later:
# waits up to 5 s for the user to see WANT from COMMAND, then checks it as above.
settled() {
  local name=$1 want=$2; shift 2
  for _ in $(seq 100); do
    [[ $(as "$name" "$@" 2>&1) == "${want%...}"* ]] && break
    sleep 0.05
  done
  check "$name" 0 "$want" "$@"
}

# --- The system instance and one user's kvd ---------------------------------------------------
step "Start kvd --system as root under socket activation (socket $system_socket, mode 0666 as kvd-system.socket sets it)"
mkdir -m 0755 "$work/etc" "$work/etc/defaults.d" "$work/etc/locks.d"   # as /etc/kvd, root's
systemd-socket-activate -l "$system_socket" "$bin/kvd" --system --state-dir "$system_state" --config-dir "$work/etc" \
  2>>"$work/system.log" &
system_pid=$!
for _ in $(seq 100); do [ -S "$system_socket" ] && break; sleep 0.05; done
[ -S "$system_socket" ] || fail "systemd-socket-activate did not make $system_socket"
chmod 0666 "$system_socket"   # systemd-socket-activate has no SocketMode=
ls -l "$system_socket"

step "Start $user's own kvd as $user, reading the system instance (--system-socket)"
setpriv --reuid "$user" --regid "$user" --init-groups -- env -i PATH=/usr/bin:/bin LANG=C.UTF-8 HOME="$work/home" \
  "$bin/kvd" --socket "$user_socket" --state-dir "$user_state" --system-socket "$system_socket" --idle-exit 0 \
  2>>"$work/user.log" &
user_pid=$!
for _ in $(seq 100); do [ -S "$user_socket" ] && break; kill -0 "$user_pid" 2>/dev/null || break; sleep 0.05; done
[ -S "$user_socket" ] || fail "$user's kvd did not start (its log follows)"
ps -o user=,pid=,args= -p "$system_pid" -p "$user_pid"

# --- The story --------------------------------------------------------------------------------
step "root sets a default for everyone"
check root 0 '{"revision":...' "$bin/kvctl" --json --system set "$domain" "$key" https://intranet.example
check root 0 https://intranet.example "$bin/kvctl" --system get "$domain" "$key"

step "$user sees it, and where it comes from"
settled "$user" https://intranet.example "$bin/kvctl" get "$domain" "$key"
check "$user" 0 "system: ..." "$bin/kvctl" source "$domain" "$key"

step "$user may not change the system instance"
check "$user" 1 "kvctl: permission denied: only root and members of group kvd-admin may change the system instance" \
  "$bin/kvctl" --system set "$domain" "$key" https://mine.example
check root 0 https://intranet.example "$bin/kvctl" --system get "$domain" "$key"

step "$user overrides the default with a value of their own"
check "$user" 0 "" "$bin/kvctl" set "$domain" "$key" https://news.example
check "$user" 0 https://news.example "$bin/kvctl" get "$domain" "$key"
check "$user" 0 "user: ..." "$bin/kvctl" source "$domain" "$key"

step "$admin (in group $group, not root) locks the key"
check "$admin" 0 "..." "$bin/kvctl" --system lock "$domain" "$key"
check "$admin" 0 "$domain $key" "$bin/kvctl" --system locks

step "$user now gets the locked value; their own write is refused"
settled "$user" https://intranet.example "$bin/kvctl" get "$domain" "$key"
check "$user" 0 "locked: ..." "$bin/kvctl" source "$domain" "$key"
check "$user" 1 "kvctl: $domain $key is locked by the system administrator; root or a member of group kvd-admin can lift it with: kvctl --system unlock $domain $key" \
  "$bin/kvctl" set "$domain" "$key" https://other.example

step "$admin unlocks it; $user's own value comes back"
check "$admin" 0 "..." "$bin/kvctl" --system unlock "$domain" "$key"
check "$admin" 0 "..." "$bin/kvctl" --system locks
settled "$user" https://news.example "$bin/kvctl" get "$domain" "$key"
check "$user" 0 "user: ..." "$bin/kvctl" source "$domain" "$key"

step "root ships drop-in files, as Ansible or an OS image would (kvd reads them when they change)"
ship() { printf '%s\n' "$2" >"$(dirname "$1")/.tmp" && mv "$(dirname "$1")/.tmp" "$1" && echo "wrote $1: $2"; }
ship "$work/etc/defaults.d/50-mail.json" '{"org.example.mail": {"server": "mail.intranet.example", "port": 993}}'
ship "$work/etc/locks.d/50-mail" "org.example.mail server"
check root 0 "reloaded at revision ..." "$bin/kvctl" --system reload
settled "$user" mail.intranet.example "$bin/kvctl" get org.example.mail server
check "$user" 0 "locked: ..." "$bin/kvctl" source org.example.mail server
check "$user" 0 "system: ..." "$bin/kvctl" source org.example.mail port
check root 0 "value: drop-in file $work/etc/defaults.d/50-mail.json
lock: drop-in file $work/etc/locks.d/50-mail" "$bin/kvctl" --system source org.example.mail server
check "$user" 1 "kvctl: org.example.mail server is locked by the system administrator..." \
  "$bin/kvctl" set org.example.mail server evil.example

step "Profiles: a drop-in file for $user's group, another for group $group; $user gets only the first"
ship "$work/etc/defaults.d/60-$user.json" '{"for": {"groups": ["'"$user"'"]}, "org.example.mail": {"signature": "-- sent from the lab"}}'
ship "$work/etc/defaults.d/60-admins.json" '{"for": {"groups": ["'"$group"'"]}, "org.example.mail": {"signature": "-- the admins"}}'
settled "$user" "-- sent from the lab" "$bin/kvctl" get org.example.mail signature
check root 0 "value: none
lock: none" "$bin/kvctl" --system source org.example.mail signature

echo
echo "system layer demo finished"
