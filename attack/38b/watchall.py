"""attack/38b/watchall.py SOCKET — prints, one a line, what a WatchAll(current: true) starts with:
`domain NAME KEY=VALUE[source] ...` per domain sent, `withheld NAME` per domain withheld, then
`start REVISION SYSTEM_REVISION`. With `hold SECONDS`: opens the stream and never reads it."""
import json
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import varlink  # noqa: E402


def main():
    s = varlink.connect(sys.argv[1])
    varlink.send(s, "io.kvd.Defaults.WatchAll", {"current": True}, more=True)
    if len(sys.argv) > 3 and sys.argv[2] == "hold":
        time.sleep(float(sys.argv[3]))
        return
    domains = {}
    for reply in varlink.replies(s):
        if "error" in reply:
            print("error", json.dumps(reply))
            return
        p = reply["parameters"]
        if p.get("domain"):
            d = domains.setdefault(p["domain"], [])
            for c in p.get("changes", []):
                d.append("%s=%s[%s]" % (c["key"], json.dumps(c.get("value")), c.get("source", "")))
            continue
        for name, changes in sorted(domains.items()):
            print("domain", name, " ".join(sorted(changes)))
        for name in p.get("withheld", []):
            print("withheld", name)
        print("start", p.get("revision"), p.get("systemRevision"))
        return


main()
