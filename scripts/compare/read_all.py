"""read_all.py TRACE: prints what the Python reader makes of a trace (for
scripts/compare/run.sh): summary, tensors, collectives, allocations, steps,
events and captures, each as text; an exception is printed as its type and
message, so a reader that fails the same way reads the same."""
import sys

import tftrace


def show(title, fn):
    print("== " + title)
    try:
        v = fn()
        if hasattr(v, "to_string"):
            print(v.to_string(max_rows=400, max_cols=40))
        else:
            print(repr(v)[:200000])
    except Exception as e:  # noqa: BLE001 (the point is to print it)
        print("%s: %s" % (type(e).__name__, e))


def main(path):
    try:
        t = tftrace.open(path)
    except Exception as e:  # noqa: BLE001
        print("open: %s: %s" % (type(e).__name__, e))
        return
    show("summary", t.summary)
    show("tensors", t.tensors)
    show("collectives", t.collectives)
    show("allocations", t.allocations)
    show("steps", t.steps)
    show("events", lambda: list(t.events()))
    show("captures", t.captures)
    t.close()


main(sys.argv[1])
