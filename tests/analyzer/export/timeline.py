"""Readers for the tests of tfdump --export (tests/analyzer/export).

chrome(path): the Chrome JSON's events. perfetto(path, proto): the packets
of a Perfetto trace as `protoc --decode=perfetto.protos.Trace` prints
them, parsed into dicts (every field a list of values). slices_*: the
slices of either as (pid, tid, name, cat, ts_ns, dur_ns or None if open),
resolved through the interned names, so the two exports can be compared.
"""
import json
import re
import subprocess


def chrome(path):
    d = json.load(open(path))
    assert set(d) >= {"traceEvents", "displayTimeUnit"}, list(d)
    return d["traceEvents"]


def ns(us):
    """A Chrome ts/dur (microseconds, three decimals) as integer ns."""
    return round(us * 1000)


def _parse(lines, i):
    msg = {}
    while i < len(lines):
        ln = lines[i].strip()
        i += 1
        if not ln:
            continue
        if ln == "}":
            return msg, i
        m = re.match(r"^(\w+) \{$", ln)
        if m:
            sub, i = _parse(lines, i)
            msg.setdefault(m.group(1), []).append(sub)
            continue
        m = re.match(r"^(\w+): (.*)$", ln)
        assert m, "cannot read protoc's line: " + ln
        v = m.group(2)
        if v.startswith('"'):
            v = json.loads(v.replace("\\'", "'"))
        elif re.match(r"^-?[0-9]+$", v):
            v = int(v)
        elif re.match(r"^-?[0-9.eE+-]+$", v) or v in ("inf", "-inf", "nan"):
            v = float(v)
        msg.setdefault(m.group(1), []).append(v)
    return msg, i


def perfetto(path, proto):
    import os
    out = subprocess.run(
        ["protoc", "--decode=perfetto.protos.Trace", "-I", os.path.dirname(proto), os.path.basename(proto)],
        stdin=open(path, "rb"), capture_output=True, check=True, text=True).stdout
    trace, _ = _parse(out.splitlines(), 0)
    return trace.get("packet", [])


def one(m, k, default=None):
    v = m.get(k)
    return v[0] if v else default


def slices_chrome(ev):
    out = []
    for e in ev:
        if e["ph"] == "X":
            out.append((e["pid"], e["tid"], e["name"], e["cat"], ns(e["ts"]), ns(e["dur"])))
        elif e["ph"] == "B":
            out.append((e["pid"], e["tid"], e["name"], e["cat"], ns(e["ts"]), None))
    return sorted(out, key=lambda s: (s[0], s[1], s[4], s[2]))


def perfetto_model(packets):
    """Tracks by uuid, and per packet its event with names resolved."""
    tracks, events = {}, []
    names, cats, anames = {}, {}, {}
    for p in packets:
        seq = one(p, "trusted_packet_sequence_id")
        assert seq, "a packet without a sequence id"
        if one(p, "sequence_flags", 0) & 1:
            names[seq], cats[seq], anames[seq] = {}, {}, {}
        for idata in p.get("interned_data", []):
            for e in idata.get("event_names", []):
                names[seq][one(e, "iid")] = one(e, "name")
            for e in idata.get("event_categories", []):
                cats[seq][one(e, "iid")] = one(e, "name")
            for e in idata.get("debug_annotation_names", []):
                anames[seq][one(e, "iid")] = one(e, "name")
        td = one(p, "track_descriptor")
        if td:
            tracks[one(td, "uuid")] = td
        te = one(p, "track_event")
        if te:
            ev = {"seq": seq, "ts": one(p, "timestamp"), "type": one(te, "type"),
                  "track": one(te, "track_uuid"), "flows": te.get("flow_ids", []),
                  "counter": one(te, "counter_value", one(te, "double_counter_value"))}
            if one(te, "name_iid"):
                ev["name"] = names[seq][one(te, "name_iid")]
            else:
                ev["name"] = one(te, "name")
            if te.get("category_iids"):
                ev["cat"] = cats[seq][one(te, "category_iids")]
            ev["args"] = {}
            for a in te.get("debug_annotations", []):
                key = anames[seq][one(a, "name_iid")] if one(a, "name_iid") else one(a, "name")
                ev["args"][key] = next(a[k][0] for k in a if k.endswith("_value"))
            events.append(ev)
    return tracks, events


def slices_perfetto(tracks, events):
    """Slices from BEGIN/END pairs per track (stack order)."""
    stacks, out = {}, []
    for ev in events:
        t = tracks[ev["track"]]
        th = one(t, "thread")
        pid, tid = (one(th, "pid"), one(th, "tid")) if th else (None, one(t, "name"))
        st = stacks.setdefault(ev["track"], [])
        if ev["type"] == "TYPE_SLICE_BEGIN":
            st.append(ev)
        elif ev["type"] == "TYPE_SLICE_END":
            assert st, "an END without a BEGIN on track " + one(t, "name")
            b = st.pop()
            b["end"] = ev["ts"]
    for ev in events:
        if ev["type"] == "TYPE_SLICE_BEGIN":
            t = tracks[ev["track"]]
            th = one(t, "thread")
            pid, tid = (one(th, "pid"), one(th, "tid")) if th else (None, one(t, "name"))
            end = ev.get("end")
            out.append((pid, tid, ev["name"], ev["cat"], ev["ts"], None if end is None else end - ev["ts"]))
    return sorted(out, key=lambda s: (s[0] or 0, str(s[1]), s[4], s[2]))
