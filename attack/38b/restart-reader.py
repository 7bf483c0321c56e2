"""attack/38b/restart-reader.py — an app on the GSettings module (GSETTINGS_BACKEND=kvd): reads
io.kvd.test text (touched first) and, when told, the relocatable io.kvd.test.profile at
/io/kvd/first/b/ (never touched before); prints each value and each `changed` it hears.
Commands on stdin, one a line: `read`, `touch-b`, `quit`. Replies on stdout."""
import sys
import threading

from gi.repository import Gio, GLib

text = Gio.Settings.new("io.kvd.test")
heard = []
text.connect("changed::text", lambda s, k: heard.append("text=" + s.get_string(k)))
loop = GLib.MainLoop()
state = {"b": None}


def command(line):
    line = line.strip()
    if line == "read":
        b = state["b"].get_string("name") if state["b"] else "-"
        print("text=%s b=%s heard=%s" % (text.get_string("text"), b, ",".join(heard)), flush=True)
    elif line == "touch-b":
        state["b"] = Gio.Settings.new_with_path("io.kvd.test.profile", "/io/kvd/first/b/")
        state["b"].connect("changed::name", lambda s, k: heard.append("b=" + s.get_string(k)))
        print("b=%s" % state["b"].get_string("name"), flush=True)
    elif line == "quit":
        loop.quit()
    return False


def stdin():
    for line in sys.stdin:
        GLib.idle_add(command, line)
    GLib.idle_add(loop.quit)


threading.Thread(target=stdin, daemon=True).start()
print("text=%s" % text.get_string("text"), flush=True)
loop.run()
