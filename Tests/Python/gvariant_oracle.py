#!/usr/bin/python3
"""GLib's own GVariant text parser, the oracle of KVValuesTests' GVariantTextTests.

  gvariant_oracle.py defaults         prints every <default> of every installed schema as JSON
                                      lines {"text": TEXT, "type": THE KEY'S TYPE}
  gvariant_oracle.py check FILE       reads Swift's answers (JSON lines {"text", "type" (null:
                                      inferred), "ok", "gtype", "printed", "json"}) and checks
                                      each against GLib.Variant.parse: the same refusal, else the
                                      same type, Swift's text read back by GLib as the same value,
                                      the same text where no double is in it, and the same kvd
                                      form as GLib's value converted by convert.c's rule. Prints
                                      each mismatch, then "N passed, N failed".
"""
import glob
import json
import math
import sys
import xml.etree.ElementTree as ET

from gi.repository import GLib


def defaults():
    for path in sorted(glob.glob("/usr/share/glib-2.0/schemas/*.gschema.xml")):
        for key in ET.parse(path).getroot().iter("key"):
            default = key.find("default")
            if default is None or key.get("type") is None:
                continue
            print(json.dumps({"text": default.text or "", "type": key.get("type")}))


def parse(text, type_string):
    try:
        kind = GLib.VariantType.new(type_string) if type_string else None
        return GLib.Variant.parse(kind, text, None, None)
    except GLib.Error:
        return None


def inferred(value):
    """convert.c's inferred_type of a kvd value (typed JSON)."""
    if isinstance(value, bool):
        return "b"
    if isinstance(value, int):
        return "x"
    if isinstance(value, float):
        return "d"
    if isinstance(value, str):
        return "s"
    if isinstance(value, list):
        if not value:
            return "as"
        kinds = {type(v) for v in value}
        if len(kinds) != 1 or kinds.pop() not in (bool, int, float, str):
            return "av"
        return "a" + inferred(value[0])
    if isinstance(value, dict) and set(value) == {"$data"}:
        return "ay"
    return "a{sv}"


def natural(v):
    """convert.c's natural form as typed JSON, or None."""
    t = v.get_type_string()
    c = t[0]
    if c == "b":
        return bool(v.unpack())
    if c in "ynqiux":
        return int(v.unpack())
    if c == "t":
        n = v.unpack()
        return n if n <= 2**63 - 1 else None
    if c == "d":
        d = v.unpack()
        return d if math.isfinite(d) else None
    if c in "sog":
        return v.unpack()
    if c == "v":
        inner = v.get_variant()
        got = natural(inner)
        return got if got is not None and inferred(got) == inner.get_type_string() else None
    if c == "a":
        return natural_array(v, t)
    return None


def natural_array(v, t):
    if t == "ay":
        import base64

        return {"$data": base64.b64encode(bytes(v.get_data_as_bytes().get_data())).decode()}
    children = [v.get_child_value(i) for i in range(v.n_children())]
    if t.startswith("a{"):
        if not t.startswith("a{s"):
            return None
        out, previous = {}, None
        for entry in children:
            key = entry.get_child_value(0).get_string()
            if previous is not None and not previous.encode() < key.encode():
                return None
            got = natural(entry.get_child_value(1))
            if got is None:
                return None
            out[key] = got
            previous = key
        if len(out) == 2 and isinstance(out.get("gvariant"), str) and GLib.VariantType.string_is_valid(out["gvariant"]):
            if isinstance(out.get("text"), str) or (isinstance(out.get("data"), dict) and "$data" in out["data"]):
                return None
        return {"$dict": out} if any(k.startswith("$") for k in out) else out
    items = [natural(child) for child in children]
    return None if any(i is None for i in items) else items


def kvd_form(v):
    got = natural(v)
    if got is not None:
        return got
    return {"gvariant": v.get_type_string(), "text": v.print_(True)}


def same_json(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, float) and isinstance(b, float) and a == b
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return False
        if set(a) == {"gvariant", "text"}:
            return a["gvariant"] == b["gvariant"] and parse(a["text"], a["gvariant"]) == parse(b["text"], b["gvariant"])
        return all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return a == b


def check_one(answer):
    text, type_string = answer["text"], answer["type"]
    glib = parse(text, type_string)
    if glib is None:
        return None if not answer["ok"] else "GLib refuses it, Swift gives %s" % answer["gtype"]
    if not answer["ok"]:
        return "GLib reads %s %s, Swift refuses it: %s" % (glib.get_type_string(), glib.print_(True), answer["error"])
    if answer["gtype"] != glib.get_type_string():
        return "type %s, GLib's %s" % (answer["gtype"], glib.get_type_string())
    back = parse(answer["printed"], glib.get_type_string())
    if back is None or back != glib:
        return "printed %r does not read back as GLib's %r" % (answer["printed"], glib.print_(True))
    if "d" not in glib.get_type_string() and answer["printed"] != glib.print_(True):
        return "printed %r, GLib prints %r" % (answer["printed"], glib.print_(True))
    if not same_json(json.loads(answer["json"]), kvd_form(glib)):
        return "kvd form %s, convert.c's %s" % (answer["json"], json.dumps(kvd_form(glib)))
    return None


def check(path):
    passed = failed = 0
    with open(path) as answers:
        for line in answers:
            answer = json.loads(line)
            problem = check_one(answer)
            if problem is None:
                passed += 1
            else:
                failed += 1
                print("%r (type %s): %s" % (answer["text"], answer["type"], problem))
    print("%d passed, %d failed" % (passed, failed))


if __name__ == "__main__":
    if sys.argv[1] == "defaults":
        defaults()
    else:
        check(sys.argv[2])
