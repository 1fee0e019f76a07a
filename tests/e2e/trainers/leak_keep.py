"""A numpy training loop that keeps every step's activations, for the
trainers tests: the Python shape of leak_keep.c. Nothing in it knows about
tftrace.

A two-layer MLP (1024 x 256 inputs, 1024 hidden units, float32) is fitted by
SGD to a fixed random regression target for STEPS steps. Each step appends
its hidden activations (1024 x 1024 float32: 4 MiB) to `history` for a
later plot:

  --keep all    every step's activations are kept: the leak
  --keep last   only the last step's (default)

CPython frees every object when it exits, so at the end of the trace
nothing is live: tfdiff finds the leak by the most numpy held at once.
Prints the final loss, so that a change of results under tracing shows.
"""
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed for", sys.executable)
    sys.exit(0)

STEPS, N, D, H = 16, 1024, 256, 1024


def main():
    keep_all = sys.argv[1:] == ["--keep", "all"]
    if sys.argv[1:] not in (["--keep", "all"], ["--keep", "last"], []):
        print("usage: leak_keep.py [--keep all|last]", file=sys.stderr)
        sys.exit(2)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((N, D)).astype(np.float32)
    y = rng.standard_normal((N, 1)).astype(np.float32)
    w1 = (rng.standard_normal((D, H)) / np.sqrt(D)).astype(np.float32)
    w2 = (rng.standard_normal((H, 1)) / np.sqrt(H)).astype(np.float32)
    history = []
    lr = np.float32(1e-3)
    for step in range(STEPS):
        h = np.maximum(x @ w1, 0)
        err = h @ w2 - y
        loss = float((err * err).mean())
        dh = (err @ w2.T) * (h > 0)
        w2 -= lr * (h.T @ err) / N
        w1 -= lr * (x.T @ dh) / N
        if keep_all:
            history.append(h)
        else:
            history = [h]
    print("loss %.6f kept %d" % (loss, len(history)))


if __name__ == "__main__":
    main()
