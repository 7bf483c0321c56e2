#!/bin/sh
# Finding 11 (measure): 50,000 dconf keys in one folder: the move in, then (the domain deleted in
# kvd, e.g. by `kvctl delete`) the move back, which resets each key kvd lacks with one `dconf
# reset` process and one kvd watch per key. N (default 50000) keys; prints the time of each login.
. "$(dirname "$0")/lib.sh"
n=${1:-50000}; limit=${2:-${LIMIT:-300}}
# The keys written as one change set of dconf's, as `dconf load` would (one `dconf load` of 50,000
# keys outlasts its 25 s D-Bus timeout on a busy machine).
/usr/bin/python3 -c "
from gi.repository import Gio, GLib
changes = GLib.Variant('a{smv}', {'/org/example/many/k%d' % i: GLib.Variant('i', i) for i in range($n)})
bus = Gio.bus_get_sync(Gio.BusType.SESSION)
bus.call_sync('ca.desrt.dconf', '/ca/desrt/dconf/Writer/user', 'ca.desrt.dconf.Writer', 'Change',
              GLib.Variant.new_tuple(GLib.Variant.new_from_bytes(GLib.VariantType('ay'), changes.get_data_as_bytes(), True)),
              GLib.VariantType('(s)'), Gio.DBusCallFlags.NONE, 300000)"
kvctl --system gnome enable >/dev/null
s1=0; t0=$(date +%s); login || s1=$?; t1=$(date +%s)
echo "move in of $n keys: status $s1, $((t1 - t0)) s; kvd has $(kvctl keys org.example.many | wc -l)"
kvctl delete org.example.many >/dev/null
kvctl --system gnome disable >/dev/null
s2=0; t0=$(date +%s); timeout "$limit" sh -c "GSETTINGS_BACKEND= '$module_dir/kvd-dconf-import' --login" 2>>"$dir/login.log" || s2=$?; t1=$(date +%s)
left=$(dconf dump /org/example/many/ | grep -c '^k' || true)
echo "move back ($n keys to reset): status $s2, $((t1 - t0)) s; dconf still holds $left"
[ "$s2" = 0 ] || defect "the move back of $n resets did not finish within $limit s (status $s2; $left keys left in dconf)"
fine "done"
