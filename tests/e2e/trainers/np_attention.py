"""A transformer block's forward pass in plain numpy (float32), written the
way a numpy tutorial writes it, for the trainers tests: nothing in it knows
about tftrace, which records its matmuls through the cblas_sgemm calls
numpy makes.

For each of BATCH sequences of T tokens: layer norm, causal multi-head
self-attention (q, k, v projections, per head softmax(q k^T / sqrt(hs))
with the future masked, times v; the output projection), a residual, layer
norm, a GELU MLP and a residual. Then the mean of a linear head's output,
as a stand-in for the loss.

--plant mask: the classic off-by-one of a causal mask, np.triu(..., k=2)
instead of k=1, lets every token but the last see the next one. The
scores (q k^T) are unchanged; the first recorded tensor to differ is the
attention probabilities entering the first (probabilities @ v) matmul.
"""
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed for", sys.executable)
    sys.exit(0)

BATCH, T, C, HEADS = 2, 24, 32, 2
HS = C // HEADS


def layer_norm(x, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


def softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def causal_mask(t, planted):
    """True where a query may not look: the future."""
    return np.triu(np.ones((t, t), dtype=bool), k=2 if planted else 1)


def attention(x, p, mask):
    q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
    heads = []
    for h in range(HEADS):
        s = slice(h * HS, (h + 1) * HS)
        att = (q[:, s] @ k[:, s].T) / np.float32(np.sqrt(HS))
        att = np.where(mask, np.float32(-np.inf), att)
        heads.append(softmax(att) @ v[:, s])
    return np.concatenate(heads, axis=1) @ p["wo"]


def block(x, p, mask):
    x = x + attention(layer_norm(x), p, mask)
    return x + gelu(layer_norm(x) @ p["w1"]) @ p["w2"]


def main():
    planted = len(sys.argv) == 3 and sys.argv[1:] == ["--plant", "mask"]
    if len(sys.argv) > 1 and not planted:
        print("usage: np_attention.py [--plant mask]", file=sys.stderr)
        sys.exit(2)
    rng = np.random.default_rng(1234)

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    p = {"wq": w(C, C), "wk": w(C, C), "wv": w(C, C), "wo": w(C, C),
         "w1": w(C, 4 * C), "w2": w(4 * C, C), "head": w(C, 8)}
    xs = rng.standard_normal((BATCH, T, C)).astype(np.float32)
    mask = causal_mask(T, planted)
    loss = 0.0
    for b in range(BATCH):
        y = block(xs[b], p, mask)
        loss += float((y @ p["head"]).mean())
    print("loss %.6f" % (loss / BATCH))


if __name__ == "__main__":
    main()
