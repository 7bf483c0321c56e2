#!/usr/bin/env bash
# scripts/throwaway-root.sh WORK — runs WORK/inside.sh as root in a throw-away root: an overlay of
# / (its upper layer on a tmpfs) in private mount and PID namespaces, with its own /run, /tmp and a
# copy of dpkg's database, so nothing reaches the machine's /etc, /usr or dpkg state, and every
# process started there ends with it (--pid --fork: the namespace's first process). Every file of
# WORK is copied into the root's /tmp first. Exits with inside.sh's status. Used by
# scripts/test-deb-gsettings.sh and scripts/test-deb-gnome.sh (as root).
set -euo pipefail
work=$(readlink -f "${1:?usage: scripts/throwaway-root.sh WORK}")
[ -f "$work/inside.sh" ] || { echo "throwaway-root: $work/inside.sh is missing" >&2; exit 2; }
unshare --mount --propagation private --pid --fork /bin/bash -euo pipefail -c '
  work=$1
  layers=$work/layers
  mkdir -p "$layers"
  mount -t tmpfs kvd-throwaway "$layers"
  mkdir "$layers/upper" "$layers/work" "$layers/root"
  mount -t overlay kvd-throwaway -o "lowerdir=/,upperdir=$layers/upper,workdir=$layers/work" "$layers/root"
  r=$layers/root
  mount --rbind /dev "$r/dev"
  mount -t proc proc "$r/proc"
  mount -t tmpfs tmpfs "$r/run"
  mount -t tmpfs tmpfs "$r/tmp"
  chmod 1777 "$r/tmp"
  # dpkg'"'"'s database as a copy (another dpkg run on this machine would change the lower layer).
  mount -t tmpfs tmpfs "$r/var/lib/dpkg"
  cp -a /var/lib/dpkg/. "$r/var/lib/dpkg/"
  rm -f "$r/var/lib/man-db/auto-update"
  find "$work" -maxdepth 1 -type f -exec cp {} "$r/tmp/" \;
  chroot "$r" /bin/sh /tmp/inside.sh
' kvd-throwaway "$work"
