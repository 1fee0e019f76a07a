"""A numpy loop that keeps small Python objects, for leak.exempt-python:
CPython's arenas grow with them over the whole run and are still mapped at
its end, which is no leak (analyzer/leak/leak_exempt.c). Nothing in it
knows about tftrace.

Each of STEPS steps multiplies two 256 x 256 float64 matrices and
doubles the product to 1 MiB (numpy's buffers: the recorded work between
the arenas), and makes a list of 2,000 small dicts:

  --keep all    the lists are kept (CPython's arenas, 1 MiB each, grow by
                about one every two steps until the end) and so are the
                1 MiB arrays: a leak of numpy's, which tfdiff finds by the
                most numpy held at once (CPython frees them at exit)
  --keep none   nothing is kept (default)
"""
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed for", sys.executable)
    sys.exit(0)

STEPS = 120


def main():
    args = sys.argv[1:]
    if args not in ([], ["--keep", "all"], ["--keep", "none"]):
        print("usage: leak_objects.py [--keep all|none]", file=sys.stderr)
        sys.exit(2)
    keep = args == ["--keep", "all"]
    rng = np.random.default_rng(3)
    a = rng.standard_normal((256, 256))
    objects, arrays = [], []
    for step in range(STEPS):
        b = a @ rng.standard_normal((256, 256))
        big = np.repeat(b, 2, axis=0)
        objs = [{"step": step, "i": i, "name": "n%d" % i} for i in range(2000)]
        if keep:
            objects.append(objs)
            arrays.append(big)
    print("kept %d object lists, %d arrays" % (len(objects), len(arrays)))


if __name__ == "__main__":
    main()
