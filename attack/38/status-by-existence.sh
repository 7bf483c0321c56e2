#!/bin/sh
# Finding 6: `kvctl --system gnome status` says "kvd for new sessions" whenever something exists at
# /etc/environment.d/50-kvd-gnome.conf: a hand-edited file that sets dconf, a file of mode 0600,
# a folder, a dangling symlink, a later environment.d file of the admin's setting dconf; and `enable` then fails on the folder without a hint.
. "$(dirname "$0")/lib.sh"
file=/etc/environment.d/50-kvd-gnome.conf
mkdir -p /etc/environment.d
report=""
try() { # WHAT
    seen=$(setpriv --reuid=65534 --regid=65534 --clear-groups env -i "$generator" 2>/dev/null | sed -n 's/^GSETTINGS_BACKEND=//p')
    status=$(kvctl --system gnome status | head -1)
    case "$status" in *"kvd for new sessions"*) [ "$seen" = kvd ] || report="$report; $1: status says kvd, sessions get '${seen}'" ;; esac
    rm -rf "$file"
}
printf 'GSETTINGS_BACKEND=dconf\n' > "$file"; try "hand-edited to dconf"
printf 'GSETTINGS_BACKEND=kvd\n' > "$file"; chmod 600 "$file"; try "mode 0600"
mkdir "$file"; try "a folder"
ln -s /nonexistent "$file"; try "a dangling symlink"
printf 'GSETTINGS_BACKEND=kvd\n' > "$file"; printf 'GSETTINGS_BACKEND=dconf\n' > /etc/environment.d/90-local.conf
try "a later file of the admin's setting dconf"; rm -f /etc/environment.d/90-local.conf
mkdir "$file"; out=$(kvctl --system gnome enable 2>&1) && report="$report; enable over a folder succeeded" || case "$out" in
    *remove*) ;; *) report="$report; enable over a folder, no hint: '$out'" ;; esac
rm -rf "$file"
[ -z "$report" ] || defect "${report#; }"
fine "status tells what sessions get"
